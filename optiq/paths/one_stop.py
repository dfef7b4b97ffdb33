"""Paths with one stop next to an end: the network's route to a neighbour, then on from there.

On a torus whose routes go in dimension order, a plan that sends part of a pair the other way
round a ring, or in the other dimension order, needs a stop where it leaves the route. Many
link paths carry the same loads; the one that leaves the route as few times as possible
costs the ranks the fewest copies. The cheapest such detours start at a neighbour of the
source (go one hop the other way, then take the route) or end at one of the destination (take
the route to a neighbour of it, then the last hop): every job's route to each neighbour ``v``
of its source or destination, followed by the route from ``v``, with one stop at ``v``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import PathError
from ..workloads import Demands
from .pathset import PathSet, csr_positions
from .routing import every_node_a_rank
from .system import system_routes

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..topology import Topology

__all__ = ["one_stop_paths"]


def one_stop_paths(topology: Topology, demands: Demands, jobs: ArrayLike | None = None) -> PathSet:
    """For every job ``s -> d`` and every neighbour ``v`` of ``s`` or of ``d`` (``v`` not an end),
    the route ``s -> v`` followed by the route ``v -> d``, where that visits no node twice;
    stops at ``v`` and at ``d``.

    Parameters
    ----------
    topology : Topology
        A network whose every node is a rank (a torus or mesh), so any neighbour may relay.
    demands : Demands
    jobs : array of bool, optional
        The jobs to find paths for (default every one).

    Returns
    -------
    PathSet
        Grouped by job; a job without such a path has none.

    Raises
    ------
    PathError
        If not every node of the network is a rank.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> t = torus((4,))                 # 0 -> 2: the route itself (via 1), and the other way via 3
    >>> ps = one_stop_paths(t, Demands([0], [2], [8]))
    >>> [[int(t.link_dst[e]) for e in ps.path(p)] for p in range(ps.num_paths)]
    [[1, 2], [3, 2]]
    """
    if not every_node_a_rank(topology):
        raise PathError(f"{topology.name}: one-stop paths relay at neighbours, and not every node is a rank")
    demands.check_against(topology)
    chosen = np.arange(demands.num_jobs) if jobs is None else np.flatnonzero(np.asarray(jobs, dtype=bool))
    src, dst = demands.src[chosen], demands.dst[chosen]
    out_job = np.repeat(np.arange(chosen.size), np.bincount(topology.link_src, minlength=topology.num_nodes)[src])
    by_src, by_dst = np.argsort(topology.link_src, kind="stable"), np.argsort(topology.link_dst, kind="stable")
    starts_src = np.concatenate(([0], np.cumsum(np.bincount(topology.link_src, minlength=topology.num_nodes))))
    starts_dst = np.concatenate(([0], np.cumsum(np.bincount(topology.link_dst, minlength=topology.num_nodes))))
    out_v = topology.link_dst[by_src[csr_positions(starts_src[src], starts_src[src + 1] - starts_src[src])]]
    in_count = starts_dst[dst + 1] - starts_dst[dst]
    in_job = np.repeat(np.arange(chosen.size), in_count)
    in_v = topology.link_src[by_dst[csr_positions(starts_dst[dst], in_count)]]
    job = np.concatenate([out_job, in_job])
    via = np.concatenate([out_v, in_v])
    keep = (via != src[job]) & (via != dst[job])
    pairs = np.unique(np.stack([job[keep], via[keep]], axis=1), axis=0)   # job-major: grouped by job
    job, via = pairs[:, 0], pairs[:, 1]
    legs, which = np.unique(np.stack([np.concatenate([src[job], via]), np.concatenate([via, dst[job]])], axis=1),
                            axis=0, return_inverse=True)
    routes = system_routes(topology, Demands(legs[:, 0], legs[:, 1], np.ones(len(legs), dtype=np.int64)))
    first, then = which.reshape(-1)[:job.size], which.reshape(-1)[job.size:]
    first_hops, then_hops = routes.hops[first], routes.hops[then]
    offsets = np.concatenate(([0], np.cumsum(first_hops + then_hops)))
    links = np.empty(int(offsets[-1]), dtype=np.int64)
    links[csr_positions(offsets[:-1], first_hops)] = routes.links[csr_positions(routes.offsets[first], first_hops)]
    links[csr_positions(offsets[:-1] + first_hops, then_hops)] = \
        routes.links[csr_positions(routes.offsets[then], then_hops)]
    stops = np.zeros(links.size, dtype=bool)
    stops[offsets[1:] - 1] = True
    stops[offsets[:-1] + first_hops - 1] = True
    paths = PathSet(chosen[job], offsets, links, demands.num_jobs, stops)
    return paths.select(_simple(paths, topology, demands.src))


def _simple(paths: PathSet, topology: Topology, src: np.ndarray) -> np.ndarray:
    """Which paths visit no node twice (their source included)."""
    nodes = np.concatenate([src[paths.job], topology.link_dst[paths.links]])
    owner = np.concatenate([np.arange(paths.num_paths), np.repeat(np.arange(paths.num_paths), paths.hops)])
    order = np.lexsort((nodes, owner))
    nodes, owner = nodes[order], owner[order]
    twice = (owner[1:] == owner[:-1]) & (nodes[1:] == nodes[:-1])
    simple = np.ones(paths.num_paths, dtype=bool)
    simple[owner[1:][twice]] = False
    return simple
