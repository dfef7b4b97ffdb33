"""Column generation for the multipath LP, with a proven lower bound at every iteration.

The restricted LP (:class:`~optiq.lp.restricted.RestrictedLP`) starts from every job's
default route and a few fast candidates, so its first solution is already as good as the
LP over fixed candidates and never worse than the machine's own routing. Its dual link
prices ``w`` (``w >= 0``, ``sum w = 1``) say what a link costs; a path of job ``j`` is worth
adding when its cost ``D_j / T0 * Z * sum_{e in p} w_e / c_e`` is below the job's dual
``pi_j``. The pricing step finds every job's cheapest path at once
(:func:`optiq.paths.least_cost_paths`), limited to ``hop_slack`` hops more than the job's
shortest route.

On tori and meshes the pricing searches only the nodes a job's hop-limited paths can
visit (:mod:`optiq.paths.regions`: a thin shell around the box of its shortest routes, a
small part of a large machine), which finds the same paths; it proves no bound, so the
whole graph is searched for one only now and then (:data:`BOUND_EVERY`), under both
weight sets below: the LP's duals price only the tight links, and on a large machine most
jobs find a way around those at no cost, where the smoothed weights price every link.

The same prices bound the optimum from below. For any ``w >= 0`` with ``sum w = 1`` and any
plan, ``t = t * sum_e w_e >= sum_e w_e load_e / c_e = sum_j D_j * sum_{e in p} w_e / c_e`` over
the plan's paths, which is at least ``sum_j D_j * dist_w(j)`` with ``dist_w`` the cheapest path
under ``w / c`` of any length. That bound holds for every plan, not only hop-limited ones,
so the reported gap is against the true optimum.

Degeneracy: only links that are exactly full get non-zero duals, so pricing by duals alone
fixes one bottleneck per iteration, and whole iterations pass without progress.
Every iteration therefore also prices smoothed weights that grow exponentially with each
link's utilisation, and adds every job's new path from both (batching). The LP keeps its
rows and columns between iterations; interior point restarts from scratch each time
(HiGHS cannot warm-start it), so what carries over is the model and its lazy rows.

A time limit stops after the first restricted LP at the earliest (that LP always runs to
its end, so the result is never worse than it) and returns the best plan found.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ParameterError
from ..mpi.workers import Workers
from ..paths import PathSet, min_hops, system_routes
from ..paths.space import PathSpace
from ..utils.checks import check_count, check_progress, check_range, check_seconds
from .columns import IDLE_SHARE, ColumnPool
from .highs_lp import solve_lp
from .pricer import Pricer
from .restricted import RestrictedLP
from .solution import FIRST_ORDER, LP_SOLVERS, LPStatus

if TYPE_CHECKING:
    from typing import Any

    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["CGOptions", "CGResult", "CGStatus", "CGIteration", "column_generation", "DEFAULT_GAP",
           "DEFAULT_HOP_SLACK", "INITIAL_BUSY"]

#: Stop when the plan is within 1% of the best proven lower bound.
DEFAULT_GAP = 0.01
#: Priced paths may be this many hops longer than the job's shortest route. With two, the LP
#: of a torus of unequal sides (the full Blue Gene/Q) stays above the default gap from the cut
#: bound; with four, column generation reaches it (benchmarks/RESULTS.md).
DEFAULT_HOP_SLACK = 4
#: Before the first solve, links loaded to this fraction of the busiest (every job split
#: evenly over its initial columns) get rows; the others join when a solve overloads them.
INITIAL_BUSY = 0.5
#: On tori pricing searches only where hop-limited paths go (:mod:`optiq.paths.regions`),
#: which proves no bound; the whole graph is searched for the Lagrangian bound at this
#: iteration, then as often again while that raises the bound, after a search that did not
#: only once the gap has halved, and once when nothing improves.
BOUND_EVERY = 5


class CGStatus(enum.Enum):
    GAP_REACHED = "gap reached"
    NO_IMPROVING_PATH = "no improving path within the hop limit"
    TIME_LIMIT = "time limit"
    ITERATION_LIMIT = "iteration limit"


@dataclass(frozen=True)
class CGOptions:
    """How :func:`column_generation` runs.

    Attributes
    ----------
    gap : float
        Stop when ``(LP time - best bound) / LP time <= gap``.
    hop_slack : int
        Priced paths have at most (the job's hop distance + ``hop_slack``) links.
    time_limit : float, optional
        Seconds for the whole run (the initial paths are made first, whatever the limit);
        the best plan found is returned with status ``TIME_LIMIT``: never worse than the
        first restricted LP, or the default routes if that LP was not solved in time.
    max_iterations : int
    known_bound_s : float
        A lower bound known beforehand (e.g. a cut bound); the best bound starts there.
    smoothing : float
        Sharpness of the smoothed weights ``exp(smoothing * (utilisation - 1))``.
    solver : str, optional
        HiGHS algorithm for the restricted LPs; default ``hipdlp`` (first order, much faster
        at scale, within its tolerance of each LP's optimum) unless ``gap`` is below 1e-3,
        then ``ipm-nox`` (interior point without crossover).
    tolerance : float, optional
        The restricted LPs' tolerance; default by ``gap`` and the solver.
    idle_share : float
        Columns carrying less than this share of their job after a solve leave the LP.
    seed : int
        Seed of the initial candidates.
    overlap : bool
        Price the last solution's utilisation while the next LP solves (HiGHS runs in a
        thread and releases the GIL), so on two cores an iteration costs the dual pricing
        plus the longer of the two; the utilisation columns then join one LP later.
    vertex_paths : int or None
        At the end, solve the LP over the paths that carry data once more with interior
        point and crossover when the restricted LP holds at most this many paths (``None``:
        always; ``0``: never) and a time limit, if given, leaves room: a vertex is exact,
        where the first-order LPs are only within their tolerance, and uses far fewer paths.
        A count, not seconds, so the same inputs give the same plan on any machine.

    Raises
    ------
    ParameterError
        For a setting out of its range, naming it: ``gap`` outside [0, 1), ``hop_slack`` or
        ``seed`` below 0, ``max_iterations`` below 1, a ``time_limit``, ``smoothing`` or
        ``tolerance`` that is not a positive finite number, ``idle_share`` outside [0, 1),
        ``vertex_paths`` below 0, an unknown ``solver``.
    """

    gap: float = DEFAULT_GAP
    hop_slack: int = DEFAULT_HOP_SLACK
    time_limit: float | None = None
    max_iterations: int = 100
    known_bound_s: float = 0.0
    smoothing: float = 10.0
    solver: str | None = None
    tolerance: float | None = None
    idle_share: float = IDLE_SHARE
    seed: int = 0
    overlap: bool = True
    vertex_paths: int | None = None

    def __post_init__(self) -> None:
        where = "column generation"
        check_range("gap", self.gap, 0.0, 1.0, where=where)
        for name, low in (("hop_slack", 0), ("max_iterations", 1), ("seed", 0)):
            check_count(name, getattr(self, name), low, where=where)
        check_seconds("time_limit", self.time_limit, where=where)
        check_range("smoothing", self.smoothing, 0.0, where=where, low_open=True)
        check_range("tolerance", self.tolerance, 0.0, 1.0, where=where, low_open=True, optional=True)
        check_range("idle_share", self.idle_share, 0.0, 1.0, where=where)
        check_count("vertex_paths", self.vertex_paths, 0, where=where, optional=True)
        if self.solver is not None and self.solver not in LP_SOLVERS:
            raise ParameterError(f"column generation: unknown solver {self.solver!r}; choose from "
                                 f"{', '.join(LP_SOLVERS)}")

    @property
    def lp_solver(self) -> str:
        """The restricted LPs' algorithm: ``solver``, or one chosen by ``gap``."""
        return self.solver or ("hipdlp" if self.gap >= 1e-3 else "ipm-nox")

    @property
    def lp_tolerance(self) -> float:
        """The restricted LPs' tolerance: ``tolerance``, or one chosen by ``gap`` and the solver."""
        if self.tolerance is not None:
            return self.tolerance
        return 1e-8 if self.gap == 0 else 1e-5 if self.lp_solver in FIRST_ORDER else 1e-6


@dataclass(frozen=True)
class CGIteration:
    """One round: the restricted LP's time, the best bound so far, and what pricing added."""

    iteration: int
    paths: int
    rows: int
    lp_time_s: float
    bound_s: float
    gap: float
    added: int
    solve_s: float
    price_s: float
    elapsed_s: float
    solves: int = 1  # the restricted LP's solves this round (rows added between them)


@dataclass(frozen=True)
class CGResult:
    """The result of :func:`column_generation`.

    Attributes
    ----------
    paths : PathSet
        Every path of the restricted LP (grouped by job).
    share : ndarray
        Fraction of its job on every path of ``paths``: the best solution found.
    time_s : float
        That solution's completion time (its busiest link).
    lower_bound_s : float
        The best proven lower bound on the completion time of any plan.
    gap : float
        ``(time - bound) / time``.
    status : CGStatus
    history : tuple of CGIteration
    first_time_s : float
        The first restricted LP's time; ``time_s`` is never above it.
    paths_s, lp_s, price_s : float
        Time in the initial paths, in LP solves, and in pricing.
    """

    paths: PathSet = field(repr=False)
    share: np.ndarray = field(repr=False)
    time_s: float
    lower_bound_s: float
    gap: float
    status: CGStatus
    history: tuple[CGIteration, ...] = field(repr=False)
    first_time_s: float
    paths_s: float
    lp_s: float
    price_s: float

    @property
    def iterations(self) -> int:
        return len(self.history)


def column_generation(topology: Topology, demands: Demands, options: CGOptions | None = None, *,
                      initial: PathSet | None = None, sizes: np.ndarray | None = None,
                      workers: Workers | None = None, progress: Callable[[str], None] | None = None,
                      space: PathSpace | None = None) -> CGResult:
    """Solve the path LP over all paths within the hop limit, adding paths as prices ask.

    Every iteration solves the restricted LP and prices two sets of link weights: the LP's
    duals (exact pricing: a path is added when its reduced cost is negative) and smoothed
    weights ``exp(smoothing * (utilisation - 1))`` of the current plan, which also steer
    jobs away from links that are nearly full, not only from the tight ones; degenerate
    duals alone would fix one bottleneck per iteration. Both weight sets give a lower bound.

    Parameters
    ----------
    topology : Topology
    demands : Demands
    options : CGOptions, optional
        Target gap, hop slack, limits and solver (defaults: :class:`CGOptions`).
    initial : PathSet, optional
        The first columns; default every job's default route and a few fast candidates
        (:func:`optiq.paths.initial_columns`).
    space : PathSpace, optional
        Where the paths may go (:class:`optiq.paths.space.PathSpace`); default forwarded
        paths: legs of the network's own routes. The Lagrangian bound is then a bound on the
        plans of that space. The result's paths stop only at their ends, unless the space
        chooses stops itself (chains): ``space.finish`` gives them the rest.
    sizes : ndarray, optional
        Replace the jobs' bytes (QoS effective sizes, :mod:`optiq.workloads.qos`).
    workers : Workers, optional
        Spread the pricing (one shortest-path tree per source) over MPI ranks; the result
        is the same for any number of ranks.
    progress : callable, optional
        Gets one line per step: initial paths, then per iteration paths, rows, LP time,
        bound, gap and elapsed time.

    Returns
    -------
    CGResult

    Raises
    ------
    ParameterError
        For a ``progress`` that is not callable.
    SolverError
        If HiGHS fails on a restricted LP.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import constant_ratio
    >>> t = torus((4, 4, 2), bandwidth=1e9)
    >>> d = constant_ratio(32, nbytes=2**20, num_sources=2, ratio=4)
    >>> cg = column_generation(t, d)
    >>> cg.gap <= 0.01 and cg.lower_bound_s <= cg.time_s <= cg.first_time_s
    True
    """
    check_progress(progress)
    space = space or PathSpace(topology, demands)
    run = _Run(space, options or CGOptions(), initial, sizes, workers, progress)
    background = ThreadPoolExecutor(max_workers=2) if run.options.overlap else None  # the LP, then its dual pricing
    try:
        for it in range(1, run.options.max_iterations + 1):
            stop = run.iterate(it, background)
            if stop is not None:
                run.status = stop
                break
    finally:
        if background is not None:
            background.shutdown(wait=True)
    return run.result()


@dataclass
class _Incumbent:
    """The best solution so far: its time, the paths that carry data and their shares."""

    time_s: float
    paths: PathSet
    share: np.ndarray

    def gap(self, bound: float) -> float:
        return max(0.0, (self.time_s - bound) / self.time_s) if self.time_s > 0 else 0.0


class _BoundSchedule:
    """When pricing searches the whole graph for a bound, where it searches only the jobs'
    regions otherwise (tori): at :data:`BOUND_EVERY`, again as often while that raises the
    bound, after a search that did not only once the gap has halved."""

    def __init__(self, regions: bool) -> None:
        self.regions = regions
        self.next, self.retry_gap, self.last_gap = BOUND_EVERY, float("inf"), float("inf")

    def whole(self, it: int) -> bool:
        """Whether iteration ``it`` searches the whole graph (always, where there are no regions)."""
        return not self.regions or (it >= self.next and self.last_gap <= self.retry_gap)

    def searched(self, it: int, raised: bool) -> None:
        """A whole-graph search at iteration ``it`` did (not) raise the bound."""
        self.next = it + BOUND_EVERY
        self.retry_gap = float("inf") if raised else self.last_gap / 2


class _Run:
    """One column generation: the restricted LP, its columns, the pricer, the best solution
    and bound so far, and the clock."""

    def __init__(self, space: PathSpace, options: CGOptions, initial: PathSet | None,
                 sizes: np.ndarray | None, workers: Workers | None, progress: Callable[[str], None] | None) -> None:
        from ..paths.initial import initial_columns

        topology, demands = space.topology, space.demands
        self.topology, self.demands, self.options, self.sizes, self.progress = \
            topology, demands, options, sizes, progress
        self.say = progress or (lambda msg: None)
        self.start = time.perf_counter()
        limit = options.time_limit
        self.deadline = float("inf") if limit is None else self.start + limit
        self.size = demands.nbytes.astype(float) if sizes is None else np.asarray(sizes, dtype=float)
        if initial is None:
            initial = initial_columns(topology, demands, hop_slack=options.hop_slack, seed=options.seed,
                                      progress=progress, workers=workers, space=space)
        self.lp = RestrictedLP(topology, demands, sizes=self.size, solver=options.lp_solver,
                               tolerance=options.lp_tolerance, repeats=space.kind == "chains")
        self.columns = ColumnPool(self.lp, options.idle_share, keep_stops=space.kind == "chains")
        self.columns.add(initial)
        self.lp.add_busy_links(INITIAL_BUSY)
        hop_limit = min_hops(topology, demands.src, demands.dst) + options.hop_slack
        self.pricer = Pricer(space, self.size, hop_limit, options.smoothing, self.lp.t0, progress, workers)
        self.schedule = _BoundSchedule(self.pricer.regions)
        self.paths_s = time.perf_counter() - self.start
        self.say(f"column generation: {self.lp.num_paths:,} initial paths for {demands.num_jobs:,} jobs, "
                 f"{self.lp.num_link_rows:,} of {topology.num_links:,} link rows, {self.paths_s:.1f} s")
        self.bound = float(options.known_bound_s)
        self.best: _Incumbent | None = None
        self.first_time = float("inf")
        self.history: list[CGIteration] = []
        self.lp_s = self.price_s = 0.0
        self.status = CGStatus.ITERATION_LIMIT
        self.previous: Any = None  # the last solution: its utilisation is priced while the next LP solves

    def _solve(self, full: bool, background: ThreadPoolExecutor | None) -> tuple[Any, Any, Any]:
        """The restricted LP's solution; the last one's utilisation pricing if it overlapped the
        solve; and, then, this solution's dual pricing, begun as soon as the solve ended (beside
        the rest of the utilisation pricing, which often outlasts the solve)."""
        limit = _remaining(self.deadline)
        enough = self._enough(self.bound)
        if background is None or self.previous is None:
            return self.lp.solve(limit, progress=self.progress, good_enough_s=enough), None, None
        solving = background.submit(self.lp.solve, limit, progress=self.progress,
                                    good_enough_s=enough)  # HiGHS releases the GIL
        beat = self.bound
        # searches spread over MPI ranks run one at a time: their messages share one communicator
        workers = self.pricer.workers
        pricing = background.submit(self._price_duals, solving, full, beat) \
            if workers is None or workers.size == 1 else None
        t0 = time.perf_counter()
        smoothed = self.pricer.utilisation(self.previous, bound=full, beat=beat, alone=False)
        sol = solving.result()
        duals = None if pricing is None else pricing.result()
        self.price_s += time.perf_counter() - t0
        return sol, smoothed, duals

    def _price_duals(self, solving: Any, full: bool, beat: float) -> tuple[PathSet, float] | None:
        """Dual pricing of the solve under way, once it ends (None if it ended at the time limit,
        or within the target gap: then the run stops without it)."""
        sol = solving.result()
        if sol.status != LPStatus.OPTIMAL or self._within_gap(sol.time_s, beat):
            return None
        return self.pricer.duals(sol, bound=full, beat=beat)

    def _enough(self, bound: float) -> float:
        """The time of a plan within the target gap of ``bound``: one this fast ends the run."""
        return bound / (1 - self.options.gap)

    def _within_gap(self, time_s: float, bound: float) -> bool:
        """Whether the best plan, counting one of ``time_s``, is within the target gap of ``bound``."""
        return min(time_s, self.best.time_s if self.best is not None else time_s) <= self._enough(bound)

    def iterate(self, it: int, background: ThreadPoolExecutor | None) -> CGStatus | None:
        """Solve, price and add columns once; the status to stop with, or ``None`` to go on."""
        t_iter = time.perf_counter()
        full = self.schedule.whole(it)
        self.pricer.searched_whole = False
        sol, smoothed, priced = self._solve(full, background)
        self.lp_s += sol.solve_s
        if sol.status == LPStatus.TIME_LIMIT:
            self.say(f"iteration {it}: time limit during the LP solve; keeping the best plan found")
            return CGStatus.TIME_LIMIT
        if self.best is None:
            self.first_time = sol.time_s
        if self.best is None or sol.time_s < self.best.time_s:
            used = sol.share > 0
            paths, order = self.columns.pathset(used)
            self.best = _Incumbent(sol.time_s, paths, sol.share[used][order])
        known = max(self.bound, smoothed[1] if smoothed is not None else 0.0)
        if self._within_gap(sol.time_s, known):
            self.bound = known
            return self._stop_within_gap(it, sol)  # no pricing can change the outcome
        t0 = time.perf_counter()
        rows_before, paths_before = sol.rows, self.lp.num_paths
        dual_paths, dual_bound = priced if priced is not None else self.pricer.duals(sol, bound=full, beat=self.bound)
        if smoothed is None:
            smoothed = self.pricer.utilisation(sol, bound=full, beat=self.bound)
        self.previous = sol if background is not None else None
        this_bound = max(dual_bound, smoothed[1])
        if full and self.pricer.regions:
            self.schedule.searched(it, raised=this_bound > self.bound)
        self.bound = max(self.bound, this_bound)
        dropped = self.columns.drop_idle(sol.share)
        improved = self.columns.add(dual_paths)  # improving paths already in the LP are noise
        added = improved + self.columns.add(smoothed[0])
        price = time.perf_counter() - t0
        self.price_s += price
        gap = self.schedule.last_gap = self.best.gap(self.bound)
        if self.lp.solver in FIRST_ORDER:  # far from the target, a looser first-order solve is enough
            self.lp.set_tolerance(min(1e-4, max(self.options.lp_tolerance, gap / 100)))
        elapsed = time.perf_counter() - self.start
        self.history.append(CGIteration(it, paths_before, rows_before, sol.time_s, self.bound, gap, added,
                                        sol.solve_s, price, elapsed, sol.rounds))
        note = _bound_note(full and self.pricer.regions, self.pricer.searched_whole, this_bound)
        self.say(f"{self._solved(it, paths_before, sol)}{note}, gap {gap:.2%}; +{added:,} -{dropped:,} paths "
                 f"({price:.1f} s), {elapsed:.1f} s")
        if gap <= self.options.gap:
            return CGStatus.GAP_REACHED
        if improved == 0 and sol.over == 0:
            if not full:  # the search in the jobs' regions proved no bound: search the whole graph once
                self.bound = max(self.bound, self.pricer.duals(sol, bound=True, beat=self.bound)[1],
                                 self.pricer.utilisation(sol, bound=True, beat=self.bound)[1])
                self.history[-1] = replace(self.history[-1], bound_s=self.bound, gap=self.best.gap(self.bound))
            return CGStatus.NO_IMPROVING_PATH
        if time.perf_counter() + 1.2 * (time.perf_counter() - t_iter) >= self.deadline:
            self.say(f"stopping: another iteration would not end within the time limit "
                     f"({self.options.time_limit:g} s)")
            return CGStatus.TIME_LIMIT  # the next (larger) LP would not finish in time
        return None

    def _stop_within_gap(self, it: int, sol: Any) -> CGStatus:
        """The iteration whose solve brought the plan within the target gap: recorded without pricing."""
        assert self.best is not None
        gap = self.best.gap(self.bound)
        elapsed = time.perf_counter() - self.start
        self.history.append(CGIteration(it, self.lp.num_paths, sol.rows, sol.time_s, self.bound, gap, 0, sol.solve_s,
                                        0.0, elapsed, sol.rounds))
        self.say(f"{self._solved(it, self.lp.num_paths, sol)}, gap {gap:.2%}: within the target, no more pricing; "
                 f"{elapsed:.1f} s")
        return CGStatus.GAP_REACHED

    def _solved(self, it: int, paths: int, sol: Any) -> str:
        """The start of an iteration's progress line: the LP it solved, and the bound."""
        lp = f"LP {sol.time_s * 1e3:.4f} ms" if not sol.over else \
            f"LP {sol.optimum_s * 1e3:.4f} ms (its shares {sol.time_s * 1e3:.4f} ms: {sol.over:,} links over, rows added)"
        return (f"iteration {it}: {paths:,} paths, {sol.rows:,} link rows, {lp} "
                f"({sol.solve_s:.1f} s, {sol.rounds} solve{'s' if sol.rounds > 1 else ''}), bound "
                f"{self.bound * 1e3:.4f} ms")

    def result(self) -> CGResult:
        """The best plan found (the default routes if no LP was solved), polished to a vertex
        where :attr:`CGOptions.vertex_paths` says."""
        best = self.best
        limit = self.options.vertex_paths
        vertex = limit is None or 0 < limit and self.lp.num_paths <= limit
        if best is None:  # the time limit ended before the first LP: the default routes are the plan
            self.say("time limit reached before the first restricted LP was solved: keeping the default routes")
            paths = system_routes(self.topology, self.demands)
            share = np.ones(paths.num_paths)
            best = _Incumbent(_busiest(self.topology, paths, self.size, share), paths, share)
            vertex = False
        mean_lp_s = self.lp_s / max(len(self.history), 1)
        if vertex and (self.deadline == float("inf") or self.deadline - time.perf_counter() > 2 * mean_lp_s):
            best = self._vertex(best)
        return CGResult(paths=best.paths, share=best.share, time_s=best.time_s, lower_bound_s=self.bound,
                        gap=best.gap(self.bound), status=self.status, history=tuple(self.history),
                        first_time_s=self.first_time, paths_s=self.paths_s, lp_s=self.lp_s, price_s=self.price_s)

    def _vertex(self, best: _Incumbent) -> _Incumbent:
        """A vertex of the LP over the paths that carry data, if no slower: as fast, far
        fewer paths (fewer chunk copies)."""
        t0 = time.perf_counter()
        sol = solve_lp(self.topology, self.demands, best.paths, solver="ipm", sizes=self.sizes,
                       time_limit=_remaining(self.deadline), progress=self.progress)
        self.lp_s += time.perf_counter() - t0
        if sol.status != LPStatus.OPTIMAL:
            return best
        polished = _busiest(self.topology, best.paths, self.size, sol.share)
        if polished > best.time_s * (1 + 1e-9):
            return best
        kept = sol.share > 0
        self.say(f"vertex of the final LP: {int(kept.sum()):,} of {best.paths.num_paths:,} paths carry data "
                 f"({time.perf_counter() - t0:.1f} s)")
        return _Incumbent(polished, best.paths.select(kept), sol.share[kept])


def _bound_note(tried: bool, searched: bool, found: float) -> str:
    """What the progress line says of an iteration's attempt at a whole-graph bound."""
    if not tried:
        return ""
    return f" (whole graph: {found * 1e3:.4f})" if searched else " (whole graph skipped: it could not beat that)"


def _busiest(topology: Topology, paths: PathSet, size: np.ndarray, share: np.ndarray) -> float:
    """Completion time (busiest link) when path ``p`` carries ``share[p]`` of its job, shares renormalised."""
    share = np.maximum(share, 0.0)
    total = np.bincount(paths.job, weights=share, minlength=size.size)[paths.job]
    per_path = np.where(total > 0, share / np.where(total > 0, total, 1.0), 0.0) * size[paths.job]
    return paths.busiest_link_time(per_path, topology.capacity)


def _remaining(deadline: float) -> float | None:
    return None if deadline == float("inf") else max(1e-3, deadline - time.perf_counter())
