"""Result types shared by the LP routes."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

__all__ = ["LPStatus", "LPSolution", "LP_SOLVERS", "DEFAULT_SOLVER"]

#: HiGHS LP solvers optiq exposes. ``ipm`` is interior point without crossover, ``simplex``
#: the dual simplex, ``pdlp`` the first-order solver.
LP_SOLVERS = ("ipm", "simplex", "pdlp")

#: Interior point without crossover: on multipath LPs it is far faster than simplex (a
#: 1024-job x 32-path LP did not finish in 900 s with dual simplex), and crossover adds
#: nothing because the plan is rounded to whole bytes and its true load recomputed anyway.
DEFAULT_SOLVER = "ipm"


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
    """

    share: np.ndarray = field(repr=False)
    time_s: float
    status: LPStatus
    route: str
    solver: str
    build_s: float
    solve_s: float
