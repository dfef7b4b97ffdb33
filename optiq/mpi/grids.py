"""The communicator of a whole process grid, made from the grid's own sub-communicators.

A library such as mpi4py-fft keeps only the sub-communicators of a Cartesian grid (one per
axis: the ranks that differ in that axis's coordinate alone) and frees the grid itself. An
exchange on all the rows at once is planned over the whole grid, so :func:`grid_comm`
makes it again from those sub-communicators, without the communicator the grid was cut
from: the sub-communicators of the last axis are merged along each axis in turn, by
recursive doubling (``Intercomm_create`` between two blocks' leaders, which share the
axis's sub-communicator, then ``Merge``), and the result is ordered by each rank's grid
rank (row-major coordinates, the order ``Create_cart`` numbers them in).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["grid_comm", "grid_rank"]

#: Tags of the intercommunicators made while merging (one per axis and round).
_TAG = 30_817


def grid_rank(subcomms: Sequence[Any]) -> int:
    """This rank's rank in the grid: its coordinates (its rank in every axis's
    sub-communicator), row-major.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> grid_rank([MPI.COMM_SELF, MPI.COMM_SELF])
    0
    """
    rank = 0
    for comm in subcomms:
        rank = rank * comm.Get_size() + comm.Get_rank()
    return rank


def grid_comm(subcomms: Sequence[Any]) -> Any:
    """A new communicator of every rank of the grid whose axes' sub-communicators are
    ``subcomms`` (``subcomms[a]``: the ranks that differ from this one in coordinate ``a``
    only), ranked by :func:`grid_rank`. Collective over the whole grid; the caller frees it.

    Parameters
    ----------
    subcomms : sequence of mpi4py.MPI.Comm
        One intracommunicator per axis, as ``Cartcomm.Sub`` makes them (size-1 axes included
        or not).

    Returns
    -------
    mpi4py.MPI.Intracomm

    Examples
    --------
    >>> from mpi4py import MPI
    >>> whole = grid_comm([MPI.COMM_SELF])
    >>> whole.Get_size(), whole.Get_rank()
    (1, 0)
    >>> whole.Free()
    """
    axes = list(subcomms)
    merged = axes[-1].Dup()
    for a in range(len(axes) - 2, -1, -1):
        merged = _merge_along(merged, axes[a], a)
    whole = merged.Split(0, grid_rank(axes))
    merged.Free()
    return whole


def _merge_along(local: Any, peer: Any, axis: int) -> Any:
    """One communicator of the ``peer.Get_size()`` communicators like ``local`` that differ in
    coordinate ``axis`` (this one's index: ``peer.Get_rank()``), each led by its rank 0, which
    has coordinate 0 on every later axis and so is in the leaders' ``peer``; frees ``local``."""
    n, index = peer.Get_size(), peer.Get_rank()
    step = 1
    while step < n:
        base = index // step * step  # the first index of this rank's block of ``step`` merged so far
        high = bool(base // step % 2)
        partner = base - step if high else base + step
        if partner < n:
            inter = local.Create_intercomm(0, peer, partner, tag=_TAG + 64 * axis + step.bit_length())
            joined = inter.Merge(high)
            inter.Free()
            local.Free()
            local = joined
        step *= 2
    return local
