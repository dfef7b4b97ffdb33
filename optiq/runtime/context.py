"""What ``optiq.alltoallv`` and ``optiq.alltoallw`` keep per communicator: its duplicate, the cache of patterns, the groups.

Every call works on a :class:`Context`: a duplicate of the communicator it plans over (so its
messages never meet the application's), the patterns planned on it (the cache, the least
recently used leaving first), ``auto``'s account of the shapes and its unchecked windows.
It lives as an MPI attribute of the caller's communicator and is released when that is
freed (or by :func:`clear_cache`).

A call given ``parent=`` plans over the parent's ranks, while its bytes are those of its own
communicator, one of several exchanging at once (the rows of a grid, the components of a
coupler): its context is the parent's, and a :class:`Group` says which of the parent's ranks
the call's communicator holds. A call without ``parent=`` is its own parent: its group holds
every rank.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import OrderedDict
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..mpi.comms import cached_on, forget, mpi_module
from ..mpi.launch import together
from ..mpi.waiting import wait_all
from .messages import Message
from .options import DEFAULT_TIMEOUT, check_timeout, is_timeout
from .patterns import Pattern
from .policy import Quiet, Shapes

__all__ = ["Context", "Group", "SpreadMessage", "context", "group_of", "open_groups", "clear_cache", "connected"]

#: Weights of the groups' check (:meth:`Group.word`): rank ``m`` of the parent weighs ``(m + 1) * _MIX``.
_MIX = np.uint64(0x9E3779B97F4A7C15)
_SERIALS = itertools.count(1)


class Group:
    """The ranks of a call's communicator, as ranks of the communicator its context plans over.

    Attributes
    ----------
    members : ndarray of int
        The context's rank of each rank of the call's communicator (empty: a rank of the
        parent that only relays, ``comm=MPI.COMM_NULL``).
    size : int
        Ranks of the context.
    local : ndarray of int
        The call's rank of each rank of the context (-1 outside the group).
    comm : mpi4py.MPI.Comm or None
        Where a call handed to MPI goes: the context's duplicate for a call without
        ``parent=``; else a duplicate of the call's communicator, made at the first call the
        ranks agreed on (collective over it: every member is in that call), None before and
        for a relay. MPI's non-blocking and persistent calls go there.
    caller : mpi4py.MPI.Comm or None
        The call's own communicator (None for a relay): a blocking call handed to MPI goes
        there, as the application's own call would have gone (MPICH's blocking all-to-alls on
        a duplicate can be slower: ``benchmarks/RESULTS.md``).
    serial : int
        Tells groups apart in memos (never reused).
    """

    def __init__(self, members: np.ndarray, size: int, comm: Any = None, source: Any = None,
                 caller: Any = None) -> None:
        self.members = np.asarray(members, dtype=np.int64)
        self.size = size
        self.local = np.full(size, -1, dtype=np.int64)
        self.local[self.members] = np.arange(self.members.size)
        self.whole = self.members.size == size and bool((self.members == np.arange(size)).all())
        self.comm = comm
        self.source = source
        self.caller = source if caller is None else caller
        self.serial = next(_SERIALS)
        self._words: dict[int, np.uint64] = {}

    def __repr__(self) -> str:
        return f"Group({self.members.size} of {self.size} ranks)"

    def spread(self, counts: np.ndarray) -> np.ndarray:
        """Per-rank values of the call's communicator as values per rank of the context (0 outside)."""
        if self.whole:
            return counts
        out = np.zeros(self.size, dtype=counts.dtype)
        out[self.members] = counts
        return out

    def ensure_comm(self) -> Any:
        """The duplicate MPI calls go to, made now if it was not (collective over the group)."""
        if self.comm is None and self.source is not None:
            self.comm = self.source.Dup()
        return self.comm

    def word(self, rank: int) -> np.uint64:
        """This rank's share of the check that the groups of one call are a partition of the
        context's ranks: ``h * (sum of the members' weights - size * own weight)``, ``h`` a hash
        of the members. The shares of all ranks sum to 0 (modulo 2**64) exactly when every member
        of every rank's group has that same group (module docstring of
        :mod:`optiq.runtime.agreement`); a relay's share is 0."""
        known = self._words.get(rank)
        if known is not None:
            return known
        self._words[rank] = word = self._word(rank)
        return word

    def _word(self, rank: int) -> np.uint64:
        if not self.members.size:
            return np.uint64(0)
        h = np.uint64(int.from_bytes(hashlib.blake2b(self.members.tobytes(), digest_size=8).digest(), "little"))
        with np.errstate(over="ignore"):
            weights = ((self.members.astype(np.uint64) + np.uint64(1)) * _MIX).sum(dtype=np.uint64)
            own = (np.uint64(rank + 1) * _MIX) * np.uint64(self.members.size)
            return np.uint64(h * (weights - own))

    def free(self) -> None:
        if self.source is not None and self.comm is not None:
            self.comm.Free()
        self.comm = None


class SpreadMessage:
    """A message of a call's communicator read by ranks of its context (:class:`Group`): the
    part of context rank ``p`` is the call's part of its rank ``local[p]``, empty outside."""

    def __init__(self, message: Message, group: Group) -> None:
        self.message, self.group = message, group
        self.byte_counts = group.spread(message.byte_counts)

    def read(self, p: int) -> np.ndarray:
        i = int(self.group.local[p])
        return self.message.read(i) if i >= 0 else np.zeros(0, np.uint8)

    def copy(self, p: int) -> np.ndarray:
        i = int(self.group.local[p])
        return self.message.copy(i) if i >= 0 else np.zeros(0, np.uint8)

    def target(self, p: int) -> Any:
        i = int(self.group.local[p])
        return self.message.target(i) if i >= 0 else (np.zeros(0, np.uint8), None)

    def write(self, p: int, part: np.ndarray) -> None:
        i = int(self.group.local[p])
        if i >= 0:
            self.message.write(i, part)


class Context:
    """The duplicate of a communicator the calls plan over, and its cache of patterns."""

    def __init__(self, comm: Any, timeout: float | None = None) -> None:
        #: why calls on this context are refused from now on (a call that not every rank joined)
        self.broken = ""
        if timeout is None:
            self.comm = comm.Dup()
        else:  # parent=: a rank of the parent that never calls must not leave the others in a Dup for ever
            self.comm, request = comm.Idup()
            if not wait_all([request], timeout=timeout):
                self.broken = (f"not every rank of parent= joined within {timeout:g} s: every rank of the parent "
                               f"calls together, each with its own sub-communicator (MPI.COMM_NULL for a rank that "
                               f"only relays); calls with this parent are refused from now on")
        self._parent = comm
        self._side: Any = None
        self.whole = Group(np.arange(comm.Get_size()), comm.Get_size(), self.comm, caller=comm)
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
        #: this rank's last planned call: its pattern, seconds and whether it failed, told at the
        #: next call so that every rank reviews the plan alike (:mod:`optiq.runtime.watch`)
        self.watch: tuple[Pattern | None, float, bool] = (None, 0.0, False)
        self.placed: set[str] = set()  # the options whose placement of the ranks has been checked
        self.checked: set[tuple[str, str, str]] = set()  # the options checked (:func:`check_call_options`)
        self.quiet = Quiet()
        self.released = False
        self.serial = next(_SERIALS)
        #: the ranks agreed on a call: MPI's connections are open (one partner at a time, on real
        #: links; :func:`optiq.mpi.connect.connect_in_turn`), and calls may go ahead of the agreement.
        #: Connections join processes, not communicators: a context of processes connected before is.
        self.connected = self.comm is not None and connected_before(self.comm)
        #: ``parent=``: every rank of the parent has joined an agreement (later ones are not timed)
        self.joined = False
        #: the patterns of the last two agreed calls, and which pattern followed every two
        #: (alike on every rank): the next call's pattern, predicted (:meth:`predicted`)
        self.history: tuple[tuple[int, int] | None, tuple[int, int] | None] = (None, None)
        self.successors: dict[tuple[Any, Any], tuple[int, int]] = {}

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
        self.successors.clear()
        self.generation += 1

    def learn(self, key: tuple[int, int]) -> None:
        """An agreed call had pattern ``key``: it follows the last two (alike on every rank)."""
        if len(self.successors) > 4 * len(self.entries) + 64:  # patterns long gone: forget them
            self.successors.clear()
        self.successors[self.history] = key
        self.history = (self.history[1], key)

    def predicted(self) -> Pattern | None:
        """The cached pattern the next call is predicted to have (the one that followed the last
        two patterns before), if its plan may run while the ranks agree; alike on every rank."""
        key = self.successors.get(self.history)
        entry = None if key is None else self.entries.get(key)
        return entry if entry is not None and entry.runs_ahead() else None

    def holds_own(self, own: tuple[int, int]) -> bool:
        """Whether a cached plan has this rank's own counts and options ``own`` (the call may be
        that plan: it does not go ahead to MPI). A cached pattern that MPI moves does not hold
        the call back: going ahead to MPI is what it would do."""
        return any(entry.own == own and entry.method != "mpi" for entry in self.entries.values())

    def has_plan(self, shape: tuple[int, int]) -> bool:
        """Whether the cache holds a plan (not MPI) for counts of ``shape``."""
        return any(self.entry_shapes.get(key) == shape and pattern.method != "mpi"
                   for key, pattern in self.entries.items())

    def plans_another(self, shape: tuple[int, int]) -> bool:
        """Whether the cache holds a plan of another shape than ``shape``: calls of it may come
        between, and a call handed to MPI unchecked cannot tell them apart (no window opens)."""
        return any(self.entry_shapes.get(key) != shape and pattern.executor is not None
                   for key, pattern in self.entries.items())

    def release(self) -> None:
        """Close the cached executors and free the duplicates (collective)."""
        self.released = True
        self.quiet = Quiet()
        self.close()
        if self._side is not None:
            self._side.Free()
        if not self.broken:  # a duplicate still being made cannot be freed
            self.comm.Free()


#: The groups of processes whose contexts opened MPI's connections among them (alike on their ranks).
_CONNECTED: list[Any] = []


def connected_before(comm: Any) -> bool:
    """Whether the processes of ``comm`` (exactly those) opened their connections before."""
    MPI = mpi_module()

    group = comm.Get_group()
    return any(MPI.Group.Compare(group, other) in (MPI.IDENT, MPI.SIMILAR) for other in _CONNECTED)


def connected(ctx: Context) -> None:
    """The context's processes have their connections open (remembered for later contexts of them)."""
    ctx.connected = True
    if not connected_before(ctx.comm):
        _CONNECTED.append(ctx.comm.Get_group())


#: The communicators that hold a context (as an MPI attribute, released when they are freed).
_HOLDERS: list[Any] = []
_PURPOSE = "optiq.alltoallv"
_GROUPS = "optiq.alltoallv.groups"

#: The last communicator whose context was asked for, and that context: found again without asking MPI.
_LAST: list[Any] = [None, None]


def context(comm: Any, timeout: float | None = None) -> Context:
    """The context of ``comm`` (made on its first call: collective); with ``timeout``, its
    duplicate is waited for at most that long (a call with ``parent=``), and a context whose
    ranks did not all join is refused (:attr:`Context.broken`).

    A ``timeout`` that is no number of seconds above 0 waits :data:`DEFAULT_TIMEOUT`: the
    call's agreement refuses it then, on every rank together, where one rank raising here
    would leave the others waiting for it.

    Raises
    ------
    ArgumentError
        A context not every rank joined.
    """
    if timeout is not None and not is_timeout(timeout):
        timeout = DEFAULT_TIMEOUT
    last, ctx = _LAST
    if last is comm and not ctx.released:
        return ctx

    def make() -> Context:
        MPI = mpi_module()

        _HOLDERS[:] = [h for h in _HOLDERS if h != MPI.COMM_NULL]  # communicators freed since
        _HOLDERS.append(comm)
        return Context(comm, timeout)

    ctx = cached_on(comm, _PURPOSE, make, Context.release)
    if ctx.broken:
        raise ArgumentError(ctx.broken)
    _LAST[:] = [comm, ctx]
    return ctx


def group_of(comm: Any, parent: Any, ctx: Context) -> Group:
    """The group of a call on ``comm`` planned over ``parent`` (whose context is ``ctx``): which of
    the parent's ranks ``comm`` holds, kept on ``comm`` (not collective).

    Raises
    ------
    ArgumentError
        If ``comm`` is an intercommunicator, or holds a rank that ``parent`` does not.
    """
    MPI = mpi_module()

    if comm is parent:
        return ctx.whole
    if comm == MPI.COMM_NULL:
        return Group(np.zeros(0, np.int64), ctx.comm.Get_size())
    if comm.Is_inter():
        raise ArgumentError("parent= takes intracommunicators: the call's communicator is an intercommunicator")
    kept: dict[int, Group] = cached_on(comm, _GROUPS, dict, _free_groups)
    group = kept.get(ctx.serial)
    if group is None or group.size != ctx.comm.Get_size():
        ranks = MPI.Group.Translate_ranks(comm.Get_group(), list(range(comm.Get_size())), parent.Get_group())
        outside = [r for r, p in enumerate(ranks) if p == MPI.UNDEFINED]
        if outside:
            raise ArgumentError(f"rank {outside[0]} of the call's communicator is not a rank of parent=: the "
                                f"communicator must hold ranks of the parent only")
        group = kept[ctx.serial] = Group(np.array(ranks, dtype=np.int64), ctx.comm.Get_size(), source=comm)
    return group


def open_groups(parent: Any, comms: list[Any], timeout: float = DEFAULT_TIMEOUT) -> None:
    """Make now what the first calls with ``parent=`` on each of ``comms`` would make: the
    parent's context and every group's duplicate (collective over ``parent``: every rank passes
    its own sub-communicators, one per exchange, in the same order). An application's set-up
    calls it (:func:`optiq.integrations.mpi4py_fft.accelerate` does), so that its first calls
    wait for no duplicate, and go ahead of their agreement as later ones do; nothing is planned.

    Raises
    ------
    ArgumentError
        On every rank, if a communicator holds a rank that ``parent`` does not, or not every
        rank of the parent joined within ``timeout`` seconds.
    ParameterError
        A ``timeout`` that is no number of seconds above 0.
    """
    check_timeout(timeout)
    ctx = context(parent, timeout)
    groups = together(ctx.comm, lambda: [group_of(comm, parent, ctx) for comm in comms])
    for group in groups:
        if group.members.size:
            group.ensure_comm()  # collective over the group: its members reach it in the same order


def _free_groups(kept: dict[int, Group]) -> None:
    for group in kept.values():
        group.free()


def clear_cache(comm: Any | None = None) -> None:
    """Forget the planned patterns of ``comm`` (or of every communicator) and release their
    executors and duplicated communicators. Collective: every rank calls it together.

    Freeing a communicator releases its cache too (an MPI attribute's delete callback)."""
    MPI = mpi_module()

    holders = list(_HOLDERS) if comm is None else [comm]
    for holder in holders:
        if holder != MPI.COMM_NULL:
            forget(holder, _PURPOSE)
    _HOLDERS[:] = [h for h in _HOLDERS if h not in holders and h != MPI.COMM_NULL]
    _LAST[:] = [None, None]
