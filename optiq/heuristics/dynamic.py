"""Dynamic routing (fat-tree study): heaviest pair first, each on its least-loaded shortest path."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..progress import Progress, Ticker
from .common import job_candidates

if TYPE_CHECKING:
    from ..workloads import Demands
    from ..paths import PathSet
    from ..topology import Topology

__all__ = ["dynamic_routing"]


def dynamic_routing(topology: Topology, demands: Demands, candidates: PathSet, *, progress: Progress | None = None) -> np.ndarray:
    """Bytes per candidate path chosen by dynamic routing.

    Jobs are routed in order of decreasing bytes (ties: lower job id first). Each takes,
    among its candidates with the fewest hops, the one whose busiest link (in bytes over
    capacity, counting the job's own bytes) is least loaded, and sends all its bytes there.

    Examples
    --------
    >>> from optiq.topology import cluster
    >>> from optiq.workloads import Demands
    >>> from optiq.paths import diverse_paths
    >>> t = cluster()
    >>> d = Demands([0, 1], [5, 6], [100, 50])      # both cross from edge 20 to edge 21
    >>> ps = diverse_paths(t, d, k=4)
    >>> b = dynamic_routing(t, d, ps)
    >>> cores = [ps.nodes(p, t)[2] for p in range(ps.num_paths) if b[p] > 0]
    >>> sorted(cores)                                # one core each
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
        size = float(demands.nbytes[j])
        worst = np.maximum.reduceat((load[links] + size) / cap[links], offs)
        worst = np.where(hops == hops.min(), worst, np.inf)
        best = int(np.argmin(worst))
        load[links[offs[best]:offs[best] + hops[best]]] += size
        out[ids[best]] = demands.nbytes[j]
    return out
