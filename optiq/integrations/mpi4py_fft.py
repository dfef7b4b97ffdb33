"""mpi4py-fft through optiq in one line: :func:`accelerate`.

mpi4py-fft (``pip install 'optiq[fft]'``; building it needs FFTW's headers, Debian's
``libfftw3-dev``) computes parallel FFTs of arrays distributed in pencils over a Cartesian
process grid. Between the FFTs along the axis each rank holds whole, a *transfer* redistributes
the array: ``comm.Alltoallw`` with subarray datatypes on the grid's sub-communicator of one axis,
every row (or column) of the grid exchanging at the same time. A ``PFFT``'s transforms hold the
transfers' bound methods from construction, and each method calls ``self.comm.Alltoallw``; so
:func:`accelerate` gives every transfer object a communicator of its own, an
:class:`AcceleratedComm`, whose ``Alltoallw`` is :func:`optiq.alltoallw` on the real
sub-communicator with ``parent=`` the whole grid: the rows are planned as one exchange and any
rank of the grid may forward. Nothing of mpi4py-fft changes, and its results are bitwise those
of its own transfers (optiq moves the same bytes). A transfer on a sub-communicator of one rank
(the other axes of slabs) moves nothing between ranks and keeps MPI's own call (every rank of the
grid has it alike).

The grid is made from the sub-communicators themselves (:func:`optiq.mpi.grids.grid_comm`;
mpi4py-fft frees the Cartesian communicator), ranked as ``Create_cart`` ranks them: with
``hosts=`` left out, grid rank ``i`` runs on endpoint ``i`` of the network, which is the rank
of the communicator the ``PFFT`` was made from where the MPI library does not reorder a
Cartesian grid (MPICH does not). Give ``parent=`` (that communicator) or ``hosts=`` otherwise.
"""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentError
from ..mpi.comms import cached_on
from ..mpi.grids import grid_comm
from ..mpi.launch import together
from ..runtime import AlltoallvResult, alltoallv, alltoallw
from ..runtime.context import open_groups
from ..runtime.options import DEFAULT_TIMEOUT, check_keywords
from ..runtime.patterns import check_placement, import_planner
from ..utils.units import as_rate

__all__ = ["accelerate", "restore", "AcceleratedComm"]


class AcceleratedComm:
    """A transfer's communicator whose ``Alltoallw`` (and ``Alltoallv``) go through optiq.

    Every other attribute is the real sub-communicator's.

    Attributes
    ----------
    comm : mpi4py.MPI.Comm
        The sub-communicator mpi4py-fft made.
    parent : mpi4py.MPI.Comm
        The grid the transfers of every row are planned over.
    options : dict
        What :func:`optiq.alltoallw` is given (``network``, ``method``, ...).
    last : AlltoallvResult or None
        What the last call did (on this rank).
    calls : int
        Calls made through it.
    """

    def __init__(self, comm: Any, parent: Any, options: dict[str, Any]) -> None:
        self.comm, self.parent, self.options = comm, parent, options
        self.last: AlltoallvResult | None = None
        self.calls = 0

    def __repr__(self) -> str:
        return f"AcceleratedComm({self.comm.Get_size()} ranks of {self.parent.Get_size()}, {self.options})"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.comm, name)

    def Alltoallw(self, sendbuf: Any, recvbuf: Any) -> None:  # noqa: N802 (mpi4py's name)
        self.last = alltoallw(self.comm, sendbuf, recvbuf, parent=self.parent, **self.options)
        self.calls += 1

    def Alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:  # noqa: N802
        self.last = alltoallv(self.comm, sendbuf, recvbuf, parent=self.parent, **self.options)
        self.calls += 1


def _grid_of(subcomms: list[Any]) -> Any:
    """The grid of ``subcomms`` (:func:`~optiq.mpi.grids.grid_comm`), made once and kept on the
    first of them (freed with it: every rank of the grid frees its sub-communicators together,
    as ``PFFT.destroy`` does). Collective over the grid the first time."""
    kept: dict[tuple[int, ...], Any] = cached_on(subcomms[0], _GRIDS, dict, _free_grids)
    key = tuple(c.handle for c in subcomms)
    if key not in kept:
        kept[key] = grid_comm(subcomms)
    return kept[key]


def _free_grids(kept: dict[tuple[int, ...], Any]) -> None:
    for grid in kept.values():
        grid.Free()


_GRIDS = "optiq.integrations.mpi4py_fft.grids"


def _transfers(fft: Any) -> list[Any]:
    transfers = getattr(fft, "transfer", None)
    if not isinstance(transfers, list) or not all(hasattr(t, "comm") and hasattr(t, "forward") for t in transfers) \
            or not hasattr(fft, "subcomm"):
        raise ArgumentError(f"accelerate takes an mpi4py_fft PFFT (with .transfer and .subcomm), not "
                            f"{type(fft).__name__}")
    return transfers


def accelerate(fft: Any, network: Any = None, method: str = "auto", *, parent: Any = None,
               **alltoallv_options: Any) -> Any:
    """Make ``fft``'s transfers go through :func:`optiq.alltoallw`, every group of the grid planned
    together (module docstring). Collective over the whole grid, like the ``PFFT`` itself: it
    makes the calls' context and their groups' duplicates now
    (:func:`~optiq.runtime.context.open_groups`), and for ``method="auto"`` imports the planner on
    the rank that plans, so that the loop's first calls pay for neither.

    Parameters
    ----------
    fft : mpi4py_fft.PFFT
        The transform; it is changed in place and returned.
    network : Topology or str
        The machine (``"torus:4x4"``, ``"ibnet:fabric.txt"``, ...).
    method : str
        As for :func:`optiq.alltoallw`: ``"auto"`` (a plan where it pays), a planner's name, ``"mpi"``.
    parent : mpi4py.MPI.Comm, optional
        The communicator the grid's transfers are planned over: by default the grid, made from
        its sub-communicators (module docstring).
    **alltoallv_options
        Passed to every call (``hosts``, ``link_bw``, ``plan_budget``, planner options ...).

    Returns
    -------
    mpi4py_fft.PFFT
        ``fft`` itself.

    Raises
    ------
    ArgumentError
        If ``fft`` is not a ``PFFT``, or the grid does not fit the network (on every rank).
    ParameterError
        An option no call could use (:func:`optiq.runtime.options.check_call_options`), on
        every rank, before the application's first transform.

    Examples
    --------
    ``fft = accelerate(PFFT(comm, (64, 64, 64), dtype=complex, grid=(4, 4, 1)), network="torus:4x4")``;
    then ``fft.forward(u, u_hat)`` and ``fft.backward(u_hat, u)`` as before.
    """
    transfers = _transfers(fft)
    if network is None:
        raise ArgumentError("accelerate needs network= (the machine the grid runs on)")
    grid = parent if parent is not None else _grid_of(list(fft.subcomm))
    together(grid, lambda: check_keywords(method, alltoallv_options))  # not first at the loop's first plan
    options = dict(alltoallv_options, network=network, method=method)
    if "link_bw" in options:
        options["link_bw"] = as_rate(options["link_bw"])  # a rate's text parsed once, not at every call
    check_placement(grid, network, options.get("hosts"), options.get("link_bw"))
    if method == "auto" and grid.Get_rank() == 0:  # the rank that makes auto's plans: not in the first plan
        import_planner()
    comms = [t.comm.comm if isinstance(t.comm, AcceleratedComm) else t.comm for t in transfers]
    # one of a single rank (a slab's other axes) moves nothing between ranks: it keeps MPI's
    accelerated = [(t, c) for t, c in zip(transfers, comms) if c.Get_size() > 1]
    # the calls' context and their groups' duplicates, made here: the loop's first calls wait for none
    open_groups(grid, [c for _, c in accelerated], alltoallv_options.get("timeout", DEFAULT_TIMEOUT))
    for transfer, comm in accelerated:
        transfer.comm = AcceleratedComm(comm, grid, options)
    return fft


def restore(fft: Any) -> Any:
    """Give ``fft``'s transfers back their own communicators (MPI's ``Alltoallw`` again).

    Returns
    -------
    mpi4py_fft.PFFT
        ``fft`` itself.
    """
    for transfer in _transfers(fft):
        if isinstance(transfer.comm, AcceleratedComm):
            transfer.comm = transfer.comm.comm
    return fft
