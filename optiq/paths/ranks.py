"""Rank-level hops: where a path's chunks are stored and copied.

A path runs over topology links, but only endpoints are MPI ranks: on a fat-tree the
switches forward in hardware, with no copy. Every chunk of a path is received and copied
once at each intermediate *rank* on it. The executor (which ranks send to which), the
chunk simulator (where the forwarding cost is paid), the chunk-model fit and the copies
metric all count hops this way, through these functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .pathset import PathSet

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["rank_stops", "forwarding_ranks"]


def rank_stops(paths: PathSet, topology: Topology) -> np.ndarray:
    """For every link entry of ``paths``: whether its head is a rank (an endpoint).

    Examples
    --------
    >>> from optiq.topology import kary_ntree
    >>> from optiq.paths import system_routes
    >>> from optiq.workloads import Demands
    >>> t = kary_ntree(2, 2)
    >>> rank_stops(system_routes(t, Demands([0], [3], [8])), t).tolist()  # host, 3 switches, host
    [False, False, False, True]
    """
    return topology.link_dst[paths.links] < topology.num_endpoints


def forwarding_ranks(paths: PathSet, topology: Topology) -> np.ndarray:
    """Intermediate ranks of every path: how many times each of its chunks is copied.

    Examples
    --------
    >>> from optiq.topology import kary_ntree, torus
    >>> from optiq.paths import system_routes
    >>> from optiq.workloads import Demands
    >>> d = Demands([0], [3], [8])
    >>> forwarding_ranks(system_routes(kary_ntree(2, 2), d), kary_ntree(2, 2)).tolist()  # switches only
    [0]
    >>> forwarding_ranks(system_routes(torus((4,)), d), torus((4,))).tolist()  # 0 -> 3 is one hop back
    [0]
    """
    stops = np.bincount(paths.path_of_link_entry, weights=rank_stops(paths, topology), minlength=paths.num_paths)
    return stops.astype(np.int64) - 1
