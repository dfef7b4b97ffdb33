"""One shortest path per pair, the next link chosen by a rule wherever several are shortest:
the walk D-mod-K (:func:`optiq.paths.dmodk_routes`) and ECMP (:mod:`optiq.paths.ecmp`) share."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PathError
from .pathset import PathSet

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["shortest_walk"]


def shortest_walk(topology: Topology, src: np.ndarray, dst: np.ndarray,
                  choose: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]) -> PathSet:
    """One shortest path (fewest links) from ``src[i]`` to ``dst[i]`` for every ``i``, as path
    ``i``, where ``choose`` picks the next link wherever several lie on a shortest path.

    All pairs walk together, one hop per step, over a padded table of every node's
    out-links sorted by (next node, link id); distances to the targets come from one
    breadth-first search per distinct target, 256 targets at a time.

    Parameters
    ----------
    topology : Topology
    src, dst : ndarray of int
        Distinct nodes, pair by pair.
    choose : callable
        ``choose(pairs, at, m)``: for the pairs (indices into ``src``) not yet arrived, at
        nodes ``at`` with ``m`` links on a shortest path there (at least 1), the index
        ``0 .. m - 1`` of the one taken, in that sorted order. It is called once per step
        with every pair of a batch still walking.

    Raises
    ------
    PathError
        If a destination cannot be reached from its source.
    """
    from scipy.sparse.csgraph import shortest_path

    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    heads = topology.link_dst
    order = np.lexsort((np.arange(topology.num_links), heads, topology.link_src))
    degree = np.bincount(topology.link_src, minlength=topology.num_nodes)
    out = np.full((topology.num_nodes, max(int(degree.max()), 1)), -1, dtype=np.int64)
    first = np.concatenate(([0], np.cumsum(degree)[:-1]))
    out[topology.link_src[order], np.arange(order.size) - first[topology.link_src[order]]] = order
    reverse = topology.adjacency().T.tocsr()
    targets, inverse = np.unique(dst, return_inverse=True)
    parts: list[tuple[np.ndarray, np.ndarray]] = []  # (pairs, their walked rows, -1 padded)
    for start in range(0, targets.size, 256):
        jobs = np.flatnonzero((inverse >= start) & (inverse < start + 256))
        dist = np.atleast_2d(shortest_path(reverse, unweighted=True, indices=targets[start:start + 256]))
        row = inverse[jobs] - start
        v, t = src[jobs].copy(), dst[jobs]
        unreachable = np.flatnonzero(~np.isfinite(dist[row, v]))
        if unreachable.size:
            j = jobs[unreachable[0]]
            raise PathError(f"job {j}: destination {dst[j]} is unreachable from {src[j]}")
        steps = []
        while True:
            live = np.flatnonzero(v != t)
            if not live.size:
                break
            cand = out[v[live]]
            on_shortest = (cand >= 0) & (dist[row[live, None], heads[np.maximum(cand, 0)]]
                                         == dist[row[live], v[live]][:, None] - 1)
            m = np.maximum(on_shortest.sum(axis=1), 1)
            pick = choose(jobs[live], v[live], m)
            rank = np.cumsum(on_shortest, axis=1) - 1
            link = np.full(jobs.size, -1, dtype=np.int64)
            link[live] = cand[np.arange(live.size), np.argmax(on_shortest & (rank == pick[:, None]), axis=1)]
            steps.append(link)
            v[live] = heads[link[live]]
        parts.append((jobs, np.stack(steps, axis=1) if steps else np.zeros((jobs.size, 0), np.int64)))
    jobs = np.concatenate([j for j, _ in parts])
    hops = np.concatenate([(w >= 0).sum(axis=1) for _, w in parts])
    links = np.concatenate([w[w >= 0] for _, w in parts])  # row by row: each pair's links in order
    paths, _ = PathSet.from_csr(links, np.concatenate(([0], np.cumsum(hops))), jobs, src.size)
    return paths
