"""The application's calls: :func:`alltoallv` and :func:`alltoallw`, MPI's all-to-alls that plan their own routes.

An application replaces ::

    comm.Alltoallv(sendbuf, recvbuf)          # or comm.Alltoallw(sendbuf, recvbuf)

by ::

    optiq.alltoallv(comm, sendbuf, recvbuf, network="torus:4x4")   # or optiq.alltoallw

with the same two arguments, in any form ``comm.Alltoallv`` (``comm.Alltoallw``) takes
(:mod:`optiq.runtime.messages`, :mod:`optiq.runtime.messages_w`), and moves exactly the same
bytes (gaps, zero counts, a rank's bytes to itself, derived datatypes, ``MPI.IN_PLACE``).
Every rank of ``comm`` calls it together; it works on a duplicate of ``comm``.
:mod:`optiq.runtime.requests` has the non-blocking and persistent forms.

**What a call does.** Both calls share every step:

1. *Checks and the agreement* (:mod:`optiq.runtime.agreement`): every rank reads its two
   messages as mpi4py reads them; one small ``Iallreduce`` sums a fingerprint of the counts
   and checks that the ranks agree. A wrong argument on any rank raises the same error on
   every rank, as the same type mpi4py raises. A buffer this module does not read (device
   memory, ``MPI.BOTTOM`` with data) hands the call to MPI with the caller's own arguments,
   on every rank; so does an intercommunicator.
2. *A pattern, once per set of counts* (:mod:`optiq.runtime.patterns`,
   :mod:`optiq.runtime.context`): a fingerprint the cache does not hold gathers every rank's
   byte counts, plans the bytes between the hosts the ranks run on with ``method`` and
   compiles this rank's part; later calls with the same counts reuse it. The cache holds
   ``cache_size`` patterns per communicator; :func:`~optiq.runtime.context.clear_cache`
   empties it.
3. *The transfer* (:mod:`optiq.runtime.moves`): by the executor on the plan's paths, or by
   MPI with the caller's arguments.

**Planning that pays for itself** (``method="auto"``, :mod:`optiq.runtime.policy`): a call
whose counts have no plan goes to MPI until the calls with the same pairs of ranks (the
*shape*) have taken long enough that planning them costs at most ``plan_budget`` of that
time; such calls are sent ahead (MPI moves their bytes while the ranks agree), and once
calls settle on MPI they go *unchecked*, without the agreement, in windows of growing
length up to ``max_unchecked``. The call that plans hands its own bytes to MPI first, and
rank 0 plans while MPI moves them; the plan moves the calls after. ``auto`` keeps MPI when the
plan predicts less than :data:`~optiq.runtime.patterns.MIN_GAIN` over the network's default
routes, when the chunk model (emulated links, or one given) predicts forwarding costs more
than MPI on them, and (on real links) when the plan's first call measures slower than the
shape's calls by MPI did. A call predicted to be a cached plan (the pattern that followed the
last two before) runs it while the ranks agree (:meth:`~optiq.runtime.context.Context.predicted`).

**When the network changes under a plan** (:mod:`optiq.runtime.watch`): each planned call's
time, and whether it failed, rides the next agreement. A planned transfer gives up within five
times the plan's fastest call plus 5 s (``timeout`` for its first); a plan that failed on any
rank is replaced by MPI for the calls after; ``auto``'s plan measured 1.5 times slower than its
usual call (the median of the last few) is measured against MPI again, and the faster kept.

**Exchanges at once** (``parent=``): several sub-communicators of one parent exchanging at
the same time (the rows of a process grid, the components of a coupler) are one exchange over
the parent's ranks. Each rank passes its own sub-communicator and the parent; the call plans
the bytes of every group together, any rank of the parent may forward, and the plan's
prediction holds while every group exchanges. Every rank of the parent calls (one that
exchanges nothing, ``comm=MPI.COMM_NULL``, only forwards); groups that overlap are refused on
every rank; a rank of the parent that does not join within ``timeout`` seconds fails the
others in one line.

**Where the ranks are** (``hosts=``): by default rank ``i`` (of the parent, with ``parent=``)
runs on endpoint ``i`` of the network; or a list of endpoint ids or names (one per rank), a
function of the rank giving one, ``"processor"`` (each rank's ``MPI.Get_processor_name()``
is its endpoint's name, as a fabric file names hosts), or a mapping from processor names to
endpoint names or ids.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ArgumentTypeError, TransferError
from ..topology import Topology
from ..utils.units import as_rate
from .agreement import (
    DEFAULT_CACHE_SIZE,
    DEFAULT_MAX_UNCHECKED,
    DEFAULT_PLAN_BUDGET,
    agree,
    begin,
    config_of,
)
from .context import Context, Group, clear_cache, context, group_of
from .forms import GENERAL, VECTOR, Collective
from .moves import move, trial
from .options import DEFAULT_TIMEOUT
from .patterns import AUTO_METHOD, MIN_GAIN, Pattern

__all__ = ["alltoallv", "alltoallw", "AlltoallvResult", "clear_cache", "MIN_GAIN", "DEFAULT_CACHE_SIZE",
           "DEFAULT_PLAN_BUDGET", "DEFAULT_MAX_UNCHECKED", "AUTO_METHOD"]


@dataclass(frozen=True)
class AlltoallvResult:
    """What one call of :func:`alltoallv` or :func:`alltoallw` did, on this rank.

    Attributes
    ----------
    method : str
        ``"mpi"`` (MPI's own call), the planner whose plan moved the bytes, or ``"local"``
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
        Whether the bytes moved while the ranks were still agreeing on the call: by MPI's
        non-blocking call (``method="auto"``, a pattern of no shape it may plan), or by a plan
        the call was predicted to be.
    checked : bool
        Whether the ranks agreed on this call (False: ``method="auto"`` handed it to MPI
        unchecked, between two agreed calls; its fingerprint is then ``""``).
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


#: The communicator and parent of the last call, their context and the call's group: found again without asking MPI.
_LAST: list[Any] = [None, None, None, None]


def _unchecked(kind: Collective, ctx: Context, group: Group, sendbuf: Any, recvbuf: Any,
               start: float) -> AlltoallvResult:
    """A call between two agreed calls of a shape settled on MPI: MPI with the caller's own
    arguments, nothing checked, its time kept for the next agreed call."""
    quiet = ctx.quiet
    quiet.remaining -= 1
    ready = time.perf_counter()
    if group.members.size:
        kind.mpi(group.caller, sendbuf, recvbuf)
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


def _watched(ctx: Context, pattern: Pattern, transfer: Callable[[], None]) -> None:
    """Run ``transfer``; a plan's time (or its failure) is kept for the next call's review of it
    (:mod:`optiq.runtime.watch`)."""
    if pattern.method in ("mpi", "local"):
        transfer()
        return
    began = time.perf_counter()
    try:
        transfer()
    except TransferError:
        ctx.watch = (pattern, time.perf_counter() - began, True)
        raise
    ctx.watch = (pattern, time.perf_counter() - began, False)


def _intercomm(kind: Collective, comm: Any, sendbuf: Any, recvbuf: Any, start: float) -> AlltoallvResult:
    """An intercommunicator's call, moved by MPI (two groups: nothing to plan)."""
    kind.mpi(comm, sendbuf, recvbuf)
    done = time.perf_counter()
    return AlltoallvResult(method="mpi", cached=False, plan_s=0.0, overhead_s=0.0, transfer_s=done - start,
                           reason=f"an intercommunicator: handed to comm.{kind.mpi_name}", predicted_s=None,
                           default_s=None, fingerprint="")


def _call(kind: Collective, comm: Any, sendbuf: Any, recvbuf: Any, more: tuple[Any, ...], *, network: Any,
          method: str, hosts: Any, link_bw: float | str | None, cache_size: int, chunk_model: Any, timeout: float,
          plan_budget: float, max_unchecked: int, parent: Any, planner_options: dict[str, Any]) -> AlltoallvResult:
    """The blocking call of either collective (:func:`alltoallv`, :func:`alltoallw`)."""
    start = time.perf_counter()
    link_bw = as_rate(link_bw)
    if more:
        raise ArgumentTypeError(f"{kind.name} takes (comm, sendbuf, recvbuf) as comm.{kind.mpi_name} takes (sendbuf, "
                                f"recvbuf), got {2 + len(more)} arguments after comm: pass [buf, (counts, displs)"
                                f"{', types' if kind is GENERAL else ''}] for each side")
    options_key = (network, method, hosts, link_bw, chunk_model, plan_budget, max_unchecked, kind)
    last_comm, last_parent, ctx, group = _LAST
    if last_comm is comm and last_parent is parent and not ctx.released:  # the last call's communicators
        quiet = ctx.quiet
        if quiet.remaining and not planner_options and quiet.same_options(options_key):
            return _unchecked(kind, ctx, group, sendbuf, recvbuf, start)
    elif parent is None and comm.Is_inter():
        return _intercomm(kind, comm, sendbuf, recvbuf, start)
    else:
        ctx = context(comm) if parent is None else context(parent, timeout)
        group = ctx.whole
        if parent is not None:
            try:
                group = group_of(comm, parent, ctx)
            except Exception:  # named on every rank by the agreement
                group = None
        if group is not None:
            _LAST[:] = [comm, parent, ctx, group]
    joint = parent is not None
    if group is not None and ctx.quiet.remaining and ctx.quiet.config == config_of(
            kind, network, method, hosts, link_bw, chunk_model, planner_options, plan_budget, max_unchecked, joint):
        return _unchecked(kind, ctx, group, sendbuf, recvbuf, start)
    options: dict[str, Any] = dict(network=network, method=method, hosts=hosts, link_bw=link_bw,
                                   cache_size=cache_size, chunk_model=chunk_model, planner_options=planner_options,
                                   plan_budget=plan_budget)
    begun = begin(kind, comm, sendbuf, recvbuf, go_ahead=True, max_unchecked=max_unchecked, parent=parent,
                  timeout=timeout, **options)
    ctx = begun.ctx
    ahead_error = None
    if begun.ahead:  # no plan can be made for it: the bytes move while the ranks agree
        begun.post(sendbuf, recvbuf)
    elif begun.consistent:  # predicted to be a planned pattern, and it is here: its plan runs while they agree
        assert begun.predicted is not None
        try:
            _watched(ctx, begun.predicted, lambda: begun.run_predicted(timeout))
        except TransferError as exc:  # raised below, unless the ranks move the call again
            ahead_error = exc
    call = agree(begun, sendbuf, recvbuf, **options)
    pattern = call.pattern
    if ahead_error is not None and call.moved and pattern is begun.predicted:
        raise ahead_error
    measured = False  # the plan measured against MPI in this call
    if call.moved:
        done = time.perf_counter()
        ready = done - call.moved_s
    else:
        ready = time.perf_counter()
        if pattern.trial and call.send is not None:  # in place, the first move would overwrite what the second sends
            # a plan measured again after a slow call is measured against MPI now, not MPI's calls before
            mpi_s = None if pattern.drifted else ctx.shapes.mean_call_s(call.shape)
            pattern = ctx.entries[call.key] = trial(call, pattern, timeout, mpi_s)
            measured = True
        else:
            _watched(ctx, pattern, lambda: move(call, pattern, timeout))
        done = time.perf_counter()
    if call.shape is not None:  # auto: this call's time goes to its shape's account at the next call
        ctx.pending = (call.shape, done - ready, call.plan_s)
        # planned, or measured against MPI, and MPI kept: not planned again, and its calls go
        # ahead and unchecked again (a shape left hot would hold every call for the agreement)
        if (call.prepared and (call.planned or pattern).method == "mpi") or (measured and pattern.method == "mpi"):
            ctx.shapes.mpi_faster(call.shape, pattern.reason)
    if call.shape is not None and pattern.method == "mpi" and not call.prepared \
            and not ctx.plans_another(call.shape):  # unchecked calls may follow
        ctx.quiet.agreed(begun.config, call.shape, max_unchecked, ctx.shapes.calls_left(call.shape, plan_budget),
                         ctx.has_plan(call.shape))
        if ctx.quiet.remaining:
            ctx.quiet.open(None if planner_options else options_key, ctx.shapes.plans_made, ctx.shapes.planning_s)
    else:
        ctx.quiet.agreed(begun.config, None, max_unchecked)
    planning = call.plan_s if call.planned is None else 0.0  # beside MPI: part of the transfer's time
    return AlltoallvResult(method=pattern.method, cached=not call.prepared and call.fingerprint != "",
                           plan_s=call.plan_s, overhead_s=(ready - start) - planning, transfer_s=done - ready,
                           reason=pattern.reason, predicted_s=pattern.predicted_s, default_s=pattern.default_s,
                           fingerprint=call.fingerprint, plans_made=ctx.shapes.plans_made,
                           planning_s=ctx.shapes.planning_s, ahead=call.moved and call.planned is None)


def alltoallv(comm: Any, sendbuf: Any, recvbuf: Any, *more: Any, network: Topology | str | None = None,
              method: str = "auto", hosts: Any = None, link_bw: float | str | None = None,
              cache_size: int = DEFAULT_CACHE_SIZE, chunk_model: Any = None, timeout: float = DEFAULT_TIMEOUT,
              plan_budget: float = DEFAULT_PLAN_BUDGET, max_unchecked: int = DEFAULT_MAX_UNCHECKED,
              parent: Any = None, **planner_options: Any) -> AlltoallvResult:
    """Move what ``comm.Alltoallv(sendbuf, recvbuf)`` would move, on planned paths (module docstring).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        An intracommunicator (an intercommunicator's call is handed to ``comm.Alltoallv``);
        with ``parent``, the sub-communicator this rank exchanges on, or ``MPI.COMM_NULL``.
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
    link_bw : float or str, optional
        Emulate links of this many bytes/s, or of the rate a text names, as the CLI reads it
        (:func:`~optiq.utils.units.parse_rate`); the executor paces every link leaving a rank.
    cache_size : int
        Patterns kept for this communicator.
    chunk_model : ChunkModel, optional
        ``method="auto"``'s model of forwarding costs; default Blue Gene/Q's.
    timeout : float
        Seconds before a transfer is abandoned with :class:`~optiq.errors.TransferError`, and,
        with ``parent``, before the ranks that joined give up on one that did not.
    plan_budget : float
        ``method="auto"``: plan a shape once planning costs at most this fraction of its calls'
        time (module docstring); ``0`` never plans, ``float("inf")`` plans every new pattern.
    max_unchecked : int
        ``method="auto"``: at most this many calls in a row handed to ``comm.Alltoallv`` without
        the ranks' agreement, once calls settle on MPI (module docstring); ``0`` agrees on every call.
    parent : mpi4py.MPI.Comm, optional
        The communicator whose sub-communicators exchange at once, each rank on its own
        ``comm``: planned together over the parent's ranks (module docstring).
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
        larger than the network, a rank whose host the network does not have, overlapping
        sub-communicators, a rank of ``parent`` that did not join.
    ParameterError
        The same on every rank, before any data moves, for an option no call could use
        (:func:`~optiq.runtime.options.check_call_options`): an unknown method or planner
        keyword, a link rate or timeout of 0 or less. It is refused by every call, one that
        MPI moves too, so that no mistake waits for the first call that plans.
    TransferError
        On a timeout.
    """
    return _call(VECTOR, comm, sendbuf, recvbuf, more, network=network, method=method, hosts=hosts, link_bw=link_bw,
                 cache_size=cache_size, chunk_model=chunk_model, timeout=timeout, plan_budget=plan_budget,
                 max_unchecked=max_unchecked, parent=parent, planner_options=planner_options)


def alltoallw(comm: Any, sendbuf: Any, recvbuf: Any, *more: Any, network: Topology | str | None = None,
              method: str = "auto", hosts: Any = None, link_bw: float | str | None = None,
              cache_size: int = DEFAULT_CACHE_SIZE, chunk_model: Any = None, timeout: float = DEFAULT_TIMEOUT,
              plan_budget: float = DEFAULT_PLAN_BUDGET, max_unchecked: int = DEFAULT_MAX_UNCHECKED,
              parent: Any = None, **planner_options: Any) -> AlltoallvResult:
    """Move what ``comm.Alltoallw(sendbuf, recvbuf)`` would move, on planned paths (module docstring).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        As for :func:`alltoallv`.
    sendbuf, recvbuf
        As ``comm.Alltoallw`` takes them, by mpi4py's rules (:mod:`optiq.runtime.messages_w`):
        ``[buf, types]``, ``[buf, (counts, displs), types]`` or ``[buf, counts, displs, types]``,
        with byte displacements and one ``MPI.Datatype`` per rank (subarray, vector, indexed,
        struct and resized types are packed with the MPI library's ``Pack``); ``sendbuf`` may
        be ``MPI.IN_PLACE``.
    network, method, hosts, link_bw, cache_size, chunk_model, timeout, plan_budget, max_unchecked, parent
        As for :func:`alltoallv`.
    **planner_options
        Passed to :func:`optiq.make_plan`.

    Returns
    -------
    AlltoallvResult

    Raises
    ------
    ArgumentTypeError, ArgumentError, ArgumentKeyError, ArgumentBufferError, ParameterError, TransferError
        As for :func:`alltoallv`.

    Examples
    --------
    An mpi4py-fft transfer's call ``comm.Alltoallw([A, counts_displs, subtypesA], [B,
    counts_displs, subtypesB])`` becomes ``optiq.alltoallw(comm, [A, counts_displs,
    subtypesA], [B, counts_displs, subtypesB], network="torus:4x4", parent=grid)``.
    """
    return _call(GENERAL, comm, sendbuf, recvbuf, more, network=network, method=method, hosts=hosts,
                 link_bw=link_bw, cache_size=cache_size, chunk_model=chunk_model, timeout=timeout,
                 plan_budget=plan_budget, max_unchecked=max_unchecked, parent=parent, planner_options=planner_options)
