"""Lean plans: among the plans as fast as a given one, the one that moves the fewest hop-bytes.

An optimal plan of the max-throughput LP is any optimal vertex, and column generation
stops at the first it finds; it may carry far more link bytes than the same completion
time needs (every extra hop-byte is a copy at a forwarder and interference with other
traffic). The second step keeps the time and minimises the bytes on links:

    minimise    sum_p D_j * hops(p) * s_p
    subject to  sum_{p of j} s_p = 1                     for every job j      (dual pi_j)
                sum_{p through e} D_j * s_p <= c_e * T    for every link e     (dual -y_e <= 0)

with ``T`` the plan's time. It is solved by column generation too, from the plan's own
paths: a path of job ``j`` improves it when ``D_j * sum_{e in p} (1 + y_e / c_e) < pi_j``
(link cost 1 plus the dual price per byte), found by the same search of the plan's path space
(:class:`optiq.paths.space.PathSpace`), within the same hop limit. Link rows are lazy, as in
:mod:`optiq.lp.restricted`: the links loaded to at least half of ``T`` start as rows, and a
solve that overloads another adds its row; its duals are priced all the same, and of its plan
the step keeps the part that fits: the plan that far from the best one so far toward it. The
last plan is made a vertex (few paths, every link exactly within ``T``) over the paths it uses,
with a row for every link those paths could overfill.

For any ``y >= 0``, ``sum_j D_j * dist_{1 + y/c}(j) - T * sum_e y_e`` is at most the least
hop-bytes of any plan of time ``T`` (the Lagrangian bound, with paths of any length): the
step reports its gap against it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..mpi.workers import Workers
from ..paths import PathSet, min_hops
from ..paths.pathset import path_key
from ..paths.space import PathSpace
from ..utils.progress import heartbeat
from .restricted import sum_repeats
from .solution import LPStatus, highs_status, silent_highs

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..mpi.workers import Workers
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["LeanResult", "lean_plan", "LEAN_GAP"]

#: Stop when the hop-bytes are within this fraction of the Lagrangian bound.
LEAN_GAP = 0.005
#: Links loaded to at least this fraction of the time start as rows.
INITIAL_ROWS = 0.5
#: The paths the final vertex keeps: those the interior point gave this share of their job.
SUPPORT = 1e-6
#: A lean plan saving less than this fraction of the hop-bytes is not worth its final vertex
#: (a simplex solve): the given plan stays.
MIN_SAVING = 1e-3


@dataclass(frozen=True)
class LeanResult:
    """What the lean step found.

    Attributes
    ----------
    paths : PathSet
        The paths that carry data.
    share : ndarray
        Every path's fraction of its job.
    time_s : float
        The busiest link's time of the lean plan (at most the given time, to the solver's
        tolerance).
    hop_bytes_before, hop_bytes : float
        Bytes times hops of the given plan and of the lean one.
    bound : float
        A proven lower bound on the hop-bytes of any plan of the given time.
    iterations : int
    seconds : float
        Wall time of the step.
    status : str
        ``"gap reached"``, ``"no improving path"``, ``"time limit"`` or ``"iteration limit"``.
    """

    paths: PathSet = field(repr=False)
    share: np.ndarray = field(repr=False)
    time_s: float
    hop_bytes_before: float
    hop_bytes: float
    bound: float
    iterations: int
    seconds: float
    status: str

    @property
    def gap(self) -> float:
        return max(0.0, 1.0 - self.bound / self.hop_bytes) if self.hop_bytes > 0 else 0.0


def lean_plan(topology: Topology, demands: Demands, paths: PathSet, share: np.ndarray, time_s: float, *,
              sizes: np.ndarray | None = None, hop_slack: int = 2, gap: float = LEAN_GAP, minimal: int = 4,
              time_limit: float | None = None, max_iterations: int = 50, workers: Workers | None = None,
              progress: Callable[[str], None] | None = None, space: PathSpace | None = None) -> LeanResult:
    """The plan of fewest hop-bytes no slower than ``time_s`` (module docstring).

    Parameters
    ----------
    topology, demands : Topology, Demands
    paths, share : PathSet, ndarray
        A plan of time ``time_s``: its paths and every path's fraction of its job.
    time_s : float
        The time to keep.
    sizes : ndarray, optional
        Bytes per job instead of the demands' (QoS effective sizes).
    hop_slack : int
        Priced paths have at most the job's hop distance plus this many links.
    gap : float
        Stop within this fraction of the Lagrangian bound.
    minimal : int
        Shortest routes per job added to the first columns (spread over the links), so
        that pricing has less to find.
    time_limit : float, optional
        Seconds; the best lean plan found so far is returned (never more hop-bytes than given).
    space : PathSpace, optional
        Where new paths may go (default: forwarded paths, :class:`optiq.paths.space.PathSpace`).
        Chains keep their stops in the result; other paths stop only at their ends.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> t = torus((6,), bandwidth=1.0)
    >>> d = Demands([0], [1], [6])
    >>> ps = PathSet.from_lists([[t.links_between(0, 1)[0]],
    ...                          [t.links_between(0, 5)[0], t.links_between(5, 4)[0], t.links_between(4, 3)[0],
    ...                           t.links_between(3, 2)[0], t.links_between(2, 1)[0]]], [0, 0], 1)
    >>> r = lean_plan(t, d, ps, np.array([0.5, 0.5]), 6.0)   # the whole job fits the short way in time
    >>> r.hop_bytes_before, r.hop_bytes, r.share.tolist()
    (18.0, 6.0, [1.0])
    """
    import highspy

    space = space or PathSpace(topology, demands)
    repeats = space.kind == "chains"  # a chain may cross a link twice: sum its coefficients
    start = time.perf_counter()
    deadline = float("inf") if time_limit is None else start + time_limit
    say = progress or (lambda message: None)
    size = demands.nbytes.astype(float) if sizes is None else np.asarray(sizes, dtype=float)
    cap = topology.capacity
    J, L = demands.num_jobs, topology.num_links
    unit = float(size.max())  # objective in hop-bytes / unit, rows in load / (c T): both O(1)
    hop_limit = min_hops(topology, demands.src, demands.dst) + hop_slack
    before = float(size[paths.job] @ (share * paths.hops))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = 0, J
    lp.row_lower_, lp.row_upper_ = np.ones(J), np.ones(J)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.zeros(1, dtype=np.int32)
    highs = silent_highs()
    # interior point without crossover: a warm-started primal simplex re-solve grows fast with
    # the jobs (``benchmarks/lean_budget.py``); pricing needs only the duals, and a tight primal
    # tolerance keeps every link within the time to 1e-10 of it
    highs.setOptionValue("solver", "ipm")
    highs.setOptionValue("run_crossover", "off")
    highs.setOptionValue("primal_feasibility_tolerance", 1e-10)
    highs.passModel(lp)
    row_of_link = np.full(L, -1, dtype=np.int64)
    columns: list[np.ndarray] = []
    column_stops: list[np.ndarray] = []
    jobs: list[int] = []
    known: dict[tuple[int, bytes], int] = {}  # a job's path -> its column

    def add_columns(new: PathSet) -> np.ndarray:
        """Add the paths the LP does not have; every path's column (-1 for an empty path)."""
        fresh: list[tuple[np.ndarray, int, np.ndarray]] = []
        where = np.full(new.num_paths, -1, dtype=np.int64)
        for p, j in enumerate(new.job.tolist()):
            links = new.path(p)
            if not links.size:
                continue
            key = path_key(j, links)
            if key not in known:
                known[key] = len(columns) + len(fresh)
                fresh.append((links, j, new.stops[new.offsets[p]:new.offsets[p + 1]]))
            where[p] = known[key]
        if not fresh:
            return where
        links = np.concatenate([p for p, _, _ in fresh])
        owner = np.repeat(np.arange(len(fresh)), [p.size for p, _, _ in fresh])
        job = np.array([j for _, j, _ in fresh], dtype=np.int64)
        rows = row_of_link[links]
        on = rows >= 0
        on_owner, on_rows, on_value = owner[on], rows[on], size[job[owner[on]]] / (cap[links[on]] * time_s)
        if repeats:
            on_owner, on_rows, on_value = sum_repeats(on_owner, on_rows, on_value)
        count = np.bincount(on_owner, minlength=len(fresh)) + 1  # the job row, then the link rows
        starts = np.concatenate(([0], np.cumsum(count)[:-1]))
        index = np.empty(int(count.sum()), dtype=np.int32)
        value = np.empty(index.size)
        index[starts], value[starts] = job, 1.0
        rest = np.ones(index.size, dtype=bool)
        rest[starts] = False
        index[rest], value[rest] = on_rows, on_value
        cost = size[job] * np.array([p.size for p, _, _ in fresh]) / unit
        highs.addCols(len(fresh), cost, np.zeros(len(fresh)), np.full(len(fresh), highspy.kHighsInf), index.size,
                      starts.astype(np.int32), index, value)
        columns.extend(p for p, _, _ in fresh)
        column_stops.extend(f for _, _, f in fresh)
        jobs.extend(job.tolist())
        return where

    def add_rows(links: np.ndarray) -> int:
        links = np.unique(links[row_of_link[links] < 0])
        if not links.size:
            return 0
        row_of_link[links] = J + np.count_nonzero(row_of_link >= 0) + np.arange(links.size)
        flat = np.concatenate(columns)
        col = np.repeat(np.arange(len(columns)), [p.size for p in columns])
        hit = np.flatnonzero(np.isin(flat, links))
        hit_col, hit_link = col[hit], flat[hit]
        value = size[np.array(jobs)[hit_col]] / (cap[hit_link] * time_s)
        if repeats:
            hit_col, hit_link, value = sum_repeats(hit_col, hit_link, value)
        order = np.lexsort((hit_col, hit_link))  # by link (row), then column
        row = np.searchsorted(links, hit_link[order])
        starts = np.searchsorted(row, np.arange(links.size)).astype(np.int32)
        highs.addRows(links.size, np.full(links.size, -highspy.kHighsInf), np.ones(links.size), order.size, starts,
                      hit_col[order].astype(np.int32), value[order])
        return int(links.size)

    threads = (workers or Workers()).search_threads  # the pricing has the cores to itself
    where = add_columns(paths)
    placed = where >= 0
    given = np.bincount(where[placed], weights=share[placed], minlength=len(columns))  # the given plan's shares
    if minimal:  # the few shortest routes of every job: where the lean plan ends up mostly
        add_columns(_shortest_routes(space, minimal, workers))
    loads = paths.link_loads(share * size[paths.job], L) / cap
    add_rows(np.flatnonzero(loads >= INITIAL_ROWS * time_s))
    # the best plan so far, as shares of the columns, its link loads (in seconds) and hop-bytes
    best_share, best_loads, best_hop_bytes, bound = given, loads, before, 0.0
    status, iterations = "iteration limit", 0

    def solve() -> tuple[Any, np.ndarray, np.ndarray] | str:
        """The LP solved: HiGHS's solution, every column's share and every link's time; or
        why there is none."""
        left = deadline - time.perf_counter()
        if left <= 0:
            return "time limit"
        highs.setOptionValue("time_limit", float("inf") if deadline == float("inf") else highs.getRunTime() + left)
        with heartbeat(progress, f"lean LP ({len(columns):,} paths)"):
            highs.run()
        solved = highs_status(highs.getModelStatus())
        if solved != LPStatus.OPTIMAL and not (solved == LPStatus.FAILED and highs.getSolution().dual_valid):
            return "time limit" if solved == LPStatus.TIME_LIMIT else "solver failed"
        sol = highs.getSolution()
        x = np.maximum(np.asarray(sol.col_value), 0.0)
        job_of = np.array(jobs)
        total = np.bincount(job_of, weights=x, minlength=J)
        if not (total > 0).all():  # a job the solver left without a path: no plan
            return "solver failed"
        s = x / total[job_of]
        return sol, s, link_times(s)

    def link_times(s: np.ndarray) -> np.ndarray:
        hops = np.array([c.size for c in columns[:s.size]])
        return np.bincount(np.concatenate(columns[:s.size]), weights=np.repeat(s * size[jobs[:s.size]], hops),
                           minlength=L) / cap

    def hop_bytes_of(s: np.ndarray) -> float:
        return float(size[jobs[:s.size]] @ (s * np.array([c.size for c in columns[:s.size]])))

    for it in range(1, max_iterations + 1):
        iterations = it
        solved = solve()
        if isinstance(solved, str):
            status = solved
            break
        sol, s, link_loads = solved
        row_dual = np.asarray(sol.row_dual)
        pi = row_dual[:J] * unit  # hop-bytes a job's row is worth
        price = np.zeros(L)  # hop-bytes a link's row is worth (>= 0)
        has = row_of_link >= 0
        price[has] = np.maximum(-row_dual[row_of_link[has]], 0.0) * unit
        over = np.flatnonzero(~has & (link_loads > time_s * (1 + 1e-9)))
        if over.size:  # a link without a row was overloaded: give it (and the nearly full ones) a row,
            # and price this solve's duals all the same (any prices give improving paths and a bound)
            add_rows(np.flatnonzero(~has & (link_loads >= 0.9 * time_s)))
        blended = _toward(best_share, best_loads, s, link_loads, time_s * (1 + 1e-9))
        hop_bytes = hop_bytes_of(blended)
        if hop_bytes < best_hop_bytes:  # the given plan stays unless one moves fewer
            best_share, best_hop_bytes, best_loads = blended, hop_bytes, link_times(blended)
        cost = 1.0 + price / (cap * time_s)  # per byte on a link: one hop, plus its price
        for mode in ("penalty", "exact"):  # the cheap search first; the exact one proves there is nothing
            found, path_cost, free_cost = space.cheapest(cost, hop_limit, too_long=mode, progress=progress,
                                                         what="lean pricing", workers=workers, threads=threads)
            reduced = size * path_cost - pi
            improving = np.flatnonzero((reduced < -1e-9 * np.abs(pi).max()) & (found.hops > 0))
            if improving.size or space.kind == "chains":  # chains: one search is exact
                break
        bound = max(bound, float(size @ free_cost - price.sum()))
        current = max(0.0, 1.0 - bound / best_hop_bytes)
        said = f"at most {current:.2%} over the fewest any plan of this time can have ({bound:.6g})" if bound > 0 \
            else "no bound on the fewest yet"
        rows = f", +{over.size:,} overfilled link rows" if over.size else ""
        say(f"lean step {it}: {best_hop_bytes:.6g} hop-bytes (given {before:.6g}), {said}; +{improving.size:,} "
            f"paths{rows}, {time.perf_counter() - start:.1f} s")
        if current <= gap:
            status = "gap reached"
            break
        mask = np.zeros(J, dtype=bool)
        mask[improving] = True
        had = len(columns)
        add_columns(found.select(mask))
        if len(columns) == had and not over.size:
            status = "no improving path"
            break
    if best_hop_bytes >= before * (1 - MIN_SAVING):  # nothing worth a vertex: the given plan
        return LeanResult(paths, share, float(loads.max()), before, before, bound, iterations,
                          time.perf_counter() - start, status)
    used = _support(best_share, np.array(jobs[:best_share.size]))
    # every link the used paths could overfill gets a row: the vertex fits every link
    pairs = np.unique(np.repeat(np.array(jobs)[used] * L, [columns[c].size for c in used])
                      + np.concatenate([columns[c] for c in used]))
    add_rows(np.flatnonzero(np.bincount(pairs % L, weights=size[pairs // L], minlength=L) / cap
                            > time_s * (1 + 1e-9)))
    say(f"lean step: a vertex over the {used.size:,} paths its plan uses, {time.perf_counter() - start:.1f} s")
    with heartbeat(progress, f"lean vertex ({used.size:,} paths)"):
        polished = _vertex(highs, used, len(columns), best_share.size, np.array(jobs[:best_share.size]), J)
    if polished is not None and hop_bytes_of(polished) <= best_hop_bytes * (1 + 1e-9) \
            and link_times(polished).max() <= time_s * (1 + 1e-9):
        best_share, best_hop_bytes = polished, hop_bytes_of(polished)
    keep = np.flatnonzero(best_share > 0)
    chosen, order = PathSet.from_csr(np.concatenate([columns[c] for c in keep]),
                                     np.concatenate(([0], np.cumsum([columns[c].size for c in keep]))),
                                     np.array(jobs)[keep], J,
                                     np.concatenate([column_stops[c] for c in keep]) if repeats else None)
    lean_share = best_share[keep][order]
    lean_time = chosen.busiest_link_time(lean_share * size[chosen.job], cap)
    return LeanResult(chosen, lean_share, lean_time, before, best_hop_bytes, bound, iterations,
                      time.perf_counter() - start, status)


def _toward(best: np.ndarray, best_loads: np.ndarray, share: np.ndarray, loads: np.ndarray,
            time_s: float) -> np.ndarray:
    """The plan as far from ``best`` toward ``share`` (shares of the columns, ``share`` over at
    least as many) as keeps every link within ``time_s``: a solve whose link rows missed a
    link it overfills still gives, on the way to it from a plan that fits, one that fits and
    moves fewer hop-bytes. ``best_loads`` and ``loads`` are the two plans' link times."""
    rise = loads - best_loads
    up = rise > 0
    step = float(np.clip(np.min((time_s - best_loads[up]) / rise[up]), 0.0, 1.0)) if up.any() else 1.0
    return step * share + (1 - step) * np.pad(best, (0, share.size - best.size))


def _support(share: np.ndarray, job_of: np.ndarray) -> np.ndarray:
    """The columns a plan uses: a share of at least :data:`SUPPORT` of its job, and every
    job's largest."""
    used = share >= SUPPORT
    order = np.lexsort((-share, job_of))
    used[order[np.concatenate(([0], np.flatnonzero(np.diff(job_of[order])) + 1))]] = True
    return np.flatnonzero(used)


def _vertex(highs: Any, used: np.ndarray, count: int, known: int, job_of: np.ndarray, J: int) -> np.ndarray | None:
    """A vertex of the LP over the ``used`` columns (of the ``count`` it has), so that the
    plan's paths are few and its links exactly within the time: its shares of the first
    ``known`` columns (of jobs ``job_of``), or None where that LP fails. By interior point and
    crossover: a simplex from scratch on these degenerate LPs takes many times longer."""
    import highspy

    upper = np.zeros(count)
    upper[used] = highspy.kHighsInf
    highs.changeColsBounds(count, np.arange(count, dtype=np.int32), np.zeros(count), upper)
    highs.setOptionValue("run_crossover", "on")
    highs.run()
    if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    x = np.maximum(np.asarray(highs.getSolution().col_value)[:known], 0.0)
    total = np.bincount(job_of, weights=x, minlength=J)
    return x / total[job_of] if (total > 0).all() else None


def _shortest_routes(space: PathSpace, k: int, workers: Workers | None) -> PathSet:
    """Up to ``k`` routes of every job with its fewest hops, spread over the links (chains:
    the direct routes)."""
    from ..paths import spread_paths, system_routes, torus_paths

    topology, demands = space.topology, space.demands
    if space.kind == "chains":
        return system_routes(topology, demands)
    if topology.is_torus and topology.num_nodes > 16384:  # coordinates: seconds for a whole Blue Gene/Q
        return space.from_links(torus_paths(topology, demands, k, hop_slack=0), distinct=True)
    return space.from_links(spread_paths(topology, demands, k, hop_slack=0, workers=workers))
