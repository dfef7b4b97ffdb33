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

from ..errors import SolverError
from ..mpi.workers import Workers
from ..paths import PathSet, least_cost_paths, min_hops, system_routes
from ..paths.pathset import csr_positions, path_key
from .highs_lp import solve_lp
from .restricted import RestrictedLP
from .solution import FIRST_ORDER, LPStatus

if TYPE_CHECKING:
    from typing import Any

    from numpy.typing import ArrayLike

    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["ColumnGeneration", "CGStatus", "CGIteration", "column_generation", "DEFAULT_GAP", "DEFAULT_HOP_SLACK",
           "INITIAL_BUSY"]

#: Stop when the plan is within 1% of the best proven lower bound.
DEFAULT_GAP = 0.01
#: Priced paths may be this many hops longer than the job's shortest route.
DEFAULT_HOP_SLACK = 2
#: Columns carrying less than this share of their job after a solve leave the restricted LP.
IDLE_SHARE = 1e-3
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


@dataclass(frozen=True)
class ColumnGeneration:
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


def column_generation(topology: Topology, demands: Demands, *, initial: PathSet | None = None, hop_slack: int = DEFAULT_HOP_SLACK,
                      gap: float = DEFAULT_GAP, time_limit: float | None = None, max_iterations: int = 100,
                      known_bound_s: float = 0.0, smoothing: float = 10.0, solver: str | None = None,
                      sizes: np.ndarray | None = None, seed: int = 0, idle_share: float | None = None,
                      tolerance: float | None = None, workers: Workers | None = None, overlap: bool = True,
                      vertex_within_s: float = float("inf"),
                      progress: Callable[[str], None] | None = None) -> ColumnGeneration:
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
    initial : PathSet, optional
        The first columns; default every job's default route and a few fast candidates
        (:func:`optiq.paths.initial_columns`).
    hop_slack : int
        Priced paths have at most (the job's hop distance + ``hop_slack``) links.
    gap : float
        Stop when ``(LP time - best bound) / LP time <= gap``.
    time_limit : float, optional
        Seconds for the whole run (the initial paths are made first, whatever the limit);
        the best plan found is returned with status ``TIME_LIMIT``: never worse than the
        first restricted LP, or the default routes if that LP was not solved in time.
    max_iterations : int
    known_bound_s : float
        A lower bound known beforehand (e.g. a cut bound); the best bound starts there.
    smoothing : float
        Sharpness of the smoothed weights.
    solver : str, optional
        HiGHS algorithm for the restricted LPs; default ``hipdlp`` (first order, 4-5 times
        faster at scale, within 1e-5 of each LP's optimum) unless ``gap`` is below 1e-3,
        then ``ipm-nox`` (interior point without crossover).
    sizes : ndarray, optional
        Replace the jobs' bytes (QoS effective sizes, :mod:`optiq.workloads.qos`).
    seed : int
        Seed of the initial candidates and of the jitter of the smoothed weights.
    workers : Workers, optional
        Spread the pricing (one shortest-path tree per source) over MPI ranks; the result
        is the same for any number of ranks.
    vertex_within_s : float
        At the end, solve the LP over the paths that carry data once more with interior
        point and crossover when the restricted LPs took at most this many seconds on
        average and the time limit leaves room: a vertex is exact, where the first-order
        LPs are only within their tolerance, and uses far fewer paths. ``0`` never.
    overlap : bool
        Price the last solution's utilisation while the next LP solves (HiGHS runs in a
        thread and releases the GIL), so on two cores an iteration costs the dual pricing
        plus the longer of the two; the utilisation columns then join one LP later.
    progress : callable, optional
        Gets one line per step: initial paths, then per iteration paths, rows, LP time,
        bound, gap and elapsed time.

    Returns
    -------
    ColumnGeneration

    Raises
    ------
    SolverError
        If HiGHS fails on a restricted LP, or ``gap`` is not in [0, 1).

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
    from ..paths.initial import initial_columns

    if not 0 <= gap < 1:
        raise SolverError(f"gap must be in [0, 1), got {gap}")
    say = progress or (lambda msg: None)
    start = time.perf_counter()
    deadline = float("inf") if time_limit is None else start + time_limit
    J = demands.num_jobs
    size = demands.nbytes.astype(float) if sizes is None else np.asarray(sizes, dtype=float)
    hop_limit = min_hops(topology, demands.src, demands.dst) + hop_slack
    if initial is None:
        initial = initial_columns(topology, demands, hop_slack=hop_slack, seed=seed, progress=progress,
                                  workers=workers)
    if solver is None:
        solver = "hipdlp" if gap >= 1e-3 else "ipm-nox"
    if tolerance is None:
        tolerance = 1e-8 if gap == 0 else 1e-5 if solver in FIRST_ORDER else 1e-6
    lp = RestrictedLP(topology, demands, sizes=size, solver=solver, tolerance=tolerance)
    columns = _Columns(lp, IDLE_SHARE if idle_share is None else idle_share)
    columns.add(initial.links, initial.hops, initial.job)
    lp.add_busy_links(INITIAL_BUSY)
    pricer = _Pricer(topology, demands, size, hop_limit, smoothing, lp.t0, progress, workers)
    paths_s = time.perf_counter() - start
    say(f"column generation: {lp.num_paths:,} initial paths for {J:,} jobs, {lp.num_link_rows:,} of "
        f"{topology.num_links:,} link rows, {paths_s:.1f} s")
    bound, lp_s, price_s, history = float(known_bound_s), 0.0, 0.0, []
    best: tuple[float, PathSet, np.ndarray] | None = None  # time, the paths that carry data, their shares
    first_time = float("inf")
    status = CGStatus.ITERATION_LIMIT
    previous = None  # the last solution: its utilisation is priced while the next LP solves
    next_bound, retry_gap = BOUND_EVERY, float("inf")  # when the whole graph is searched next for a bound (tori)
    last_gap = float("inf")
    background = ThreadPoolExecutor(max_workers=1) if overlap else None
    try:
        for it in range(1, max_iterations + 1):
            t_iter = time.perf_counter()
            limit = _remaining(deadline)
            smoothed = None
            full = not pricer.regions or (it >= next_bound and last_gap <= retry_gap)
            pricer.searched_whole = False
            if background is not None and previous is not None:
                solving = background.submit(lp.solve, limit, progress=progress)  # HiGHS releases the GIL
                t0 = time.perf_counter()
                smoothed = pricer.utilisation(previous, bound=full, beat=bound)
                price_s += time.perf_counter() - t0
                sol = solving.result()
            else:
                sol = lp.solve(limit, progress=progress)
            lp_s += sol.solve_s
            if sol.status == LPStatus.TIME_LIMIT:
                status = CGStatus.TIME_LIMIT
                say(f"iteration {it}: time limit during the LP solve; keeping the best plan found")
                break
            if best is None:
                first_time = sol.time_s
            if best is None or sol.time_s < best[0]:
                used = sol.share > 0
                paths, order = columns.pathset(used)
                best = (sol.time_s, paths, sol.share[used][order])
            t0 = time.perf_counter()
            rows_before, paths_before = sol.rows, lp.num_paths
            dual_paths, dual_jobs, dual_bound = pricer.duals(sol, bound=full, beat=bound)
            if smoothed is None or background is None:
                smoothed = pricer.utilisation(sol, bound=full, beat=bound)
            previous = sol if background is not None else None
            this_bound = max(dual_bound, smoothed[2])
            if full and pricer.regions:  # a search that did not raise the bound waits until the gap has halved
                next_bound = it + BOUND_EVERY
                retry_gap = float("inf") if this_bound > bound else last_gap / 2
            bound = max(bound, this_bound)
            dropped = columns.drop_idle(sol.share)
            improved = columns.add_lists(dual_paths, dual_jobs)  # improving paths already in the LP are noise
            added = improved + columns.add_lists(smoothed[0], smoothed[1])
            price = time.perf_counter() - t0
            price_s += price
            current_gap = max(0.0, (best[0] - bound) / best[0]) if best[0] > 0 else 0.0
            last_gap = current_gap
            if lp.solver in FIRST_ORDER:  # far from the target, a looser first-order solve is enough
                lp.set_tolerance(min(1e-4, max(tolerance, current_gap / 100)))
            elapsed = time.perf_counter() - start
            history.append(CGIteration(it, paths_before, rows_before, sol.time_s, bound, current_gap, added,
                                       sol.solve_s, price, elapsed))
            say(f"iteration {it}: {paths_before:,} paths, {rows_before:,} link rows, LP {sol.time_s * 1e3:.4f} ms "
                f"({sol.solve_s:.1f} s, {sol.rounds} solve{'s' if sol.rounds > 1 else ''}), bound "
                f"{bound * 1e3:.4f} ms{_bound_note(full and pricer.regions, pricer.searched_whole, this_bound)}, gap "
                f"{current_gap:.2%}; +{added:,} -{dropped:,} paths ({price:.1f} s), {elapsed:.1f} s")
            if current_gap <= gap:
                status = CGStatus.GAP_REACHED
                break
            if improved == 0 and sol.over == 0:
                if not full:  # the search in the jobs' regions proved no bound: search the whole graph once
                    bound = max(bound, pricer.duals(sol, bound=True, beat=bound)[2],
                                pricer.utilisation(sol, bound=True, beat=bound)[2])
                    history[-1] = replace(history[-1], bound_s=bound,
                                          gap=max(0.0, (best[0] - bound) / best[0]) if best[0] > 0 else 0.0)
                status = CGStatus.NO_IMPROVING_PATH
                break
            if time.perf_counter() + 1.2 * (time.perf_counter() - t_iter) >= deadline:
                status = CGStatus.TIME_LIMIT  # the next (larger) LP would not finish in time
                say(f"stopping: another iteration would not end within the time limit ({time_limit:g} s)")
                break
    finally:
        if background is not None:
            background.shutdown(wait=True)
    if best is None:  # the time limit ended before the first LP: the default routes are the plan
        say("time limit reached before the first restricted LP was solved: keeping the default routes")
        paths = system_routes(topology, demands)
        share = np.ones(paths.num_paths)
        best = (_busiest(topology, paths, size, share), paths, share)
        vertex_within_s = 0.0
    best_time, paths, share = best
    mean_lp_s = lp_s / max(len(history), 1)
    if 0 < vertex_within_s and mean_lp_s <= vertex_within_s and (deadline == float("inf")
                                                                  or deadline - time.perf_counter() > 2 * mean_lp_s):
        # a vertex of the LP over the paths that carry data: as fast, far fewer paths (fewer chunk copies)
        t0 = time.perf_counter()
        vertex_sol = solve_lp(topology, demands, paths, solver="ipm", sizes=sizes, time_limit=_remaining(deadline),
                              progress=progress)
        lp_s += time.perf_counter() - t0
        polished = _busiest(topology, paths, size, vertex_sol.share) if vertex_sol.status == LPStatus.OPTIMAL \
            else float("inf")
        if polished <= best_time * (1 + 1e-9):
            kept = vertex_sol.share > 0
            say(f"vertex of the final LP: {int(kept.sum()):,} of {paths.num_paths:,} paths carry data "
                f"({time.perf_counter() - t0:.1f} s)")
            best_time, paths, share = polished, paths.select(kept), vertex_sol.share[kept]
    final_gap = max(0.0, (best_time - bound) / best_time) if best_time > 0 else 0.0
    return ColumnGeneration(paths=paths, share=share, time_s=best_time, lower_bound_s=bound, gap=final_gap,
                            status=status, history=tuple(history), first_time_s=first_time, paths_s=paths_s,
                            lp_s=lp_s, price_s=price_s)


class _Pricer:
    """The two pricing steps: by the LP's duals (exact) and by smoothed utilisation weights.

    (Pricing from a pool of coordinate-built paths instead of a graph search was tried and
    dropped: the paths the optimum needs are not in the pool; ``benchmarks/RESULTS.md``.)
    """

    def __init__(self, topology: Topology, demands: Demands, size: np.ndarray, hop_limit: np.ndarray, smoothing: float,
                 t0: float, progress: Callable[[str], None] | None, workers: Workers | None) -> None:
        self.topology, self.demands, self.size, self.hop_limit = topology, demands, size, hop_limit
        self.smoothing, self.t0, self.progress, self.workers = smoothing, t0, progress, workers
        #: search only where hop-limited paths go (tori and meshes, :mod:`optiq.paths.regions`);
        #: the whole graph when a bound is wanted
        self.regions = topology.is_torus
        self.searched_whole = False  # since the caller last reset it

    def _search(self, cost: np.ndarray, too_long: str, what: str, regions: bool):
        return least_cost_paths(self.topology, self.demands.src, self.demands.dst, cost / self.topology.capacity,
                                self.hop_limit, too_long=too_long, progress=self.progress, what=what,
                                workers=self.workers, regions=regions)

    def duals(self, sol: Any, bound: bool = True, beat: float = 0.0) -> tuple[list[np.ndarray], np.ndarray, float]:
        """Paths of negative reduced cost ``D_j / T0 * Z * cost_w(p) - pi_j``, and the Lagrangian
        bound (0 when the search stayed in the jobs' regions: see :meth:`_whole_graph`).

        A per-hop penalty keeps paths within their hop limit cheaply; only when it finds
        nothing does the exact hop-limited search run, so "no improving path" is exact.
        """
        tolerance = -1e-9 * np.abs(sol.job_dual).max()
        regions = self.regions
        for mode in ("penalty", "exact"):
            found, path_cost, free_cost = self._search(sol.link_price, mode, "pricing by duals", regions)
            if mode == "penalty" and regions and bound and self._whole_graph(path_cost, beat):
                regions = False
                found, path_cost, free_cost = self._search(sol.link_price, mode, "pricing by duals", regions)
            reduced = self.size / self.t0 * sol.price_scale * path_cost - sol.job_dual
            improving = np.flatnonzero((reduced < tolerance) & (np.array([p.size for p in found]) > 0))
            if improving.size:
                break
        return [found[j] for j in improving], improving, 0.0 if regions else float(self.size @ free_cost)

    def utilisation(self, sol: Any, bound: bool = True,
                    beat: float = 0.0) -> tuple[list[np.ndarray], np.ndarray, float]:
        """Every job's cheapest path under ``exp(smoothing * (utilisation - 1))``, and that bound
        (0 when the search stayed in the jobs' regions: see :meth:`_whole_graph`).

        Every link weighs here, so this bound can help where the LP's duals price only the few
        tight links and most jobs find a free way around them.
        """
        smooth = np.exp(self.smoothing * (np.minimum(sol.link_s / sol.time_s, 1.0) - 1.0))
        weight = smooth / smooth.sum()
        regions = self.regions
        found, path_cost, free_cost = self._search(weight, "penalty", "pricing by utilisation", regions)
        if regions and bound and self._whole_graph(path_cost, beat):
            regions = False
            found, _, free_cost = self._search(weight, "penalty", "pricing by utilisation", regions)
        return found, np.arange(self.demands.num_jobs), 0.0 if regions else float(self.size @ free_cost)

    def _whole_graph(self, region_cost: np.ndarray, beat: float) -> bool:
        """Whether searching the whole graph under these weights could give a bound above ``beat``.

        The bound is ``sum_j D_j dist_w(j)`` over paths of any length, and a path found in a
        job's region is one of them: so ``sum_j D_j region_cost_j`` is at least that bound, and
        when it is no more than ``beat`` the whole search cannot raise the bound. (A job whose
        region path was dropped for its length counts 0, so the test may skip a search that
        would have helped, never accept a wrong bound. On a full Blue Gene/Q the cut bound is
        far above both Lagrangian bounds, and this saves two whole-graph searches per attempt.)
        """
        whole = float(self.size @ region_cost) > beat
        self.searched_whole |= whole
        return whole


def _bound_note(tried: bool, searched: bool, found: float) -> str:
    """What the progress line says of an iteration's attempt at a whole-graph bound."""
    if not tried:
        return ""
    return f" (whole graph: {found * 1e3:.4f})" if searched else " (whole graph skipped: it could not beat that)"


def _busiest(topology, paths: PathSet, size: np.ndarray, share: np.ndarray) -> float:
    """Completion time (busiest link) when path ``p`` carries ``share[p]`` of its job, shares renormalised."""
    share = np.maximum(share, 0.0)
    total = np.bincount(paths.job, weights=share, minlength=size.size)[paths.job]
    per_path = np.where(total > 0, share / np.where(total > 0, total, 1.0), 0.0) * size[paths.job]
    return paths.busiest_link_time(per_path, topology.capacity)


def _remaining(deadline: float) -> float | None:
    return None if deadline == float("inf") else max(1e-3, deadline - time.perf_counter())


class _Columns:
    """The columns of the restricted LP, each (job, path) once, and which may be dropped.

    A column that carries less than :data:`IDLE_SHARE` of its job after a solve leaves the
    LP (interior point pays for every column; on an 8,192-node torus two thirds of them
    are idle and dropping them makes the next solve three times faster). If pricing asks
    for it again it comes back for good, so no column cycles.
    """

    def __init__(self, lp: RestrictedLP, idle_share: float) -> None:
        self.lp, self.idle_share = lp, idle_share
        self.keys: list[tuple[int, bytes]] = []   # one per LP column, in column order
        self.state: dict[tuple[int, bytes], str] = {}  # "in", "kept" (back once: never dropped) or "out"
        self.age = np.zeros(0, dtype=np.int64)

    def add(self, links: np.ndarray, hops: np.ndarray, jobs: np.ndarray) -> int:
        offsets = np.concatenate(([0], np.cumsum(hops)))
        return self.add_lists([links[offsets[p]:offsets[p + 1]] for p in range(hops.size)], jobs)

    def add_lists(self, paths: list[np.ndarray], jobs: ArrayLike) -> int:
        keep, keys = [], []
        for i, (p, j) in enumerate(zip(paths, np.asarray(jobs).tolist())):
            key = path_key(j, p)
            state = self.state.get(key)
            if p.size and state != "in" and state != "kept":
                self.state[key] = "in" if state is None else "kept"
                keep.append(i)
                keys.append(key)
        if keep:
            hops = np.array([paths[i].size for i in keep], dtype=np.int64)
            self.lp.add_columns(np.concatenate([paths[i] for i in keep]), hops,
                                np.asarray(jobs, dtype=np.int64)[keep])
            self.keys += keys
            self.age = np.concatenate([self.age, np.zeros(len(keep), dtype=np.int64)])
        return len(keep)

    def drop_idle(self, share: np.ndarray) -> int:
        """Drop the columns below :data:`IDLE_SHARE` that were solved once and never came back."""
        self.age += 1
        drop = (share < self.idle_share) & (self.age > 0)
        drop &= np.array([self.state[k] == "in" for k in self.keys], dtype=bool)
        if not drop.any():
            return 0
        self.lp.drop_columns(drop)
        for i in np.flatnonzero(drop):
            self.state[self.keys[i]] = "out"
        self.keys = [k for k, d in zip(self.keys, drop) if not d]
        self.age = self.age[~drop]
        return int(drop.sum())

    def pathset(self, mask: np.ndarray) -> tuple[PathSet, np.ndarray]:
        """The columns where ``mask`` is true, grouped by job, and their order among those columns."""
        links, offsets, jobs = self.lp.columns
        keep = np.flatnonzero(mask)
        hops = np.diff(offsets)[keep]
        return PathSet.from_csr(links[csr_positions(offsets[keep], hops)], np.concatenate(([0], np.cumsum(hops))),
                                jobs[keep], self.lp.demands.num_jobs)
