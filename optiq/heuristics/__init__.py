"""Fast planners: Heuristic 1 (maxload), Heuristic 2 (demand-aware), dynamic routing, and
moving a plan's paths off its busiest link (rebalance)."""

from .demand_aware import DEFAULT_UNIT, default_unit, demand_aware_heuristic
from .dynamic import dynamic_routing
from .maxload import maxload_heuristic
from .rebalance import rebalance

__all__ = ["maxload_heuristic", "demand_aware_heuristic", "dynamic_routing", "rebalance", "DEFAULT_UNIT",
           "default_unit"]
