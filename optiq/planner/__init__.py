"""Planning: the methods as objects carrying their parameters (:mod:`.methods`), the one
entry point :func:`make_plan`, and several methods side by side (:func:`compare_methods`).
The record of what a planner did is :class:`optiq.plan.PlanRecord`, exported here too."""

from ..plan import PlanRecord
from .compare import MethodRun, compare_methods
from .make import METHODS, make_plan, plan_memory_estimate
from .methods import (
    CANDIDATE_KINDS,
    PLANNERS,
    CandidatePlanner,
    ColumnGeneration,
    DemandAware,
    Dynamic,
    MaxLoad,
    PathLP,
    Planner,
    SystemRoutes,
    make_candidates,
    planner_named,
)

__all__ = ["make_plan", "make_candidates", "plan_memory_estimate", "METHODS", "CANDIDATE_KINDS", "PLANNERS",
           "Planner", "CandidatePlanner", "ColumnGeneration", "PathLP", "MaxLoad", "DemandAware", "Dynamic", "SystemRoutes",
           "planner_named", "PlanRecord", "compare_methods", "MethodRun"]
