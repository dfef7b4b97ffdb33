"""The layered Bellman-Ford of :mod:`optiq.paths.shortest`, compiled (numba), one job at a time.

Layer ``h`` holds the least weight of a walk of at most ``h`` links from the job's source
to every node. Only nodes whose weight fell in layer ``h - 1`` can lower a neighbour's in
layer ``h``, so each layer relaxes the links leaving them, not every link: the same layers
as a dense pass over all links, and the same path read back from them.
"""

from __future__ import annotations

import numpy as np

from ..utils.compiled import compiled

__all__ = ["layered_records"]


@compiled
def layered_records(out_start, out_links, link_dst, in_padded, src_ext, sources, targets, weights, hop_limit,
                    record, cost):  # pragma: no cover - compiled
    """For every job ``b``: ``cost[b]``, the least weight of a walk of at most ``hop_limit``
    links from ``sources[b]`` to ``targets[b]`` under ``weights[b]`` (inf if none), and its
    links in ``record[b]`` (-1 elsewhere). Of equally cheap last links into a node, the first
    in ``in_padded``'s row is taken."""
    nodes = in_padded.shape[0]
    num_links = weights.shape[1]
    layers = np.empty((hop_limit + 1, nodes), weights.dtype)
    frontier = np.empty(nodes, np.int64)
    next_frontier = np.empty(nodes, np.int64)
    marked = np.zeros(nodes, np.bool_)
    for b in range(sources.size):
        s, t = sources[b], targets[b]
        layers[0, :] = np.inf
        layers[0, s] = 0.0
        frontier[0] = s
        size = 1
        last = 0  # the last layer computed; later ones equal it
        for h in range(1, hop_limit + 1):
            layers[h, :] = layers[h - 1, :]
            count = 0
            for i in range(size):
                u = frontier[i]
                base = layers[h - 1, u]
                for k in range(out_start[u], out_start[u + 1]):
                    e = out_links[k]
                    v = link_dst[e]
                    c = base + weights[b, e]
                    if c < layers[h, v]:
                        layers[h, v] = c
                        if not marked[v]:
                            marked[v] = True
                            next_frontier[count] = v
                            count += 1
            for i in range(count):
                marked[next_frontier[i]] = False
            last = h
            if count == 0:
                break
            frontier[:count] = next_frontier[:count]
            size = count
        for h in range(last + 1, hop_limit + 1):
            layers[h, :] = layers[last, :]
        cost[b] = layers[hop_limit, t]
        record[b, :] = -1
        if not np.isfinite(cost[b]):
            continue
        v = t
        for h in range(hop_limit, 0, -1):
            if v == s or not layers[h, v] < layers[h - 1, v]:
                continue
            best, chosen = np.inf, -1
            for j in range(in_padded.shape[1]):
                e = in_padded[v, j]
                w = weights[b, e] if e < num_links else np.inf
                c = layers[h - 1, src_ext[e]] + w
                if c < best:
                    best, chosen = c, e
            record[b, h - 1] = chosen
            v = src_ext[chosen]
