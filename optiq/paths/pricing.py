"""Least-cost paths under one set of link costs, for many jobs at once (the pricing step).

Column generation asks, for every job, for the cheapest path under the LP's dual link
weights, no longer than the job's hop limit. One Dijkstra per distinct source (scipy, in
C) answers it for all jobs; a small cost per hop breaks ties towards fewer hops (and keeps
zero-cost links visible to scipy). Jobs whose answer is too long are re-solved by the
hop-limited layered Bellman-Ford of :mod:`optiq.paths.shortest`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from ..errors import PathError
from .shortest import hop_limited_shortest_paths

__all__ = ["least_cost_paths", "min_hops", "spread_paths"]


@lru_cache(maxsize=8)
def _pairs(topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Links sorted by (tail, head); the start of every distinct node pair among them."""
    order = np.lexsort((topology.link_dst, topology.link_src))
    key = topology.link_src[order] * topology.num_nodes + topology.link_dst[order]
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    return order, starts, key[starts]


def min_hops(topology, sources, targets) -> np.ndarray:
    """Hop distance of every (source, target) pair, by BFS from each distinct source.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> min_hops(torus((4, 4)), [0, 0, 5], [5, 10, 5]).tolist()
    [2, 4, 0]
    """
    sources, targets = np.asarray(sources), np.asarray(targets)
    uniq, row = np.unique(sources, return_inverse=True)
    out = np.empty(sources.size, dtype=np.int64)
    for start in range(0, uniq.size, 512):  # bounded memory: 512 x nodes distances at a time
        block = np.flatnonzero((row >= start) & (row < start + 512))
        d = topology.hop_distances(uniq[start:start + 512])
        out[block] = d[row[block] - start, targets[block]]
    return out


def least_cost_paths(topology, sources, targets, link_cost: np.ndarray, hop_limit: np.ndarray, *,
                     exact_hop_limit: bool = True) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The cheapest path of every job under ``link_cost``, at most ``hop_limit[j]`` links long.

    Parameters
    ----------
    topology : Topology
    sources, targets : array of int, shape (J,)
    link_cost : array of float, shape (num_links,)
        Non-negative cost of every link.
    hop_limit : array of int, shape (J,)
        Longest path allowed per job (at least the job's hop distance).
    exact_hop_limit : bool
        Re-solve jobs whose cheapest path is too long with the hop-limited search (slow
        when many are); if false, those jobs get an empty path instead.

    Returns
    -------
    paths : list of ndarray
        Link ids of every job's path.
    cost : ndarray
        Its cost under ``link_cost`` (no hop term).
    unlimited : ndarray
        A lower bound on the cheapest cost of any length (the hop-limited cost where the
        limit did not bind): what a Lagrangian bound over all paths needs.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> t = torus((6,))
    >>> cost = np.zeros(t.num_links); cost[t.links_between(0, 1)] = 1.0   # the short way costs
    >>> paths, c, _ = least_cost_paths(t, [0], [2], cost, np.array([4]))
    >>> t.link_dst[paths[0]].tolist(), c.tolist()                       # so go round the long way
    ([5, 4, 3, 2], [0.0])
    >>> paths, c, free = least_cost_paths(t, [0], [2], cost, np.array([2]))   # unless it is too long
    >>> t.link_dst[paths[0]].tolist(), c.tolist(), free.tolist()
    ([1, 2], [1.0], [0.0])
    """
    sources, targets = np.asarray(sources, dtype=np.int64), np.asarray(targets, dtype=np.int64)
    hop_limit = np.asarray(hop_limit, dtype=np.int64)
    cost = np.asarray(link_cost, dtype=float)
    n = topology.num_nodes
    order, starts, pair_key = _pairs(topology)
    hop_cost = 1e-9 * max(float(cost.max()), 1e-300)
    weight = cost[order] + hop_cost
    best = np.minimum.reduceat(weight, starts)                       # cheapest of parallel links
    pick = order[starts + _argmin_reduceat(weight, starts)]          # and which link that is
    graph = csr_matrix((best, (pair_key // n, pair_key % n)), shape=(n, n))
    uniq, row = np.unique(sources, return_inverse=True)
    link_of_pair = csr_matrix((pick + 1, (pair_key // n, pair_key % n)), shape=(n, n))
    paths: list[np.ndarray] = [np.empty(0, np.int64)] * sources.size
    for start in range(0, uniq.size, 256):
        block = np.flatnonzero((row >= start) & (row < start + 256))
        _, pred = dijkstra(graph, directed=True, indices=uniq[start:start + 256], return_predecessors=True)
        pred_rows = row[block] - start
        cur, src = targets[block].copy(), sources[block]
        steps = np.zeros(block.size, dtype=np.int64)
        record = np.full((block.size, 8), -1, dtype=np.int64)
        live = np.flatnonzero(cur != src)
        while live.size:
            prev = pred[pred_rows[live], cur[live]]
            if (prev < 0).any():
                j = block[live[prev < 0][0]]
                raise PathError(f"node {targets[j]} cannot be reached from node {sources[j]}")
            if steps.max() >= record.shape[1]:
                record = np.concatenate([record, np.full_like(record, -1)], axis=1)
            record[live, steps[live]] = np.asarray(link_of_pair[prev, cur[live]]).ravel() - 1
            steps[live] += 1
            cur[live] = prev
            live = live[prev != src[live]]
        for i, j in enumerate(block):
            paths[j] = record[i, :steps[i]][::-1].copy()
    # the tie-breaking hop cost can make a path look cheaper than one with more hops by at most
    # hop_cost * (nodes - 1): subtract that so the unlimited cost stays a lower bound
    path_cost = _path_costs(paths, cost)
    unlimited = np.maximum(path_cost - hop_cost * n, 0.0)
    too_long = np.flatnonzero(np.array([p.size for p in paths]) > hop_limit)
    if not exact_hop_limit:
        for j in too_long:
            paths[j] = np.empty(0, np.int64)
        too_long = too_long[:0]
    for limit in np.unique(hop_limit[too_long]):
        jobs = too_long[hop_limit[too_long] == limit]
        for start in range(0, jobs.size, 64):
            batch = jobs[start:start + 64]
            w = np.broadcast_to(cost + hop_cost, (batch.size, cost.size))
            found, _ = hop_limited_shortest_paths(topology, sources[batch], targets[batch], w, int(limit))
            for j, p in zip(batch, found):
                paths[j] = p
            path_cost[batch] = _path_costs([paths[j] for j in batch], cost)
    return paths, path_cost, unlimited


def _path_costs(paths: list[np.ndarray], cost: np.ndarray) -> np.ndarray:
    """Sum of ``cost`` over the links of every path (empty paths cost 0)."""
    hops = np.array([p.size for p in paths], dtype=np.int64)
    if not hops.sum():
        return np.zeros(len(paths))
    owner = np.repeat(np.arange(len(paths)), hops)
    return np.bincount(owner, weights=cost[np.concatenate(paths)], minlength=len(paths))


def _argmin_reduceat(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Position of the minimum within each segment ``values[starts[i]:starts[i+1]]``."""
    seg = np.repeat(np.arange(starts.size), np.diff(np.append(starts, values.size)))
    order = np.lexsort((values, seg))
    first = np.concatenate(([True], seg[order][1:] != seg[order][:-1]))
    return order[first] - starts


def spread_paths(topology, demands, k: int = 4, *, hop_slack: int = 2, penalty: float = 2.0,
                 seed: int = 0):
    """Up to ``k`` paths per job from ``k`` rounds of :func:`least_cost_paths` — fast at scale.

    Round ``r`` weighs every link ``1 + penalty * (its use by rounds 0..r-1, over the mean
    use) + jitter``, so later rounds steer all jobs away from the links earlier rounds
    loaded. Paths are at most ``hop_slack`` hops longer than the job's shortest route. One
    Dijkstra per distinct source and round: on an 8,192-node torus a round takes about a
    second, where :func:`optiq.paths.diverse_paths` (per-job weights) takes minutes.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> ps = spread_paths(torus((4, 4)), Demands([0], [10], [1]), k=3)
    >>> ps.num_paths, int(ps.hops.max())
    (3, 4)
    """
    from .pathset import PathSet

    rng = np.random.default_rng(seed)
    hop_limit = min_hops(topology, demands.src, demands.dst) + hop_slack
    uses = np.zeros(topology.num_links)
    seen: set[tuple[int, bytes]] = set()
    lists, owners = [], []
    for _ in range(k):
        mean = uses[uses > 0].mean() if (uses > 0).any() else 1.0
        weight = 1.0 + penalty * uses / mean + rng.random(topology.num_links) * 0.5 / max(hop_limit.max(), 1)
        found, _, _ = least_cost_paths(topology, demands.src, demands.dst, weight, hop_limit,
                                       exact_hop_limit=not lists)  # later rounds skip jobs whose path is too long
        for j, p in enumerate(found):
            key = (j, p.tobytes())
            if p.size and key not in seen:
                seen.add(key)
                lists.append(p)
                owners.append(j)
                uses[p] += 1
    return PathSet.from_lists(lists, owners, demands.num_jobs)
