"""optiq: plan and replay multipath data movement on supercomputer interconnects.

The pipeline: a :class:`Topology` and :class:`Demands` go to :func:`make_plan`, which picks
candidate paths and splits every job's bytes over them (LP or heuristic); the resulting
:class:`Plan` is saved as JSON and measured with :func:`plan_metrics`. An application calls
:func:`alltoallv` in place of ``comm.Alltoallv`` (and :func:`ialltoallv`, :func:`alltoallv_init`
for ``Ialltoallv`` and ``Alltoallv_init``), and :func:`alltoallw` in place of ``comm.Alltoallw``: they
plan at run time and cache.
"""

__version__ = "0.1.0"

from .errors import (
    ArgumentError,
    OptiqError,
    OutputError,
    ParameterError,
    PathError,
    PlanError,
    SolverError,
    TopologyError,
    WorkloadError,
)
from .metrics.compute import Metrics, plan_metrics
from .plan import Plan, load_plan
from .planner import METHODS, make_plan
from .runtime import alltoallv, alltoallv_init, alltoallw, alltoallw_init, ialltoallv, ialltoallw
from .topology import Topology, from_spec
from .workloads import Demands

__all__ = ["Topology", "from_spec", "Demands", "make_plan", "METHODS", "Plan", "load_plan", "plan_metrics", "alltoallv",
           "ialltoallv", "alltoallv_init", "alltoallw", "ialltoallw", "alltoallw_init", "ArgumentError",
           "Metrics", "OptiqError", "TopologyError", "WorkloadError", "PathError", "PlanError", "ParameterError", "SolverError",
           "OutputError"]
