"""The max-throughput multipath LP as a Pyomo model a user can read and extend."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import SolverError
from .scaling import lp_coefficients
from .solution import DEFAULT_SOLVER, FIRST_ORDER, LPSolution, first_order_limit, highs_options, pyomo_status

if TYPE_CHECKING:
    from ..paths import PathSet
    from ..topology import Topology
    from ..workloads import Demands
    from ..workloads.qos import QoSClasses

if TYPE_CHECKING:  # pyomo takes ~1.5 s to import; only the model functions need it
    import pyomo.environ as pyo

__all__ = ["build_pyomo_model", "solve_pyomo_model"]


def build_pyomo_model(topology: Topology, demands: Demands, paths: PathSet, qos: QoSClasses | None = None) -> pyo.ConcreteModel:
    """Build the multipath LP over the candidate ``paths`` as a Pyomo model.

    ::

        minimise   tau
        subject to sum_{p of job j} x[p] = 1                    (demand[j], every job)
                   sum_{p crossing e} a[e,p] x[p] <= tau        (capacity[e], every used link)
                   x >= 0

    where ``x[p]`` is the share of its job's demand on path ``p``, ``a[e,p] = D_j / (c_e T0)``
    and the completion time is ``t = tau * T0`` seconds (``model.time_unit_s`` holds ``T0``).
    With ``qos`` (:class:`~optiq.workloads.qos.QoSClasses`), ``D_j`` becomes the job's effective
    size ``D_j alpha_i B / B_i`` and ``B / t`` is the throughput ``T`` of which class ``i``
    gets ``alpha_i T``; ``model.alpha`` holds the shares. Indices: ``model.J`` jobs, ``model.P`` paths, ``model.E`` used links. Add constraints or
    change the objective before :func:`solve_pyomo_model` to extend it.

    Raises
    ------
    PlanError
        If a job has no candidate path.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> from optiq.paths import diverse_paths
    >>> t = torus((4,)); d = Demands([0], [2], [10**6])
    >>> m = build_pyomo_model(t, d, diverse_paths(t, d, k=2))
    >>> len(m.P), len(m.E)
    (2, 4)
    """
    sizes = None if qos is None else qos.effective_sizes(demands)
    links, cols, vals, used, t0 = lp_coefficients(topology, demands, paths, sizes)
    by_link: dict[int, list[tuple[int, float]]] = {}
    for e, p, a in zip(links.tolist(), cols.tolist(), vals.tolist()):
        by_link.setdefault(e, []).append((p, a))
    job_offsets = paths.job_offsets
    import pyomo.environ as pyo

    m = pyo.ConcreteModel(name="optiq multipath throughput")
    m.J = pyo.RangeSet(0, demands.num_jobs - 1)
    m.P = pyo.RangeSet(0, paths.num_paths - 1)
    m.E = pyo.Set(initialize=used.tolist())
    m.time_unit_s = t0
    if qos is not None:
        m.classes = pyo.Set(initialize=list(qos.shares))
        m.alpha = pyo.Param(m.classes, initialize=dict(qos.shares))
    m.x = pyo.Var(m.P, domain=pyo.NonNegativeReals)
    m.tau = pyo.Var(domain=pyo.NonNegativeReals)
    m.demand = pyo.Constraint(m.J, rule=lambda m, j: sum(
        m.x[p] for p in range(job_offsets[j], job_offsets[j + 1])) == 1)
    m.capacity = pyo.Constraint(m.E, rule=lambda m, e: sum(a * m.x[p] for p, a in by_link[e]) <= m.tau)
    m.objective = pyo.Objective(expr=m.tau, sense=pyo.minimize)
    return m


def solve_pyomo_model(model: pyo.ConcreteModel, *, solver: str = DEFAULT_SOLVER,
                      time_limit: float | None = None, build_s: float = 0.0) -> LPSolution:
    """Solve a model from :func:`build_pyomo_model` with HiGHS through Pyomo.

    Parameters
    ----------
    solver : {"ipm", "ipm-nox", "pdlp", "hipdlp", "simplex"}
        The HiGHS algorithm (see :data:`optiq.lp.DEFAULT_SOLVER`). A first-order one that has
        not converged after :func:`~optiq.lp.solution.first_order_limit` iterations gives way
        to interior point (the solution's ``solver`` says ``ipm-nox``).
    time_limit : float, optional
        Seconds; the best point found so far is returned with status ``TIME_LIMIT``.

    Raises
    ------
    SolverError
        If the solver is unknown or HiGHS returns no usable point.
    """
    import pyomo.environ as pyo
    from pyomo.contrib.solver.common.factory import SolverFactory
    from pyomo.contrib.solver.common.results import TerminationCondition

    start = time.perf_counter()

    def run(solver: str, time_limit: float | None) -> Any:
        options = highs_options(solver, time_limit)
        if solver in FIRST_ORDER:
            options["pdlp_iteration_limit"] = first_order_limit(model.nconstraints(), model.nvariables())
        try:
            return SolverFactory("highs").solve(model, solver_options=options, load_solutions=False,
                                                raise_exception_on_nonoptimal_result=False)
        except Exception as exc:  # pyomo raises RuntimeError / NoSolutionError variants
            raise SolverError(f"HiGHS ({solver}) via Pyomo returned no solution: {exc}") from None

    res = run(solver, time_limit)
    if solver in FIRST_ORDER and res.termination_condition == TerminationCondition.iterationLimit:
        solver = "ipm-nox"  # a first-order solve that does not converge: interior point instead
        res = run(solver, None if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - start)))
    try:
        res.solution_loader.load_vars()
    except Exception as exc:
        raise SolverError(f"HiGHS ({solver}) via Pyomo returned no solution: {exc}") from None
    solve_s = time.perf_counter() - start
    status = pyomo_status(res.termination_condition)
    share = np.array([model.x[p].value or 0.0 for p in model.P], dtype=float)
    return LPSolution(share=share, time_s=float(pyo.value(model.tau)) * model.time_unit_s, status=status,
                      route="pyomo", solver=solver, build_s=build_s, solve_s=solve_s)
