"""``method="auto"``'s policy, kept alike on every rank: which shapes to plan, and which calls to leave unchecked.

A call's *shape* is which ranks send bytes to which, whatever the amounts. :class:`Shapes`
books every call's time to its shape and decides, from the same figures on every rank, when
a shape's calls have taken long enough that planning them costs at most the plan budget of
that time. A shape so decided is *hot*: its calls wait for the ranks' agreement before any
byte moves, because one of them may be planned. A call whose shape is not hot goes to MPI
at once, with the agreement travelling beside the transfer; every rank can tell that alone,
from its own row of the shape (the counts it sends and receives).

Once calls settle on MPI, :class:`Quiet` opens windows of calls handed to MPI without the
ranks' agreement (*unchecked*): they grow fourfold after every agreed call of a shape settled
before (one shape, or a cycle of them, as the rows and columns of a grid make), up to a cap,
and never run past the call after which a settled shape's planning pays.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..paths import PathSet
from .patterns import Pattern

__all__ = ["Shapes", "Quiet", "PLAN_S_PER_PAIR", "PLAN_S_FIXED", "SHAPES_KEPT", "COUNTS_KEPT", "CYCLE_SHAPES"]

#: Before a communicator has planned: the planning time guessed per host pair, and on top. A
#: planning call's cost beyond its own transfer, measured with 8 to 32 ranks on one node
#: (``benchmarks/RESULTS.md``), is of this order; once the communicator has planned, the
#: guess is scaled to what its planning measured (:meth:`Shapes.book`).
PLAN_S_PER_PAIR, PLAN_S_FIXED = 2.5e-4, 0.03
#: Shapes whose calls' time is remembered per communicator (the least recently used leave).
SHAPES_KEPT = 256
#: Counts remembered per shape, to tell counts that repeat from counts that drift.
COUNTS_KEPT = 16


@dataclass
class _Shape:
    """One shape: the time its calls took, what planning it cost, whether it is hot, and
    whether its plan measured slower than MPI (then it is not planned again)."""

    row: tuple[int, int]  # this rank's own row of the shape, hashed (differs from rank to rank)
    calls_s: float = 0.0
    spent_s: float = 0.0
    calls: float = 0  # fractional: a window of unchecked calls is shared among its shapes
    hot: bool = False
    mpi_faster: str = ""
    #: the candidates (rank 0's only, for a plan it makes alone) and paths of the shape's last plan: its
    #: next counts re-split over them
    last: tuple[PathSet | None, PathSet] | None = None
    #: the fingerprints of its latest counts (the most recent last): only counts seen before are planned
    seen: OrderedDict[tuple[int, int], None] = field(default_factory=OrderedDict)
    #: its planning pays, but its last agreed call's counts were new: its calls may go unchecked
    #: (windows bounded by the cap alone) until an agreed call finds counts that repeat
    drifting: bool = False


def _guess(pairs: int) -> float:
    """The planning time of ``pairs`` rank pairs, guessed before any plan was measured.

    Examples
    --------
    >>> round(_guess(48), 3)
    0.042
    """
    return PLAN_S_FIXED + PLAN_S_PER_PAIR * pairs


class Shapes:
    """The shapes of one communicator's ``method="auto"`` calls (the same on every rank but
    for each rank's own rows)."""

    def __init__(self) -> None:
        self.shapes: OrderedDict[tuple[int, int], _Shape] = OrderedDict()
        self.plans_made = 0
        self.planning_s = 0.0
        #: the planning time measured on this communicator (the ranks' mean) over the guess
        #: (:data:`PLAN_S_FIXED`, :data:`PLAN_S_PER_PAIR`) for the same pairs; None before any
        self.plan_scale: float | None = None
        self.last_pairs = 0  # the rank pairs of the last pattern considered (every rank's sum)
        self._hot_rows: set[tuple[int, int]] = set()

    def get(self, key: tuple[int, int] | None) -> _Shape | None:
        return None if key is None else self.shapes.get(key)

    def is_hot(self, row: tuple[int, int]) -> bool:
        """Whether this rank's row belongs to a hot shape (so the call may be planned)."""
        return row in self._hot_rows

    def _refresh(self) -> None:
        self._hot_rows = {s.row for s in self.shapes.values() if s.hot and not s.mpi_faster}

    def book(self, key: tuple[int, int] | None, call_s: float, planned_s: float, calls: float = 1) -> None:
        """Book the time of the last ``calls`` calls and planning (the ranks' means) to their
        shape, and learn how the planning time compares with the guess (a planning faster
        than the last halves the scale at most, so one quick plan does not make the next
        shapes plan too early)."""
        if planned_s > 0 and self.last_pairs:
            scale = planned_s / _guess(self.last_pairs)
            self.plan_scale = scale if self.plan_scale is None else max(scale, 0.5 * self.plan_scale)
        shape = self.get(key)
        if shape is not None:
            shape.calls_s += call_s
            shape.spent_s += planned_s
            shape.calls += calls

    def planned(self, seconds: float) -> None:
        self.plans_made += 1
        self.planning_s += seconds

    def estimate(self, pairs: int) -> float:
        """The planning time of a pattern of ``pairs`` rank pairs with bytes, as every rank guesses it alike."""
        return _guess(pairs) * (1.0 if self.plan_scale is None else self.plan_scale)

    def calls_left(self, key: tuple[int, int], budget: float) -> int | None:
        """How many more calls like its past ones the shape takes before planning it (or, once
        planned, planning its new counts) pays, the same on every rank: 0 for a shape not
        known, None for one never to be planned, or whose planning pays but whose last counts
        were new (its windows of unchecked calls are then bounded by the cap alone, and an
        agreed call plans counts that repeat)."""
        shape = self.get(key)
        if shape is None:
            return 0
        if shape.mpi_faster or budget <= 0 or shape.drifting:
            return None
        if not shape.calls:
            return 0
        mean = shape.calls_s / shape.calls
        need = self._cost(shape, self.last_pairs) / budget
        return max(0, int((need - shape.calls_s) / mean + 1e-9)) if mean > 0 else 0  # whole calls, not 0.99999

    def _cost(self, shape: _Shape, pairs: int) -> float:
        """What planning the shape now costs, with what it cost before: the planning spent and the
        estimate (its first planned call is measured against the mean of its calls by MPI:
        nothing moves twice)."""
        return shape.spent_s + self.estimate(pairs)

    def mean_call_s(self, key: tuple[int, int] | None) -> float | None:
        """The mean time of the shape's calls so far (the ranks' mean, the same on every rank), or
        None before any."""
        shape = self.get(key)
        return shape.calls_s / shape.calls if shape is not None and shape.calls else None

    def mpi_faster(self, key: tuple[int, int], reason: str) -> None:
        """The shape's plan measured slower than MPI: it is not planned again."""
        shape = self.get(key)
        if shape is not None:
            shape.mpi_faster = reason
            self._refresh()

    def decide(self, key: tuple[int, int], row: tuple[int, int], pairs: int, budget: float,
               counts: tuple[int, int], never: str = "") -> Pattern | None:
        """A reason to hand a pattern without a plan to MPI (a Pattern), or None: plan it now (the
        same on every rank; the shape is hot, its next calls waiting for the agreement, until a
        call finds planning it again does not pay yet).

        ``counts`` is the pattern's fingerprint. Only counts the shape had before are planned
        (but for ``budget`` infinite): a plan moves the calls after it with the same counts, so
        counts that drift from call to call would pay for plans no call uses. ``never``: why no
        plan on this network is faster than its own routes (:func:`~optiq.runtime.patterns.no_faster_plan`),
        or empty: a new shape is then MPI's from its first call, as one whose plan lost."""
        shape = self.shapes.get(key)
        if shape is None:
            shape = self.shapes[key] = _Shape(row, mpi_faster=never)
            while len(self.shapes) > SHAPES_KEPT:
                if self.shapes.popitem(last=False)[1].hot:
                    self._refresh()
        self.shapes.move_to_end(key)
        self.last_pairs = pairs
        repeat = counts in shape.seen
        shape.seen[counts] = None
        shape.seen.move_to_end(counts)
        while len(shape.seen) > COUNTS_KEPT:
            shape.seen.popitem(last=False)
        if shape.mpi_faster:
            return Pattern("mpi", f"MPI: {shape.mpi_faster}")
        cost = self._cost(shape, pairs)
        pays = budget == float("inf") or cost <= budget * shape.calls_s
        shape.drifting = pays and budget != float("inf") and not repeat
        if pays and not shape.drifting:
            if not shape.hot:
                shape.hot = True
                self._hot_rows.add(shape.row)
            return None
        if shape.hot:  # not to be planned now (new counts, or not yet worth planning again): its calls go ahead
            shape.hot = False
            self._refresh()
        if shape.drifting:
            return Pattern("mpi", f"MPI: these counts are new on these pairs (of the last {COUNTS_KEPT}); "
                                  f"counts they had before are planned, since planning them now pays")
        need = cost / budget if budget > 0 else float("inf")
        return Pattern("mpi", f"MPI until calls of these pairs have taken {need:.3g} s, when planning "
                              f"them (about {self.estimate(pairs):.3g} s) costs at most {budget:.0%} of their time: "
                              f"{shape.calls_s:.3g} s in {shape.calls} calls so far")


#: Shapes one window of unchecked calls may hold: the calls of a cycle (the rows, then the
#: columns, of a process grid's transposes), every shape of it settled on MPI.
CYCLE_SHAPES = 8


@dataclass
class Quiet:
    """``method="auto"``'s calls without the ranks' agreement, alike on every rank.

    An agreed call of a shape that goes to MPI (``comm.Alltoallv`` or ``Alltoallw``) and is not
    about to be planned (its calls have not yet paid for planning it, or for planning it again,
    or its plan measured slower than MPI) is *settled*. Settled shapes make a cycle (one shape
    called again and again, or the rows and the columns of a grid in turn, up to
    :data:`CYCLE_SHAPES`): an agreed call of a shape already in the cycle, with the same options,
    extends a *streak*; a shape joining the cycle restarts it, other options start a new cycle.
    After a streak of ``s`` calls, the next ``min(4**s, cap + 1) - 1`` calls with the same options
    go straight to MPI, and never more than any settled shape's calls left before planning it
    pays. A shape with a plan in the cache (for other counts, which may come back) waits one
    agreed call longer. The unchecked calls' time is booked to the cycle's shapes, in equal
    shares, at the next agreed call."""

    config: str = ""
    shape: tuple[int, int] | None = None  # the last agreed call's
    streak: int = 0
    remaining: int = 0      # calls still to go unchecked
    skipped_s: float = 0.0  # this rank's time in them since the last agreed call
    skipped_n: int = 0
    #: the settled shapes of the cycle, each with the calls it may take before planning it pays
    #: (None: never to be planned)
    settled: dict[tuple[int, int], int | None] = field(default_factory=dict)
    opened: int = 0         # calls the last window opened with
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
            self.shape, self.streak, self.remaining, self.opened, self.settled = None, 0, 0, 0, {}
            return
        used = self.opened - self.remaining  # the last window's calls that went unchecked
        if used > 0 and self.settled:        # each settled shape had its share of them
            share = used / len(self.settled)
            self.settled = {s: None if n is None else max(0, int(n - share)) for s, n in self.settled.items()}
        if config != self.config or (shape not in self.settled and len(self.settled) >= CYCLE_SHAPES):
            self.config, self.settled, self.streak = config, {}, 0
        elif shape in self.settled:
            self.streak += 1
        else:
            self.streak = 0  # a shape joins the cycle: its windows start small again
        self.settled[shape] = left
        self.shape = shape
        steps = self.streak - planned
        self.remaining = 0 if steps < 0 else min(4 ** min(steps, 31), cap + 1) - 1
        limits = [n for n in self.settled.values() if n is not None]
        if limits:
            self.remaining = min(self.remaining, max(0, min(limits) - 1))
        self.opened = self.remaining

    def window(self) -> tuple[tuple[int, int], ...]:
        """The shapes the last window's unchecked calls are booked to (alike on every rank)."""
        return tuple(self.settled)

    def open(self, options: tuple[Any, ...] | None, plans_made: int, planning_s: float) -> None:
        """After :meth:`agreed`: what the window's unchecked calls compare and return."""
        self.options = options
        self.template = dict(method="mpi", cached=False, plan_s=0.0, reason=self.reason(), predicted_s=None,
                             default_s=None, fingerprint="", plans_made=plans_made, planning_s=planning_s,
                             ahead=False, checked=False)

    def same_options(self, options: tuple[Any, ...]) -> bool:
        """Whether a call passes the very objects the window's agreed call passed (then its
        options are the same; a call passing equal but other objects is compared by text)."""
        o = self.options
        return o is not None and len(o) == len(options) and all(a is b for a, b in zip(o, options))

    def reason(self) -> str:
        return (f"MPI, unchecked: {self.streak + 1} agreed calls in a row had one shape and went to MPI; "
                f"the ranks agree again after {self.remaining} calls unchecked")
