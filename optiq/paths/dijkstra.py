"""Least-weight paths from many sources, one compiled Dijkstra per source (the pricing step's kernel).

Column generation prices every job at every iteration: on a whole Blue Gene/Q that is
thousands of searches per step. scipy's Dijkstra settles every node of the graph (or of
a region's subgraph, which must first be cut out of the matrix) for each source; this
kernel (numba) stops as soon as the source's own targets are settled, and on tori and
meshes tests whether a node lies in a job's region (:mod:`optiq.paths.regions`) from its
coordinates as the search reaches it, so nothing is cut out or cached. The answer is the
same cheapest path, up to the choice among equally cheap ones.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PathError
from ..utils.compiled import compiled, interrupts_held

if TYPE_CHECKING:
    from ..topology import Topology
    from ..utils.progress import Ticker

__all__ = ["source_paths"]

#: Sources per compiled call: the progress ticks between calls.
BLOCK = 256


@lru_cache(maxsize=8)
def _graph(topology: Topology) -> tuple[np.ndarray, ...]:
    """The node-pair graph as CSR (every pair of linked nodes once, its tail beside it), with every pair's links
    sorted so that the first is the lowest id; ``pair_first[k]:pair_first[k + 1]`` are pair
    ``k``'s links in ``pair_links``."""
    n = topology.num_nodes
    order = np.lexsort((np.arange(topology.num_links), topology.link_dst, topology.link_src))
    tail, head = topology.link_src[order], topology.link_dst[order]
    new = np.concatenate(([True], (tail[1:] != tail[:-1]) | (head[1:] != head[:-1])))
    first = np.flatnonzero(new)
    indptr = np.searchsorted(tail[first], np.arange(n + 1)).astype(np.int64)
    return indptr, tail[first].astype(np.int64), head[first].astype(np.int64), \
        np.append(first, order.size).astype(np.int64), order.astype(np.int64)


@lru_cache(maxsize=8)
def _geometry(topology: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Every node's coordinates and, per dimension, the hop distance between coordinates
    (padded to the longest dimension); empty where the topology is not a torus or mesh."""
    if not topology.is_torus:
        return np.zeros((0, 0), np.int64), np.zeros((0, 0, 0), np.int64)
    dims, wraps = topology.dims or (), topology.wrap or ()
    width = max(dims)
    table = np.zeros((len(dims), width, width), np.int64)
    for i, (length, wrap) in enumerate(zip(dims, wraps)):
        x = np.arange(length)
        d = np.abs(x[:, None] - x[None, :])
        table[i, :length, :length] = np.minimum(d, length - d) if wrap else d
    return np.ascontiguousarray(topology.coords.astype(np.int64)), table


def source_paths(topology: Topology, sources: np.ndarray, targets: np.ndarray, link_weight: np.ndarray,
                 link_cost: np.ndarray, hop_limit: np.ndarray, slack: np.ndarray | None = None,
                 tick: Ticker | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every job's least-``link_weight`` path (CSR), its cost under ``link_cost`` and its hop count.

    Of parallel links the cheapest carries the path (the lowest id among equals). A path
    longer than its job's ``hop_limit`` is returned empty, with its true cost and hop count,
    so the caller can tell it is too long. With ``slack`` (tori and meshes), job ``j``'s
    search may only visit the nodes of its region: those whose per-dimension detours from
    the shortest routes add up to at most ``slack[j]``.

    Returns
    -------
    links, offsets : ndarray
        Job ``j``'s path is ``links[offsets[j]:offsets[j + 1]]``.
    cost : ndarray
        Its cost (of the path found, also when it was too long to return).
    hops : ndarray
        Its length (likewise).

    Raises
    ------
    PathError
        If a target cannot be reached from its source (within its region).

    Examples
    --------
    >>> from optiq.topology import torus
    >>> t = torus((6,))
    >>> w = np.ones(t.num_links); w[t.links_between(0, 1)] = 10.0          # the short way is dear
    >>> links, offsets, cost, hops = source_paths(t, np.array([0]), np.array([2]), w, w, np.array([4]))
    >>> t.link_dst[links].tolist(), cost.tolist(), hops.tolist()
    ([5, 4, 3, 2], [4.0], [4])
    >>> links, _, cost, _ = source_paths(t, np.array([0]), np.array([2]), w, w, np.array([4]), slack=np.array([0]))
    >>> t.link_dst[links].tolist(), cost.tolist()                         # no detour allowed
    ([1, 2], [11.0])
    """
    sources, targets = np.asarray(sources, np.int64), np.asarray(targets, np.int64)
    hop_limit, link_cost = np.asarray(hop_limit, np.int64), np.asarray(link_cost, dtype=float)
    indptr, tails, heads, pair_first, pair_links = _graph(topology)
    weight = np.asarray(link_weight, dtype=float)[pair_links]
    pair_weight = np.minimum.reduceat(weight, pair_first[:-1]) if weight.size else weight
    # the first link of each pair at its pair's least weight
    pair_of = np.repeat(np.arange(pair_first.size - 1), np.diff(pair_first))
    cheapest = weight <= pair_weight[pair_of]
    pick_at = np.full(pair_first.size - 1, weight.size, np.int64)
    np.minimum.at(pick_at, pair_of[cheapest], np.flatnonzero(cheapest))
    pair_link = pair_links[pick_at] if weight.size else pair_first[:-1]
    region = slack is not None
    coords, table = _geometry(topology) if region else (np.zeros((0, 0), np.int64), np.zeros((0, 0, 0), np.int64))
    job_slack = np.asarray(slack, np.int64) if region else np.zeros(sources.size, np.int64)
    uniq, row = np.unique(sources, return_inverse=True)
    order = np.argsort(row, kind="stable")
    bounds = np.searchsorted(row[order], np.arange(uniq.size + 1))
    width = max(min(int(hop_limit.max(initial=0)), topology.num_nodes - 1), 1)  # a Dijkstra path is simple
    rows = np.full((sources.size, width), -1, np.int64)
    cost, hops = np.zeros(sources.size), np.zeros(sources.size, np.int64)
    work = _Work(topology.num_nodes, heads.size)
    for first in range(0, uniq.size, BLOCK):
        stop = min(first + BLOCK, uniq.size)
        with interrupts_held():
            _search(indptr, tails, heads, pair_weight, pair_link, link_cost, uniq[first:stop],
                    bounds[first:stop + 1], order, targets, hop_limit, job_slack, region, coords, table,
                    work.dist, work.pred, work.state, work.touched, work.heap_d, work.heap_n, rows, cost, hops)
        if tick:
            tick(stop)
    if (hops < 0).any():
        j = int(np.flatnonzero(hops < 0)[0])
        raise PathError(f"node {targets[j]} cannot be reached from node {sources[j]}")
    kept = np.where(hops <= hop_limit, hops, 0)
    offsets = np.concatenate(([0], np.cumsum(kept)))
    return rows[np.arange(width) < kept[:, None]], offsets, cost, hops


class _Work:
    """Scratch arrays of one search, reset by the kernel after every source."""

    def __init__(self, nodes: int, pairs: int) -> None:
        self.dist = np.full(nodes, np.inf)
        self.pred = np.full(nodes, -1, np.int64)   # the pair entry (CSR position) the node was reached by
        self.state = np.zeros(nodes, np.int8)      # 0 unseen, 1 in the region, 2 outside, 3 settled
        self.touched = np.zeros(nodes, np.int64)
        self.heap_d = np.zeros(pairs + 1)
        self.heap_n = np.zeros(pairs + 1, np.int64)


@compiled
def _excess(src, jobs, targets, coords, table, excess):  # pragma: no cover - compiled
    """``excess[k, d, x]``: how far coordinate ``x`` of dimension ``d`` takes job ``jobs[k]`` off its shortest routes."""
    for k in range(jobs.size):
        t = targets[jobs[k]]
        for d in range(coords.shape[1]):
            s_d, t_d = coords[src, d], coords[t, d]
            for x in range(table.shape[1]):
                excess[k, d, x] = table[d, s_d, x] + table[d, x, t_d] - table[d, s_d, t_d]


@compiled
def _inside(v, jobs, job_slack, coords, excess):  # pragma: no cover - compiled
    """Whether node ``v`` lies in the region of any of ``jobs`` (their excess tables from :func:`_excess`)."""
    for k in range(jobs.size):
        allowed, total = job_slack[jobs[k]], 0
        for d in range(coords.shape[1]):
            total += excess[k, d, coords[v, d]]
            if total > allowed:
                break
        if total <= allowed:
            return True
    return False


@compiled
def _search(indptr, tails, heads, pair_weight, pair_link, link_cost, sources, bounds, order, targets, hop_limit,
            job_slack, region, coords, table, dist, pred, state, touched, heap_d, heap_n,
            out_links, out_cost, out_hops):  # pragma: no cover - compiled
    """For each source: Dijkstra (binary heap, lazy deletion) until all its jobs' targets are
    settled, then every job's path walked back from its target."""
    excess = np.empty((0, table.shape[0], table.shape[1]), np.int64)
    for i in range(sources.size):
        src = sources[i]
        jobs = order[bounds[i]:bounds[i + 1]]
        if region:
            if jobs.size > excess.shape[0]:
                excess = np.empty((jobs.size, table.shape[0], table.shape[1]), np.int64)
            _excess(src, jobs, targets, coords, table, excess)
        remaining = jobs.size
        n_touched, size = 0, 0
        dist[src] = 0.0
        state[src] = 1
        touched[n_touched] = src
        n_touched += 1
        heap_d[0], heap_n[0], size = 0.0, src, 1
        while size > 0 and remaining > 0:
            d_u, u = heap_d[0], heap_n[0]
            size -= 1
            if size > 0:  # sift the last entry down from the root
                d_x, x_n = heap_d[size], heap_n[size]
                k = 0
                while True:
                    c = 2 * k + 1
                    if c >= size:
                        break
                    if c + 1 < size and heap_d[c + 1] < heap_d[c]:
                        c += 1
                    if heap_d[c] >= d_x:
                        break
                    heap_d[k], heap_n[k] = heap_d[c], heap_n[c]
                    k = c
                heap_d[k], heap_n[k] = d_x, x_n
            if state[u] == 3 or d_u > dist[u]:
                continue
            state[u] = 3
            for j in jobs:
                if targets[j] == u:
                    remaining -= 1
            for e in range(indptr[u], indptr[u + 1]):
                v = heads[e]
                if state[v] == 3 or state[v] == 2:
                    continue
                if state[v] == 0:
                    touched[n_touched] = v
                    n_touched += 1
                    state[v] = 1 if not region or _inside(v, jobs, job_slack, coords, excess) else 2
                    if state[v] == 2:
                        continue
                nd = d_u + pair_weight[e]
                if nd < dist[v]:
                    dist[v] = nd
                    pred[v] = e
                    k = size  # sift up
                    size += 1
                    while k > 0:
                        p = (k - 1) // 2
                        if heap_d[p] <= nd:
                            break
                        heap_d[k], heap_n[k] = heap_d[p], heap_n[p]
                        k = p
                    heap_d[k], heap_n[k] = nd, v
        for j in jobs:
            t = targets[j]
            if state[t] != 3:
                out_hops[j] = -1
                continue
            h, c, v = 0, 0.0, t
            while v != src:
                e = pred[v]
                c += link_cost[pair_link[e]]
                h += 1
                v = tails[e]
            out_cost[j], out_hops[j] = c, h
            if h <= hop_limit[j]:
                v, k = t, h
                while v != src:
                    e = pred[v]
                    k -= 1
                    out_links[j, k] = pair_link[e]
                    v = tails[e]
        for k in range(n_touched):
            v = touched[k]
            dist[v], pred[v], state[v] = np.inf, -1, 0
