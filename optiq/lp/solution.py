"""Result types shared by the LP routes."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from typing import Any

__all__ = ["LPStatus", "LPSolution", "LP_SOLVERS", "FIRST_ORDER", "DEFAULT_SOLVER", "FALLBACK", "EXACT_TOLERANCE",
           "first_order_limit", "first_order_stalled", "highs_options", "highs_status", "silent_highs", "run_stands"]

#: HiGHS LP algorithms optiq exposes: ``ipm`` is interior point followed by crossover to a
#: vertex; ``ipm-nox`` interior point without crossover; ``pdlp`` and ``hipdlp`` the two
#: first-order (PDLP) solvers; ``simplex`` the dual simplex. ``hipdlp`` solves the
#: restricted LPs of column generation several times faster than interior point at scale,
#: to within its tolerance of their optimum (``benchmarks/whole_machine.py``).
LP_SOLVERS = ("ipm", "ipm-nox", "pdlp", "hipdlp", "simplex")
#: Solvers whose answer is a first-order approximation (slightly infeasible, within tolerance).
FIRST_ORDER = ("pdlp", "hipdlp")
#: PDLP iterations a first-order solve may take, at least, before interior point takes over:
#: the LP's rows and columns together where that is more. Column generation's restricted
#: LPs on whole machines take a few thousand (``benchmarks/whole_machine.py``); HiGHS's
#: ``hipdlp`` runs without end on some small degenerate ones that interior point solves at once.
FIRST_ORDER_ITERATIONS = 100_000
#: The solver that solves again, from scratch, when one returns nothing usable (a first-order
#: solve that stalls, an interior point that ends "unknown" on a badly scaled LP): every
#: step is slower and surer, and simplex ends every feasible bounded LP. A failure of the
#: last is a bug to report, never an answer for valid input.
FALLBACK = {"pdlp": "ipm-nox", "hipdlp": "ipm-nox", "ipm-nox": "ipm", "ipm": "simplex"}
#: The optimality tolerance of interior point where it takes over from a first-order solver
#: (HiGHS's own default): a first-order tolerance such as 1e-3 leaves interior point short of
#: "optimal".
EXACT_TOLERANCE = 1e-8


def first_order_limit(rows: int, columns: int) -> int:
    """The PDLP iteration limit of an LP of ``rows`` and ``columns`` (:data:`FIRST_ORDER_ITERATIONS`).

    Examples
    --------
    >>> first_order_limit(1_000, 2_000), first_order_limit(400_000, 900_000)
    (100000, 1300000)
    """
    return max(FIRST_ORDER_ITERATIONS, int(rows) + int(columns))


def first_order_stalled(solver: str, model_status: Any) -> bool:
    """Whether a solve by ``solver`` ended at :func:`first_order_limit` without converging: the
    caller then solves the LP by interior point."""
    import highspy

    return solver in FIRST_ORDER and model_status == highspy.HighsModelStatus.kIterationLimit


#: Interior point with crossover. Interior point is far faster than simplex on large
#: multipath LPs, and crossover turns its interior solution (which spreads every job over
#: all of its candidates) into a vertex, where at most one path per job plus one per
#: tight link carries data: several times fewer paths for the same optimum, at about
#: twice the solve time (``benchmarks/planner_speed.py``). Fewer paths mean fewer
#: chunks to forward. ``ipm-nox`` and ``pdlp`` skip that step when only the time matters.
DEFAULT_SOLVER = "ipm"


def silent_highs() -> Any:
    """A ``highspy.Highs`` instance that prints nothing, not even HiGHS's banner.

    From highspy 1.16 ``Highs()`` prints the banner itself (its constructor enables the
    Python callbacks, a HiGHS call), before any option can be set. So only the compiled
    class under it is initialised, and silenced at once; optiq uses no callbacks.

    Examples
    --------
    >>> silent_highs().getOptionValue("output_flag")[1]
    False
    """
    import highspy

    highs = highspy.Highs.__new__(highspy.Highs)
    super(highspy.Highs, highs).__init__()
    highs.setOptionValue("output_flag", False)
    return highs


def highs_options(solver: str, time_limit: float | None) -> dict:
    """HiGHS option values for one of :data:`LP_SOLVERS`."""
    from ..errors import SolverError

    if solver not in LP_SOLVERS:
        raise SolverError(f"unknown LP solver {solver!r}; expected one of {', '.join(LP_SOLVERS)}")
    options: dict[str, bool | str | float] = {"solver": "ipm" if solver.startswith("ipm") else solver,
               "run_crossover": "off" if solver == "ipm-nox" else "on", "output_flag": False}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    return options


def run_stands(solver: str, model_status: Any, point_ok: bool) -> bool:
    """Whether a HiGHS run's outcome stands, or the next solver of :data:`FALLBACK` must solve
    again: it stands at the time limit, and with a usable point (``point_ok``: the caller's
    checks of it) that is optimal or a first-order point within its tolerance (which HiGHS may
    call "unknown"); a first-order solve that stalled never stands."""
    import highspy

    if first_order_stalled(solver, model_status):
        return False
    if highs_status(model_status) == LPStatus.TIME_LIMIT:
        return True
    return bool(point_ok) and (model_status == highspy.HighsModelStatus.kOptimal or solver in FIRST_ORDER)


class LPStatus(enum.Enum):
    OPTIMAL = "optimal"
    TIME_LIMIT = "time limit"
    FAILED = "failed"


def highs_status(model_status: Any) -> LPStatus:
    """The :class:`LPStatus` of a HiGHS model status (with :func:`pyomo_status`, the one place
    that maps a solver's status codes)."""
    import highspy

    if model_status == highspy.HighsModelStatus.kOptimal:
        return LPStatus.OPTIMAL
    if model_status in (highspy.HighsModelStatus.kTimeLimit, highspy.HighsModelStatus.kIterationLimit,
                        highspy.HighsModelStatus.kInterrupt):
        return LPStatus.TIME_LIMIT
    return LPStatus.FAILED


def pyomo_status(termination_condition: Any) -> LPStatus:
    """The :class:`LPStatus` of a Pyomo solver interface's termination condition."""
    from pyomo.contrib.solver.common.results import TerminationCondition

    if termination_condition == TerminationCondition.convergenceCriteriaSatisfied:
        return LPStatus.OPTIMAL
    if termination_condition in (TerminationCondition.maxTimeLimit, TerminationCondition.iterationLimit):
        return LPStatus.TIME_LIMIT
    return LPStatus.FAILED


@dataclass(frozen=True)
class LPSolution:
    """The solution of a multipath throughput LP over a fixed set of candidate paths.

    Attributes
    ----------
    share : ndarray
        Fraction of its job's demand on every candidate path (sums to 1 per job, up to the
        solver's tolerance; :func:`optiq.lp.round_to_bytes` makes it exact).
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
        the LP's scaled units (see :func:`optiq.lp.scaling.lp_coefficients`).
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
