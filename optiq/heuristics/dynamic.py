"""Dynamic routing (fat-tree study): heaviest pair first, each on its least-loaded shortest path."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..utils.progress import Progress, Ticker
from .common import job_candidates

if TYPE_CHECKING:
    from ..paths import PathSet
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["dynamic_routing"]


def dynamic_routing(topology: Topology, demands: Demands, candidates: PathSet, *, progress: Progress | None = None) -> np.ndarray:
    """Bytes per candidate path chosen by dynamic routing, as the fat-tree study defines it.

    Jobs are routed in order of decreasing bytes (ties: lower job id first). Each sends all
    its bytes on one of its candidates with the fewest hops. The cost of a candidate is its
    busiest link (bytes over capacity, counting the job's own bytes) among the links that
    not every such candidate of the job crosses: the links they all share (the pair's own
    host links) load every choice alike and would hide the differences between the others.
    Ties go to the first candidate in the order of their node sequences (on a fat-tree:
    the lower core first).

    Examples
    --------
    >>> from optiq.topology import cluster
    >>> from optiq.workloads import Demands
    >>> from optiq.paths import diverse_paths
    >>> t = cluster()
    >>> d = Demands([0, 1], [5, 6], [100, 50])      # both cross from edge 20 to edge 21
    >>> ps = diverse_paths(t, d, k=4)
    >>> b = dynamic_routing(t, d, ps)
    >>> [ps.nodes(p, t)[2] for p in range(ps.num_paths) if b[p] > 0]   # one core each
    [24, 25]
    """
    load = np.zeros(topology.num_links)
    cap = topology.capacity
    out = np.zeros(candidates.num_paths, dtype=np.int64)
    order = np.lexsort((np.arange(demands.num_jobs), -demands.nbytes))
    tick = Ticker(progress, "dynamic routing: jobs routed", demands.num_jobs)
    for done, j in enumerate(order):
        if done % 1024 == 0:
            tick(done)
        ids, links, offs, hops = job_candidates(candidates, j)
        shortest = np.flatnonzero(hops == hops.min())
        paths = [links[offs[p]:offs[p] + hops[p]] for p in shortest]
        nodes = [tuple(topology.link_dst[path].tolist()) for path in paths]
        ranked = sorted(range(shortest.size), key=lambda i: nodes[i])  # the fixed order of ties
        shared = set(paths[0].tolist()).intersection(*(path.tolist() for path in paths[1:]))
        size = float(demands.nbytes[j])
        best, best_cost = ranked[0], np.inf
        for i in ranked:
            own = np.array([e for e in paths[i].tolist() if e not in shared], dtype=np.int64)
            cost = float(((load[own] + size) / cap[own]).max()) if own.size else 0.0
            if cost < best_cost:
                best, best_cost = i, cost
        load[paths[best]] += size
        out[ids[shortest[best]]] = demands.nbytes[j]
    return out
