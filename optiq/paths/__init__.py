"""Candidate paths (diverse, spread, torus, Valiant, Yen), least-cost paths for pricing and the
system's default routes (dimension order, D-mod-K, a fabric's forwarding tables or OpenSM's
minhop emulated, dragonfly minimal routes), stored as CSR path sets."""

from .candidates import diverse_paths, spread_paths, yen_paths
from .dragonfly import dragonfly_routes, valiant_paths
from .fabric import forwarding_routes, minhop_tables
from .initial import initial_columns
from .pathset import PathSet
from .pricing import least_cost_paths, min_hops
from .ranks import forwarding_ranks, rank_stops
from .shortest import hop_limited_shortest_paths
from .system import dmodk_routes, system_routes, torus_routes
from .torus import bgq_dimension_order, torus_paths

__all__ = ["PathSet", "diverse_paths", "spread_paths", "torus_paths", "yen_paths", "initial_columns",
           "least_cost_paths", "min_hops", "system_routes", "torus_routes", "dmodk_routes", "bgq_dimension_order",
           "hop_limited_shortest_paths", "rank_stops", "forwarding_ranks", "dragonfly_routes", "valiant_paths",
           "forwarding_routes", "minhop_tables"]
