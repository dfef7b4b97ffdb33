"""The application's call: :func:`alltoallv`, an ``MPI_Alltoallv`` that plans its own routes.

An application replaces ::

    comm.Alltoallv(sendbuf, recvbuf)

by ::

    optiq.alltoallv(comm, sendbuf, recvbuf, network="torus:4x4")

with the same two arguments, in any form ``comm.Alltoallv`` takes
(:mod:`optiq.runtime.messages`), and moves exactly the same bytes (gaps, zero counts, a
rank's bytes to itself, derived datatypes, ``MPI.IN_PLACE``). Every rank of ``comm`` calls
it together; it works on a duplicate of ``comm``. :func:`optiq.runtime.ialltoallv` and
:func:`optiq.runtime.alltoallv_init` are its non-blocking and persistent forms.

**What a call does.**

1. *Checks and a fingerprint.* Every rank reads its two messages as mpi4py reads them and
   hashes their byte counts; one small ``Allreduce`` sums the hashes into the pattern's
   fingerprint and counts the ranks whose arguments are wrong, and those whose buffers this
   module does not read (device memory, ``MPI.BOTTOM`` with data). A wrong argument on any
   rank raises the same error on every rank, before any data moves, as the same type
   mpi4py raises (``TypeError``, ``ValueError``, ``KeyError``, ``BufferError``). A buffer
   that is not read here on any rank hands the call to ``comm.Alltoallv`` with the
   caller's own arguments, on every rank; so does an intercommunicator.
2. *A plan, once per pattern.* A fingerprint the cache does not hold gathers every rank's
   send counts, checks them against the receive counts (a mismatch is named on every rank),
   places the ranks on the network (``hosts=``), plans the bytes between hosts with
   ``method`` (the work spread over the ranks, as ``make_plan(..., comm=...)`` does), turns
   that into a plan between ranks (:mod:`optiq.runtime.ranklevel`: several ranks on one
   host share their host's paths, and their traffic within the host is not routed) and
   compiles this rank's part (:class:`~optiq.runtime.Executor`). Later calls with the same
   counts on every rank reuse it: no gather, no planning. The cache holds ``cache_size``
   patterns per communicator, the least recently used leaving first; :func:`clear_cache`
   empties it.
3. *The transfer*, by the executor (the plan's paths, chunked store-and-forward; every part
   read and written in place where its datatype's elements lie back to back, else packed
   and unpacked by the MPI library), or by ``comm.Alltoallv`` with the caller's arguments.

**Never slower than MPI where it matters.** With ``method="auto"`` (the default) the call
plans with Heuristic 2 and keeps ``comm.Alltoallv`` when the plan predicts less than
:data:`MIN_GAIN` over the network's default routes; when the chunk model predicts that
forwarding the plan's chunks (:func:`optiq.sim.simulate_chunks`) takes longer than MPI
sending straight on the default routes (:func:`optiq.sim.simulate_direct`), as for small
messages whose gain does not pay for the copies at intermediate ranks (the default
:class:`~optiq.sim.ChunkModel` describes Blue Gene/Q; ``chunk_model=`` takes one fitted to
your machine with ``optiq fit-chunk``); and, on real links (no ``link_bw``), when the first
call measures the plan slower: that call moves the bytes both ways, by ``comm.Alltoallv``
and by the plan, each from an agreed start to the last rank's end, and the pattern keeps
the faster (a measured crossover). ``method="mpi"`` always uses ``comm.Alltoallv``; a
planner's name (``"opt"``, ``"heu2"``, ``"default"``, ...) always uses that plan.

**Where the ranks are** (``hosts=``): by default rank ``i`` runs on endpoint ``i`` of the
network; or a list of endpoint ids or names (one per rank), a function of the rank giving
one, ``"processor"`` (each rank's ``MPI.Get_processor_name()`` is its endpoint's name, as a
fabric file names hosts), or a mapping from processor names to endpoint names or ids.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError, OptiqError
from ..mpi.comms import cached_on, forget
from ..mpi.launch import together
from ..mpi.waiting import wait_politely
from ..topology import Topology
from ..utils.checks import check_count
from .messages import Message, as_argument_error, read_message, spec_key
from .patterns import AUTO_METHOD, MIN_GAIN, Pattern, move, prepare, trial

__all__ = ["alltoallv", "AlltoallvResult", "clear_cache", "MIN_GAIN", "DEFAULT_CACHE_SIZE", "AUTO_METHOD"]

#: Patterns kept per communicator.
DEFAULT_CACHE_SIZE = 16


@dataclass(frozen=True)
class AlltoallvResult:
    """What one call did, on this rank.

    Attributes
    ----------
    method : str
        ``"mpi"`` (``comm.Alltoallv``), the planner whose plan moved the bytes, or ``"local"``
        (no rank sends to another: each copies its own part).
    cached : bool
        Whether the pattern's plan came from the cache.
    plan_s : float
        Gathering the counts, planning and compiling (0 when cached).
    overhead_s : float
        The rest of the call before the transfer: checks, fingerprint, buffer views.
    transfer_s : float
        Moving the bytes (this rank's wall time).
    reason : str
        Why this method.
    predicted_s, default_s : float or None
        The plan's predicted time and the default routes' (flow level), when planned.
    fingerprint : str
        The pattern's fingerprint (the same on every rank).
    """

    method: str
    cached: bool
    plan_s: float
    overhead_s: float
    transfer_s: float
    reason: str
    predicted_s: float | None
    default_s: float | None
    fingerprint: str

    def __repr__(self) -> str:
        extra = ""
        if self.predicted_s is not None and self.default_s is not None:
            extra = f", predicted {self.predicted_s * 1e3:.3f} ms, default routes {self.default_s * 1e3:.3f} ms"
        return (f"AlltoallvResult({self.method}, {'cached' if self.cached else 'planned'}, plan {self.plan_s:.4f} s, "
                f"overhead {self.overhead_s * 1e3:.3f} ms, transfer {self.transfer_s:.4f} s{extra}: {self.reason})")


class _Context:
    """The duplicate of a communicator this module works on, and its cache of patterns."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm.Dup()
        self.entries: OrderedDict[tuple[int, int], Pattern] = OrderedDict()
        self.generation = 0  # changes with every insertion and clearing, alike on every rank
        #: the last call's checked messages on this rank, and what they depend on (a repeated
        #: call with the same numpy buffers and counts is not read again)
        self.last: tuple[tuple[Any, ...], tuple[Message | None, Message, np.ndarray, bool]] | None = None

    def close(self) -> None:
        for entry in self.entries.values():
            entry.close()
        self.entries.clear()
        self.generation += 1

    def release(self) -> None:
        """Close the cached executors and free the duplicate (collective)."""
        self.close()
        self.comm.Free()


#: The communicators that hold a context (as an MPI attribute, released when they are freed).
_HOLDERS: list[Any] = []
_PURPOSE = "optiq.alltoallv"


def _context(comm: Any) -> _Context:
    def make() -> _Context:
        from mpi4py import MPI

        _HOLDERS[:] = [h for h in _HOLDERS if h != MPI.COMM_NULL]  # communicators freed since
        _HOLDERS.append(comm)
        return _Context(comm)

    ctx: _Context = cached_on(comm, _PURPOSE, make, _Context.release)
    return ctx


def clear_cache(comm: Any | None = None) -> None:
    """Forget the planned patterns of ``comm`` (or of every communicator) and release their
    executors and duplicated communicators. Collective: every rank calls it together.

    Freeing a communicator releases its cache too (an MPI attribute's delete callback)."""
    from mpi4py import MPI

    holders = list(_HOLDERS) if comm is None else [comm]
    for holder in holders:
        if holder != MPI.COMM_NULL:
            forget(holder, _PURPOSE)
    _HOLDERS[:] = [h for h in _HOLDERS if h not in holders and h != MPI.COMM_NULL]


@dataclass
class _Call:
    """One call, checked on every rank: its messages, and how its pattern's bytes move."""

    comm: Any                   # the context's duplicate
    sendbuf: Any
    recvbuf: Any
    send: Message | None        # None: MPI.IN_PLACE
    recv: Message
    pattern: Pattern
    key: tuple[int, int]
    fingerprint: str
    plan_s: float
    checked_s: float            # when the checks ended (perf_counter)


def _config(network: Any, method: str, hosts: Any, link_bw: float | None, chunk_model: Any,
            planner_options: dict[str, Any]) -> str:
    """The options of a call, as one string every rank must agree on."""
    return repr((method, network.spec or network.name if isinstance(network, Topology) else network,
                 hosts if isinstance(hosts, (str, type(None))) else "given", link_bw,
                 sorted(planner_options.items()), chunk_model))


def _fingerprint(rank: int, size: int, send_counts: np.ndarray, recv_counts: np.ndarray, config: str) -> np.ndarray:
    h = hashlib.blake2b(digest_size=16)
    h.update(np.array([rank, size], dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(send_counts, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(recv_counts, dtype=np.int64).tobytes())
    h.update(config.encode())
    digest: np.ndarray = np.frombuffer(h.digest(), dtype=np.uint64).copy()
    return digest


def _read_call(rank: int, size: int, sendbuf: Any, recvbuf: Any, method: str, network: Any,
               config: str) -> tuple[Message | None, Message, np.ndarray, bool]:
    """This rank's checks: its messages, the words of its pattern's fingerprint, and whether this
    module can move its bytes itself (host memory)."""
    from mpi4py import MPI

    recv = read_message(recvbuf, readonly=False, blocks=size)
    send = None if sendbuf is MPI.IN_PLACE else read_message(sendbuf, readonly=True, blocks=size)
    source = recv if send is None else send
    readable = recv.readable() and source.readable()
    if readable:
        recv.check_bounds("receive")
        recv.check_overlaps("receive")
        if send is not None:
            send.check_bounds("send")
        if source.byte_counts[rank] != recv.byte_counts[rank]:
            raise ArgumentError(f"rank {rank} sends itself {int(source.byte_counts[rank])} bytes but expects "
                                f"{int(recv.byte_counts[rank])}")
    if method not in ("auto", "mpi") and network is None:
        raise ArgumentError(f"method={method!r} needs network= (the machine to plan on)")
    words = _fingerprint(rank, size, source.byte_counts, recv.byte_counts, config) if readable else \
        np.zeros(2, np.uint64)
    return send, recv, words, readable


def _resolve(comm: Any, sendbuf: Any, recvbuf: Any, *, network: Any, method: str, hosts: Any, link_bw: float | None,
             cache_size: int, chunk_model: Any, planner_options: dict[str, Any], cached: bool = True) -> _Call:
    """Check a call on every rank and find (or make) its pattern (collective); with ``cached``
    False a new pattern of the caller's own, left out of the cache (persistent requests)."""
    from mpi4py import MPI

    ctx = _context(comm)
    c = ctx.comm
    rank, size = c.Get_rank(), c.Get_size()
    config = _config(network, method, hosts, link_bw, chunk_model, planner_options)
    failure: tuple[type[OptiqError], str] | None = None
    send: Message | None = None
    recv: Message | None = None
    words, readable = np.zeros(2, np.uint64), False
    try:
        check_count("cache_size", cache_size, 1)
        send_key, recv_key = spec_key(sendbuf) if sendbuf is not MPI.IN_PLACE else ("in place",), spec_key(recvbuf)
        memo = None if send_key is None or recv_key is None else (send_key, recv_key, method, config)
        if memo is not None and ctx.last is not None and ctx.last[0] == memo:
            send, recv, words, readable = ctx.last[1]
        else:
            send, recv, words, readable = _read_call(rank, size, sendbuf, recvbuf, method, network, config)
            ctx.last = None if memo is None else (memo, (send, recv, words, readable))
    except Exception as exc:  # any mistake, typed as mpi4py types it, fails every rank together
        error = as_argument_error(exc)
        text = str(error)
        failure = (type(error), text if text.startswith("rank ") else f"rank {rank}: {text}")
    vec = np.array([words[0], words[1], ctx.generation, ctx.generation ** 2, failure is not None, not readable],
                   dtype=np.uint64)
    wait_politely(c.Iallreduce(MPI.IN_PLACE, vec, op=MPI.SUM))  # ranks that come early leave the cores
    if vec[4]:
        together(c, lambda: _raise(failure))
    assert recv is not None
    if size * int(vec[3]) != int(vec[2]) ** 2:
        raise OptiqError("the ranks' alltoallv caches differ (clear_cache must be called on every rank together)")
    if vec[5]:  # device memory or MPI.BOTTOM with data on some rank: MPI moves the caller's own arguments
        return _Call(c, sendbuf, recvbuf, send, recv, Pattern("mpi", "device memory or MPI.BOTTOM with data: handed "
                     "to comm.Alltoallv"), (0, 0), "", 0.0, time.perf_counter())
    key = (int(vec[0]), int(vec[1]))
    pattern = ctx.entries.get(key) if cached else None
    plan_s = 0.0
    if pattern is None:
        begin = time.perf_counter()
        source = recv if send is None else send
        pattern = prepare(c, source.byte_counts, recv.byte_counts, config, network=network, method=method, hosts=hosts,
                          link_bw=link_bw, chunk_model=chunk_model, options=planner_options)
        plan_s = time.perf_counter() - begin
        if cached:
            ctx.entries[key] = pattern
            ctx.generation += 1
            while len(ctx.entries) > cache_size:
                ctx.entries.popitem(last=False)[1].close()  # the same entry on every rank: a collective free
    else:
        ctx.entries.move_to_end(key)
    return _Call(c, sendbuf, recvbuf, send, recv, pattern, key, f"{key[0]:016x}{key[1]:016x}", plan_s,
                 time.perf_counter())


def _raise(failure: tuple[type[OptiqError], str] | None) -> None:
    if failure is not None:
        kind, message = failure
        raise kind(message)


def _intercomm(comm: Any, sendbuf: Any, recvbuf: Any, start: float) -> AlltoallvResult:
    """An intercommunicator's call, moved by ``comm.Alltoallv`` (two groups: nothing to plan)."""
    comm.Alltoallv(sendbuf, recvbuf)
    done = time.perf_counter()
    return AlltoallvResult(method="mpi", cached=False, plan_s=0.0, overhead_s=0.0, transfer_s=done - start,
                           reason="an intercommunicator: handed to comm.Alltoallv", predicted_s=None, default_s=None,
                           fingerprint="")


def alltoallv(comm: Any, sendbuf: Any, recvbuf: Any, *more: Any, network: Topology | str | None = None,
              method: str = "auto", hosts: Any = None, link_bw: float | None = None,
              cache_size: int = DEFAULT_CACHE_SIZE, chunk_model: Any = None, timeout: float = 60.0,
              **planner_options: Any) -> AlltoallvResult:
    """Move what ``comm.Alltoallv(sendbuf, recvbuf)`` would move, on planned paths (module docstring).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        An intracommunicator (an intercommunicator's call is handed to ``comm.Alltoallv``).
    sendbuf, recvbuf
        As ``comm.Alltoallv`` takes them, by mpi4py's rules (:mod:`optiq.runtime.messages`):
        a buffer, or ``[buf, counts]``, ``[buf, (counts, displs)]``, ``[buf, T]``,
        ``[buf, counts, T]``, ``[buf, (counts, displs), T]``, ``[buf, counts, displs, T]``, with
        any buffer (numpy in either order, ``bytes``, ``bytearray``, ``array.array``,
        ``MPI.memory``, DLPack, CUDA arrays, ``None``/``MPI.BOTTOM``) and any datatype
        (derived ones are packed with the MPI library's ``Pack``); ``sendbuf`` may be
        ``MPI.IN_PLACE``.
    network : Topology or str, optional
        The machine (a :class:`~optiq.Topology` or a spec such as ``"torus:4x4"`` or
        ``"ibnet:fabric.txt"``). Without it the call is ``comm.Alltoallv``.
    method : str
        ``"auto"`` (a plan where it pays, else MPI), ``"mpi"``, or a planner's name.
    hosts : optional
        Where the ranks run (module docstring).
    link_bw : float, optional
        Emulate links of this many bytes/s (the executor paces every link leaving a rank).
    cache_size : int
        Patterns kept for this communicator.
    chunk_model : ChunkModel, optional
        ``method="auto"``'s model of forwarding costs; default Blue Gene/Q's.
    timeout : float
        Seconds before a transfer is abandoned with :class:`~optiq.errors.TransferError`.
    **planner_options
        Passed to :func:`optiq.make_plan` (``gap``, ``time_limit``, ``k``, ``unit``, ...).

    Returns
    -------
    AlltoallvResult

    Raises
    ------
    ArgumentTypeError, ArgumentError, ArgumentKeyError, ArgumentBufferError
        The same on every rank, before any data moves, for any argument a rank got wrong
        (``TypeError``, ``ValueError``, ``KeyError``, ``BufferError`` as mpi4py raises them
        too): a malformed message, a part outside its buffer, counts that do not match
        between senders and receivers, ranks that passed different options, a communicator
        larger than the network, a rank whose host the network does not have.
    TransferError
        On a timeout.
    """
    start = time.perf_counter()
    if more:
        raise ArgumentTypeError(f"alltoallv takes (comm, sendbuf, recvbuf) as comm.Alltoallv takes (sendbuf, "
                                f"recvbuf), got {2 + len(more)} arguments after comm: pass [buf, (counts, displs)] "
                                f"for each side")
    if comm.Is_inter():
        return _intercomm(comm, sendbuf, recvbuf, start)
    call = _resolve(comm, sendbuf, recvbuf, network=network, method=method, hosts=hosts, link_bw=link_bw,
                    cache_size=cache_size, chunk_model=chunk_model, planner_options=planner_options)
    pattern = call.pattern
    ready = time.perf_counter()
    if pattern.trial and call.send is not None:  # in place, the first move would overwrite what the second sends
        pattern = _context(comm).entries[call.key] = trial(call.comm, pattern, call.send, call.recv, sendbuf, recvbuf,
                                                           timeout)
    else:
        move(call.comm, pattern, call.send, call.recv, sendbuf, recvbuf, timeout)
    done = time.perf_counter()
    return AlltoallvResult(method=pattern.method, cached=call.plan_s == 0.0 and call.fingerprint != "",
                           plan_s=call.plan_s, overhead_s=(ready - start) - call.plan_s, transfer_s=done - ready,
                           reason=pattern.reason, predicted_s=pattern.predicted_s, default_s=pattern.default_s,
                           fingerprint=call.fingerprint)
