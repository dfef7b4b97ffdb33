"""The application's call: :func:`alltoallv`, an ``MPI_Alltoallv`` that plans its own routes.

An application replaces ::

    comm.Alltoallv([sendbuf, (scounts, sdispls), MPI.BYTE], [recvbuf, (rcounts, rdispls), MPI.BYTE])

by ::

    optiq.runtime.alltoallv(comm, sendbuf, scounts, sdispls, recvbuf, rcounts, rdispls, network="torus:4x4")

and moves exactly the same bytes (counts and displacements in elements of the buffers'
dtypes, any dtype; gaps, zero counts and a rank's bytes to itself included). Every rank of
``comm`` calls it together; it works on a duplicate of ``comm``.

**What a call does.**

1. *Checks and a fingerprint.* Every rank checks its own arguments and hashes its counts;
   one small ``Allreduce`` sums the hashes into the pattern's fingerprint and counts the
   ranks whose arguments are wrong. A wrong argument on any rank raises the same error on
   every rank, before any data moves.
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
3. *The transfer*, by the executor (the plan's paths, chunked store-and-forward), or by
   ``comm.Alltoallv`` itself.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import OptiqError, TransferError
from ..mpi.comms import cached_on, forget
from ..mpi.launch import together
from ..mpi.waiting import allreduce_asleep, start_together, wait_politely
from ..plan import Plan
from ..topology import Topology, from_spec
from ..utils.checks import check_count
from .executor import Executor
from .ranklevel import RankNetwork, host_demands_of, rank_plan

__all__ = ["alltoallv", "AlltoallvResult", "clear_cache", "MIN_GAIN", "DEFAULT_CACHE_SIZE", "AUTO_METHOD"]

#: ``method="auto"`` uses a plan only if it predicts at least this fraction less time than
#: the default routes.
MIN_GAIN = 0.05
#: Patterns kept per communicator.
DEFAULT_CACHE_SIZE = 16
#: The planner ``method="auto"`` tries.
AUTO_METHOD = "heu2"
#: ``method="auto"`` skips the chunk-model comparison for plans of more chunk events than
#: this (large messages, where forwarding costs little against the transfer).
MAX_MODEL_EVENTS = 500_000


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


@dataclass
class _Side:
    """One side of the call: the buffer as bytes, counts and displacements in bytes."""

    data: np.ndarray
    counts: np.ndarray
    displs: np.ndarray


@dataclass
class _Entry:
    """A planned pattern: how to run it on this rank."""

    method: str
    reason: str
    executor: Executor | None = None
    send_jobs: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros(0, np.int64))  # job, peer rank
    recv_jobs: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    predicted_s: float | None = None
    default_s: float | None = None
    trial: bool = False  # auto, unpaced: measure it against comm.Alltoallv on the first call

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()


class _Context:
    """The duplicate of a communicator this module works on, and its cache of patterns."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm.Dup()
        self.entries: OrderedDict[tuple[int, int], _Entry] = OrderedDict()
        self.generation = 0  # changes with every insertion and clearing, alike on every rank
        self.last_signature: tuple[Any, ...] | None = None  # the last call's checked arguments on this rank
        self.last_sides: tuple[_Side, _Side, np.ndarray] | None = None

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


def _spec(buf: Any, counts: Any, displs: Any, what: str) -> tuple[Any, Any, Any, int | None]:
    """``buf, counts, displs`` from the arguments or mpi4py's buffer spec, and the element size
    an MPI datatype in the spec gives."""
    if isinstance(buf, (list, tuple)) and counts is None and displs is None:
        parts = list(buf)
        if len(parts) < 2:
            raise OptiqError(f"the {what} buffer spec must be [buffer, (counts, displs)], got {len(parts)} item(s)")
        item = None
        if len(parts) >= 3 and hasattr(parts[-1], "Get_size"):
            item = int(parts.pop().Get_size())
        buf = parts[0]
        if len(parts) == 2 and isinstance(parts[1], (list, tuple)) and len(parts[1]) == 2 \
                and not np.isscalar(parts[1][0]):
            counts, displs = parts[1]
        else:
            counts = parts[1]
            displs = parts[2] if len(parts) > 2 else None
        return buf, counts, displs, item
    return buf, counts, displs, None


def _bytes(buf: Any, what: str, writable: bool) -> np.ndarray:
    """A buffer as contiguous bytes, or the error saying why it cannot be."""
    if not isinstance(buf, np.ndarray):
        raise OptiqError(f"the {what} buffer must be a numpy array, got {type(buf).__name__}")
    if not buf.flags.c_contiguous:
        raise OptiqError(f"the {what} buffer must be contiguous (np.ascontiguousarray)")
    if writable and not buf.flags.writeable:
        raise OptiqError(f"the {what} buffer is read-only")
    return buf.reshape(-1).view(np.uint8)


def _signature(config: str, *args: Any) -> tuple[Any, ...] | None:
    """What the checks of one side depend on, when every count and displacement is a numpy
    array (None otherwise: checked every time)."""
    sendbuf, sendcounts, sdispls, s_item, recvbuf, recvcounts, rdispls, r_item = args
    parts: list[Any] = [config, s_item, r_item]
    for buf in (sendbuf, recvbuf):
        if not isinstance(buf, np.ndarray):
            return None
        parts += [buf.nbytes, buf.dtype.itemsize]
    for array in (sendcounts, sdispls, recvcounts, rdispls):
        if array is None:
            parts.append(None)
        elif isinstance(array, np.ndarray):
            parts.append((array.dtype.str, array.tobytes()))
        else:
            return None
    return tuple(parts)


def _side(buf: Any, counts: Any, displs: Any, item: int | None, size: int, what: str, writable: bool) -> _Side:
    """Check one side of the call; the buffer as bytes and counts/displacements in bytes."""
    data = _bytes(buf, what, writable)
    try:
        c = np.asarray(counts).astype(np.int64, casting="safe").ravel()
    except (TypeError, ValueError):
        raise OptiqError(f"{what} counts must be integers, got {counts!r}") from None
    if c.size != size:
        raise OptiqError(f"{what} counts have {c.size} entries, the communicator {size} ranks")
    if (c < 0).any():
        raise OptiqError(f"{what} count for rank {int(np.argmax(c < 0))} is negative: {int(c.min())}")
    if displs is None:
        d = np.concatenate(([0], np.cumsum(c)[:-1])).astype(np.int64)
    else:
        try:
            d = np.asarray(displs).astype(np.int64, casting="safe").ravel()
        except (TypeError, ValueError):
            raise OptiqError(f"{what} displacements must be integers, got {displs!r}") from None
        if d.size != size:
            raise OptiqError(f"{what} displacements have {d.size} entries, the communicator {size} ranks")
        if (d < 0).any():
            raise OptiqError(f"{what} displacement for rank {int(np.argmax(d < 0))} is negative")
    item = buf.dtype.itemsize if item is None else item
    end = (d + c) * item
    if c.size and (end > buf.nbytes).any():
        r = int(np.argmax(end > buf.nbytes))
        raise OptiqError(f"the {what} buffer holds {buf.nbytes // max(item, 1)} elements, but rank {r}'s part ends at "
                         f"element {int(d[r] + c[r])}")
    if writable:
        order = np.argsort(d, kind="stable")
        live = order[c[order] > 0]
        overlap = np.flatnonzero(d[live][1:] < (d + c)[live][:-1])
        if overlap.size:
            a, b = live[overlap[0]], live[overlap[0] + 1]
            raise OptiqError(f"the {what} regions of ranks {a} and {b} overlap")
    return _Side(data, c * item, d * item)


def _fingerprint(rank: int, size: int, send: _Side, recv: _Side, config: str) -> np.ndarray:
    h = hashlib.blake2b(digest_size=16)
    h.update(np.array([rank, size], dtype=np.int64).tobytes())
    h.update(send.counts.tobytes())
    h.update(recv.counts.tobytes())
    h.update(config.encode())
    digest: np.ndarray = np.frombuffer(h.digest(), dtype=np.uint64).copy()
    return digest


def alltoallv(comm: Any, sendbuf: Any, sendcounts: Any = None, sdispls: Any = None, recvbuf: Any = None,
              recvcounts: Any = None, rdispls: Any = None, *, network: Topology | str | None = None,
              method: str = "auto", hosts: Any = None, link_bw: float | None = None,
              cache_size: int = DEFAULT_CACHE_SIZE, chunk_model: Any = None, timeout: float = 60.0,
              **planner_options: Any) -> AlltoallvResult:
    """Move what ``comm.Alltoallv`` would move, on planned paths (module docstring).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls
        As ``MPI_Alltoallv``: numpy arrays, and per rank the count and displacement in
        elements of the array's dtype (``None`` displacements: parts back to back). Or
        mpi4py's buffer specs: ``alltoallv(comm, [sendbuf, (counts, displs)], [recvbuf,
        (counts, displs)])``, with an MPI datatype as third item to count in its size.
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
    OptiqError
        The same on every rank, before any data moves: a malformed buffer, count or
        displacement, counts that do not match between senders and receivers, ranks that
        passed different options, a communicator larger than the network, a rank whose
        host the network does not have. :class:`~optiq.errors.TransferError` on a timeout.
    """
    start = time.perf_counter()
    from mpi4py import MPI

    ctx = _context(comm)
    c = ctx.comm
    rank, size = c.Get_rank(), c.Get_size()
    check_count("cache_size", cache_size, 1)
    config = repr((method, network.spec or network.name if isinstance(network, Topology) else network,
                   hosts if isinstance(hosts, (str, type(None))) else "given", link_bw,
                   sorted(planner_options.items()), chunk_model))
    error = None
    if isinstance(sendbuf, (list, tuple)) and recvbuf is None and sdispls is None:  # (comm, sendspec, recvspec)
        recvbuf, sendcounts = sendcounts, None
    try:
        sendbuf, sendcounts, sdispls, s_item = _spec(sendbuf, sendcounts, sdispls, "send")
        recvbuf, recvcounts, rdispls, r_item = _spec(recvbuf, recvcounts, rdispls, "receive")
        signature = _signature(config, sendbuf, sendcounts, sdispls, s_item, recvbuf, recvcounts, rdispls, r_item)
        if signature is not None and signature == ctx.last_signature and ctx.last_sides is not None:
            send, recv, words = ctx.last_sides  # the checks of the last call hold
            send = _Side(_bytes(sendbuf, "send", False), send.counts, send.displs)
            recv = _Side(_bytes(recvbuf, "receive", True), recv.counts, recv.displs)
        else:
            send = _side(sendbuf, sendcounts, sdispls, s_item, size, "send", writable=False)
            recv = _side(recvbuf, recvcounts, rdispls, r_item, size, "receive", writable=True)
            if send.counts[rank] != recv.counts[rank]:
                raise OptiqError(f"rank {rank} sends itself {send.counts[rank]} bytes but expects "
                                 f"{recv.counts[rank]}")
            if method != "auto" and method != "mpi" and network is None:
                raise OptiqError(f"method={method!r} needs network= (the machine to plan on)")
            words = _fingerprint(rank, size, send, recv, config)
            ctx.last_signature, ctx.last_sides = signature, (send, recv, words)
    except OptiqError as exc:
        error = str(exc) if str(exc).startswith("rank ") else f"rank {rank}: {exc}"
        words = np.zeros(2, np.uint64)
    vec = np.array([words[0], words[1], ctx.generation, ctx.generation ** 2, error is not None], dtype=np.uint64)
    wait_politely(c.Iallreduce(MPI.IN_PLACE, vec, op=MPI.SUM))  # ranks that come early leave the cores
    if vec[4]:
        together(c, lambda: _raise(error))
    if size * int(vec[3]) != int(vec[2]) ** 2:
        raise OptiqError("the ranks' alltoallv caches differ (clear_cache must be called on every rank together)")
    key = (int(vec[0]), int(vec[1]))
    fingerprint = f"{key[0]:016x}{key[1]:016x}"
    entry = ctx.entries.get(key)
    plan_s = 0.0
    if entry is None:
        begin = time.perf_counter()
        entry = _prepare(c, send, recv, config, network=network, method=method, hosts=hosts, link_bw=link_bw,
                         chunk_model=chunk_model, options=planner_options)
        plan_s = time.perf_counter() - begin
        ctx.entries[key] = entry
        ctx.generation += 1
        while len(ctx.entries) > cache_size:
            ctx.entries.popitem(last=False)[1].close()  # the same entry on every rank: a collective free
    else:
        ctx.entries.move_to_end(key)
    ready = time.perf_counter()
    if entry.trial:
        entry = ctx.entries[key] = _trial(c, entry, send, recv, timeout)  # the trial moved the bytes
    else:
        _move(c, entry, send, recv, timeout)
    done = time.perf_counter()
    return AlltoallvResult(method=entry.method, cached=plan_s == 0.0, plan_s=plan_s,
                           overhead_s=(ready - start) - plan_s, transfer_s=done - ready, reason=entry.reason,
                           predicted_s=entry.predicted_s, default_s=entry.default_s, fingerprint=fingerprint)


def _move(comm: Any, entry: _Entry, send: _Side, recv: _Side, timeout: float) -> None:
    """One transfer of the call's bytes as ``entry`` says: ``comm.Alltoallv`` or the plan."""
    from mpi4py import MPI

    rank = comm.Get_rank()
    if entry.method == "mpi":
        comm.Alltoallv([send.data, (send.counts, send.displs), MPI.BYTE],
                       [recv.data, (recv.counts, recv.displs), MPI.BYTE])
        return
    n = int(send.counts[rank])
    if n:
        recv.data[recv.displs[rank]:recv.displs[rank] + n] = send.data[send.displs[rank]:send.displs[rank] + n]
    if entry.executor is None:
        return
    jobs, peers = entry.send_jobs
    sends = {int(j): send.data[send.displs[p]:send.displs[p] + send.counts[p]] for j, p in zip(jobs, peers)}
    jobs, peers = entry.recv_jobs
    recvs = {int(j): recv.data[recv.displs[p]:recv.displs[p] + recv.counts[p]] for j, p in zip(jobs, peers)}
    try:
        entry.executor.run(sends, recvs, timeout=timeout)
    except TransferError as exc:
        raise TransferError(f"rank {rank}: {exc}") from None


def _trial(comm: Any, entry: _Entry, send: _Side, recv: _Side, timeout: float) -> _Entry:
    """The measured crossover: move the bytes by ``comm.Alltoallv`` and by the plan, each from
    an agreed start to the last rank's end, and keep the faster for the pattern."""
    from mpi4py import MPI

    mpi = _Entry("mpi", "")
    seconds = []
    for way in (mpi, entry):
        start = start_together(comm)
        _move(comm, way, send, recv, timeout)
        seconds.append(allreduce_asleep(comm, time.perf_counter() - start, MPI.MAX))
    t_mpi, t_plan = seconds
    measured = f"measured on the first call: the plan {t_plan:.4g} s, comm.Alltoallv {t_mpi:.4g} s"
    if t_plan >= t_mpi:
        entry.close()
        return _Entry("mpi", f"{entry.reason}, but {measured}", predicted_s=entry.predicted_s,
                      default_s=entry.default_s)
    entry.reason, entry.trial = f"{entry.reason}; {measured}", False
    return entry


def _raise(message: str | None) -> None:
    if message is not None:
        raise OptiqError(message)


def _prepare(comm: Any, send: _Side, recv: _Side, config: str, *, network: Any, method: str, hosts: Any,
             link_bw: float | None, chunk_model: Any, options: dict[str, Any]) -> _Entry:
    """Plan a new pattern (collective): every rank returns its part of the same plan."""
    rank, size = comm.Get_rank(), comm.Get_size()
    matrix = np.empty((size, size), dtype=np.int64)
    comm.Allgather(send.counts, matrix)
    configs = comm.allgather(config)
    if len(set(configs)) > 1:
        other = next(r for r, value in enumerate(configs) if value != configs[0])
        raise OptiqError(f"the ranks passed different options to alltoallv: rank 0 {configs[0]}, rank {other} "
                         f"{configs[other]}")

    def check_counts() -> None:
        wrong = np.flatnonzero(matrix[:, rank] != recv.counts)
        if wrong.size:
            s = int(wrong[0])
            raise OptiqError(f"rank {rank} expects {int(recv.counts[s])} bytes from rank {s}, which sends it "
                             f"{int(matrix[s, rank])}")

    together(comm, check_counts)
    if not (matrix - np.diag(np.diag(matrix))).any():
        return _Entry("local", "no rank sends to another")
    if method == "mpi" or network is None:
        return _Entry("mpi", "method='mpi'" if method == "mpi" else "no network= to plan on")
    topology, host_of = together(comm, lambda: _placement(comm, network, hosts, size, link_bw))
    net = RankNetwork(topology, host_of)
    demands = host_demands_of(matrix, host_of)
    if demands is None:
        if method == "auto":
            return _Entry("mpi", "every byte stays within hosts")
        return _compiled(comm, net, matrix, None, method, link_bw, "every byte stays within hosts")
    from ..planner import make_plan

    planner = AUTO_METHOD if method == "auto" else method
    # a path may stop only at a host that runs a rank: only ranks forward
    plan = make_plan(topology, demands, planner, comm=comm, forwarders=np.unique(net.host_of), **options)
    predicted_s, default_s = _times(net, matrix, plan, topology, demands, link_bw)
    if method != "auto":
        return _compiled(comm, net, matrix, plan, planner, link_bw, f"method={method!r}", predicted_s, default_s)
    if predicted_s > default_s * (1 - MIN_GAIN):
        return _Entry("mpi", f"the {planner} plan predicts {predicted_s * 1e3:.4g} ms against the default "
                             f"routes' {default_s * 1e3:.4g} ms: less than {MIN_GAIN:.0%} gain",
                      predicted_s=predicted_s, default_s=default_s)
    slower = _forwarding_costs_more(net, matrix, plan, topology, demands, chunk_model, link_bw)
    if slower is not None:
        return _Entry("mpi", slower, predicted_s=predicted_s, default_s=default_s)
    entry = _compiled(comm, net, matrix, plan, planner, link_bw,
                      f"the {planner} plan predicts {default_s / predicted_s:.2f}x the default routes' throughput",
                      predicted_s, default_s)
    entry.trial = link_bw is None  # emulated links: comm.Alltoallv is no measure of the emulated network
    return entry


def _times(net: RankNetwork, matrix: np.ndarray, plan: Plan, topology: Topology, demands: Any,
           link_bw: float | None) -> tuple[float, float]:
    """Predicted times of the plan and of the default routes (at ``link_bw`` on emulated links)."""
    if link_bw is None:
        return plan.predicted_time_s, float(plan.info.get("default_time_s", plan.predicted_time_s))
    from ..planner import make_plan
    from .runner import predicted_time

    default = make_plan(topology, demands, "default")
    return (predicted_time(rank_plan(net, matrix, plan), link_bw)[0],
            predicted_time(rank_plan(net, matrix, default), link_bw)[0])


def _compiled(comm: Any, net: RankNetwork, matrix: np.ndarray, host_plan: Plan | None, method: str,
              link_bw: float | None, reason: str, predicted_s: float | None = None,
              default_s: float | None = None) -> _Entry:
    plan = rank_plan(net, matrix, host_plan)
    executor = Executor(comm, plan, link_bw=link_bw, routes_as_planned=True)  # the host plan was checked
    rank_of = net.rank_of_endpoint
    jobs = np.array(sorted(executor.schedule.send_jobs), dtype=np.int64)
    sends = (jobs, rank_of[plan.demands.dst[jobs]])
    jobs = np.array(sorted(executor.schedule.recv_jobs), dtype=np.int64)
    recvs = (jobs, rank_of[plan.demands.src[jobs]])
    return _Entry(method, reason, executor, sends, recvs, predicted_s=predicted_s, default_s=default_s)


def _placement(comm: Any, network: Any, hosts: Any, size: int, link_bw: float | None) -> tuple[Topology, np.ndarray]:
    """The network and the endpoint of every rank (every rank computes the same)."""
    topology = network if isinstance(network, Topology) else from_spec(network)
    E = topology.num_endpoints

    def endpoint(value: Any, who: str) -> int:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return topology.check_endpoint(int(value), what=who)
        return int(topology.endpoints_named([str(value)])[0])

    if hosts is None:
        if size > E:
            raise OptiqError(f"the communicator has {size} ranks, more than the {E} endpoints of {topology.name}: "
                             f"give hosts= to put several ranks on a host")
        host_of = np.arange(size)
    elif isinstance(hosts, str) and hosts == "processor" or isinstance(hosts, Mapping):
        names = comm.allgather(_processor_name())
        host_of = np.empty(size, dtype=np.int64)
        for r, name in enumerate(names):
            if isinstance(hosts, Mapping):
                if name not in hosts:
                    raise OptiqError(f"rank {r} runs on {name!r}, which the hosts= map does not name")
                host_of[r] = endpoint(hosts[name], f"the host of rank {r}")
            else:
                try:
                    host_of[r] = endpoint(name, f"the host of rank {r}")
                except OptiqError:
                    raise OptiqError(f"rank {r} runs on {name!r}, which {topology.name} has no host of") from None
    elif callable(hosts):
        host_of = np.array([endpoint(hosts(r), f"the host of rank {r}") for r in range(size)], dtype=np.int64)
    elif isinstance(hosts, Sequence) and not isinstance(hosts, str):
        if len(hosts) != size:
            raise OptiqError(f"hosts= names {len(hosts)} hosts for {size} ranks")
        host_of = np.array([endpoint(h, f"the host of rank {r}") for r, h in enumerate(hosts)], dtype=np.int64)
    else:
        raise OptiqError(f"hosts= must be a list, a function of the rank, 'processor' or a mapping, not {hosts!r}")
    if link_bw is not None and np.unique(host_of).size < size:
        raise OptiqError("link_bw= emulates one rank per host; several ranks share a host here")
    return topology, host_of


def _processor_name() -> str:
    from mpi4py import MPI

    return MPI.Get_processor_name()


def _forwarding_costs_more(net: RankNetwork, matrix: np.ndarray, plan: Plan, topology: Topology, demands: Any,
                           chunk_model: Any, link_bw: float | None) -> str | None:
    """Why MPI on the default routes is predicted faster than forwarding the plan's chunks, or None."""
    from ..planner import make_plan
    from ..sim import ChunkModel, simulate_chunks, simulate_direct
    from ..sim.chunk import chunk_events

    model = chunk_model or ChunkModel(link_rate_Bps=link_bw)
    planned = rank_plan(net, matrix, plan)
    if chunk_events(planned, planned.chunk_size) > MAX_MODEL_EVENTS:
        return None
    default = rank_plan(net, matrix, make_plan(topology, demands, "default"))
    executor_s = simulate_chunks(planned, model).completion_time_s
    direct_s = simulate_direct(default, model)
    if executor_s >= direct_s:
        return (f"the chunk model predicts {executor_s * 1e3:.4g} ms to forward the {plan.method} plan's chunks, "
                f"against {direct_s * 1e3:.4g} ms for MPI on the default routes")
    return None
