"""The ranks' agreement on a call of ``optiq.alltoallv`` or ``optiq.alltoallw``, and the call's pattern.

Every rank reads its two messages as mpi4py reads them and hashes their byte counts; one
small ``Iallreduce`` (the *agreement*) sums, over the ranks of the context
(:mod:`optiq.runtime.context`):

- the pattern's fingerprint (the counts) and its shape's (which counts are not zero);
- checksums that show, without gathering the counts, that every receive count is its
  sender's send count and that every rank passed the same options (:func:`agreement_words`);
- the ranks whose arguments are wrong, and those whose buffers this module does not read
  (device memory, ``MPI.BOTTOM`` with data);
- ``auto``'s account: the last call's time, the planning since, the calls sent ahead;
- for a call with ``parent=``, that the groups of the ranks are a partition of the parent's
  ranks (:meth:`~optiq.runtime.context.Group.word`): every rank's share is
  ``h(g) * (sum of g's weights - |g| * own weight)``, and the shares sum to zero exactly
  when, for every rank ``m``, the groups that hold ``m`` are ``|g_m|`` copies of ``m``'s own
  group ``g_m``; so every member of every group has that group.

A wrong argument on any rank raises the same error on every rank, as the same type mpi4py
raises (:func:`begin` records it, :func:`agree` raises it): before any data moves, or, for a
call ``method="auto"`` sent ahead, once the transfer has ended, every rank having taken part
in it (a rank whose own arguments are wrong stands in with scratch bytes of the sizes its
peers send and expect). :func:`agree` then finds the call's pattern: in the cache, by
``auto``'s policy (:mod:`optiq.runtime.policy`), or planned now
(:func:`~optiq.runtime.patterns.prepare`).
"""

from __future__ import annotations

import functools
import hashlib
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError, OptiqError
from ..mpi.comms import mpi_module
from ..mpi.connect import connect_in_turn
from ..mpi.launch import together
from ..mpi.waiting import wait_all
from ..topology import Topology
from ..utils.units import as_rate
from .context import Context, Group, SpreadMessage, connected, context, group_of
from .forms import Collective
from .messages import Message, as_argument_error, overlapping
from .moves import run_plan
from .options import (
    DEFAULT_CACHE_SIZE,
    DEFAULT_MAX_UNCHECKED,
    DEFAULT_PLAN_BUDGET,
    DEFAULT_TIMEOUT,
    check_call_options,
    is_timeout,
)
from .patterns import (
    CONFIG_SEPARATOR,
    Pattern,
    check_placement,
    check_placement_here,
    gather_counts,
    names_needed,
    no_faster_plan,
    prepare,
)
from .watch import bound, judge, review

__all__ = ["Call", "Start", "begin", "agree", "resolve", "config_of", "agreement_words", "fingerprint_words",
           "DEFAULT_CACHE_SIZE", "DEFAULT_PLAN_BUDGET", "DEFAULT_MAX_UNCHECKED"]


@dataclass
class Call:
    """One call, checked on every rank: its messages, and how its pattern's bytes move.

    ``send`` and ``recv`` are indexed by the context's ranks (a call with ``parent=``: its
    messages spread over the parent's ranks, :class:`~optiq.runtime.context.SpreadMessage`)."""

    kind: Collective
    comm: Any                   # the context's duplicate: the plan's communicator
    group: Group                # the call's communicator within it (group.comm: where MPI moves the bytes)
    sendbuf: Any
    recvbuf: Any
    send: Message | SpreadMessage | None        # None: MPI.IN_PLACE
    recv: Message | SpreadMessage | None        # None only for a call sent ahead, which moved its bytes already
    pattern: Pattern
    key: tuple[int, int]
    fingerprint: str
    plan_s: float
    checked_s: float            # when the checks ended (perf_counter)
    shape: tuple[int, int] | None = None  # method="auto": the shape's key
    moved: bool = False         # the bytes went ahead by MPI's non-blocking call, before the agreement
    moved_s: float = 0.0        # this rank's part in that, when it joined the ranks that went ahead
    planned: Pattern | None = None  # the pattern planned while MPI moved the bytes (for the calls after)
    #: a plan was made in this call: alike on every rank, where ``plan_s`` (this rank's own
    #: cost of it) is not, and may be zero on one rank and not on another
    prepared: bool = False

    @property
    def received(self) -> Message | SpreadMessage:
        """The receive message of a call that has still to move its bytes."""
        assert self.recv is not None, "a call sent ahead has moved its bytes"
        return self.recv


def config_of(kind: Collective, network: Any, method: str, hosts: Any, link_bw: float | str | None, chunk_model: Any,
              planner_options: dict[str, Any], plan_budget: float = DEFAULT_PLAN_BUDGET,
              max_unchecked: int = DEFAULT_MAX_UNCHECKED, joint: bool = False) -> str:
    """The options of a call, labelled, as one string every rank must agree on."""
    if not planner_options and isinstance(network, (str, type(None))) and isinstance(hosts, (str, type(None))) \
            and chunk_model is None and isinstance(method, str) and isinstance(link_bw, (int, float, type(None))) \
            and isinstance(plan_budget, (int, float)) and isinstance(max_unchecked, int):
        return _plain_config(kind.name, network, method, hosts, link_bw, plan_budget, max_unchecked, joint)
    return _config_text(kind.name, network, method, hosts, link_bw, chunk_model, planner_options, plan_budget,
                        max_unchecked, joint)


@functools.lru_cache(maxsize=64, typed=True)
def _plain_config(name: str, network: str | None, method: str, hosts: str | None, link_bw: float | None,
                  plan_budget: float, max_unchecked: int, joint: bool) -> str:
    """:func:`config_of` of the commonest calls (a network's spec, no planner options), remembered."""
    return _config_text(name, network, method, hosts, link_bw, None, {}, plan_budget, max_unchecked, joint)


def _config_text(name: str, network: Any, method: str, hosts: Any, link_bw: float | str | None, chunk_model: Any,
                 planner_options: dict[str, Any], plan_budget: float, max_unchecked: int, joint: bool) -> str:
    given = {"method": method, "network": network.spec or network.name if isinstance(network, Topology) else network,
             "hosts": hosts if isinstance(hosts, (str, type(None))) else "by name" if names_needed(hosts) else "given",
             "link_bw": link_bw,
             "options": dict(sorted(planner_options.items())), "chunk_model": chunk_model, "plan_budget": plan_budget,
             "max_unchecked": max_unchecked, "call": name, "parent": "given" if joint else None}
    return CONFIG_SEPARATOR.join(f"{label}={value!r}" for label, value in given.items())


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


def agreement_words(rank: int, size: int, send_counts: np.ndarray, recv_counts: np.ndarray,
                    config: str) -> np.ndarray:
    """Four words whose sums over the ranks show, without gathering the counts, that the ranks
    agree: every pair's send count weighed as its receiver's receive count is (two checksums,
    equal when every receive count is its sender's send count), and the options (a hash ``h``
    and ``h**2``: ``size * sum(h**2) == sum(h)**2`` exactly when all ``h`` are equal)."""
    sent, got = _weights(rank, size)
    a = np.dot(send_counts.astype(np.uint64), sent)  # wraps modulo 2**64, silently (arrays never warn)
    b = np.dot(recv_counts.astype(np.uint64), got)
    h = _config_words(rank, size, config)[1]
    return np.array([a, b, h, h * h], dtype=np.uint64)


def fingerprint_words(rank: int, size: int, send_counts: np.ndarray, recv_counts: np.ndarray,
                      config: str) -> np.ndarray:
    """Four words: the hash of the counts (the pattern) and of which counts are not zero (its shape)."""
    both = np.concatenate((send_counts, recv_counts)).astype(np.int64, copy=False)
    prefix = _config_words(rank, size, config)[0]
    words = b"".join(hashlib.blake2b(prefix + data.tobytes(), digest_size=16).digest() for data in (both, both > 0))
    digest: np.ndarray = np.frombuffer(words, dtype=np.uint64).copy()
    return digest


def _read_call(kind: Collective, local: int, blocks: int, sendbuf: Any, recvbuf: Any,
               keys: tuple[Any, Any] | None = None) -> tuple[Message | None, Message, bool, np.ndarray, np.ndarray]:
    """This rank's checks: its messages (of the call's own communicator, ``blocks`` ranks, this
    one ``local``), whether this module can move its bytes itself (host memory), and its send
    and receive byte counts (``keys``: the specifications' keys, where known)."""
    send, recv = kind.messages(sendbuf, recvbuf, blocks, keys)
    source = recv if send is None else send
    readable = recv.readable() and source.readable()
    if readable:
        recv.check_bounds("receive")
        recv.check_overlaps("receive")
        if send is not None:
            send.check_bounds("send")
        if source.byte_counts[local] != recv.byte_counts[local]:
            raise ArgumentError(f"rank {local} sends itself {int(source.byte_counts[local])} bytes but expects "
                                f"{int(recv.byte_counts[local])}")
    return send, recv, readable, source.byte_counts, recv.byte_counts


def _words(rank: int, size: int, sent: np.ndarray, got: np.ndarray, config: str) -> tuple[np.ndarray, int]:
    """The words of a call's fingerprints and agreement from this rank's byte counts (per rank
    of the context), and how many other ranks it sends to."""
    words = np.concatenate([fingerprint_words(rank, size, sent, got, config),
                            agreement_words(rank, size, sent, got, config)])
    return words, int(np.count_nonzero(sent)) - int(sent[rank] > 0)


def _quick_counts(kind: Collective, local: int, blocks: int, sendbuf: Any,
                  recvbuf: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_read_call` for the commonest messages (:func:`~optiq.runtime.messages.quick_parts`),
    without reading them into messages: the send and receive byte counts, or None when any
    check would fail or the form is another (then the full reading names the mistake)."""
    if kind.quick is None:
        return None
    MPI = mpi_module()

    recv = kind.quick(recvbuf, blocks, readonly=False)
    if recv is None:
        return None
    send = recv if sendbuf is MPI.IN_PLACE else kind.quick(sendbuf, blocks, readonly=True)
    if send is None:
        return None
    sent, got = send[0], recv[0]
    if sent[local] != got[local] or overlapping(got, recv[1]) is not None:
        return None
    return sent, got


#: The words of a call's agreement (one ``Iallreduce``, summed over the ranks).
_PATTERN, _SHAPE, _GENERATION, _FAILED, _UNREAD, _PAIRS, _LAST_S, _PLANNED_S, _AGREE, _AHEAD, _SKIPPED_S, \
    _GROUPS, _CONSISTENT, _WATCHED, _WATCH_S, _WATCH_FAILED, _WATCH_SLOW = (
        slice(0, 2), slice(2, 4), slice(4, 6), 6, 7, 8, 9, 10, slice(11, 15), 15, 16, 17, 18, 19, 20, 21, 22)


@dataclass
class Start:
    """A call's checks on this rank, and its agreement under way (started, not yet waited for)."""

    kind: Collective
    ctx: Context
    group: Group
    joint: bool              # parent= was given
    config: str
    send: Message | None     # the call's own messages (per rank of its communicator)
    recv: Message | None
    failure: tuple[type[OptiqError], str] | None
    vec: np.ndarray          # the agreement's words (summed in place)
    agreement: Any           # the request of the agreement's Iallreduce
    last_shape: tuple[int, int] | None
    row: tuple[int, int]     # this rank's row of the call's shape, hashed
    ahead: bool              # this rank hands the call to MPI before the agreement ends
    placed: bool             # this rank checked where the ranks run (the agreement tells if all did)
    timeout: float           # parent=: seconds to wait for every rank of the parent to join
    skipped: int = 0         # the calls handed to MPI unchecked since the last agreed call (alike on every rank)
    own: tuple[int, int] = (0, 0)  # this rank's words of the pattern's fingerprint
    #: the cached pattern this call is predicted to be (alike on every rank): its plan runs while
    #: the ranks agree, with this rank's bytes where its call is of that pattern (``consistent``)
    predicted: Pattern | None = None
    consistent: bool = False
    go_ahead: bool = False   # the blocking call (begin's go_ahead)
    moved_s: float = 0.0     # the predicted plan's run, on this rank
    data: Any = None         # the transfer by MPI's non-blocking call, once posted
    posted: float = 0.0      # when (perf_counter)
    scratch: list[np.ndarray] | None = None  # a failing rank's stand-in buffers
    watched: Pattern | None = None  # the pattern of this rank's last planned call, reviewed (optiq.runtime.watch)
    keys: tuple[Any, Any] | None = None  # the keys of the call's send and receive specifications, once made

    def post(self, sendbuf: Any, recvbuf: Any) -> None:
        self.posted = time.perf_counter()
        self.data = self.kind.mpi_start(self.group.comm, sendbuf, recvbuf)

    def run_predicted(self, timeout: float) -> None:
        """Run the predicted pattern's plan while the agreement travels, where this call is of
        that pattern (its bytes, read by :func:`begin`). A rank whose call is not waits for the
        agreement and stands in with scratch bytes only if some rank runs the plan
        (:func:`agree`), so that none waits for it; the agreement then tells whether every call
        was the pattern's, and if not the call moves again."""
        pattern = self.predicted
        assert pattern is not None and self.consistent and self.recv is not None
        begun = time.perf_counter()
        spread_send, spread_recv = _spread_pair(self.group, self.send, self.recv)
        run_plan(self.ctx.comm.Get_rank(), pattern, spread_send, spread_recv, timeout)
        self.moved_s = time.perf_counter() - begun


def begin(kind: Collective, comm: Any, sendbuf: Any, recvbuf: Any, *, network: Any, method: str, hosts: Any,
          link_bw: float | None, cache_size: int, chunk_model: Any, planner_options: dict[str, Any],
          cached: bool = True, plan_budget: float = DEFAULT_PLAN_BUDGET,
          max_unchecked: int = DEFAULT_MAX_UNCHECKED, go_ahead: bool = False, parent: Any = None,
          timeout: float = DEFAULT_TIMEOUT) -> Start:
    """Check a call on this rank and start the ranks' agreement on it (a non-blocking
    ``Iallreduce`` over the context's ranks, started alike by every rank's call of every form).
    ``go_ahead``: the blocking call, which may hand a pattern of no hot shape to MPI before the
    agreement ends."""
    MPI = mpi_module()

    joint = parent is not None
    ctx = context(parent, timeout) if joint else context(comm)
    c = ctx.comm
    rank, size = c.Get_rank(), c.Get_size()
    config = config_of(kind, network, method, hosts, link_bw, chunk_model, planner_options, plan_budget,
                       max_unchecked, joint)
    failure: tuple[type[OptiqError], str] | None = None
    send: Message | None = None
    recv: Message | None = None
    words, readable, pairs = np.zeros(8, np.uint64), False, 0
    keys: tuple[Any, Any] | None = None
    group = ctx.whole
    placing = method == "auto" and cached and network is not None and config not in ctx.placed \
        and not names_needed(hosts)
    try:
        if ctx.broken:
            raise ArgumentError(ctx.broken)
        if joint:
            group = group_of(comm, parent, ctx)
        local, blocks = (rank, size) if group.whole else (int(group.local[rank]), group.members.size)
        checked = (config, repr(cache_size), repr(timeout))  # by their text: a list given by mistake is refused
        if checked not in ctx.checked:
            check_call_options(method, link_bw, chunk_model, planner_options, cache_size=cache_size,
                               max_unchecked=max_unchecked, plan_budget=plan_budget, timeout=timeout)
            ctx.checked.add(checked)
        if local < 0:  # a relay: no bytes of its own
            words, readable, pairs = _words(rank, size, np.zeros(size, np.int64), np.zeros(size, np.int64), config)[0], \
                True, 0
        else:
            send_key = kind.key(sendbuf) if sendbuf is not MPI.IN_PLACE else ("in place",)
            recv_key = kind.key(recvbuf)
            keys = (send_key, recv_key)
            memo = None if send_key is None or recv_key is None else (send_key, recv_key, method, config,
                                                                        group.serial)
            if memo is not None and ctx.last is not None and ctx.last[0] == memo:
                words, readable, pairs = ctx.last[1]
            else:
                ctx.last = None
                if method not in ("auto", "mpi") and network is None:
                    raise ArgumentError(f"method={method!r} needs network= (the machine to plan on)")
                quick = _quick_counts(kind, local, blocks, sendbuf, recvbuf)
                if quick is not None:  # its messages are read below only if the call needs them
                    sent, got = quick
                    readable = True
                else:
                    send, recv, readable, sent, got = _read_call(kind, local, blocks, sendbuf, recvbuf, keys)
                if readable:
                    words, pairs = _words(rank, size, group.spread(sent), group.spread(got), config)
                if memo is not None:
                    ctx.last = (memo, (words, readable, pairs))
        if placing:  # where the ranks run, checked on each rank alike: a mistake fails every rank with the call
            check_placement_here(network, hosts, size, link_bw)
    except Exception as exc:  # any mistake, typed as mpi4py types it, fails every rank together
        failure = _failure(exc, rank)
    row = _pair(words[_SHAPE])
    # ahead: a pattern of no hot shape cannot be planned, so it goes to MPI's non-blocking call
    # now (on the group's duplicate, once made); a memoised call sent ahead reads its messages
    # only if it turns out to need them (agree)
    eligible = go_ahead and cached and method == "auto" and network is not None and plan_budget != float("inf") \
        and group.comm is not None
    # a call predicted to be of a planned pattern runs that plan while the ranks agree (every rank,
    # with its bytes if its own counts and options are that pattern's), and goes ahead of nothing else
    predicted = ctx.predicted() if go_ahead and cached else None
    own = _pair(words[_PATTERN])
    # a rank whose last planned call failed runs no plan ahead: the others learn of it from this agreement
    consistent = predicted is not None and failure is None and readable and sendbuf is not MPI.IN_PLACE \
        and predicted.own == own and not ctx.watch[2]
    ahead = eligible and predicted is None and failure is None and readable and pairs > 0 \
        and not ctx.shapes.is_hot(row) and not ctx.holds_own(own)
    if failure is None and recv is None and not ahead and group.members.size and group.local[rank] >= 0:
        try:
            send, recv = kind.messages(sendbuf, recvbuf, group.members.size, keys)
        except Exception as exc:
            failure = _failure(exc, rank)
    consistent = consistent and failure is None  # its messages read: what the predicted plan would send
    # the last call's time and this rank's planning since ride along, in microseconds: every rank
    # then keeps the same account of every shape
    last_shape, last_s, planned_s = ctx.pending
    ctx.pending = (None, 0.0, 0.0)
    quiet = ctx.quiet
    skipped_s, skipped = quiet.skipped_s, quiet.skipped_n
    quiet.skipped_s, quiet.skipped_n = 0.0, 0
    watched, watch_s, watch_failed = ctx.watch  # the last planned call's time, for every rank's review of its plan
    ctx.watch = (None, 0.0, False)
    slow = watched is not None and not watch_failed and judge(watched, watch_s)
    vec = np.array([*words[:4], ctx.generation, ctx.generation ** 2, failure is not None, not readable, pairs,
                    round(last_s * 1e6), round(planned_s * 1e6), *words[4:], ahead, round(skipped_s * 1e6),
                    group.word(rank) if joint else 0, consistent, watched is not None, round(watch_s * 1e6),
                    watch_failed, slow], dtype=np.uint64)
    agreement = c.Iallreduce(MPI.IN_PLACE, vec, op=MPI.SUM)
    # a timeout refused above is refused once the ranks agree: until then this rank waits as the others do
    waits = timeout if is_timeout(timeout) else DEFAULT_TIMEOUT
    return Start(kind, ctx, group, joint, config, send, recv, failure, vec, agreement, last_shape, row, ahead,
                 placing, waits, skipped, own, predicted, consistent, go_ahead, watched=watched, keys=keys)


def _failure(exc: Exception, rank: int) -> tuple[type[OptiqError], str]:
    """A mistake on this rank, typed as mpi4py types it, with the rank named: raised on every rank."""
    error = as_argument_error(exc)
    text = str(error)
    return type(error), text if text.startswith("rank ") else f"rank {rank}: {text}"


def _join(start: Start, sendbuf: Any, recvbuf: Any, failed: bool) -> None:
    """Take part in the non-blocking MPI call other ranks went ahead to: with the caller's
    arguments, or, for a rank whose arguments failed, with scratch bytes of the sizes its peers
    send and expect, so that no peer waits for it (``failed``: some rank failed, and every rank
    tells the others its counts first). A rank of a group whose duplicate is not made yet (no
    rank of it went ahead) and a relay take no part."""
    ctx, group = start.ctx, start.group
    if failed:
        size = ctx.comm.Get_size()
        table = np.zeros((size, 2), np.int64)  # a failing rank claims nothing: its peers' claims size what it moves
        if start.failure is None and group.members.size:
            send, recv = (start.send, start.recv) if start.recv is not None else \
                start.kind.messages(sendbuf, recvbuf, group.members.size, start.keys)
            table[:, 0] = group.spread((recv if send is None else send).byte_counts)
            table[:, 1] = group.spread(recv.byte_counts)
        got = np.empty_like(table)
        ctx.side.Alltoall(table, got)
        if start.failure is not None:
            if group.comm is None:
                return
            members = group.members
            start.posted = time.perf_counter()
            start.data, start.scratch = start.kind.scratch(group.comm, got[members, 1], got[members, 0])
            return
    if start.data is None and group.comm is not None:
        start.post(sendbuf, recvbuf)


def _wait(start: Start) -> None:
    """Wait for the agreement. The first agreement of a context with ``parent=`` waits at most
    ``timeout`` seconds, since a rank of the parent that never calls would leave the others
    waiting for ever; later ones wait as ``MPI_Wait`` does (tests from Python between pauses cost
    every rank of a crowded node far more than MPI's own wait).

    Raises
    ------
    ArgumentError
        If not every rank of the parent joined in time (the context is refused from then on:
        its agreement is still pending).
    """
    ctx = start.ctx
    if not start.joint or ctx.joined:
        start.agreement.Wait()
        return
    if not wait_all([start.agreement], timeout=start.timeout):
        ctx.broken = (f"not every rank of parent= joined the {start.kind.name} within {start.timeout:g} s: "
                      f"every rank of the parent calls together, each with its own sub-communicator "
                      f"(MPI.COMM_NULL for a rank that only relays); calls with this parent are refused "
                      f"from now on")
        ctx.released = True  # its duplicate has the agreement pending: never freed, never used again
        raise ArgumentError(ctx.broken)
    ctx.joined = True


def agree(start: Start, sendbuf: Any, recvbuf: Any, *, network: Any, method: str, hosts: Any,
          link_bw: float | None, cache_size: int, chunk_model: Any, planner_options: dict[str, Any],
          cached: bool = True, plan_budget: float = DEFAULT_PLAN_BUDGET) -> Call:
    """Wait for the agreement and find (or make) the call's pattern (collective). When any rank
    went ahead (its bytes posted to MPI's non-blocking call), every rank takes part in that
    transfer, and the call's errors are raised after it; MPI's own error on this rank is raised
    if the ranks found none."""
    MPI = mpi_module()

    ctx, c, config, vec, kind, group = start.ctx, start.ctx.comm, start.config, start.vec, start.kind, start.group
    failure = start.failure
    size = c.Get_size()
    _wait(start)
    if start.watched is not None and int(vec[_WATCHED]) == size:  # every rank's last call was of this plan
        review(ctx, start.watched, int(vec[_WATCH_S]) / 1e6 / size, int(vec[_WATCH_FAILED]), int(vec[_WATCH_SLOW]),
               f"comm.{kind.mpi_name}")
    if start.predicted is not None and not start.consistent and int(vec[_CONSISTENT]) \
            and any(entry is start.predicted for entry in ctx.entries.values()):  # not if it has just failed
        # some rank runs the predicted plan: none waits for this one
        start.predicted.stand_in(bound(start.predicted, start.timeout))
    if start.joint and int(vec[_GROUPS]):
        if start.data is not None:  # went ahead on a group some rank of it did not join: its duplicate is left
            group.comm = None
        _name_overlap(c, group)
    ahead = int(vec[_AHEAD]) > 0
    moved_s, mpi_error = 0.0, None
    if ahead:
        if vec[_FAILED] or start.data is None:
            _join(start, sendbuf, recvbuf, failed=bool(vec[_FAILED]))
        if start.data is not None:
            try:
                start.data.Wait()
            except MPI.Exception as exc:  # mismatched counts (MPI says truncated): named below on every rank
                mpi_error = exc
            moved_s = time.perf_counter() - start.posted
    if vec[_FAILED]:
        together(c, lambda: _raise(failure))
    if size * int(vec[_GENERATION][1]) != int(vec[_GENERATION][0]) ** 2:
        raise OptiqError(f"the ranks' {kind.name} caches differ (clear_cache must be called on every rank together)")
    if start.placed:  # checked here before the agreement, and no rank failed
        ctx.placed.add(config)
    if start.joint and group.members.size and group.comm is None:
        group.ensure_comm()  # the first agreed call of this group: every member is in it
    key, shape_key = _pair(vec[_PATTERN]), _pair(vec[_SHAPE])
    ctx.shapes.book(start.last_shape, int(vec[_LAST_S]) / 1e6 / size, int(vec[_PLANNED_S]) / 1e6 / size)
    if start.skipped:  # the calls between two agreed calls: the window's shapes, in equal shares
        window = ctx.quiet.window() or (() if start.last_shape is None else (start.last_shape,))
        for each in window:
            ctx.shapes.book(each, int(vec[_SKIPPED_S]) / 1e6 / size / len(window), 0.0, start.skipped / len(window))
    fingerprint = f"{key[0]:016x}{key[1]:016x}"
    auto = method == "auto" and cached and network is not None and int(vec[_PAIRS]) > 0  # else: local, or no network
    if start.predicted is not None and int(vec[_CONSISTENT]) == size:  # every call was the predicted pattern's
        ctx.entries.move_to_end(key)
        ctx.learn(key)
        return Call(kind, c, group, sendbuf, recvbuf, None, None, start.predicted, key, fingerprint, 0.0,
                    time.perf_counter(), shape_key if auto else None, moved=True, moved_s=start.moved_s)
    agreement = vec[_AGREE]
    agreed = agreement[0] == agreement[1] and size * int(agreement[3]) == int(agreement[2]) ** 2
    # connections opened in turn for the executor: before any byte of the context moves, or, for
    # auto, before its first plan runs (its calls by MPI open theirs as the application's own do)
    if agreed and not ctx.connected and not (method == "auto" and network is not None and link_bw is None):
        if network is not None and link_bw is None and method != "mpi":
            connect_in_turn(c)
        connected(ctx)
    send, recv = _spread(start, sendbuf, recvbuf, need=not (ahead and agreed))
    if vec[_UNREAD]:  # device memory or MPI.BOTTOM with data on some rank: MPI moves the caller's own arguments
        return Call(kind, c, group, sendbuf, recvbuf, send, recv, Pattern("mpi", "device memory or MPI.BOTTOM "
                    f"with data: handed to comm.{kind.mpi_name}"), (0, 0), "", 0.0, time.perf_counter(), moved=ahead,
                    moved_s=moved_s)
    if ahead:
        if not agreed:  # the bytes moved as MPI moves mismatched counts; the mismatch is named
            assert recv is not None
            gather_counts(c, (recv if send is None else send).byte_counts, recv.byte_counts, config)
        if mpi_error is not None:
            raise mpi_error
        if start.data is None and group.comm is not None and group.members.size:
            # a group with no duplicate before this call (none of it went ahead): MPI moves its bytes now
            begun = time.perf_counter()
            kind.mpi(group.caller, sendbuf, recvbuf)
            moved_s = time.perf_counter() - begun
        ctx.learn(key)
        return Call(kind, c, group, sendbuf, recvbuf, send, recv, _after(ctx, network, hosts, link_bw, config,
                    shape_key, start.row, int(vec[_PAIRS]), plan_budget, key), key, fingerprint, 0.0, time.perf_counter(),
                    shape_key, moved=True, moved_s=moved_s)
    assert recv is not None
    source = recv if send is None else send
    pattern = ctx.entries.get(key) if cached else None
    plan_s = 0.0
    ctx.learn(key)
    if pattern is None and auto:
        if not agreed:  # gathering the counts and options names the rank that differs, on every rank
            gather_counts(c, source.byte_counts, recv.byte_counts, config)
        _check_placement_once(ctx, network, hosts, link_bw, config)
        pattern = ctx.shapes.decide(shape_key, start.row, int(vec[_PAIRS]), plan_budget, key, no_faster_plan(network))
        if pattern is not None:  # MPI for now: nothing to cache
            return Call(kind, c, group, sendbuf, recvbuf, send, recv, pattern, key, fingerprint, 0.0,
                        time.perf_counter(), shape_key)
    beside = None  # auto's blocking call: MPI moves its bytes while the plan is made (for the calls after)
    prepared = pattern is None
    if pattern is None:
        begun = time.perf_counter()
        shape = ctx.shapes.get(shape_key) if auto else None
        # gathered before MPI's bytes go: a collective's small messages would queue behind them on every link
        matrix = gather_counts(c, source.byte_counts, recv.byte_counts, config, checked=agreed)
        posted: list[Any] = []

        def post() -> list[Any]:  # called by prepare on every rank alike, once a plan is to be made
            if shape is not None and start.go_ahead and group.comm is not None and group.members.size:
                posted.append(kind.mpi_start(group.comm, sendbuf, recvbuf))
            return posted

        pattern = prepare(c, matrix, network=network, method=method, hosts=hosts, link_bw=link_bw,
                          chunk_model=chunk_model, options=planner_options, last=None if shape is None else shape.last,
                          post=post)
        beside = posted[0] if posted else None
        if shape is not None and pattern.paths is not None:  # the candidates are rank 0's only, for a small plan
            shape.last = (pattern.candidates, pattern.paths)
        planned = time.perf_counter()
        plan_s = planned - begun
        if beside is not None:  # planning beyond the transfer is what it cost the call
            beside.Wait()
            moved_s = time.perf_counter() - begun
            mean = ctx.shapes.mean_call_s(shape_key)
            plan_s = max(moved_s - (mean if mean is not None else moved_s), 0.0)
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
    if cached and pattern.own is None:
        pattern.own = start.own  # the same call on every rank: alike everywhere
    if pattern.executor is not None and not ctx.connected:  # auto's first plan, alike on every rank
        connect_in_turn(c)
        connected(ctx)
    if beside is not None:
        how = "planned" if pattern.method == "mpi" else f"the {pattern.method} plan made"
        return Call(kind, c, group, sendbuf, recvbuf, send, recv, Pattern(
            "mpi", f"comm.{kind.mpi_name} moved the bytes while {how}: {pattern.reason}", predicted_s=pattern.predicted_s,
            default_s=pattern.default_s), key, fingerprint, plan_s, time.perf_counter(), shape_key, moved=True,
            moved_s=moved_s, planned=pattern, prepared=True)
    return Call(kind, c, group, sendbuf, recvbuf, send, recv, pattern, key, fingerprint, plan_s, time.perf_counter(),
                shape_key if auto else None, prepared=prepared)


def _spread_pair(group: Group, send: Message | None,
                 recv: Message) -> tuple[Message | SpreadMessage | None, Message | SpreadMessage]:
    """A call's messages per rank of the context (spread over the parent's ranks with ``parent=``)."""
    if group.whole:
        return send, recv
    return None if send is None else SpreadMessage(send, group), SpreadMessage(recv, group)


def _spread(start: Start, sendbuf: Any, recvbuf: Any,
            need: bool) -> tuple[Message | SpreadMessage | None, Message | SpreadMessage | None]:
    """The call's messages per rank of the context: read now if the checks did not (and ``need``:
    a call sent ahead reads them only if it must name a mismatch), spread over the parent's
    ranks for a call with ``parent=``; a relay's are empty."""
    group = start.group
    send, recv = start.send, start.recv
    if not group.members.size:  # a relay: nothing of its own
        empty = Message.of_one_type(None, None, "none", None, np.zeros(0, np.int64), np.zeros(0, np.int64),
                                    mpi_module().BYTE, 0)
        return SpreadMessage(empty, group), SpreadMessage(empty, group)
    if recv is None:
        if not need:
            return None, None
        send, recv = start.kind.messages(sendbuf, recvbuf, group.members.size, start.keys)
    return _spread_pair(group, send, recv)


def _name_overlap(comm: Any, group: Group) -> None:
    """The groups of a call with ``parent=`` are not a partition of the parent's ranks: name two
    that overlap, on every rank (collective)."""
    groups = comm.allgather(group.members.tolist())
    rank_groups = {r: tuple(g) for r, g in enumerate(groups)}
    for r, g in rank_groups.items():
        for m in g:
            if rank_groups.get(m) != g:
                other = rank_groups.get(m, ())
                raise ArgumentError(f"the sub-communicators overlap: rank {r}'s holds ranks {list(g)} of the parent, "
                                    f"and rank {m}'s holds {list(other)}; every rank of parent= calls with the "
                                    f"sub-communicator it exchanges on, and no two share a rank")
    raise ArgumentError("the sub-communicators of the ranks of parent= are not a partition of its ranks")


def _pair(words: np.ndarray) -> tuple[int, int]:
    return int(words[0]), int(words[1])


def _check_placement_once(ctx: Context, network: Any, hosts: Any, link_bw: float | None, config: str) -> None:
    """Where the ranks run, checked once per set of options, as a plan would check it
    (collective; a placement every rank checked on its own before the agreement is known
    already)."""
    if config not in ctx.placed:
        check_placement(ctx.comm, network, hosts, link_bw)
        ctx.placed.add(config)


def _after(ctx: Context, network: Any, hosts: Any, link_bw: float | None, config: str,
           shape_key: tuple[int, int], row: tuple[int, int], pairs: int, budget: float,
           key: tuple[int, int]) -> Pattern:
    """What a call handed to MPI ahead of the agreement did, and whether its shape is now to be
    planned (then its next call waits for the agreement, and plans); ``key``: its counts' fingerprint."""
    _check_placement_once(ctx, network, hosts, link_bw, config)
    pattern = ctx.shapes.decide(shape_key, row, pairs, budget, key, no_faster_plan(network))
    if pattern is None:
        return Pattern("mpi", "MPI; the next call of these pairs plans them (planning now costs at most "
                              f"{budget:.0%} of their calls' time)")
    return pattern


def resolve(kind: Collective, comm: Any, sendbuf: Any, recvbuf: Any, **options: Any) -> Call:
    """Check a call on every rank and find (or make) its pattern, before any byte moves
    (collective); with ``cached`` False a new pattern of the caller's own, left out of the
    cache (persistent requests)."""
    begin_options = dict(options, link_bw=as_rate(options.get("link_bw")))
    parent, timeout = begin_options.pop("parent", None), begin_options.pop("timeout", DEFAULT_TIMEOUT)
    return agree(begin(kind, comm, sendbuf, recvbuf, parent=parent, timeout=timeout, **begin_options), sendbuf,
                 recvbuf, **begin_options)


def _raise(failure: tuple[type[OptiqError], str] | None) -> None:
    if failure is not None:
        kind, message = failure
        raise kind(message)

