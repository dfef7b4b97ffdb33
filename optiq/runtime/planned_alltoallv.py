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
   hashes their byte counts; one small ``Iallreduce`` (the *agreement*) sums the hashes into
   the pattern's fingerprint and counts the ranks whose arguments are wrong, and those whose
   buffers this module does not read (device memory, ``MPI.BOTTOM`` with data). A wrong
   argument on any rank raises the same error on every rank, as the same type mpi4py raises
   (``TypeError``, ``ValueError``, ``KeyError``, ``BufferError``): before any data moves,
   or, for a call ``method="auto"`` sent ahead (below), once the transfer has ended, every
   rank having taken part in it (a rank whose own arguments are wrong stands in with
   scratch bytes of the sizes its peers send and expect). A buffer that is not read here on
   any rank hands the call to ``comm.Alltoallv`` with the caller's own arguments, on every
   rank; so does an intercommunicator.
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

**Planning that pays for itself.** With ``method="auto"`` (the default) a call whose counts
the cache has no plan for is handed to ``comm.Alltoallv`` until the calls with the same
*pairs* (the same ranks sending to the same ranks, whatever the amounts: the pattern's
*shape*) have taken long enough that planning them costs at most ``plan_budget`` of that
time (5% by default): the time spent planning a shape, and trying its plan, never exceeds
that fraction of the time its calls took, so counts that change from call to call (a sample
sort, a mixture-of-experts layer) cost what ``comm.Alltoallv`` costs, and counts that repeat
reach the plan's gain once they have run long enough (``result.reason`` says how long). A
call whose counts belong to no shape about to be planned (each rank can tell from its own
counts) is sent *ahead*: its bytes go to ``comm.Ialltoallv`` at once, and the agreement
travels beside them, so that such a call waits for no other rank before its transfer
(``result.ahead``); the call after the one that makes a shape's planning pay waits for the
agreement, and plans. Once calls settle on MPI (agreed calls in a row of one shape, handed
to ``comm.Alltoallv``, whose shape is not yet worth planning, or planning again for new
counts, or measured faster with MPI), the calls after them go to ``comm.Alltoallv``
*unchecked*, with the caller's own arguments and no agreement: 3, then 15, 63, ... up to
``max_unchecked`` (127) calls between agreed ones (one agreed call later while the cache
holds a plan of the shape, whose counts may come back), and never past the call after which
the shape's planning pays. A mistake in an unchecked call is MPI's to find, as with
``comm.Alltoallv`` (``max_unchecked=0`` checks every call); their time is booked to the
shape when the agreed calls around them have it (``result.checked``). New
counts of a shape planned before are re-split over that shape's candidate paths
(:func:`optiq.runtime.patterns.prepare`). A shape whose plan measured slower than MPI is not
planned again. The planning time is
estimated from the plans made before on the communicator (at first, 1 ms a host pair and
50 ms more); every rank agrees on the times (each call's time travels with the next call's
fingerprint). ``result.plans_made`` and ``result.planning_s`` count the plans made on the
communicator and their seconds.

**Never slower than MPI where it matters.** When ``method="auto"`` plans, it plans with
Heuristic 2 and keeps ``comm.Alltoallv`` when the plan predicts less than
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

import functools
import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError, OptiqError
from ..mpi.comms import cached_on, forget, mpi_module
from ..mpi.launch import together
from ..topology import Topology
from ..utils.checks import check_count
from .messages import Message, as_argument_error, overlapping, quick_parts, read_message, spec_key
from .patterns import (
    AUTO_METHOD,
    CONFIG_SEPARATOR,
    MIN_GAIN,
    Pattern,
    check_placement,
    check_placement_here,
    gather_counts,
    move,
    names_needed,
    prepare,
    trial,
)
from .shapes import Shapes

__all__ = ["alltoallv", "AlltoallvResult", "clear_cache", "MIN_GAIN", "DEFAULT_CACHE_SIZE", "DEFAULT_PLAN_BUDGET",
           "DEFAULT_MAX_UNCHECKED", "AUTO_METHOD"]

#: Patterns kept per communicator.
DEFAULT_CACHE_SIZE = 16
#: ``method="auto"`` plans a shape once planning costs at most this fraction of its calls' time.
DEFAULT_PLAN_BUDGET = 0.05
#: ``method="auto"``: at most this many calls in a row go to ``comm.Alltoallv`` without the ranks' agreement.
DEFAULT_MAX_UNCHECKED = 127


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
    plans_made : int
        Plans made on this communicator so far (this call's included).
    planning_s : float
        Seconds this rank spent making them.
    ahead : bool
        Whether the bytes moved by ``comm.Ialltoallv`` while the ranks were still agreeing on
        the call (``method="auto"``, a pattern of no shape it may plan).
    checked : bool
        Whether the ranks agreed on this call (False: ``method="auto"`` handed it to
        ``comm.Alltoallv`` unchecked, between two agreed calls; its fingerprint is then ``""``).
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
    plans_made: int = 0
    planning_s: float = 0.0
    ahead: bool = False
    checked: bool = True

    def __repr__(self) -> str:
        extra = ", sent ahead" if self.ahead else "" if self.checked else ", unchecked"
        if self.predicted_s is not None and self.default_s is not None:
            extra += f", predicted {self.predicted_s * 1e3:.3f} ms, default routes {self.default_s * 1e3:.3f} ms"
        return (f"AlltoallvResult({self.method}, {'cached' if self.cached else 'planned'}, plan {self.plan_s:.4f} s, "
                f"overhead {self.overhead_s * 1e3:.3f} ms, transfer {self.transfer_s:.4f} s{extra}: {self.reason})")


@dataclass
class _Quiet:
    """``method="auto"``'s calls without the ranks' agreement, alike on every rank.

    An agreed call of a shape that goes to ``comm.Alltoallv`` and is not about to be planned
    (its calls have not yet paid for planning it, or for planning it again, or its plan
    measured slower than MPI) extends a *streak* when the agreed call before it, with the same
    options, had the same shape; it resets it otherwise. After a streak of ``s`` such calls,
    the next ``min(4**s, cap + 1) - 1`` calls with the same options go straight to
    ``comm.Alltoallv``, and never more than the shape's calls left before planning it pays.
    A shape with a plan in the cache (for other counts, which may come back) waits one agreed
    call longer. Their time is booked to the shape at the next agreed call if that call has
    the shape too."""

    config: str = ""
    shape: tuple[int, int] | None = None
    streak: int = 0
    remaining: int = 0      # calls still to go unchecked
    skipped_s: float = 0.0  # this rank's time in them since the last agreed call
    skipped_n: int = 0
    #: the options of the agreed call that opened the window, as the caller passed them: a call
    #: passing the very same objects has the same options without building their text (None:
    #: planner options were given, and only the text tells)
    options: tuple[Any, ...] | None = None
    #: what each unchecked call of the window returns, but for its times (AlltoallvResult's fields)
    template: dict[str, Any] = field(default_factory=dict)

    def agreed(self, config: str, shape: tuple[int, int] | None, cap: int, left: int | None = None,
               planned: bool = False) -> None:
        """An agreed call ended; ``shape`` None unless it is one whose next calls may go unchecked,
        ``left`` the calls it may take before it is planned (None: it is not to be planned),
        ``planned`` whether the cache holds a plan of the shape."""
        if shape is None or cap <= 0:
            self.shape, self.streak, self.remaining = None, 0, 0
            return
        if shape == self.shape and config == self.config:
            self.streak += 1
        else:
            self.config, self.shape, self.streak = config, shape, 0
        steps = self.streak - planned
        self.remaining = 0 if steps < 0 else min(4 ** min(steps, 31), cap + 1) - 1
        if left is not None:
            self.remaining = min(self.remaining, max(0, left - 1))

    def open(self, options: tuple[Any, ...] | None, plans_made: int, planning_s: float) -> None:
        """After :meth:`agreed`: what the window's unchecked calls compare and return."""
        self.options = options
        self.template = dict(method="mpi", cached=False, plan_s=0.0, reason=self.reason(), predicted_s=None,
                             default_s=None, fingerprint="", plans_made=plans_made, planning_s=planning_s,
                             ahead=False, checked=False)

    def same_options(self, network: Any, method: str, hosts: Any, link_bw: Any, chunk_model: Any,
                     plan_budget: Any, max_unchecked: Any) -> bool:
        """Whether a call passes the very objects the window's agreed call passed (then its
        options are the same; a call passing equal but other objects is compared by text)."""
        o = self.options
        return o is not None and o[0] is network and o[1] is method and o[2] is hosts and o[3] is link_bw \
            and o[4] is chunk_model and o[5] is plan_budget and o[6] is max_unchecked

    def reason(self) -> str:
        return (f"comm.Alltoallv, unchecked: {self.streak + 1} agreed calls in a row had one shape and went to MPI; "
                f"the ranks agree again after {self.remaining} calls unchecked")


class _Context:
    """The duplicate of a communicator this module works on, and its cache of patterns."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm.Dup()
        self._parent = comm
        self._side: Any = None
        self.entries: OrderedDict[tuple[int, int], Pattern] = OrderedDict()
        self.entry_shapes: dict[tuple[int, int], tuple[int, int]] = {}  # method="auto": each entry's shape
        self.generation = 0  # changes with every insertion and clearing, alike on every rank
        #: what the last call's checks found on this rank, and what they depend on: a call with
        #: the same counts and displacements, on numpy buffers of the same sizes and types, is not
        #: checked again. Its buffers are not held (held, they would keep the allocator from
        #: reusing their pages, and every call would fault fresh ones in).
        self.last: tuple[tuple[Any, ...], tuple[np.ndarray, bool, int]] | None = None
        #: ``method="auto"``: what every shape's calls took and cost (the same on every rank)
        self.shapes = Shapes()
        #: this rank's time of its last call and of its planning since, told at the next call
        self.pending: tuple[tuple[int, int] | None, float, float] = (None, 0.0, 0.0)
        self.placed: set[str] = set()  # the options whose placement of the ranks has been checked
        self.quiet = _Quiet()
        self.released = False

    @property
    def side(self) -> Any:
        """Where the ranks tell each other their counts when one failed while others went ahead
        (a transfer may be pending on ``comm`` then, so it cannot be ``comm``): a duplicate of
        the caller's communicator, made the first time a call fails (collective: every rank
        of a failing call asks for it at the same point)."""
        if self._side is None:
            self._side = self._parent.Dup()
        return self._side

    def close(self) -> None:
        for entry in self.entries.values():
            entry.close()
        self.entries.clear()
        self.entry_shapes.clear()
        self.generation += 1

    def has_plan(self, shape: tuple[int, int]) -> bool:
        """Whether the cache holds a plan (not MPI) for counts of ``shape``."""
        return any(self.entry_shapes.get(key) == shape and pattern.method != "mpi"
                   for key, pattern in self.entries.items())

    def release(self) -> None:
        """Close the cached executors and free the duplicate (collective)."""
        self.released = True
        self.quiet = _Quiet()
        self.close()
        if self._side is not None:
            self._side.Free()
        self.comm.Free()


#: The communicators that hold a context (as an MPI attribute, released when they are freed).
_HOLDERS: list[Any] = []
_PURPOSE = "optiq.alltoallv"


#: The last communicator a call came with, and its context: found again without asking MPI.
_LAST: list[Any] = [None, None]


def _context(comm: Any) -> _Context:
    last, ctx = _LAST
    if last is comm and not ctx.released:
        return ctx  # type: ignore[no-any-return]

    def make() -> _Context:
        from mpi4py import MPI

        _HOLDERS[:] = [h for h in _HOLDERS if h != MPI.COMM_NULL]  # communicators freed since
        _HOLDERS.append(comm)
        return _Context(comm)

    ctx = cached_on(comm, _PURPOSE, make, _Context.release)
    _LAST[:] = [comm, ctx]
    return ctx  # type: ignore[no-any-return]


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
    recv: Message | None        # None only for a call sent ahead, which moved its bytes already
    pattern: Pattern
    key: tuple[int, int]
    fingerprint: str
    plan_s: float
    checked_s: float            # when the checks ended (perf_counter)
    shape: tuple[int, int] | None = None  # method="auto": the shape's key
    moved: bool = False         # the bytes went ahead by comm.Ialltoallv, before the agreement
    moved_s: float = 0.0        # this rank's part in that, when it joined the ranks that went ahead

    @property
    def received(self) -> Message:
        """The receive message of a call that has still to move its bytes."""
        assert self.recv is not None, "a call sent ahead has moved its bytes"
        return self.recv


def _config(network: Any, method: str, hosts: Any, link_bw: float | None, chunk_model: Any,
            planner_options: dict[str, Any], plan_budget: float = DEFAULT_PLAN_BUDGET,
            max_unchecked: int = DEFAULT_MAX_UNCHECKED) -> str:
    """The options of a call, labelled, as one string every rank must agree on."""
    if not planner_options and isinstance(network, (str, type(None))) and isinstance(hosts, (str, type(None))) \
            and chunk_model is None and isinstance(method, str) and isinstance(link_bw, (int, float, type(None))) \
            and isinstance(plan_budget, (int, float)) and isinstance(max_unchecked, int):
        return _plain_config(network, method, hosts, link_bw, plan_budget, max_unchecked)
    return _config_text(network, method, hosts, link_bw, chunk_model, planner_options, plan_budget, max_unchecked)


@functools.lru_cache(maxsize=64, typed=True)
def _plain_config(network: str | None, method: str, hosts: str | None, link_bw: float | None,
                  plan_budget: float, max_unchecked: int) -> str:
    """:func:`_config` of the commonest calls (a network's spec, no planner options), remembered."""
    return _config_text(network, method, hosts, link_bw, None, {}, plan_budget, max_unchecked)


def _config_text(network: Any, method: str, hosts: Any, link_bw: float | None, chunk_model: Any,
                 planner_options: dict[str, Any], plan_budget: float, max_unchecked: int) -> str:
    given = {"method": method, "network": network.spec or network.name if isinstance(network, Topology) else network,
             "hosts": hosts if isinstance(hosts, (str, type(None))) else "by name" if names_needed(hosts) else "given",
             "link_bw": link_bw,
             "options": dict(sorted(planner_options.items())), "chunk_model": chunk_model, "plan_budget": plan_budget,
             "max_unchecked": max_unchecked}
    return CONFIG_SEPARATOR.join(f"{name}={value!r}" for name, value in given.items())


#: Weights of the count checksums: the pair (sender, receiver) weighs ``(sender * size + receiver + 1) * _MIX``.
_MIX = np.uint64(0x9E3779B97F4A7C15)


@functools.lru_cache(maxsize=64)
def _weights(rank: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The checksum weights of this rank's send and receive counts, per peer."""
    peers = np.arange(size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        sent = ((np.uint64(rank) * np.uint64(size) + peers + np.uint64(1)) * _MIX).astype(np.uint64)
        got = ((peers * np.uint64(size) + np.uint64(rank) + np.uint64(1)) * _MIX).astype(np.uint64)
    return sent, got


@functools.lru_cache(maxsize=64)
def _config_words(rank: int, size: int, config: str) -> tuple[bytes, int]:
    """What the fingerprints hash before the counts, and the options' hash of the agreement."""
    h = int.from_bytes(hashlib.blake2b(config.encode(), digest_size=3).digest(), "little")
    return np.array([rank, size], dtype=np.int64).tobytes() + config.encode(), h


def _agreement(rank: int, size: int, send_counts: np.ndarray, recv_counts: np.ndarray, config: str) -> np.ndarray:
    """Four words whose sums over the ranks show, without gathering the counts, that the ranks
    agree: every pair's send count weighed as its receiver's receive count is (two checksums,
    equal when every receive count is its sender's send count), and the options (a hash ``h``
    and ``h**2``: ``size * sum(h**2) == sum(h)**2`` exactly when all ``h`` are equal)."""
    sent, got = _weights(rank, size)
    a = np.dot(send_counts.astype(np.uint64), sent)  # wraps modulo 2**64, silently (arrays never warn)
    b = np.dot(recv_counts.astype(np.uint64), got)
    h = _config_words(rank, size, config)[1]
    return np.array([a, b, h, h * h], dtype=np.uint64)


def _fingerprint(rank: int, size: int, send_counts: np.ndarray, recv_counts: np.ndarray, config: str) -> np.ndarray:
    """Four words: the hash of the counts (the pattern) and of which counts are not zero (its shape)."""
    both = np.concatenate((send_counts, recv_counts)).astype(np.int64, copy=False)
    prefix = _config_words(rank, size, config)[0]
    words = b"".join(hashlib.blake2b(prefix + data.tobytes(), digest_size=16).digest() for data in (both, both > 0))
    digest: np.ndarray = np.frombuffer(words, dtype=np.uint64).copy()
    return digest


def _read_call(rank: int, size: int, sendbuf: Any, recvbuf: Any, method: str, network: Any,
               config: str) -> tuple[Message | None, Message, np.ndarray, bool, int]:
    """This rank's checks: its messages, the words of its pattern's and shape's fingerprints,
    whether this module can move its bytes itself (host memory), and how many other ranks it
    sends to."""
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
    words, pairs = _words(rank, size, source.byte_counts, recv.byte_counts, config) if readable else \
        (np.zeros(8, np.uint64), 0)
    return send, recv, words, readable, pairs


def _words(rank: int, size: int, sent: np.ndarray, got: np.ndarray, config: str) -> tuple[np.ndarray, int]:
    """The words of a call's fingerprints and agreement from this rank's byte counts, and how
    many other ranks it sends to."""
    words = np.concatenate([_fingerprint(rank, size, sent, got, config), _agreement(rank, size, sent, got, config)])
    return words, int(np.count_nonzero(sent)) - int(sent[rank] > 0)


def _quick_call(rank: int, size: int, sendbuf: Any, recvbuf: Any, config: str) -> tuple[np.ndarray, int] | None:
    """:func:`_read_call` for the commonest messages (:func:`~optiq.runtime.messages.quick_parts`),
    without reading them into messages: the words and the peers, or None when any check would
    fail (then the full reading names the mistake)."""
    MPI = mpi_module()

    recv = quick_parts(recvbuf, size, readonly=False)
    if recv is None:
        return None
    send = recv if sendbuf is MPI.IN_PLACE else quick_parts(sendbuf, size, readonly=True)
    if send is None:
        return None
    sent, got = send[0], recv[0]
    if sent[rank] != got[rank] or overlapping(got, recv[1]) is not None:
        return None
    return _words(rank, size, sent, got, config)


#: The words of a call's agreement (one ``Iallreduce``, summed over the ranks).
_PATTERN, _SHAPE, _GENERATION, _FAILED, _UNREAD, _PAIRS, _LAST_S, _PLANNED_S, _AGREE, _AHEAD, _SKIPPED_S = (
    slice(0, 2), slice(2, 4), slice(4, 6), 6, 7, 8, 9, 10, slice(11, 15), 15, 16)


@dataclass
class _Start:
    """A call's checks on this rank, and its agreement under way (started, not yet waited for)."""

    ctx: _Context
    config: str
    send: Message | None
    recv: Message | None
    failure: tuple[type[OptiqError], str] | None
    vec: np.ndarray          # the agreement's words (summed in place)
    agreement: Any           # the request of the agreement's Iallreduce
    last_shape: tuple[int, int] | None
    row: tuple[int, int]     # this rank's row of the call's shape, hashed
    ahead: bool              # this rank hands the call to MPI before the agreement ends
    placed: bool             # this rank checked where the ranks run (the agreement tells if all did)
    skipped: int = 0         # the calls handed to MPI unchecked since the last agreed call (alike on every rank)
    data: Any = None         # the transfer by comm.Ialltoallv, once posted
    posted: float = 0.0      # when (perf_counter)
    scratch: list[np.ndarray] | None = None  # a failing rank's stand-in buffers

    def post(self, sendbuf: Any, recvbuf: Any) -> None:
        self.posted = time.perf_counter()
        self.data = self.ctx.comm.Ialltoallv(sendbuf, recvbuf)


def _begin(comm: Any, sendbuf: Any, recvbuf: Any, *, network: Any, method: str, hosts: Any, link_bw: float | None,
           cache_size: int, chunk_model: Any, planner_options: dict[str, Any], cached: bool = True,
           plan_budget: float = DEFAULT_PLAN_BUDGET, max_unchecked: int = DEFAULT_MAX_UNCHECKED,
           go_ahead: bool = False) -> _Start:
    """Check a call on this rank and start the ranks' agreement on it (a non-blocking
    ``Iallreduce``, started alike by every rank's call of every form). ``go_ahead``: the blocking
    call, which may hand a pattern of no hot shape to MPI before the agreement ends."""
    MPI = mpi_module()

    ctx = _context(comm)
    c = ctx.comm
    rank, size = c.Get_rank(), c.Get_size()
    config = _config(network, method, hosts, link_bw, chunk_model, planner_options, plan_budget, max_unchecked)
    failure: tuple[type[OptiqError], str] | None = None
    send: Message | None = None
    recv: Message | None = None
    words, readable, pairs = np.zeros(8, np.uint64), False, 0
    eligible = (go_ahead and cached and method == "auto" and network is not None and plan_budget != float("inf"))
    placing = method == "auto" and cached and network is not None and config not in ctx.placed \
        and not names_needed(hosts)
    try:
        check_count("cache_size", cache_size, 1)
        check_count("max_unchecked", max_unchecked, 0)
        if isinstance(plan_budget, bool) or not isinstance(plan_budget, (int, float, np.number)) \
                or not plan_budget >= 0:  # NaN too
            raise ArgumentError(f"plan_budget must be a fraction of the calls' time of 0 or more, got {plan_budget!r}")
        send_key, recv_key = spec_key(sendbuf) if sendbuf is not MPI.IN_PLACE else ("in place",), spec_key(recvbuf)
        memo = None if send_key is None or recv_key is None else (send_key, recv_key, method, config)
        if memo is not None and ctx.last is not None and ctx.last[0] == memo:
            words, readable, pairs = ctx.last[1]
        else:
            ctx.last = None
            if method not in ("auto", "mpi") and network is None:
                raise ArgumentError(f"method={method!r} needs network= (the machine to plan on)")
            quick = _quick_call(rank, size, sendbuf, recvbuf, config)
            if quick is not None:  # its messages are read below only if the call needs them
                (words, pairs), readable = quick, True
            else:
                send, recv, words, readable, pairs = _read_call(rank, size, sendbuf, recvbuf, method, network, config)
            if memo is not None:
                ctx.last = (memo, (words, readable, pairs))
        if placing:  # where the ranks run, checked on each rank alike: a mistake fails every rank with the call
            check_placement_here(network, hosts, size, link_bw)
    except Exception as exc:  # any mistake, typed as mpi4py types it, fails every rank together
        failure = _failure(exc, rank)
    row = _pair(words[_SHAPE])
    # ahead: a pattern of no hot shape cannot be planned, so it goes to comm.Ialltoallv now; a
    # memoised call sent ahead reads its messages only if it turns out to need them (_agree)
    ahead = eligible and failure is None and readable and pairs > 0 and not ctx.shapes.is_hot(row)
    if failure is None and recv is None and not ahead:
        try:
            send, recv = _messages(sendbuf, recvbuf, size)
        except Exception as exc:
            failure = _failure(exc, rank)
    # the last call's time and this rank's planning since ride along, in microseconds: every rank
    # then keeps the same account of every shape
    last_shape, last_s, planned_s = ctx.pending
    ctx.pending = (None, 0.0, 0.0)
    quiet = ctx.quiet
    skipped_s, skipped = quiet.skipped_s, quiet.skipped_n
    quiet.skipped_s, quiet.skipped_n = 0.0, 0
    vec = np.array([*words[:4], ctx.generation, ctx.generation ** 2, failure is not None, not readable, pairs,
                    round(last_s * 1e6), round(planned_s * 1e6), *words[4:], ahead, round(skipped_s * 1e6)],
                   dtype=np.uint64)
    agreement = c.Iallreduce(MPI.IN_PLACE, vec, op=MPI.SUM)
    return _Start(ctx, config, send, recv, failure, vec, agreement, last_shape, row, ahead, placing, skipped)


def _failure(exc: Exception, rank: int) -> tuple[type[OptiqError], str]:
    """A mistake on this rank, typed as mpi4py types it, with the rank named: raised on every rank."""
    error = as_argument_error(exc)
    text = str(error)
    return type(error), text if text.startswith("rank ") else f"rank {rank}: {text}"


def _messages(sendbuf: Any, recvbuf: Any, size: int) -> tuple[Message | None, Message]:
    """The call's two messages, read (``None`` for ``MPI.IN_PLACE``)."""
    from mpi4py import MPI

    recv = read_message(recvbuf, readonly=False, blocks=size)
    return None if sendbuf is MPI.IN_PLACE else read_message(sendbuf, readonly=True, blocks=size), recv


def _join(start: _Start, sendbuf: Any, recvbuf: Any, failed: bool) -> None:
    """Take part in the ``comm.Ialltoallv`` other ranks went ahead to: with the caller's
    arguments, or, for a rank whose arguments failed, with scratch bytes of the sizes its peers
    send and expect, so that no peer waits for it (``failed``: some rank failed, and every rank
    tells the others its counts first)."""
    from mpi4py import MPI

    ctx = start.ctx
    if failed:
        size = ctx.comm.Get_size()
        table = np.zeros((size, 2), np.int64)  # a failing rank claims nothing: its peers' claims size what it moves
        if start.failure is None:
            send, recv = (start.send, start.recv) if start.recv is not None else _messages(sendbuf, recvbuf, size)
            table[:, 0], table[:, 1] = (recv if send is None else send).byte_counts, recv.byte_counts
        got = np.empty_like(table)
        ctx.side.Alltoall(table, got)
        if start.failure is not None:
            counts = [got[:, 1], got[:, 0]]  # what the peers expect from it, and send it
            buffers = [np.zeros(int(n.sum()), np.uint8) for n in counts]
            displs = [np.concatenate(([0], np.cumsum(n)[:-1])) for n in counts]
            start.posted = time.perf_counter()
            start.data = ctx.comm.Ialltoallv([buffers[0], (counts[0], displs[0]), MPI.BYTE],
                                             [buffers[1], (counts[1], displs[1]), MPI.BYTE])
            start.scratch = buffers  # held until the transfer ends
            return
    if start.data is None:
        start.post(sendbuf, recvbuf)


def _agree(start: _Start, sendbuf: Any, recvbuf: Any, *, network: Any, method: str, hosts: Any,
           link_bw: float | None, cache_size: int, chunk_model: Any, planner_options: dict[str, Any],
           cached: bool = True, plan_budget: float = DEFAULT_PLAN_BUDGET) -> _Call:
    """Wait for the agreement and find (or make) the call's pattern (collective). When any rank
    went ahead (its bytes posted to ``comm.Ialltoallv``), every rank takes part in that transfer,
    and the call's errors are raised after it; MPI's own error on this rank is raised if the
    ranks found none."""
    MPI = mpi_module()

    ctx, c, config, vec = start.ctx, start.ctx.comm, start.config, start.vec
    send, recv, failure = start.send, start.recv, start.failure
    size = c.Get_size()
    start.agreement.Wait()
    ahead = int(vec[_AHEAD]) > 0
    moved_s, mpi_error = 0.0, None
    if ahead:
        if vec[_FAILED] or start.data is None:
            _join(start, sendbuf, recvbuf, failed=bool(vec[_FAILED]))
        try:
            start.data.Wait()
        except MPI.Exception as exc:  # mismatched counts (MPI says truncated): named below on every rank
            mpi_error = exc
        moved_s = time.perf_counter() - start.posted
    if vec[_FAILED]:
        together(c, lambda: _raise(failure))
    if size * int(vec[_GENERATION][1]) != int(vec[_GENERATION][0]) ** 2:
        raise OptiqError("the ranks' alltoallv caches differ (clear_cache must be called on every rank together)")
    if start.placed:  # checked here before the agreement, and no rank failed
        ctx.placed.add(config)
    key, shape_key = _pair(vec[_PATTERN]), _pair(vec[_SHAPE])
    last_s, calls = int(vec[_LAST_S]), 1
    if start.skipped and shape_key == start.last_shape:  # the calls between two agreed calls of one shape
        last_s, calls = last_s + int(vec[_SKIPPED_S]), 1 + start.skipped
    ctx.shapes.book(start.last_shape, last_s / 1e6 / size, int(vec[_PLANNED_S]) / 1e6 / size, calls)
    fingerprint = f"{key[0]:016x}{key[1]:016x}"
    agreement = vec[_AGREE]
    agreed = agreement[0] == agreement[1] and size * int(agreement[3]) == int(agreement[2]) ** 2
    if recv is None and not (ahead and agreed):  # a call sent ahead reads its messages only if it needs them
        send, recv = _messages(sendbuf, recvbuf, size)
    if vec[_UNREAD]:  # device memory or MPI.BOTTOM with data on some rank: MPI moves the caller's own arguments
        return _Call(c, sendbuf, recvbuf, send, recv, Pattern("mpi", "device memory or MPI.BOTTOM with data: handed "
                     "to comm.Alltoallv"), (0, 0), "", 0.0, time.perf_counter(), moved=ahead, moved_s=moved_s)
    if ahead:
        if not agreed:  # the bytes moved as MPI moves mismatched counts; the mismatch is named
            assert recv is not None
            gather_counts(c, (recv if send is None else send).byte_counts, recv.byte_counts, config)
        if mpi_error is not None:
            raise mpi_error
        return _Call(c, sendbuf, recvbuf, send, recv, _after(ctx, network, hosts, link_bw, config, shape_key,
                     start.row, int(vec[_PAIRS]), plan_budget), key, fingerprint, 0.0, time.perf_counter(), shape_key,
                     moved=True, moved_s=moved_s)
    assert recv is not None
    source = recv if send is None else send
    pattern = ctx.entries.get(key) if cached else None
    plan_s = 0.0
    auto = method == "auto" and cached and network is not None and int(vec[_PAIRS]) > 0  # else: local, or no network
    if pattern is None and auto:
        if not agreed:  # gathering the counts and options names the rank that differs, on every rank
            gather_counts(c, source.byte_counts, recv.byte_counts, config)
        _check_placement_once(ctx, network, hosts, link_bw, config)
        pattern = ctx.shapes.decide(shape_key, start.row, int(vec[_PAIRS]), plan_budget)
        if pattern is not None:  # comm.Alltoallv for now: nothing to cache
            return _Call(c, sendbuf, recvbuf, send, recv, pattern, key, fingerprint, 0.0, time.perf_counter(),
                         shape_key)
    if pattern is None:
        begin = time.perf_counter()
        shape = ctx.shapes.get(shape_key) if auto else None
        pattern = prepare(c, source.byte_counts, recv.byte_counts, config, network=network, method=method, hosts=hosts,
                          link_bw=link_bw, chunk_model=chunk_model, options=planner_options,
                          last=None if shape is None else shape.last)
        if shape is not None and pattern.candidates is not None and pattern.paths is not None:
            shape.last = (pattern.candidates, pattern.paths)
        plan_s = time.perf_counter() - begin
        ctx.shapes.planned(plan_s)
        ctx.pending = (None, 0.0, plan_s)
        if cached:
            ctx.entries[key] = pattern
            if shape is not None:
                ctx.entry_shapes[key] = shape_key
            ctx.generation += 1
            while len(ctx.entries) > cache_size:
                gone, entry = ctx.entries.popitem(last=False)
                ctx.entry_shapes.pop(gone, None)
                entry.close()  # the same entry on every rank: a collective free
    else:
        ctx.entries.move_to_end(key)
    return _Call(c, sendbuf, recvbuf, send, recv, pattern, key, fingerprint, plan_s, time.perf_counter(),
                 shape_key if auto else None)


def _pair(words: np.ndarray) -> tuple[int, int]:
    return int(words[0]), int(words[1])


def _check_placement_once(ctx: _Context, network: Any, hosts: Any, link_bw: float | None, config: str) -> None:
    """Where the ranks run, checked once per set of options, as a plan would check it
    (collective; a placement every rank checked on its own before the agreement is known
    already)."""
    if config not in ctx.placed:
        check_placement(ctx.comm, network, hosts, link_bw)
        ctx.placed.add(config)


def _after(ctx: _Context, network: Any, hosts: Any, link_bw: float | None, config: str,
           shape_key: tuple[int, int], row: tuple[int, int], pairs: int, budget: float) -> Pattern:
    """What a call handed to ``comm.Alltoallv`` ahead of the agreement did, and whether its
    shape is now to be planned (then its next call waits for the agreement, and plans)."""
    _check_placement_once(ctx, network, hosts, link_bw, config)
    pattern = ctx.shapes.decide(shape_key, row, pairs, budget)
    if pattern is None:
        return Pattern("mpi", "comm.Alltoallv; the next call of these pairs plans them (planning now costs at most "
                              f"{budget:.0%} of their calls' time)")
    return pattern


def _resolve(comm: Any, sendbuf: Any, recvbuf: Any, **options: Any) -> _Call:
    """Check a call on every rank and find (or make) its pattern, before any byte moves
    (collective); with ``cached`` False a new pattern of the caller's own, left out of the
    cache (persistent requests)."""
    return _agree(_begin(comm, sendbuf, recvbuf, **options), sendbuf, recvbuf, **options)


def _raise(failure: tuple[type[OptiqError], str] | None) -> None:
    if failure is not None:
        kind, message = failure
        raise kind(message)


def _unchecked(ctx: _Context, sendbuf: Any, recvbuf: Any, start: float) -> AlltoallvResult:
    """A call between two agreed calls of a shape settled on MPI: ``comm.Alltoallv`` with the
    caller's own arguments, nothing checked, its time kept for the next agreed call."""
    quiet = ctx.quiet
    quiet.remaining -= 1
    ready = time.perf_counter()
    ctx.comm.Alltoallv(sendbuf, recvbuf)
    done = time.perf_counter()
    quiet.skipped_s += done - ready
    quiet.skipped_n += 1
    # a frozen dataclass's __init__ sets each field through object.__setattr__: several times
    # the cost of these calls' own Python, so the unchecked result is filled in directly
    result = object.__new__(AlltoallvResult)
    fields = result.__dict__
    fields.update(quiet.template)
    fields["overhead_s"], fields["transfer_s"] = ready - start, done - ready
    return result


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
              plan_budget: float = DEFAULT_PLAN_BUDGET, max_unchecked: int = DEFAULT_MAX_UNCHECKED,
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
    plan_budget : float
        ``method="auto"``: plan a shape once planning costs at most this fraction of its calls'
        time (module docstring); ``0`` never plans, ``float("inf")`` plans every new pattern.
    max_unchecked : int
        ``method="auto"``: at most this many calls in a row handed to ``comm.Alltoallv`` without
        the ranks' agreement, once calls settle on MPI (module docstring); ``0`` agrees on every call.
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
    last, ctx = _LAST
    quiet = ctx.quiet if last is comm else None  # the communicator of the last call: an intracommunicator
    if quiet is not None and quiet.remaining and not planner_options \
            and quiet.same_options(network, method, hosts, link_bw, chunk_model, plan_budget, max_unchecked):
        return _unchecked(ctx, sendbuf, recvbuf, start)
    if comm.Is_inter():
        return _intercomm(comm, sendbuf, recvbuf, start)
    ctx = _context(comm)
    if ctx.quiet.remaining and ctx.quiet.config == _config(network, method, hosts, link_bw, chunk_model,
                                                           planner_options, plan_budget, max_unchecked):
        return _unchecked(ctx, sendbuf, recvbuf, start)
    options: dict[str, Any] = dict(network=network, method=method, hosts=hosts, link_bw=link_bw,
                                   cache_size=cache_size, chunk_model=chunk_model, planner_options=planner_options,
                                   plan_budget=plan_budget)
    begun = _begin(comm, sendbuf, recvbuf, go_ahead=True, max_unchecked=max_unchecked, **options)
    if begun.ahead:  # no plan can be made for it: the bytes move while the ranks agree
        begun.post(sendbuf, recvbuf)
    call = _agree(begun, sendbuf, recvbuf, **options)
    pattern = call.pattern
    if call.moved:
        done = time.perf_counter()
        ready = done - call.moved_s
    else:
        ready = time.perf_counter()
        if pattern.trial and call.send is not None:  # in place, the first move would overwrite what the second sends
            pattern = ctx.entries[call.key] = trial(call.comm, pattern, call.send, call.received, sendbuf, recvbuf,
                                                    timeout)
        else:
            move(call.comm, pattern, call.send, call.received, sendbuf, recvbuf, timeout)
        done = time.perf_counter()
    if call.shape is not None:  # auto: this call's time goes to its shape's account at the next call
        ctx.pending = (call.shape, done - ready, call.plan_s)
        if call.plan_s and pattern.method == "mpi":  # planned, and MPI kept: not planned again
            ctx.shapes.mpi_faster(call.shape, pattern.reason)
    if call.shape is not None and pattern.method == "mpi" and not call.plan_s:  # unchecked calls may follow
        ctx.quiet.agreed(begun.config, call.shape, max_unchecked, ctx.shapes.calls_left(call.shape, plan_budget),
                         ctx.has_plan(call.shape))
        if ctx.quiet.remaining:
            ctx.quiet.open(None if planner_options else (network, method, hosts, link_bw, chunk_model, plan_budget,
                                                         max_unchecked), ctx.shapes.plans_made, ctx.shapes.planning_s)
    else:
        ctx.quiet.agreed(begun.config, None, max_unchecked)
    return AlltoallvResult(method=pattern.method, cached=call.plan_s == 0.0 and call.fingerprint != "",
                           plan_s=call.plan_s, overhead_s=(ready - start) - call.plan_s, transfer_s=done - ready,
                           reason=pattern.reason, predicted_s=pattern.predicted_s, default_s=pattern.default_s,
                           fingerprint=call.fingerprint, plans_made=ctx.shapes.plans_made,
                           planning_s=ctx.shapes.planning_s, ahead=call.moved)


