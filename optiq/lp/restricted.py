"""The restricted path LP of column generation, kept alive in HiGHS between iterations.

It is the "maximise Z" form of the original OPTIQ model, scaled by ``T0 = max demand / min
capacity``: column ``x_p = Z * share_p`` per path, one row per job ``sum_p x_p - Z = 0``,
one row per link ``sum_p a_ep x_p <= 1`` with ``a_ep = D_j / (c_e T0)``; maximise ``Z``; the
completion time is ``t = T0 / Z``. The usual "minimise t" form has ``-t`` in every link
row, a column as dense as the rows are many, which interior point pays for at every
iteration; here ``Z`` touches only the job rows.

Link rows are lazy. Most links never bind (on an 8,192-node torus, 48,000 of the
52,000 rows are below half the busiest load), and interior point pays for every row, so
only the links that the caller marks busy start as rows; after every solve the load of
*every* link is computed from the path shares, the links over the LP's time (plus the
nearly full ones) become rows, and the LP is solved again until none is over. The
returned time is always the true busiest link of the shares, so a solution is a plan.

Duals: ``u_e >= 0`` per link row (zero for links without a row, which are slack) and
``pi_j`` per job, with ``sum_e u_e = Z`` and ``sum_j pi_j = 1`` at an optimum. A path of job
``j`` improves the LP when ``D_j / T0 * sum_{e in p} u_e / c_e < pi_j``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import SolverError
from ..paths.pathset import csr_positions
from ..utils.progress import Progress, heartbeat
from .solution import (
    EXACT_TOLERANCE,
    FALLBACK,
    FIRST_ORDER,
    LPStatus,
    first_order_limit,
    highs_options,
    highs_status,
    run_stands,
    silent_highs,
)

if TYPE_CHECKING:
    from ..paths import PathSet
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["RestrictedLP", "RestrictedSolution", "sum_repeats"]

#: First-order solves look for the missing link rows at this looser tolerance, then solve once
#: at the tolerance asked for (None: every round at that tolerance).
SCOUT_TOLERANCE: float | None = 1e-3
#: Links loaded to at least this fraction of the LP's time join the rows with the violated ones.
NEAR_FULL = 0.9
#: Solves at a tenth of the tolerance, at most, for a first-order solution good enough but for
#: its slack (:meth:`RestrictedLP.solve`'s ``good_enough_s``).
POLISH_ROUNDS = 2


def sum_repeats(column: np.ndarray, row: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Matrix entries with each (column, row) once, the values of repeats summed, ordered by
    column then row (a path that crosses a link twice loads it twice).

    Examples
    --------
    >>> [a.tolist() for a in sum_repeats(np.array([0, 0, 1, 0]), np.array([5, 7, 5, 5]), np.array([1., 2., 4., 8.]))]
    [[0, 0, 1], [5, 7, 5], [9.0, 2.0, 4.0]]
    """
    column, row = np.asarray(column, dtype=np.int64), np.asarray(row, dtype=np.int64)
    width = int(row.max(initial=0)) + 1
    keys, inverse = np.unique(column * width + row, return_inverse=True)
    return keys // width, keys % width, np.bincount(inverse, weights=value, minlength=keys.size)


@dataclass(frozen=True)
class RestrictedSolution:
    """One solve of the :class:`RestrictedLP`.

    Attributes
    ----------
    status : LPStatus
    time_s : float
        Completion time of the shares: the busiest link over every link.
    optimum_s : float
        The LP's own optimum (``time_s`` to the solver's tolerance, unless links were ``over``).
    share : ndarray
        Fraction of its job's bytes on every column, in the order columns were added.
    link_s : ndarray
        Seconds every link is busy with these shares (bytes over capacity).
    link_price : ndarray
        ``u_e / sum(u)`` per link (``>= 0``, sums to 1; zero for links without a row).
    price_scale : float
        ``sum(u)``, i.e. ``Z``: ``u = price_scale * link_price``.
    job_dual : ndarray
        ``pi_j`` per job.
    rounds : int
        HiGHS runs in this call (1 when the rows were enough and the solver succeeded; a
        solver that takes over from one that failed runs again).
    over : int
        Links without a row that the last solve loaded above the LP's time (0: the shares
        are the restricted LP's optimum; otherwise their rows were added for the next solve).
    rows : int
        Link rows in the LP after this solve.
    solve_s : float
        Wall time in HiGHS.
    """

    status: LPStatus
    time_s: float
    optimum_s: float
    share: np.ndarray = field(repr=False)
    link_s: np.ndarray = field(repr=False)
    link_price: np.ndarray = field(repr=False)
    price_scale: float
    job_dual: np.ndarray = field(repr=False)
    rounds: int
    over: int
    rows: int
    solve_s: float


class RestrictedLP:
    """The path LP in "maximise Z" form with lazy link rows (module docstring).

    Parameters
    ----------
    topology : Topology
    demands : Demands
    sizes : ndarray, optional
        Bytes per job instead of the demands' (QoS effective sizes).
    solver : str
        One of :data:`optiq.lp.LP_SOLVERS`: ``hipdlp`` (first order, to a relative
        1e-5) is the fastest at scale; ``ipm-nox`` (interior point, no crossover) is exact
        to ``tolerance``. If a first-order solve returns nothing usable, interior point
        takes over.
    tolerance : float
        Interior point's optimality tolerance (HiGHS ``ipm_optimality_tolerance``).
    repeats : bool
        Whether a path may cross a link twice (a chain through an intermediate rank may):
        its coefficients are then summed per link.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> from optiq.paths import diverse_paths
    >>> t = torus((4,), bandwidth=1e6); d = Demands([0], [2], [10**6])
    >>> lp = RestrictedLP(t, d)
    >>> lp.add_paths(diverse_paths(t, d, k=2))
    >>> sol = lp.solve()
    >>> round(sol.time_s, 6), sol.share.round(6).tolist()       # two 2-hop paths, half each
    (0.5, [0.5, 0.5])
    """

    def __init__(self, topology: Topology, demands: Demands, *, sizes: np.ndarray | None = None, solver: str = "ipm-nox",
                 tolerance: float = 1e-8, repeats: bool = False) -> None:
        import highspy

        self.topology, self.demands, self.repeats = topology, demands, repeats
        self.sizes = demands.nbytes.astype(float) if sizes is None else np.asarray(sizes, dtype=float)
        self.t0 = float(self.sizes.max() / topology.capacity.min())
        J, L = demands.num_jobs, topology.num_links
        self.row_of_link = np.full(L, -1, dtype=np.int64)
        self.num_link_rows = 0
        # the columns as CSR: path p of job job[p] crosses links[offsets[p]:offsets[p + 1]]
        self._links: list[np.ndarray] = []
        self._jobs: list[np.ndarray] = []
        self._hops: list[np.ndarray] = []
        self._flat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._seconds: np.ndarray | None = None  # link seconds of the last solution
        self.num_paths = 0
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = 1, J
        lp.col_cost_ = np.array([-1.0])
        lp.col_lower_, lp.col_upper_ = np.array([0.0]), np.array([highspy.kHighsInf])
        lp.row_lower_, lp.row_upper_ = np.zeros(J), np.zeros(J)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.array([0, J], dtype=np.int32)
        lp.a_matrix_.index_ = np.arange(J, dtype=np.int32)
        lp.a_matrix_.value_ = -np.ones(J)
        self.highs = silent_highs()
        self.tolerance = float(tolerance)
        self._use(solver)
        self.highs.passModel(lp)

    def _run(self, tolerance: float, deadline: float | None,
             progress: Progress | None) -> tuple[LPStatus, Any, float, int]:
        """One solve from scratch at ``tolerance``; where the solver stalls or returns no usable
        point, the next of :data:`~optiq.lp.solution.FALLBACK` solves again and stays for the
        later solves. Returns the status, HiGHS's solution, the seconds in HiGHS and its runs
        (every run is work: the lean step's budget counts them).

        Raises
        ------
        SolverError
            If the last solver of the chain returns no usable point.
        """
        h, seconds, runs = self.highs, 0.0, 0
        while True:
            runs += 1
            self.set_tolerance(tolerance if self.solver in FIRST_ORDER else min(tolerance, EXACT_TOLERANCE))
            left = None if deadline is None else max(deadline - time.perf_counter(), 1e-3)
            # HiGHS compares its time limit with the run time summed over every run of this object
            h.setOptionValue("time_limit", float("inf") if left is None else h.getRunTime() + float(left))
            h.setOptionValue("pdlp_iteration_limit", first_order_limit(self.demands.num_jobs + self.num_link_rows,
                                                                       self.num_paths + 1))
            if self.solver != "simplex":
                h.clearSolver()  # interior point from scratch: simplex's warm start gives vertex duals again
            t = time.perf_counter()
            with heartbeat(progress, f"restricted LP ({self.num_paths:,} paths, {self.num_link_rows:,} link rows)"):
                h.run()
            seconds += time.perf_counter() - t
            model_status, sol = h.getModelStatus(), h.getSolution()
            point_ok = sol.value_valid and sol.dual_valid and len(sol.col_value) == self.num_paths + 1 \
                and sol.col_value[0] > 0
            if run_stands(self.solver, model_status, point_ok):
                return highs_status(model_status), sol, seconds, runs
            if self.solver not in FALLBACK:
                raise SolverError(f"HiGHS ({self.solver}) returned no solution for the restricted LP "
                                  f"({self.num_paths:,} paths, {self.num_link_rows:,} link rows): "
                                  f"{h.modelStatusToString(model_status)}")
            self._use(FALLBACK[self.solver])
            if self.solver not in FIRST_ORDER:
                tolerance = min(tolerance, EXACT_TOLERANCE)

    def _use(self, solver: str) -> None:
        self.solver = solver
        for name, value in highs_options(solver, None).items():
            self.highs.setOptionValue(name, value)
        self.set_tolerance(self.tolerance)

    def set_tolerance(self, tolerance: float) -> None:
        """The relative optimality tolerance of the next solves (interior point or first order)."""
        self.tolerance = float(tolerance)
        self.highs.setOptionValue("ipm_optimality_tolerance", self.tolerance)
        self.highs.setOptionValue("pdlp_optimality_tolerance", self.tolerance)
        # a link without a row is over when above the LP's time by more than the solver's slack
        self.over = 10 * self.tolerance

    # -- columns ----------------------------------------------------------------------
    def add_paths(self, paths: PathSet) -> None:
        """Add every path of a :class:`~optiq.paths.PathSet` as a column."""
        self.add_columns(paths.links, paths.hops, paths.job)

    def add_columns(self, links: np.ndarray, hops: np.ndarray, jobs: np.ndarray) -> None:
        """Add columns given as flat link ids, the hop count of each path and its job."""
        import highspy

        links, hops, jobs = (np.asarray(a, dtype=np.int64) for a in (links, hops, jobs))
        n = hops.size
        if not n:
            return
        owner = np.repeat(np.arange(n), hops)
        row = self.row_of_link[links]
        active = row >= 0
        coef = self.sizes[jobs[owner[active]]] / (self.topology.capacity[links[active]] * self.t0)
        active_owner, active_row = owner[active], row[active]
        if self.repeats:
            active_owner, active_row, coef = sum_repeats(active_owner, active_row, coef)
        count = np.bincount(active_owner, minlength=n) + 1  # the job row, then the active links
        starts = np.concatenate(([0], np.cumsum(count)[:-1]))
        index = np.empty(int(count.sum()), dtype=np.int32)
        value = np.empty(index.size)
        index[starts], value[starts] = jobs, 1.0
        rest = np.ones(index.size, dtype=bool)
        rest[starts] = False
        index[rest], value[rest] = active_row, coef  # active_owner is sorted: fills path by path
        self.highs.addCols(n, np.zeros(n), np.zeros(n), np.full(n, highspy.kHighsInf), index.size,
                           starts.astype(np.int32), index, value)
        self._links.append(links)
        self._hops.append(hops)
        self._jobs.append(jobs)
        self._flat = None
        self.num_paths += n
        uncovered = np.flatnonzero(count == 1)
        if uncovered.size:  # a column in no link row could grow without bound: give it its busiest link
            estimate = self._seconds if self._seconds is not None else self.link_seconds(self._even_share())
            by_load = np.lexsort((-estimate[links], owner))  # per column, its busiest link first
            self.add_links(links[by_load[np.concatenate(([0], np.cumsum(hops)[:-1]))[uncovered]]])

    def drop_columns(self, drop: np.ndarray) -> None:
        """Remove the columns where ``drop`` is true (a mask over the columns); the rest keep their order."""
        drop = np.asarray(drop, dtype=bool)
        if not drop.any():
            return
        links, offsets, jobs = self.columns
        gone = np.flatnonzero(drop)
        self.highs.deleteCols(gone.size, (gone + 1).astype(np.int32))  # column 0 is Z
        keep = np.flatnonzero(~drop)
        hops = np.diff(offsets)[keep]
        self._links = [links[csr_positions(offsets[keep], hops)]]
        self._hops, self._jobs = [hops], [jobs[keep]]
        self._flat = None
        self.num_paths = int(keep.size)

    @property
    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Flat link ids, per-column offsets into them, and the job of every column."""
        if self._flat is None:
            hops = np.concatenate(self._hops) if self._hops else np.zeros(0, np.int64)
            self._flat = (np.concatenate(self._links) if self._links else np.zeros(0, np.int64),
                          np.concatenate(([0], np.cumsum(hops))),
                          np.concatenate(self._jobs) if self._jobs else np.zeros(0, np.int64))
        return self._flat

    def link_seconds(self, share: np.ndarray) -> np.ndarray:
        """Seconds every link is busy (bytes over capacity) when column ``p`` carries ``share[p]``."""
        links, offsets, jobs = self.columns
        per_path = np.asarray(share, dtype=float) * self.sizes[jobs]
        loads = np.bincount(links, weights=np.repeat(per_path, np.diff(offsets)), minlength=self.topology.num_links)
        return loads / self.topology.capacity

    def _shares(self, x: np.ndarray) -> np.ndarray:
        """Column values as fractions of their job (each job's sum is 1, whatever the solver's tolerance)."""
        jobs = self.columns[2]
        total = np.bincount(jobs, weights=x, minlength=self.demands.num_jobs)
        return np.where(total[jobs] > 0, x / np.where(total[jobs] > 0, total[jobs], 1.0), 0.0)

    def _even_share(self) -> np.ndarray:
        """Every job's bytes split evenly over its columns."""
        jobs = self.columns[2]
        return 1.0 / np.bincount(jobs, minlength=self.demands.num_jobs)[jobs]

    # -- rows -------------------------------------------------------------------------
    def add_busy_links(self, fraction: float) -> int:
        """Rows for the links busy at least ``fraction`` of the busiest one, by the last solution's
        loads or, before any solve, with every job split evenly over its columns."""
        seconds = self._seconds if self._seconds is not None else self.link_seconds(self._even_share())
        return self.add_links(np.flatnonzero(seconds >= fraction * seconds.max()))

    def add_links(self, links: np.ndarray) -> int:
        """Give these links a capacity row (those without one); returns how many were added."""
        import highspy

        links = np.unique(np.asarray(links, dtype=np.int64))
        links = links[self.row_of_link[links] < 0]
        if not links.size:
            return 0
        J = self.demands.num_jobs
        self.row_of_link[links] = J + self.num_link_rows + np.arange(links.size)
        flat, offsets, jobs = self.columns
        hit = np.flatnonzero(np.isin(flat, links))
        col = np.searchsorted(offsets, hit, side="right") - 1 + 1  # + 1: column 0 is Z
        link = flat[hit]
        coef = self.sizes[jobs[col - 1]] / (self.topology.capacity[link] * self.t0)
        if self.repeats:
            col, link, coef = sum_repeats(col, link, coef)
        order = np.lexsort((col, link))
        row_local = np.searchsorted(links, link[order])
        starts = np.searchsorted(row_local, np.arange(links.size))
        self.highs.addRows(links.size, np.full(links.size, -highspy.kHighsInf), np.ones(links.size),
                           order.size, starts.astype(np.int32), col[order].astype(np.int32), coef[order])
        self.num_link_rows += links.size
        return int(links.size)

    # -- solving ----------------------------------------------------------------------
    def solve(self, time_limit: float | None = None, *, max_rounds: int = 20,
              progress: Progress | None = None, good_enough_s: float | None = None) -> RestrictedSolution:
        """Solve; while links without a row turn out over the LP's time, add their rows and solve again.

        With ``max_rounds=1`` the first solve is returned even when links are over: its shares
        are still a plan (``time_s`` is its true busiest link) but not the restricted LP's
        optimum, and ``over`` says how many links were over (their rows are added for the
        next solve). At the time limit the status is ``TIME_LIMIT`` and the arrays are empty.

        ``good_enough_s``: a first-order solve whose own optimum is at most this time while its
        shares' busiest link is above it (a first-order solution may overfill some rows by
        far more than its relative tolerance) is solved again at a tenth of the tolerance, at
        most :data:`POLISH_ROUNDS` times: the caller stops on such a plan. And where a
        first-order solve's optimum is above this time by more than the solver's slack, no
        closer solve could give a plan the caller stops on (rows only raise the optimum): its
        scouting solution, once no link is over, is returned without the solve at the
        tolerance asked for, and a solve at that tolerance is returned even when links are
        over, as with ``max_rounds=1``. Far from the target, duals to a relative
        :data:`SCOUT_TOLERANCE` price as well, and each solve from scratch costs several
        scouting ones.

        Raises
        ------
        SolverError
            If HiGHS fails.
        """
        deadline = None if time_limit is None else time.perf_counter() + time_limit
        J = self.demands.num_jobs
        solve_s = 0.0
        target = asked = self.tolerance
        polished = rounds = runs = 0
        scouting = self.solver in FIRST_ORDER and SCOUT_TOLERANCE is not None and target < SCOUT_TOLERANCE
        while rounds < max_rounds:
            rounds += 1
            status, sol, seconds_in_highs, tries = self._run(SCOUT_TOLERANCE if scouting and SCOUT_TOLERANCE else target,
                                                             deadline, progress)
            solve_s += seconds_in_highs
            runs += tries
            if self.solver not in FIRST_ORDER:  # a fallback took over: no scouting, its own tolerance
                scouting, target, asked = False, min(target, EXACT_TOLERANCE), min(asked, EXACT_TOLERANCE)
            if status == LPStatus.TIME_LIMIT:
                empty = np.zeros(0)
                self.set_tolerance(asked)
                return RestrictedSolution(status, float("nan"), float("nan"), empty, empty, empty, 0.0, empty, runs, 0,
                                          self.num_link_rows, solve_s)
            x = np.asarray(sol.col_value)
            share = self._shares(np.maximum(x[1:], 0.0))
            seconds = self._seconds = self.link_seconds(share)
            lp_time = self.t0 / x[0]
            over = np.flatnonzero((self.row_of_link < 0) & (seconds > lp_time * (1 + self.over)))
            cannot_end = good_enough_s is not None and self.solver in FIRST_ORDER \
                and lp_time * (1 - self.over) > good_enough_s
            if over.size:
                self.add_links(np.flatnonzero((self.row_of_link < 0) & (seconds >= NEAR_FULL * lp_time)))
                if cannot_end and not scouting:
                    break   # the rows serve the next solve
            elif scouting and not cannot_end:  # the rows are found: solve once more at the tolerance asked for
                scouting = False
                continue
            elif good_enough_s is not None and self.solver in FIRST_ORDER and polished < POLISH_ROUNDS \
                    and lp_time <= good_enough_s < seconds.max() and rounds < max_rounds:
                polished += 1   # good enough but for the solver's slack: solve that closer
                target /= 10
                continue
            if not over.size or rounds == max_rounds:
                break
        self.set_tolerance(asked)
        row_dual = np.asarray(sol.row_dual)
        price = np.zeros(self.topology.num_links)
        has_row = self.row_of_link >= 0
        in_lp = has_row & (self.row_of_link < row_dual.size)  # rows added after this solve have no dual yet
        price[in_lp] = np.maximum(-row_dual[self.row_of_link[in_lp]], 0.0)
        scale = float(price.sum())
        if scale <= 0:
            raise SolverError("the restricted LP returned no link prices")
        return RestrictedSolution(LPStatus.OPTIMAL, float(seconds.max()), float(lp_time), share, seconds, price / scale,
                                  scale, row_dual[:J].copy(), runs, int(over.size), self.num_link_rows, solve_s)
