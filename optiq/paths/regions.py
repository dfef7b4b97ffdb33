"""Least-cost paths on tori and meshes, searched only where a hop-limited path can go.

A path from ``s`` to ``t`` of at most ``hops(s, t) + slack`` links only visits nodes ``v``
with ``hops(s, v) + hops(v, t) <= hops(s, t) + slack``. On a torus or mesh that sum splits
by dimension: every coordinate ``x`` of dimension ``i`` has an *excess*
``d_i(s_i, x) + d_i(x, t_i) - d_i(s_i, t_i) >= 0`` (0 on a shortest arc, growing off it), and
``v`` is in the region when its excesses add up to at most ``slack``. The region of a job
is a thin shell around the box of its shortest routes: on a whole Blue Gene/Q a few
thousand of the 49,152 nodes. One Dijkstra per source over the union of its jobs' regions
then finds every cheapest hop-limited path exactly (a path found may still be longer than
the limit when the cheapest one wanders inside the region; the caller handles those, as for
a search over the whole graph). The costs it finds are not lower bounds over paths of any
length, so they prove nothing on their own.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from .treewalk import walk_back

if TYPE_CHECKING:
    from ..topology import Topology
    from ..utils.progress import Ticker

__all__ = ["region_tree_paths", "region_nodes", "clear_region_cache"]


def _excess_tables(topology: Topology) -> list[np.ndarray]:
    """Per dimension, ``table[s, t, x]``: the excess of coordinate ``x`` on the way from ``s`` to ``t``."""
    tables = []
    for length, wrap in zip(topology.dims or (), topology.wrap or ()):
        x = np.arange(length)
        d = np.abs(x[:, None] - x[None, :])
        if wrap:
            d = np.minimum(d, length - d)
        tables.append(d[:, None, :] + d.T[None, :, :] - d[:, :, None])
    return tables


def region_nodes(topology: Topology, source: int, targets: np.ndarray, slack: np.ndarray,
                 tables: list[np.ndarray] | None = None, mask: np.ndarray | None = None) -> np.ndarray:
    """The nodes a path from ``source`` to any of ``targets`` within its ``slack`` may visit, sorted.

    ``mask`` (all false, one entry per node) is scratch memory, left all false again.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> t = torus((4, 4))
    >>> region_nodes(t, 0, np.array([5]), np.array([0])).tolist()     # the 2 x 2 box of shortest routes
    [0, 1, 4, 5]
    >>> region_nodes(t, 0, np.array([5]), np.array([2])).size          # one detour allowed: 4 + 8 nodes
    12
    """
    tables = tables if tables is not None else _excess_tables(topology)
    mask = np.zeros(topology.num_nodes, dtype=bool) if mask is None else mask
    dims = topology.dims or ()
    s = np.unravel_index(int(source), dims)
    for t_node, allowed in zip(np.asarray(targets).tolist(), np.asarray(slack).tolist()):
        t = np.unravel_index(int(t_node), dims)
        excess = [table[s[i], t[i]] for i, table in enumerate(tables)]
        keep = [np.flatnonzero(e <= allowed) for e in excess]
        total = np.zeros([k.size for k in keep], dtype=np.int64)
        for i, k in enumerate(keep):
            shape = [1] * len(keep)
            shape[i] = k.size
            total = total + excess[i][k].reshape(shape)
        inside = np.nonzero(total <= allowed)
        mask[np.ravel_multi_index(tuple(k[c] for k, c in zip(keep, inside)), dims)] = True
    nodes = np.flatnonzero(mask)
    mask[nodes] = False
    return nodes


#: Sources searched together: their predecessor tables are walked back at once.
BLOCK = 128
#: Searches whose regions are kept: column generation prices the same jobs at every step,
#: and their regions (which depend only on the geometry and the jobs) cost as much to find
#: as the search itself. One entry of a whole Blue Gene/Q holds about 50 MB.
REGION_CACHE_SIZE = 2
_REGIONS: OrderedDict[bytes, list[np.ndarray]] = OrderedDict()


def clear_region_cache() -> None:
    """Forget the regions kept for later searches (memory, or timing a search from scratch)."""
    _REGIONS.clear()


def _regions_of(topology: Topology, uniq: np.ndarray, targets: np.ndarray, slack: np.ndarray, order: np.ndarray,
                bounds: np.ndarray) -> list[np.ndarray]:
    """The region of every distinct source (its jobs' regions together), cached."""
    h = hashlib.blake2b(repr((topology.dims, topology.wrap)).encode())
    for a in (uniq, targets[order], slack[order], bounds):
        h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
    key = h.digest()
    if key in _REGIONS:
        _REGIONS.move_to_end(key)
        return _REGIONS[key]
    tables, mask = _excess_tables(topology), np.zeros(topology.num_nodes, dtype=bool)
    index = np.int32 if topology.num_nodes < 2**31 else np.int64
    found = [region_nodes(topology, s, targets[order[bounds[i]:bounds[i + 1]]], slack[order[bounds[i]:bounds[i + 1]]],
                          tables, mask).astype(index) for i, s in enumerate(uniq.tolist())]
    _REGIONS[key] = found
    while len(_REGIONS) > REGION_CACHE_SIZE:
        _REGIONS.popitem(last=False)
    return found


def region_tree_paths(topology: Topology, sources: np.ndarray, targets: np.ndarray, slack: np.ndarray,
                      link_weight: np.ndarray, pairs: tuple[np.ndarray, np.ndarray, np.ndarray],
                      tick: Ticker | None = None) -> list[np.ndarray]:
    """Every job's least-weight path within its region (module docstring).

    ``pairs`` are the topology's links sorted by (tail, head), the start of every node
    pair among them and the pairs' keys ``tail * nodes + head``; of parallel links the
    cheapest carries the path.
    """
    n = topology.num_nodes
    order_links, starts, pair_key = pairs
    weight = link_weight[order_links]
    best = np.minimum.reduceat(weight, starts)
    seg = np.repeat(np.arange(starts.size), np.diff(np.append(starts, weight.size)))
    by = np.lexsort((weight, seg))
    pick = order_links[by[np.concatenate(([True], seg[by][1:] != seg[by][:-1]))]]  # the cheapest of each pair
    graph = csr_matrix((best, (pair_key // n, pair_key % n)), shape=(n, n))
    uniq, row = np.unique(sources, return_inverse=True)
    order = np.argsort(row, kind="stable")
    bounds = np.searchsorted(row[order], np.arange(uniq.size + 1))
    region_of = _regions_of(topology, uniq, targets, slack, order, bounds)
    paths: list[np.ndarray] = [np.empty(0, np.int64)] * sources.size
    for first in range(0, uniq.size, BLOCK):
        block = range(first, min(first + BLOCK, uniq.size))
        regions, preds = [], []
        for i in block:
            nodes = region_of[i]
            start = int(np.searchsorted(nodes, uniq[i]))
            _, pred = dijkstra(graph[nodes][:, nodes], directed=True, indices=start, return_predecessors=True)
            regions.append(nodes)
            preds.append(pred)
        # walk every job of the block back to its source at once, in padded local tables
        width = max(r.size for r in regions)
        node_of = np.zeros((len(regions), width), dtype=np.int64)
        pred_of = np.full((len(regions), width), -9999, dtype=np.int64)
        for k, (nodes, pred) in enumerate(zip(regions, preds)):
            node_of[k, :nodes.size], pred_of[k, :nodes.size] = nodes, pred
        jobs = order[bounds[first]:bounds[block.stop]]
        src_row = row[jobs] - first
        cur = np.array([np.searchsorted(regions[k], t) for k, t in zip(src_row.tolist(), targets[jobs].tolist())],
                       dtype=np.int64)
        home = np.array([np.searchsorted(regions[k], uniq[first + k]) for k in src_row.tolist()], dtype=np.int64)
        steps: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (jobs, tail nodes, head nodes) per step
        for live, prev, here in walk_back(pred_of, src_row, cur, home, jobs, sources, targets):
            steps.append((live, node_of[src_row[live], prev], node_of[src_row[live], here]))
        if steps:
            who = np.concatenate([s[0] for s in steps])
            key = np.concatenate([s[1] for s in steps]) * n + np.concatenate([s[2] for s in steps])
            link = pick[np.searchsorted(pair_key, key)]
            by_job = np.lexsort((-np.repeat(np.arange(len(steps)), [s[0].size for s in steps]), who))
            counts = np.bincount(who, minlength=jobs.size)
            cuts = np.cumsum(counts)[:-1]
            for j, links in zip(jobs.tolist(), np.split(link[by_job], cuts)):
                paths[j] = links
        if tick:
            tick(block.stop)
    return paths
