"""The non-blocking and persistent forms of :func:`optiq.alltoallv` and :func:`optiq.alltoallw`, with mpi4py's shapes.

:func:`ialltoallv` (:func:`ialltoallw`) stands in for ``comm.Ialltoallv(sendbuf, recvbuf)``
(``comm.Ialltoallw``) and returns an ``MPI.Request`` an application waits on or tests as any
other. :func:`alltoallv_init` (:func:`alltoallw_init`) stands in for
``comm.Alltoallv_init(sendbuf, recvbuf)`` (``comm.Alltoallw_init``): the checks and the plan
happen once, at creation, and every ``Start()`` moves the buffers' current contents;
``Free()`` (on every rank) releases the plan. A persistent request is optiq's cache made
explicit: the pattern belongs to the request and no other call can push it out.

Where a call is handed to MPI (``method="mpi"``, ``method="auto"`` keeping MPI, device
memory, an intercommunicator), the request *is* MPI's: ``comm.Ialltoallv`` or
``comm.Alltoallv_init`` (their ``w`` forms) with the caller's own arguments, as non-blocking
as MPI makes it.
Where a plan moves the bytes, the executor runs in the calling thread: ``ialltoallv``
returns a request that is already complete (a generalized request), and ``Start()`` returns
once the bytes are moved. So, unlike MPI's, such a call does not let a rank do other
communication with the ranks of the collective between posting it and waiting for it.
"""

from __future__ import annotations

import time
from typing import Any

from .agreement import DEFAULT_CACHE_SIZE, resolve
from .alltoall import AlltoallvResult
from .context import context
from .forms import GENERAL, VECTOR, Collective
from .moves import move, trial
from .options import DEFAULT_TIMEOUT

__all__ = ["ialltoallv", "ialltoallw", "alltoallv_init", "alltoallw_init", "AlltoallvRequest"]


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


def _istart(kind: Collective, comm: Any, sendbuf: Any, recvbuf: Any, timeout: float, **options: Any) -> Any:
    """The non-blocking call of either collective: MPI's request, or a completed one once the plan moved the bytes."""
    if comm.Is_inter() and options.get("parent") is None:
        return kind.mpi_start(comm, sendbuf, recvbuf)
    call = resolve(kind, comm, sendbuf, recvbuf, timeout=timeout, **options)
    if call.pattern.method == "mpi":
        if call.group.comm is None or not call.group.members.size:  # a relay: nothing of its own to move
            return _complete()
        return kind.mpi_start(call.group.comm, sendbuf, recvbuf)
    if call.pattern.trial and call.send is not None:
        parent = options.get("parent")
        context(comm if parent is None else parent).entries[call.key] = trial(call, call.pattern, timeout)
    else:
        move(call, call.pattern, timeout)
    return _complete()


def ialltoallv(comm: Any, sendbuf: Any, recvbuf: Any, *, network: Any = None, method: str = "auto",
               hosts: Any = None, link_bw: float | str | None = None, cache_size: int = DEFAULT_CACHE_SIZE,
               chunk_model: Any = None, timeout: float = DEFAULT_TIMEOUT, parent: Any = None, **planner_options: Any) -> Any:
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
    return _istart(VECTOR, comm, sendbuf, recvbuf, timeout, network=network, method=method, hosts=hosts,
                   link_bw=link_bw, cache_size=cache_size, chunk_model=chunk_model, planner_options=planner_options,
                   parent=parent)


def ialltoallw(comm: Any, sendbuf: Any, recvbuf: Any, *, network: Any = None, method: str = "auto",
               hosts: Any = None, link_bw: float | str | None = None, cache_size: int = DEFAULT_CACHE_SIZE,
               chunk_model: Any = None, timeout: float = DEFAULT_TIMEOUT, parent: Any = None, **planner_options: Any) -> Any:
    """``comm.Ialltoallw(sendbuf, recvbuf)`` on planned paths: the arguments of
    :func:`optiq.alltoallw`, the behaviour of :func:`ialltoallv`; returns an ``MPI.Request``.

    Raises
    ------
    ArgumentTypeError, ArgumentError, ArgumentKeyError, ArgumentBufferError
        As :func:`optiq.alltoallw`, on every rank, before any data moves.
    """
    return _istart(GENERAL, comm, sendbuf, recvbuf, timeout, network=network, method=method, hosts=hosts,
                   link_bw=link_bw, cache_size=cache_size, chunk_model=chunk_model, planner_options=planner_options,
                   parent=parent)


class AlltoallvRequest:
    """A persistent ``alltoallv`` or ``alltoallw`` (:func:`alltoallv_init`, :func:`alltoallw_init`):
    ``Start()``, then ``Wait()`` or ``Test()``, as often as wanted; ``Free()`` on every rank when
    done (or a ``with`` block).

    Attributes
    ----------
    method : str
        What moves the bytes: ``"mpi"`` (``comm.Alltoallv_init``'s request, or
        ``Alltoallw_init``'s), ``"local"`` or the planner whose plan moves them.
    reason : str
        Why.
    result : AlltoallvResult or None
        What the last ``Start()`` did.
    """

    def __init__(self, comm: Any, sendbuf: Any, recvbuf: Any, *, timeout: float, kind: Collective = VECTOR,
                 **options: Any) -> None:
        self.timeout = timeout
        self.result: AlltoallvResult | None = None
        self._mpi: Any = None
        self._call: Any = None
        self._started = False
        self._trial = False
        if comm.Is_inter() and options.get("parent") is None:
            self._mpi = kind.mpi_init(comm, sendbuf, recvbuf)
            self.method, self.reason = "mpi", f"an intercommunicator: comm.{kind.mpi_name}_init's request"
            return
        call = resolve(kind, comm, sendbuf, recvbuf, cached=False, timeout=timeout, **options)
        self.method, self.reason = call.pattern.method, call.pattern.reason
        if call.pattern.method == "mpi":
            if call.group.comm is not None and call.group.members.size:  # a relay has nothing of its own
                self._mpi = kind.mpi_init(call.group.comm, sendbuf, recvbuf)
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
            if self.method == "mpi":  # a relay's: nothing of its own to move
                return
            raise ValueError("this request has been freed")
        start = time.perf_counter()
        if self._trial:  # the first start measures the plan against MPI, and keeps the faster
            call.pattern = trial(call, call.pattern, self.timeout)
            self._trial = False
            self.method, self.reason = call.pattern.method, call.pattern.reason
        else:
            move(call, call.pattern, self.timeout)
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
                   hosts: Any = None, link_bw: float | str | None = None, chunk_model: Any = None, timeout: float = DEFAULT_TIMEOUT,
                   parent: Any = None, **planner_options: Any) -> AlltoallvRequest:
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
                            planner_options=planner_options, parent=parent)


def alltoallw_init(comm: Any, sendbuf: Any, recvbuf: Any, *, network: Any = None, method: str = "auto",
                   hosts: Any = None, link_bw: float | str | None = None, chunk_model: Any = None, timeout: float = DEFAULT_TIMEOUT,
                   parent: Any = None, **planner_options: Any) -> AlltoallvRequest:
    """``comm.Alltoallw_init(sendbuf, recvbuf)`` on planned paths: the arguments of
    :func:`optiq.alltoallw`, the behaviour of :func:`alltoallv_init`; returns an
    :class:`AlltoallvRequest`.

    Raises
    ------
    ArgumentTypeError, ArgumentError, ArgumentKeyError, ArgumentBufferError
        As :func:`optiq.alltoallw`, on every rank.
    """
    return AlltoallvRequest(comm, sendbuf, recvbuf, timeout=timeout, kind=GENERAL, network=network, method=method,
                            hosts=hosts, link_bw=link_bw, cache_size=DEFAULT_CACHE_SIZE, chunk_model=chunk_model,
                            planner_options=planner_options, parent=parent)
