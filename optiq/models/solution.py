"""Result types shared by the LP routes."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

__all__ = ["LPStatus", "LPSolution", "LP_SOLVERS", "DEFAULT_SOLVER", "highs_options"]

#: HiGHS LP algorithms optiq exposes: ``ipm`` is interior point followed by crossover to a
#: vertex; ``ipm-nox`` interior point without crossover; ``pdlp`` the first-order solver;
#: ``simplex`` the dual simplex.
LP_SOLVERS = ("ipm", "ipm-nox", "pdlp", "simplex")

#: Interior point with crossover. Interior point is far faster than simplex on large
#: multipath LPs, and crossover turns its interior solution (which spreads every job over
#: all of its candidates) into a vertex, where at most one path per job plus one per
#: tight link carries data: on bgq:1024 disjoint with 16 candidates, 1,029 paths instead
#: of 8,113 for the same optimum, at about twice the solve time. Fewer paths mean fewer
#: chunks to forward. ``ipm-nox`` and ``pdlp`` skip that step when only the time matters.
DEFAULT_SOLVER = "ipm"


def highs_options(solver: str, time_limit: float | None) -> dict:
    """HiGHS option values for one of :data:`LP_SOLVERS`."""
    from ..errors import SolverError

    if solver not in LP_SOLVERS:
        raise SolverError(f"unknown LP solver {solver!r}; expected one of {', '.join(LP_SOLVERS)}")
    options = {"solver": "ipm" if solver.startswith("ipm") else solver,
               "run_crossover": "off" if solver == "ipm-nox" else "on", "output_flag": False}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    return options


class LPStatus(enum.Enum):
    OPTIMAL = "optimal"
    TIME_LIMIT = "time limit"
    FAILED = "failed"


@dataclass(frozen=True)
class LPSolution:
    """The solution of a multipath throughput LP over a fixed set of candidate paths.

    Attributes
    ----------
    share : ndarray
        Fraction of its job's demand on every candidate path (sums to 1 per job, up to the
        solver's tolerance; :func:`optiq.models.round_to_bytes` makes it exact).
    time_s : float
        The LP's completion time ``t`` in seconds.
    status : LPStatus
    route : str
        ``"pyomo"`` or ``"highs"`` (direct assembly).
    solver : str
    build_s, solve_s : float
        Model construction and solver wall time.
    link_dual, job_dual : ndarray, optional
        Dual values (direct route only): ``link_dual[e] >= 0`` for every link's capacity
        row (zero for links no path uses), ``job_dual[j]`` for every job's demand row, in
        the LP's scaled units (see :func:`optiq.models.scaling.lp_coefficients`).
    time_unit_s : float
        Seconds per unit of the scaled LP (``T0``).
    """

    share: np.ndarray = field(repr=False)
    time_s: float
    status: LPStatus
    route: str
    solver: str
    build_s: float
    solve_s: float
    link_dual: np.ndarray | None = field(default=None, repr=False)
    job_dual: np.ndarray | None = field(default=None, repr=False)
    time_unit_s: float = 1.0
