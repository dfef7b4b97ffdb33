"""Candidate paths (diverse, spread, torus, Valiant, Yen, chains through intermediate ranks),
least-cost paths for pricing, the system's default routes (dimension order, D-mod-K, a
fabric's forwarding tables or OpenSM's minhop emulated, dragonfly minimal routes), and how a
path reaches the wire (legs of the network's own routes between the ranks it stops at),
stored as CSR path sets."""

from .candidates import diverse_paths, spread_paths, yen_paths
from .dragonfly import dragonfly_routes, valiant_paths
from .fabric import forwarding_routes
from .initial import initial_columns
from .minhop import minhop_tables
from .pathset import PathSet
from .pricing import least_cost_paths, min_hops
from .routing import (
    FORWARDED,
    FREE,
    ROUTINGS,
    every_rank_stops,
    forwarded_paths,
    forwarded_stops,
    misrouted_legs,
    network_routes,
    realized_link_bytes,
    realized_time,
    route_twins,
)
from .shortest import hop_limited_shortest_paths
from .system import dmodk_routes, system_routes, torus_routes
from .torus import bgq_dimension_order, torus_paths

__all__ = ["PathSet", "diverse_paths", "spread_paths", "torus_paths", "yen_paths", "initial_columns",
           "least_cost_paths", "min_hops", "system_routes", "torus_routes", "dmodk_routes", "bgq_dimension_order",
           "hop_limited_shortest_paths", "dragonfly_routes", "valiant_paths", "forwarding_routes", "minhop_tables",
           "ROUTINGS", "FORWARDED", "FREE", "network_routes", "every_rank_stops", "route_twins", "forwarded_paths",
           "forwarded_stops", "realized_link_bytes", "realized_time", "misrouted_legs"]
