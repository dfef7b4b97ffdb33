"""The same multipath LP assembled straight into highspy from the sparse path-link matrix."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import highspy
import numpy as np

from ..errors import SolverError
from ..utils.progress import Progress, heartbeat
from .scaling import lp_coefficients
from .solution import (
    DEFAULT_SOLVER,
    EXACT_TOLERANCE,
    FALLBACK,
    LPSolution,
    LPStatus,
    first_order_limit,
    highs_options,
    highs_status,
    run_stands,
    silent_highs,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..paths import PathSet
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["solve_lp"]


def solve_lp(topology: Topology, demands: Demands, paths: PathSet, *, solver: str = DEFAULT_SOLVER,
             time_limit: float | None = None, sizes: ArrayLike | None = None, progress: Progress | None = None) -> LPSolution:
    """Solve the multipath LP of :func:`optiq.lp.build_pyomo_model` by direct assembly.

    Assembled in the equivalent "maximise Z" form (``y = x Z``, ``Z = 1 / tau``: job rows
    ``sum y - Z = 0``, link rows ``sum a y <= 1``), whose ``Z`` column touches only the job
    rows; the solution is returned in the ``x``/``tau`` terms of the Pyomo model. One row
    per job and one per used link, built as one sparse matrix (no per-variable Python objects).

    Raises
    ------
    SolverError
        For an unknown solver or when HiGHS returns no usable point.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> from optiq.paths import diverse_paths
    >>> t = torus((4,), bandwidth=1e6); d = Demands([0], [2], [10**6])
    >>> round(solve_lp(t, d, diverse_paths(t, d, k=2)).time_s, 6)   # two 2-hop paths, half each
    0.5
    """
    options = highs_options(solver, time_limit)
    start = time.perf_counter()
    links, cols, vals, used, t0 = lp_coefficients(topology, demands, paths, sizes)
    P, J = paths.num_paths, demands.num_jobs
    link_row = np.full(topology.num_links, -1, dtype=np.int64)
    link_row[used] = J + np.arange(used.size)
    # the Z form: y[p] = x[p] * Z, maximise Z = 1 / tau; the Z column touches the J job rows
    # only, where tau's touched every link row (a dense column interior point pays for)
    rows = np.concatenate([paths.job, link_row[links], np.arange(J)])
    colidx = np.concatenate([np.arange(P), cols, np.full(J, P)])
    data = np.concatenate([np.ones(P), vals, -np.ones(J)])
    from scipy.sparse import coo_matrix
    a = coo_matrix((data, (rows, colidx)), shape=(J + used.size, P + 1)).tocsc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = P + 1, J + used.size
    lp.col_cost_ = np.concatenate([np.zeros(P), [-1.0]])  # minimise -Z
    lp.col_lower_ = np.zeros(P + 1)
    lp.col_upper_ = np.full(P + 1, highspy.kHighsInf)
    lp.row_lower_ = np.concatenate([np.zeros(J), np.full(used.size, -highspy.kHighsInf)])
    lp.row_upper_ = np.concatenate([np.zeros(J), np.ones(used.size)])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr
    lp.a_matrix_.index_ = a.indices
    lp.a_matrix_.value_ = a.data
    h = silent_highs()
    for name, value in options.items():
        h.setOptionValue(name, value)
    h.setOptionValue("pdlp_iteration_limit", first_order_limit(J + used.size, P + 1))
    h.passModel(lp)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    with heartbeat(progress, f"LP ({P:,} paths, {J + used.size:,} rows, HiGHS {solver})"):
        while True:
            h.run()
            model_status, solution = h.getModelStatus(), h.getSolution()
            point_ok = solution.value_valid and len(solution.col_value) == P + 1 and solution.col_value[P] > 0
            if run_stands(solver, model_status, point_ok) or solver not in FALLBACK:
                break
            solver = FALLBACK[solver]  # nothing usable: the next, surer solver from scratch
            for name, value in highs_options(solver, None).items():  # the time limit counts every run
                h.setOptionValue(name, value)
            h.setOptionValue("ipm_optimality_tolerance", EXACT_TOLERANCE)
            h.clearSolver()
    solve_s = time.perf_counter() - start
    x = np.asarray(solution.col_value)
    if x.size != P + 1:
        raise SolverError(f"HiGHS ({solver}) returned no solution: {h.modelStatusToString(model_status)}")
    status = highs_status(model_status)
    z = float(x[P])
    if not z > 0:
        if status != LPStatus.TIME_LIMIT:
            raise SolverError(f"HiGHS ({solver}) returned no usable point: {h.modelStatusToString(model_status)}")
        even = 1.0 / paths.paths_per_job[paths.job]  # stopped before any progress: split every job evenly
        return LPSolution(share=even, time_s=float("nan"), status=status, route="highs", solver=solver,
                          build_s=build_s, solve_s=solve_s, time_unit_s=t0)
    link_dual, job_dual = np.zeros(topology.num_links), None
    if solution.dual_valid:  # the Z form's duals w, s, scaled to the tau form's: u = w / sum(w), pi = s / sum(w)
        row_dual = np.asarray(solution.row_dual)
        w = np.abs(row_dual[J:])
        if w.sum() > 0:
            link_dual[used] = w / w.sum()
            job_dual = np.abs(row_dual[:J]) / w.sum()
    return LPSolution(share=x[:P] / z, time_s=t0 / z, status=status, route="highs", solver=solver,
                      build_s=build_s, solve_s=solve_s, link_dual=link_dual, job_dual=job_dual, time_unit_s=t0)
