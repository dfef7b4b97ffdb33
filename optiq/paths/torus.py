"""Candidate paths on tori and meshes built from coordinates, for every job at once.

A dimension-ordered route moves along one dimension at a time. Varying the order and the
direction taken when a coordinate is exactly half a ring away gives a job several
shortest routes that leave its source and enter its destination by different links; a
one-hop detour (a first step along a dimension the route does not need, or in the wrong
direction, and the matching step back at the end of the route, or the same at the
destination's side) reaches the links a shortest route never uses, for two extra hops.
Every recipe is a few numpy operations over all jobs, so a whole Blue Gene/Q
(49,152 nodes, 24,576 jobs) gets 8 candidates per job in seconds, where one Dijkstra
per source takes a minute per round.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import PathError
from .pathset import PathSet

__all__ = ["bgq_dimension_order", "dimension_order_walk", "torus_paths"]


def bgq_dimension_order(dims) -> list[int]:
    """The order in which Blue Gene/Q routes the dimensions of a torus of shape ``dims``.

    A selection sort on length, descending, starting from A, B, C, D, E and swapping the
    first longest remaining dimension into place.

    Examples
    --------
    >>> bgq_dimension_order((4, 4, 4, 8, 2))   # D, B, C, A, E
    [3, 1, 2, 0, 4]
    >>> bgq_dimension_order((8, 12, 16, 16, 2))   # C, D, B, A, E
    [2, 3, 1, 0, 4]
    """
    order = list(range(len(dims)))
    for i in range(len(order)):
        best = i
        for j in range(i + 1, len(order)):
            if dims[order[j]] > dims[order[best]]:
                best = j
        order[i], order[best] = order[best], order[i]
    return order


def _link_table(topology) -> np.ndarray:
    """``table[node, dim, 0 or 1]`` = id of the ``+`` or ``-`` link of ``node`` in ``dim`` (-1 if none)."""
    table = np.full((topology.num_nodes, len(topology.dims), 2), -1, dtype=np.int64)
    table[topology.link_src, topology.link_dim, (topology.link_sign < 0).astype(int)] = np.arange(topology.num_links)
    return table


def dimension_order_walk(topology, start: np.ndarray, target: np.ndarray, order, *, flip_ties: bool = False,
                         table: np.ndarray | None = None) -> np.ndarray:
    """Links of the dimension-ordered route of every ``start[i] -> target[i]``, one row each.

    Dimensions are routed in ``order``; along each the route goes the shorter way round.
    When the distance is exactly half the ring, a current coordinate that is even goes the
    way that does not wrap and an odd one wraps (the Blue Gene/Q rule); ``flip_ties``
    takes the other way. Rows are padded with ``-1``.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> t = torus((4, 2))
    >>> rows = dimension_order_walk(t, np.array([0, 2]), np.array([4, 6]), [0, 1])
    >>> [t.link_dst[r[r >= 0]].tolist() for r in rows]     # even coordinate 0 -> 1 -> 2; odd 1 wraps
    [[2, 4], [0, 6]]
    """
    table = _link_table(topology) if table is None else table
    dims, wrap = topology.dims, topology.wrap
    strides = [int(np.prod(dims[d + 1:], dtype=np.int64)) for d in range(len(dims))]
    cur = np.asarray(start, dtype=np.int64).copy()
    target = np.asarray(target, dtype=np.int64)
    steps: list[np.ndarray] = []
    for dim in order:
        length = int(dims[dim])
        s, t = cur // strides[dim] % length, target // strides[dim] % length
        if wrap[dim]:
            fwd, back = (t - s) % length, (s - t) % length
            tie = (fwd == back) & (fwd > 0)
            no_wrap_plus = s < t
            tie_plus = np.where(s % 2 == 0, no_wrap_plus, ~no_wrap_plus) ^ flip_ties
            plus = np.where(tie, tie_plus, fwd < back)
            count = np.minimum(fwd, back)
        else:
            plus, count = t > s, np.abs(t - s)
        side = np.where(plus, 0, 1)
        for step in range(int(count.max(initial=0))):
            moving = count > step
            link = np.where(moving, table[cur, dim, side], -1)
            cur = np.where(moving, topology.link_dst[np.maximum(link, 0)], cur)
            steps.append(link)
    if not np.array_equal(cur, target):  # cannot happen on a valid torus; guards the rule
        raise PathError("dimension-order routing did not reach every destination")
    return np.stack(steps, axis=1) if steps else np.zeros((cur.size, 0), np.int64)


@dataclass(frozen=True)
class _Recipe:
    rotation: int = 0
    flip_ties: bool = False
    detour_dim: int = -1          # -1: no detour
    detour_sign: int = 0
    at_start: bool = True
    via: int = -1                 # >= 0: through a random point of the shortest-route box (seed offset)


def _recipes(order: list[int], hop_slack: int, vias: int) -> list[_Recipe]:
    """Shortest routes first (every rotation of the order, ties both ways), then the detours."""
    n = len(order)
    recipes = [_Recipe(r, flip) for flip in (False, True) for r in range(n)]
    recipes += [_Recipe(v % n, bool(v // n % 2), via=v) for v in range(vias)]
    if hop_slack >= 2:
        for i in range(n):
            for sign in (+1, -1):
                for at_start in (True, False):
                    recipes.append(_Recipe(i, False, order[i], sign, at_start))
    return recipes


def _rotated(order: list[int], r: int) -> list[int]:
    return order[r:] + order[:r]


def _build(topology, table, src, dst, order, recipe: _Recipe) -> tuple[np.ndarray, np.ndarray]:
    """Rows of link ids (``-1`` padded) for every job, and which rows are valid simple paths."""
    rotated = _rotated(order, recipe.rotation)
    if recipe.via >= 0:
        mid = _box_point(topology, src, dst, recipe.flip_ties, np.random.default_rng(recipe.via))
        rows = np.concatenate([dimension_order_walk(topology, src, mid, rotated, flip_ties=recipe.flip_ties, table=table),
                               dimension_order_walk(topology, mid, dst, _rotated(order, recipe.rotation + 1),
                                                    flip_ties=recipe.flip_ties, table=table)], axis=1)
        return rows, np.ones(src.size, bool)
    if recipe.detour_dim < 0:
        rows = dimension_order_walk(topology, src, dst, rotated, flip_ties=recipe.flip_ties, table=table)
        return rows, np.ones(src.size, bool)
    d, side = recipe.detour_dim, 0 if recipe.detour_sign > 0 else 1
    rest = [x for x in rotated if x != d]
    if recipe.at_start:  # step along d first, route the other dimensions, then d back last
        first = table[src, d, side]
        via = topology.link_dst[np.maximum(first, 0)]
        rows = np.concatenate([first[:, None], dimension_order_walk(topology, via, dst, rest + [d], table=table)],
                              axis=1)
        ok = first >= 0
    else:  # route d first to the destination's neighbour, the others, then the last step along d
        back = table[dst, d, 1 - side]
        via = topology.link_dst[np.maximum(back, 0)]
        last = table[via, d, side]
        rows = np.concatenate([dimension_order_walk(topology, src, via, [d] + rest, table=table), last[:, None]],
                              axis=1)
        ok = (back >= 0) & (last >= 0)
    return rows, ok


def _box_point(topology, src, dst, flip_ties: bool, rng) -> np.ndarray:
    """A random node on the way of every job: per dimension, part of the shorter way round."""
    mid = np.zeros(src.size, dtype=np.int64)
    for d, (length, wrap) in enumerate(zip(topology.dims, topology.wrap)):
        stride = int(np.prod(topology.dims[d + 1:], dtype=np.int64))
        s, t = src // stride % length, dst // stride % length
        if wrap:
            fwd, back = (t - s) % length, (s - t) % length
            tie = (fwd == back) & (fwd > 0)
            tie_plus = np.where(s % 2 == 0, s < t, ~(s < t)) ^ flip_ties
            plus = np.where(tie, tie_plus, fwd < back)
            count = np.minimum(fwd, back)
        else:
            plus, count = t > s, np.abs(t - s)
        moved = np.floor(rng.random(src.size) * (count + 1)).astype(np.int64)
        mid += ((s + np.where(plus, moved, -moved)) % length) * stride
    return mid


def _simple(topology, rows: np.ndarray, src: np.ndarray) -> np.ndarray:
    """Rows whose node sequence visits no node twice."""
    nodes = np.where(rows >= 0, topology.link_dst[np.maximum(rows, 0)], -1 - np.arange(rows.shape[1]))
    nodes = np.sort(np.concatenate([src[:, None], nodes], axis=1), axis=1)
    return ~(nodes[:, 1:] == nodes[:, :-1]).any(axis=1)


def torus_paths(topology, demands, k: int = 8, *, hop_slack: int = 2, vias: int = 0, seed: int = 0) -> PathSet:
    """Up to ``k`` distinct paths per job on a torus or mesh, from coordinates (module docstring).

    The first path of every job is its Blue Gene/Q default route, so a plan over these
    candidates can always do what the machine does. Then come the other shortest
    dimension-ordered routes (each rotation of the order, ties taken both ways), then
    detours of two extra hops (when ``hop_slack >= 2``) that are not shortest routes in
    disguise. Paths visit no node twice.

    Parameters
    ----------
    topology : Topology
        A torus or mesh (:func:`optiq.topology.torus`).
    demands : Demands
    k : int
        Paths per job at most.
    hop_slack : int
        Detours (two hops longer than the shortest route) only when at least 2.

    Returns
    -------
    PathSet

    Raises
    ------
    PathError
        If the topology is not a torus or mesh, or ``k < 1``.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> t = torus((4, 4))
    >>> ps = torus_paths(t, Demands([0], [5], [1]), k=6)
    >>> ps.num_paths, sorted(set(ps.hops.tolist()))
    (6, [2, 4])
    >>> len({int(ps.path(p)[0]) for p in range(ps.num_paths)})     # leaves by all four links
    4
    """
    if not topology.is_torus:
        raise PathError(f"torus_paths needs a torus or mesh, not {topology.name!r}")
    if k < 1:
        raise PathError(f"k (paths per job) must be at least 1, got {k}")
    demands.check_against(topology)
    table = _link_table(topology)
    order = [d for d in bgq_dimension_order(topology.dims) if topology.dims[d] > 1]
    src, dst = demands.src, demands.dst
    J = demands.num_jobs
    shortest = topology.pair_hops(src, dst)
    chosen: list[np.ndarray] = []          # accepted rows, one (J, width) array per recipe
    taken = np.zeros(J, dtype=np.int64)
    keys: list[tuple[np.ndarray, np.ndarray]] = []   # per recipe used: each job's row hash, accepted or not
    for recipe in _recipes(order, hop_slack, vias):
        need = taken < k
        if not need.any():
            break
        rows, ok = _build(topology, table, src, dst, order, recipe)
        hops = (rows >= 0).sum(axis=1)
        ok &= need & (hops <= shortest + hop_slack)
        if recipe.detour_dim >= 0:
            ok &= hops > shortest  # a "detour" that is a shortest route repeats the routes above
            ok &= _simple(topology, rows, src)
        key = _row_hash(rows)
        for earlier, accepted in keys:
            ok &= ~((earlier == key) & accepted)
        if not ok.any():
            continue
        chosen.append(np.where(ok[:, None], rows, -1))
        keys.append((key, ok))
        taken += ok
    return _to_pathset(chosen, J)


def _row_hash(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash of the links of every row, ignoring the ``-1`` padding (FNV-1a)."""
    h = np.full(rows.shape[0], 1469598103934665603, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for col in rows.T:
            mixed = (h ^ col.astype(np.uint64)) * np.uint64(1099511628211)
            h = np.where(col >= 0, mixed, h)
    return h


def _to_pathset(chosen: list[np.ndarray], num_jobs: int) -> PathSet:
    """Paths grouped by job, in recipe order within a job."""
    if not chosen:
        return PathSet(np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), num_jobs)
    width = max(r.shape[1] for r in chosen)
    table = np.full((num_jobs, len(chosen), width), -1, dtype=np.int64)
    for i, rows in enumerate(chosen):
        table[:, i, :rows.shape[1]] = rows
    flat = table.reshape(num_jobs * len(chosen), width)
    hops = (flat >= 0).sum(axis=1)
    keep = hops > 0
    job = np.repeat(np.arange(num_jobs), len(chosen))[keep]
    links = flat[keep][flat[keep] >= 0]  # row-major: each path's links in order
    return PathSet(job, np.concatenate(([0], np.cumsum(hops[keep]))), links, num_jobs)
