"""Planning: the methods as objects carrying their parameters (:mod:`.methods`), the one
entry point :func:`make_plan`, several methods side by side (:func:`compare_methods`), and a
fabric's forwarding tables written for a job (:func:`job_tables`) or for every running job
(:func:`cluster_tables`), and the exact tables of a small fabric (:func:`exact_tables`). The record of what a
planner did is :class:`optiq.plan.PlanRecord`, exported here too."""

from ..plan import PlanRecord
from .cluster_tables import ClusterTables, cluster_tables
from .compare import COMPARE_METHODS, MethodRun, compare_methods
from .exact_tables import ExactTables, exact_tables
from .make import METHODS, default_routes_optimal, make_plan, plan_memory_estimate
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
from .tables import JobTables, job_tables, single_path_bound, split_plan

__all__ = ["make_plan", "default_routes_optimal", "make_candidates", "plan_memory_estimate", "METHODS", "CANDIDATE_KINDS", "PLANNERS",
           "Planner", "CandidatePlanner", "ColumnGeneration", "PathLP", "MaxLoad", "DemandAware", "Dynamic", "SystemRoutes",
           "planner_named", "PlanRecord", "compare_methods", "MethodRun", "COMPARE_METHODS", "job_tables", "JobTables",
           "single_path_bound", "cluster_tables", "ClusterTables", "exact_tables", "ExactTables", "split_plan"]
