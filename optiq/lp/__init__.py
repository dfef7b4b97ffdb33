"""The routing LP: the multipath max-throughput model, column generation and lower bounds."""

from .bounds import CutBound, cut_lower_bound
from .colgen import CGOptions, CGResult, CGStatus, column_generation
from .highs_lp import solve_lp
from .pyomo_lp import build_pyomo_model, solve_pyomo_model
from .rounding import round_to_bytes
from .solution import DEFAULT_SOLVER, LP_SOLVERS, LPSolution, LPStatus

__all__ = ["build_pyomo_model", "solve_pyomo_model", "solve_lp", "LPSolution", "LPStatus", "LP_SOLVERS",
           "DEFAULT_SOLVER", "round_to_bytes", "cut_lower_bound", "CutBound", "column_generation", "CGOptions",
           "CGResult", "CGStatus"]
