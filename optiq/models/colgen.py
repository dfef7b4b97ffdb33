"""Column generation for the multipath LP, with a proven lower bound at every iteration.

The restricted LP holds a few paths per job. Its dual link prices ``w`` (``w >= 0``,
``sum w = 1`` at an optimum) say what a link costs; a path of job ``j`` is worth adding
when its cost ``D_j / T0 * sum_{e in p} w_e / c_e`` is below the job's dual ``pi_j``. The
pricing step finds every job's cheapest path at once (:func:`optiq.paths.least_cost_paths`),
limited to ``hop_slack`` hops more than the job's shortest route.

The same prices bound the optimum from below. For any ``w >= 0`` with ``sum w = 1`` and any
plan, ``t = t * sum_e w_e >= sum_e w_e load_e / c_e = sum_j D_j * sum_{e in p} w_e / c_e`` over
the plan's paths, which is at least ``sum_j D_j * dist_w(j)`` with ``dist_w`` the cheapest path
under ``w / c`` of any length. That bound holds for every plan, not only hop-limited ones,
so the reported gap is against the true optimum.

Degeneracy: only links that are exactly full get non-zero duals, so pricing by duals alone
fixes one bottleneck per iteration (measured: 60 iterations without progress on bgq:1024).
Every iteration therefore also prices smoothed weights that grow exponentially with each
link's utilisation, and adds every job's new path from both (batching). The final
restricted LP is solved once more with crossover, so the plan uses few paths.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import SolverError
from ..paths import PathSet
from ..paths.pricing import least_cost_paths, min_hops
from .highs_lp import solve_lp
from .solution import LPSolution, LPStatus, highs_options

__all__ = ["ColumnGeneration", "CGStatus", "CGIteration", "column_generation", "RestrictedLP", "DEFAULT_GAP",
           "DEFAULT_HOP_SLACK"]

#: Stop when the plan is within 1% of the best proven lower bound.
DEFAULT_GAP = 0.01
#: Priced paths may be this many hops longer than the job's shortest route.
DEFAULT_HOP_SLACK = 2


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
    lp_time_s: float
    bound_s: float
    gap: float
    added: int
    elapsed_s: float


@dataclass(frozen=True)
class ColumnGeneration:
    """The result of :func:`column_generation`.

    Attributes
    ----------
    paths : PathSet
        Every path generated (grouped by job).
    solution : LPSolution
        The final restricted LP over ``paths`` (a vertex when ``final_solver`` crosses over).
    lower_bound_s : float
        The best proven lower bound on the completion time of any plan.
    gap : float
        ``(LP time - bound) / LP time``.
    status : CGStatus
    history : tuple of CGIteration
    paths_s, lp_s, price_s : float
        Time in the initial paths, in LP solves, and in pricing.
    """

    paths: PathSet = field(repr=False)
    solution: LPSolution = field(repr=False)
    lower_bound_s: float
    gap: float
    status: CGStatus
    history: tuple[CGIteration, ...] = field(repr=False)
    paths_s: float
    lp_s: float
    price_s: float

    @property
    def time_s(self) -> float:
        return self.solution.time_s

    @property
    def iterations(self) -> int:
        return len(self.history)


def column_generation(topology, demands, *, hop_slack: int = DEFAULT_HOP_SLACK, gap: float = DEFAULT_GAP,
                      time_limit: float | None = None, max_iterations: int = 100, known_bound_s: float = 0.0,
                      smoothing: float = 10.0, solver: str = "ipm-nox", sizes: np.ndarray | None = None,
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
    hop_slack : int
        Priced paths have at most (the job's hop distance + ``hop_slack``) links.
    gap : float
        Stop when ``(LP time - best bound) / LP time <= gap``.
    time_limit : float, optional
        Seconds for the whole run; the best plan so far is returned with ``TIME_LIMIT``.
    max_iterations : int
    known_bound_s : float
        A lower bound known beforehand (e.g. a cut bound); the best bound starts there.
    smoothing : float
        Sharpness of the smoothed weights.
    solver : str
        HiGHS algorithm for the restricted LPs (``ipm-nox`` re-solves from scratch,
        ``simplex`` warm-starts from the last basis).
    sizes : ndarray, optional
        Replace the jobs' bytes (QoS effective sizes, :mod:`optiq.models.qos`).
    progress : callable, optional
        Gets one line per iteration: iteration, paths, LP time, bound, gap, elapsed.

    Returns
    -------
    ColumnGeneration

    Raises
    ------
    SolverError
        If HiGHS fails on a restricted LP, or ``gap`` is negative.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import constant_ratio
    >>> t = torus((4, 4, 2), bandwidth=1e9)
    >>> d = constant_ratio(32, nbytes=2**20, num_sources=2, ratio=4)
    >>> cg = column_generation(t, d)
    >>> cg.gap <= 0.01 and cg.lower_bound_s <= cg.time_s
    True
    """
    if gap < 0:
        raise SolverError(f"gap must be non-negative, got {gap}")
    say = progress or (lambda msg: None)
    start = time.perf_counter()
    deadline = float("inf") if time_limit is None else start + time_limit
    J = demands.num_jobs
    size = demands.nbytes.astype(float) if sizes is None else np.asarray(sizes, dtype=float)
    hop_limit = min_hops(topology, demands.src, demands.dst) + hop_slack
    first, _, _ = least_cost_paths(topology, demands.src, demands.dst, np.ones(topology.num_links), hop_limit)
    lp = RestrictedLP(topology, demands, solver, sizes=size)
    columns = _Columns(lp, size)
    columns.add(first, np.arange(J))
    paths_s = time.perf_counter() - start
    bound, lp_s, price_s, history = float(known_bound_s), 0.0, 0.0, []
    status = CGStatus.ITERATION_LIMIT
    last: tuple[int, np.ndarray, float] | None = None  # columns, shares and time of the last solved LP
    for it in range(1, max_iterations + 1):
        t_iter = t0 = time.perf_counter()
        lp_time, share, link_dual, job_dual, lp_status = lp.solve(_remaining(deadline))
        lp_s += time.perf_counter() - t0
        if lp_status == LPStatus.TIME_LIMIT:
            status = CGStatus.TIME_LIMIT
            break
        last = (lp.num_paths, share, lp_time)
        t0 = time.perf_counter()
        utilisation = columns.link_bytes(share) / (topology.capacity * lp_time)
        total = link_dual.sum()
        if total <= 0:
            raise SolverError("the restricted LP returned no link prices")
        cost = link_dual / total / topology.capacity  # normalised price per byte on every link
        found, path_cost, free_cost = least_cost_paths(topology, demands.src, demands.dst, cost, hop_limit)
        bound = max(bound, float(size @ free_cost))
        # reduced cost in the scaled LP: D_j / T0 * sum_e dual_e / c_e - pi_j
        reduced = size * path_cost * total / lp.t0 - job_dual
        improving = np.flatnonzero(reduced < -1e-9 * lp_time / lp.t0)
        added = columns.add([found[j] for j in improving], improving)
        smooth = np.exp(smoothing * (np.minimum(utilisation, 1.0) - 1.0))
        smooth /= smooth.sum()
        found, _, free_cost = least_cost_paths(topology, demands.src, demands.dst, smooth / topology.capacity,
                                               hop_limit)
        bound = max(bound, float(size @ free_cost))
        added += columns.add(found, np.arange(J))
        price_s += time.perf_counter() - t0
        current_gap = max(0.0, (lp_time - bound) / lp_time) if lp_time > 0 else 0.0
        history.append(CGIteration(it, lp.num_paths - added, lp_time, bound, current_gap, added,
                                   time.perf_counter() - start))
        say(f"iteration {it}: {lp.num_paths - added} paths, LP {lp_time * 1e3:.4f} ms, bound {bound * 1e3:.4f} ms, "
            f"gap {current_gap:.2%}, +{added} paths, {time.perf_counter() - start:.1f} s")
        if current_gap <= gap:
            status = CGStatus.GAP_REACHED
            break
        if improving.size == 0:
            status = CGStatus.NO_IMPROVING_PATH
            break
        if time.perf_counter() + 1.5 * (time.perf_counter() - t_iter) >= deadline:
            status = CGStatus.TIME_LIMIT  # the next (larger) LP would not finish in time
            break
    final = None
    if status != CGStatus.TIME_LIMIT:
        # once more with crossover: a vertex uses far fewer paths; within what is left of the time limit
        paths = columns.pathset()
        t0 = time.perf_counter()
        final = solve_lp(topology, demands, paths, solver="ipm", sizes=sizes, time_limit=_remaining(deadline))
        lp_s += time.perf_counter() - t0
        if final.status != LPStatus.OPTIMAL:
            say("no time left for the final vertex: keeping the last interior solution")
            final = None
    if final is None:
        if last is None:
            raise SolverError(f"the time limit ({time_limit} s) ran out before the first restricted LP was solved")
        count, share, lp_time = last
        paths = columns.pathset(count)
        final = LPSolution(share=share[columns.order(count)], time_s=lp_time,
                           status=LPStatus.OPTIMAL if status == CGStatus.GAP_REACHED else LPStatus.TIME_LIMIT,
                           route="highs", solver=solver, build_s=0.0, solve_s=0.0, time_unit_s=lp.t0)
    final_gap = max(0.0, (final.time_s - bound) / final.time_s) if final.time_s > 0 else 0.0
    return ColumnGeneration(paths=paths, solution=final, lower_bound_s=bound, gap=final_gap, status=status,
                            history=tuple(history), paths_s=paths_s, lp_s=lp_s, price_s=price_s)


def _remaining(deadline: float) -> float | None:
    return None if deadline == float("inf") else max(1.0, deadline - time.perf_counter())


class _Columns:
    """The paths in the restricted LP, without duplicates, as flat link arrays."""

    def __init__(self, lp: "RestrictedLP", sizes: np.ndarray) -> None:
        self.lp, self.sizes = lp, sizes
        self.known: set[tuple[int, bytes]] = set()
        self.links: list[np.ndarray] = []
        self.jobs: list[int] = []
        self._flat: tuple[np.ndarray, np.ndarray] | None = None

    def add(self, paths: list[np.ndarray], jobs) -> int:
        new_paths, new_jobs = [], []
        for p, j in zip(paths, np.asarray(jobs).tolist()):
            key = (j, p.tobytes())
            if key not in self.known:
                self.known.add(key)
                new_paths.append(p)
                new_jobs.append(j)
        self.lp.add_paths(new_paths, np.asarray(new_jobs, dtype=np.int64))
        self.links += new_paths
        self.jobs += new_jobs
        self._flat = None
        return len(new_paths)

    def link_bytes(self, share: np.ndarray) -> np.ndarray:
        """Bytes on every link when path ``p`` carries ``share[p]`` of its job."""
        if self._flat is None:
            hops = np.array([p.size for p in self.links])
            self._flat = (np.concatenate(self.links), np.repeat(np.arange(len(self.links)), hops))
        links, owner = self._flat
        per_path = share * self.sizes[np.asarray(self.jobs)]
        return np.bincount(links, weights=per_path[owner], minlength=self.lp.topology.num_links)

    def pathset(self, count: int | None = None) -> PathSet:
        """The first ``count`` columns (all by default), grouped by job."""
        count = len(self.links) if count is None else count
        return PathSet.from_lists(self.links[:count], self.jobs[:count], self.lp.demands.num_jobs)

    def order(self, count: int) -> np.ndarray:
        """Column positions in the order of :meth:`pathset` (stable by job)."""
        return np.argsort(np.asarray(self.jobs[:count]), kind="stable")


class RestrictedLP:
    """The path LP kept alive in HiGHS: columns are added, each solve starts from the last one.

    Rows: one demand row per job (``sum x = 1``) and one capacity row per link
    (``sum a x - tau <= 0``), in the scaling of :func:`optiq.models.scaling.lp_coefficients`
    (``T0 = max demand / min capacity``). Column 0 is ``tau``.
    """

    def __init__(self, topology, demands, solver: str = "simplex", sizes: np.ndarray | None = None) -> None:
        import highspy

        self.topology, self.demands = topology, demands
        self.sizes = demands.nbytes.astype(float) if sizes is None else np.asarray(sizes, dtype=float)
        self.t0 = float(self.sizes.max() / topology.capacity.min())
        J, L = demands.num_jobs, topology.num_links
        self.num_paths = 0
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = 1, J + L
        lp.col_cost_ = np.array([1.0])
        lp.col_lower_, lp.col_upper_ = np.array([0.0]), np.array([highspy.kHighsInf])
        lp.row_lower_ = np.concatenate([np.ones(J), np.full(L, -highspy.kHighsInf)])
        lp.row_upper_ = np.concatenate([np.ones(J), np.zeros(L)])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.array([0, L], dtype=np.int32)
        lp.a_matrix_.index_ = (J + np.arange(L)).astype(np.int32)
        lp.a_matrix_.value_ = -np.ones(L)
        self.solver = solver
        self.highs = highspy.Highs()
        for name, value in highs_options(solver, None).items():
            self.highs.setOptionValue(name, value)
        self.highs.passModel(lp)

    def add_paths(self, paths: list[np.ndarray], jobs: np.ndarray) -> None:
        """Add one column per path (link ids) of the given jobs."""
        if not paths:
            return
        import highspy

        topo, J = self.topology, self.demands.num_jobs
        jobs = np.asarray(jobs, dtype=np.int64)
        hops = np.array([p.size for p in paths])
        links = np.concatenate(paths)
        owner = np.repeat(jobs, hops)
        coef = self.sizes[owner] / (topo.capacity[links] * self.t0)
        starts = np.concatenate(([0], np.cumsum(hops + 1)[:-1]))
        index = np.empty(int(hops.sum() + hops.size), dtype=np.int32)
        value = np.empty(index.size)
        index[starts], value[starts] = jobs, 1.0  # the demand row first, then the links
        rest = np.ones(index.size, dtype=bool)
        rest[starts] = False
        index[rest], value[rest] = J + links, coef
        n = len(paths)
        self.highs.addCols(n, np.zeros(n), np.zeros(n), np.full(n, highspy.kHighsInf), index.size,
                           starts.astype(np.int32), index, value)
        self.num_paths += n

    def solve(self, time_limit: float | None = None) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, LPStatus]:
        """Solve; returns time (s), path shares, link duals (>= 0), job duals, status.

        At the time limit the status is ``TIME_LIMIT`` and the arrays are ``None``.
        """
        import highspy

        h = self.highs
        h.setOptionValue("time_limit", float("inf") if time_limit is None else float(time_limit))
        if self.solver != "simplex":
            h.clearSolver()  # otherwise HiGHS warm-starts simplex from the last basis: vertex duals again
        h.run()
        status = h.getModelStatus()
        sol = h.getSolution()
        x = np.asarray(sol.col_value)
        if status in (highspy.HighsModelStatus.kTimeLimit, highspy.HighsModelStatus.kIterationLimit):
            return float("nan"), None, None, None, LPStatus.TIME_LIMIT
        if status != highspy.HighsModelStatus.kOptimal or x.size != self.num_paths + 1 or not sol.dual_valid:
            raise SolverError(f"HiGHS returned no solution for the restricted LP: {h.modelStatusToString(status)}")
        J = self.demands.num_jobs
        row_dual = np.asarray(sol.row_dual)
        return float(x[0]) * self.t0, x[1:], np.maximum(-row_dual[J:], 0.0), row_dual[:J], LPStatus.OPTIMAL
