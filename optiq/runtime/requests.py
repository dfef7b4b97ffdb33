"""The non-blocking and persistent forms of :func:`optiq.alltoallv`, with mpi4py's shapes.

:func:`ialltoallv` stands in for ``comm.Ialltoallv(sendbuf, recvbuf)`` and returns an
``MPI.Request`` an application waits on or tests as any other. :func:`alltoallv_init`
stands in for ``comm.Alltoallv_init(sendbuf, recvbuf)``: the checks and the plan happen once,
at creation, and every ``Start()`` moves the buffers' current contents; ``Free()`` (on every
rank) releases the plan. A persistent request is optiq's cache made explicit: the pattern
belongs to the request and no other call can push it out.

Where a call is handed to MPI (``method="mpi"``, ``method="auto"`` keeping MPI, device
memory, an intercommunicator), the request *is* MPI's: ``comm.Ialltoallv`` or
``comm.Alltoallv_init`` with the caller's own arguments, as non-blocking as MPI makes it.
Where a plan moves the bytes, the executor runs in the calling thread: ``ialltoallv``
returns a request that is already complete (a generalized request), and ``Start()`` returns
once the bytes are moved. So, unlike MPI's, such a call does not let a rank do other
communication with the ranks of the collective between posting it and waiting for it.
"""

from __future__ import annotations

import time
from typing import Any

from .patterns import move, trial
from .planned_alltoallv import DEFAULT_CACHE_SIZE, AlltoallvResult, _context, _resolve

__all__ = ["ialltoallv", "alltoallv_init", "AlltoallvRequest"]


def _complete() -> Any:
    """An ``MPI.Request`` that is complete already (an MPI generalized request)."""
    from mpi4py import MPI

    def query(status: Any) -> None:
        status.Set_source(MPI.UNDEFINED)
        status.Set_tag(MPI.UNDEFINED)
        status.Set_error(MPI.SUCCESS)
        status.Set_elements(MPI.BYTE, 0)

    request = MPI.Grequest.Start(query, lambda: None, lambda completed: None)
    request.Complete()
    return request


def ialltoallv(comm: Any, sendbuf: Any, recvbuf: Any, *, network: Any = None, method: str = "auto",
               hosts: Any = None, link_bw: float | None = None, cache_size: int = DEFAULT_CACHE_SIZE,
               chunk_model: Any = None, timeout: float = 60.0, **planner_options: Any) -> Any:
    """``comm.Ialltoallv(sendbuf, recvbuf)`` on planned paths (module docstring): the same
    arguments and options as :func:`optiq.alltoallv`; returns an ``MPI.Request``.

    Raises
    ------
    ArgumentTypeError, ArgumentError, ArgumentKeyError, ArgumentBufferError
        As :func:`optiq.alltoallv`, on every rank, before any data moves.

    Examples
    --------
    ``request = optiq.ialltoallv(comm, [send, (sc, sd)], [recv, (rc, rd)], network="torus:4x4")``,
    then ``request.Wait()`` (or ``MPI.Request.Waitall([request, ...])``).
    """
    if comm.Is_inter():
        return comm.Ialltoallv(sendbuf, recvbuf)
    call = _resolve(comm, sendbuf, recvbuf, network=network, method=method, hosts=hosts, link_bw=link_bw,
                    cache_size=cache_size, chunk_model=chunk_model, planner_options=planner_options)
    if call.pattern.method == "mpi":
        return call.comm.Ialltoallv(sendbuf, recvbuf)
    if call.pattern.trial and call.send is not None:
        _context(comm).entries[call.key] = trial(call.comm, call.pattern, call.send, call.received, sendbuf, recvbuf,
                                                 timeout)
    else:
        move(call.comm, call.pattern, call.send, call.received, sendbuf, recvbuf, timeout)
    return _complete()


class AlltoallvRequest:
    """A persistent ``alltoallv`` (:func:`alltoallv_init`): ``Start()``, then ``Wait()`` or
    ``Test()``, as often as wanted; ``Free()`` on every rank when done (or a ``with`` block).

    Attributes
    ----------
    method : str
        What moves the bytes: ``"mpi"`` (``comm.Alltoallv_init``'s request), ``"local"`` or
        the planner whose plan moves them.
    reason : str
        Why.
    result : AlltoallvResult or None
        What the last ``Start()`` did.
    """

    def __init__(self, comm: Any, sendbuf: Any, recvbuf: Any, *, timeout: float, **options: Any) -> None:
        self.timeout = timeout
        self.result: AlltoallvResult | None = None
        self._mpi: Any = None
        self._call: Any = None
        self._started = False
        self._trial = False
        if comm.Is_inter():
            self._mpi = comm.Alltoallv_init(sendbuf, recvbuf)
            self.method, self.reason = "mpi", "an intercommunicator: comm.Alltoallv_init's request"
            return
        call = _resolve(comm, sendbuf, recvbuf, cached=False, **options)
        self.method, self.reason = call.pattern.method, call.pattern.reason
        if call.pattern.method == "mpi":
            self._mpi = call.comm.Alltoallv_init(sendbuf, recvbuf)
            return
        self._call = call
        self._trial = call.pattern.trial and call.send is not None

    def __repr__(self) -> str:
        state = "freed" if self._mpi is None and self._call is None else "started" if self._started else "inactive"
        return f"AlltoallvRequest({self.method}, {state}: {self.reason})"

    def Start(self) -> None:  # noqa: N802  (mpi4py's name)
        """Move the buffers' current contents (a planned pattern: before returning)."""
        if self._mpi is not None:
            self._mpi.Start()
            self._started = True
            return
        call = self._call
        if call is None:
            raise ValueError("this request has been freed")
        start = time.perf_counter()
        if self._trial:  # the first start measures the plan against MPI, and keeps the faster
            call.pattern = trial(call.comm, call.pattern, call.send, call.received, call.sendbuf, call.recvbuf,
                                 self.timeout)
            self._trial = False
            self.method, self.reason = call.pattern.method, call.pattern.reason
        else:
            move(call.comm, call.pattern, call.send, call.received, call.sendbuf, call.recvbuf, self.timeout)
        self._started = True
        self.result = AlltoallvResult(method=call.pattern.method, cached=True, plan_s=0.0, overhead_s=0.0,
                                      transfer_s=time.perf_counter() - start, reason=call.pattern.reason,
                                      predicted_s=call.pattern.predicted_s, default_s=call.pattern.default_s,
                                      fingerprint=call.fingerprint)

    def Wait(self, status: Any = None) -> bool:  # noqa: N802
        """Wait for the transfer ``Start()`` began (MPI's request) or return (a planned one has ended)."""
        if self._mpi is not None:
            self._mpi.Wait(status)
        self._started = False
        return True

    def Test(self, status: Any = None) -> bool:  # noqa: N802
        """Whether the transfer has ended."""
        if self._mpi is not None:
            done = bool(self._mpi.Test(status))
            self._started = not done
            return done
        self._started = False
        return True

    def Free(self) -> None:  # noqa: N802
        """Release the plan (collective: every rank frees its request) or MPI's request."""
        if self._mpi is not None:
            self._mpi.Free()
            self._mpi = None
        if self._call is not None:
            self._call.pattern.close()
            self._call = None

    def __enter__(self) -> AlltoallvRequest:
        return self

    def __exit__(self, *exc: object) -> None:
        self.Free()


def alltoallv_init(comm: Any, sendbuf: Any, recvbuf: Any, *, network: Any = None, method: str = "auto",
                   hosts: Any = None, link_bw: float | None = None, chunk_model: Any = None, timeout: float = 60.0,
                   **planner_options: Any) -> AlltoallvRequest:
    """``comm.Alltoallv_init(sendbuf, recvbuf)`` on planned paths (module docstring): checks and
    plans once, on every rank together; returns an :class:`AlltoallvRequest`.

    Raises
    ------
    ArgumentTypeError, ArgumentError, ArgumentKeyError, ArgumentBufferError
        As :func:`optiq.alltoallv`, on every rank.

    Examples
    --------
    ``with optiq.alltoallv_init(comm, send, recv, network="torus:4x4") as request:`` then, per
    step, fill ``send``, ``request.Start()``, ``request.Wait()``.
    """
    return AlltoallvRequest(comm, sendbuf, recvbuf, timeout=timeout, network=network, method=method, hosts=hosts,
                            link_bw=link_bw, cache_size=DEFAULT_CACHE_SIZE, chunk_model=chunk_model,
                            planner_options=planner_options)
