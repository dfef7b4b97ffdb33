"""Candidate paths (diverse, Yen) and the system's default routes, stored as CSR path sets."""

from .candidates import diverse_paths, yen_paths
from .pathset import PathSet
from .shortest import hop_limited_shortest_paths
from .system import bgq_dimension_order, dmodk_routes, system_routes, torus_routes

__all__ = ["PathSet", "diverse_paths", "yen_paths", "system_routes", "torus_routes", "dmodk_routes",
           "bgq_dimension_order", "hop_limited_shortest_paths"]
