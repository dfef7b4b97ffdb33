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
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PathError
from ..utils.progress import Progress, Ticker
from .pathset import PathSet, csr_positions

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["bgq_dimension_order", "dimension_order_walk", "torus_paths", "RecipePool"]


def bgq_dimension_order(dims: Sequence[int]) -> list[int]:
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


def dimension_order_walk(topology: Topology, start: np.ndarray, target: np.ndarray, order: Sequence[int], *, flip_ties: bool = False,
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
    if dims is None or wrap is None:
        raise PathError(f"dimension-order routes need a torus or mesh, not {topology.name!r}")
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


def _build(topology, table, src, dst, order, recipe: _Recipe, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows of link ids (``-1`` padded) for every job, and which rows are valid simple paths."""
    rotated = _rotated(order, recipe.rotation)
    if recipe.via >= 0:
        mid = _box_point(topology, src, dst, recipe.flip_ties, np.random.default_rng([seed, recipe.via]))
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


class RecipePool:
    """Every job's coordinate-built paths as one ``(jobs, recipes, hops)`` array.

    The recipes: every shortest dimension-ordered route (each rotation of the Blue Gene/Q
    order, ties both ways), ``vias`` shortest routes through a random point of the job's
    shortest-route box (two dimension-ordered legs), and, when ``hop_slack >= 2``, the
    two-hop detours. A job's invalid, too long or repeated paths are masked out. The pool
    answers two questions with a gather and a sum, no graph search: which path of each job
    is cheapest under some link costs (:meth:`cheapest`, pricing), and which ``k`` spread
    the load best (:meth:`spread`, candidates). Recipe 0 is every job's default route.

    Memory: 4 bytes per (job, recipe, hop): 140 MB for the 24,576 jobs of a full Blue
    Gene/Q with 50 recipes.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> t = torus((4, 4)); pool = RecipePool(t, Demands([0], [5], [1]), vias=4)
    >>> pick, cost = pool.cheapest(np.ones(t.num_links))
    >>> cost.tolist()                                       # a shortest route: 2 hops
    [2.0]
    """

    def __init__(self, topology: Topology, demands: Demands, *, hop_slack: int = 2, vias: int = 20, seed: int = 0,
                 progress: Progress | None = None) -> None:
        if not topology.is_torus:
            raise PathError(f"coordinate-built paths need a torus or mesh, not {topology.name!r}")
        demands.check_against(topology)
        self.topology, self.demands, self.hop_slack = topology, demands, hop_slack
        self.table = _link_table(topology)
        dims = topology.dims
        assert dims is not None  # checked above: a torus or mesh
        self.order = [d for d in bgq_dimension_order(dims) if dims[d] > 1]
        self.shortest = topology.pair_hops(demands.src, demands.dst)
        self.recipes = _recipes(self.order, hop_slack, vias)
        self.seed = seed
        tick = Ticker(progress, "torus candidates: routes built", len(self.recipes))
        built = []
        for i, recipe in enumerate(self.recipes):
            built.append(self._build(recipe))
            tick(i + 1)
        width = max(rows.shape[1] for rows, _ in built)
        L = topology.num_links
        self.links = np.full((demands.num_jobs, len(built), width), L, dtype=np.int32)  # L pads: costs nothing
        self.valid = np.zeros((demands.num_jobs, len(built)), dtype=bool)
        for i, (rows, ok) in enumerate(built):
            self.links[:, i, :rows.shape[1]] = np.where(rows >= 0, rows, L)
            self.valid[:, i] = ok
        self._drop_repeats()

    def _build(self, recipe: _Recipe) -> tuple[np.ndarray, np.ndarray]:
        src, dst = self.demands.src, self.demands.dst
        rows, ok = _build(self.topology, self.table, src, dst, self.order, recipe, self.seed)
        hops = (rows >= 0).sum(axis=1)
        ok &= hops <= self.shortest + self.hop_slack
        if recipe.detour_dim >= 0:
            ok &= hops > self.shortest  # a "detour" that is a shortest route repeats the routes above
            ok &= _simple(self.topology, rows, src)
        return rows, ok

    def _drop_repeats(self) -> None:
        """Mask every path a job already has from an earlier recipe."""
        J, R, W = self.links.shape
        key = _row_hash(np.where(self.links == self.topology.num_links, -1, self.links).reshape(J * R, W))
        key = np.where(self.valid.reshape(-1), key, np.arange(J * R, dtype=np.uint64)).reshape(J, R)
        order = np.argsort(key, axis=1, kind="stable")
        ranked = np.take_along_axis(key, order, axis=1)
        repeat = np.zeros((J, R), bool)
        repeat[:, 1:] = ranked[:, 1:] == ranked[:, :-1]
        np.put_along_axis(self.valid, order, np.take_along_axis(self.valid, order, axis=1) & ~repeat, axis=1)

    def refresh(self, seed: int) -> None:
        """Draw new random points for the through-a-point recipes (new paths for pricing)."""
        self.seed = seed
        for i, recipe in enumerate(self.recipes):
            if recipe.via >= 0:
                rows, ok = self._build(recipe)
                self.links[:, i, :] = self.topology.num_links
                self.links[:, i, :rows.shape[1]] = np.where(rows >= 0, rows, self.topology.num_links)
                self.valid[:, i] = ok
        self._drop_repeats()

    def path(self, job: int, recipe: int) -> np.ndarray:
        row = self.links[job, recipe]
        return row[row < self.topology.num_links].astype(np.int64)

    def _costs(self, weight: np.ndarray, jobs: slice) -> np.ndarray:
        cost = weight[self.links[jobs]].sum(axis=2)
        return np.where(self.valid[jobs], cost, np.inf)

    def cheapest(self, link_cost: np.ndarray, *, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
        """Per job, the recipe of its cheapest valid path under ``link_cost`` and that cost."""
        weight = np.append(np.asarray(link_cost, dtype=float), 0.0)
        J = self.demands.num_jobs
        pick, cost = np.zeros(J, dtype=np.int64), np.zeros(J)
        for start in range(0, J, chunk):
            part = slice(start, min(start + chunk, J))
            costs = self._costs(weight, part)
            pick[part] = np.argmin(costs, axis=1)
            cost[part] = costs[np.arange(costs.shape[0]), pick[part]]
        return pick, cost

    def spread(self, k: int, *, penalty: float = 2.0, seed: int = 0, chunk: int = 4096,
               progress: Progress | None = None) -> PathSet:
        """``k`` rounds of load-aware choice: each round every job takes its unused path whose
        links, weighted ``1 + penalty * use / mean use + jitter``, cost least."""
        rng = np.random.default_rng(seed)
        J, R, _ = self.links.shape
        L = self.topology.num_links
        uses = np.zeros(L + 1)
        taken = np.zeros((J, R), dtype=bool)
        picks: list[np.ndarray] = []
        tick = Ticker(progress, "torus candidates: rounds", k)
        for rnd in range(k):
            tick(rnd)
            mean = uses[:L][uses[:L] > 0].mean() if (uses[:L] > 0).any() else 1.0
            weight = 1.0 + penalty * uses / mean + rng.random(L + 1) * 0.01
            weight[L] = 0.0
            pick = np.full(J, -1, dtype=np.int64)
            for start in range(0, J, chunk):
                part = slice(start, min(start + chunk, J))
                costs = np.where(taken[part], np.inf, self._costs(weight, part))
                best = np.argmin(costs, axis=1)
                fine = np.isfinite(costs[np.arange(costs.shape[0]), best])
                pick[part] = np.where(fine, best, -1)
            ok = np.flatnonzero(pick >= 0)
            taken[ok, pick[ok]] = True
            np.add.at(uses, self.links[ok, pick[ok]].ravel(), 1.0)
            picks.append(pick)
        tick(k)
        return self._pathset(np.stack(picks, axis=1))

    def first(self, k: int) -> PathSet:
        """Every job's first ``k`` valid paths in recipe order (the default route first)."""
        chosen = self.valid & (np.cumsum(self.valid, axis=1) <= k)
        order = np.argsort(~chosen, axis=1, kind="stable")[:, :k]  # the chosen recipes first, in recipe order
        return self._pathset(np.where(np.take_along_axis(chosen, order, axis=1), order, -1))

    def _pathset(self, picks: np.ndarray) -> PathSet:
        """Paths of ``picks[j, i]`` (a recipe, or ``-1`` / out of range for none), grouped by job."""
        J, R, W = self.links.shape
        jobs, slot = np.nonzero((picks >= 0) & (picks < R))
        rows = self.links[jobs, picks[jobs, slot]]
        keep = rows < self.topology.num_links
        hops = keep.sum(axis=1)
        return PathSet(jobs, np.concatenate(([0], np.cumsum(hops))), rows[keep].astype(np.int64), J)


def torus_paths(topology: Topology, demands: Demands, k: int = 8, *, hop_slack: int = 2, spread: bool = True, vias: int = 20,
                seed: int = 0, progress: Progress | None = None) -> PathSet:
    """Up to ``k`` distinct paths per job on a torus or mesh, from coordinates (module docstring).

    With ``spread`` (the default) the paths come from a :class:`RecipePool` in ``k`` rounds
    of load-aware choice, as :func:`optiq.paths.spread_paths` does with Dijkstra but with
    no graph search: at scale the LP over them is nearly as good as over spread paths and far
    better than over the first recipes, in a fraction of the time
    (``benchmarks/whole_machine.py``). Without ``spread``: every job's first ``k`` recipes, its Blue Gene/Q
    default route first, then the other shortest dimension-ordered routes, then two-hop
    detours. Paths visit no node twice.

    Parameters
    ----------
    topology : Topology
        A torus or mesh (:func:`optiq.topology.torus`).
    demands : Demands
    k : int
        Paths per job at most.
    hop_slack : int
        Detours (two hops longer than the shortest route) only when at least 2.
    spread : bool
        Choose by load (see above) rather than in recipe order.
    vias : int
        Recipes through random points of the shortest-route box (``spread`` only).
    seed : int
        Seed of the random points and of the load jitter.
    progress : callable, optional
        Receives the rounds done every couple of seconds.

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
    >>> ps = torus_paths(t, Demands([0], [5], [1]), k=6, spread=False)
    >>> ps.num_paths, sorted(set(ps.hops.tolist()))
    (6, [2, 4])
    >>> len({int(ps.path(p)[0]) for p in range(ps.num_paths)})     # leaves by all four links
    4
    """
    if k < 1:
        raise PathError(f"k (paths per job) must be at least 1, got {k}")
    if hop_slack < 2 and not spread:
        return _shortest_routes(topology, demands, k)
    if progress:
        progress(f"torus candidates: building the coordinate routes of {demands.num_jobs:,} jobs")
    pool = RecipePool(topology, demands, hop_slack=hop_slack, vias=vias if spread else 0, seed=seed,
                      progress=progress)
    return pool.spread(k, seed=seed, progress=progress) if spread else pool.first(k)


def _shortest_routes(topology: Topology, demands: Demands, k: int) -> PathSet:
    """Every job's first ``k`` distinct shortest dimension-ordered routes in recipe order (each
    rotation of the Blue Gene/Q order, then the same with ties the other way), as
    :meth:`RecipePool.first` gives them, without building the pool.

    Which recipes repeat an earlier one follows from coordinates: along a dimension the route
    moves the same way whatever was routed before, so a route is fixed by the order of the
    dimensions it moves along and, if one of them is a tie, by the tie's way. Rotation ``r``
    gives the same order as rotation ``r - 1`` unless the dimension at ``r - 1`` moves, and
    the same as rotation 0 when no dimension from ``r`` on moves; the other way round the
    ties is a new route only where a moving dimension is a tie.
    """
    if not topology.is_torus:
        raise PathError(f"coordinate-built paths need a torus or mesh, not {topology.name!r}")
    demands.check_against(topology)
    dims, wrap = topology.dims, topology.wrap
    assert dims is not None and wrap is not None  # checked above: a torus or mesh
    order = [d for d in bgq_dimension_order(dims) if dims[d] > 1]
    n, J = len(order), demands.num_jobs
    moving = np.zeros((J, max(n, 1)), dtype=bool)   # by position in the order
    hops_along = np.zeros((max(n, 1), J), dtype=np.int32)   # by position in the order, then job
    tie_along = np.zeros((max(n, 1), J), dtype=bool)
    for i, d in enumerate(order):
        stride = int(np.prod(dims[d + 1:], dtype=np.int64))
        s, t = demands.src // stride % dims[d], demands.dst // stride % dims[d]
        moving[:, i] = s != t
        ahead = (t - s) % dims[d]
        hops_along[i] = np.minimum(ahead, dims[d] - ahead) if wrap[d] else np.abs(t - s)
        if wrap[d]:
            tie_along[i] = (s != t) & (ahead == (s - t) % dims[d])
    tie = np.any(tie_along, axis=0, keepdims=True).T   # (job, 1)
    # rotation r is new where position r - 1 moves and some position from r on does (else it
    # wraps round to rotation 0's order)
    later = np.cumsum(moving[:, ::-1], axis=1)[:, ::-1] > 0
    new_order = np.zeros_like(moving)
    new_order[:, 0] = moving.any(axis=1)
    new_order[:, 1:] = moving[:, :-1] & later[:, 1:]
    valid = np.concatenate([new_order, new_order & tie], axis=1)   # (job, recipe)
    valid &= np.cumsum(valid, axis=1) <= k
    table = _link_table(topology).astype(np.int32)   # rows of int32: half the bytes to gather and mask
    # every shortest route of a job has its distance in hops: the paths' offsets follow from
    # coordinates, and each recipe's routes go straight to their places (job by job, each in
    # recipe order)
    dist = topology.pair_hops(demands.src, demands.dst)
    rank = np.cumsum(valid, axis=1) - 1                  # a valid recipe's place among its job's paths
    count = valid.sum(axis=1)
    first_link = np.concatenate(([0], np.cumsum(count * dist)))
    links = np.empty(int(first_link[-1]), dtype=np.int64)
    from .kept import FORWARDED_STOPS, derived_from

    # the network routes by dimension order (no fabric's tables), and link paths are forwarded
    # paths as they are: no two links join the same two nodes, as a wrapped ring of two's do
    forwarded = topology.fabric is None and not any(w and size == 2 for size, w in zip(dims, wrap))
    stops = np.zeros(links.size if forwarded else 0, dtype=bool)
    for r in range(valid.shape[1]):
        jobs = np.flatnonzero(valid[:, r])
        if not jobs.size:
            continue
        rows = dimension_order_walk(topology, demands.src[jobs], demands.dst[jobs], _rotated(order, r % n),
                                    flip_ties=r >= n, table=table)
        start = first_link[jobs] + rank[jobs, r] * dist[jobs]
        links[csr_positions(start, dist[jobs])] = rows[rows >= 0]
        if forwarded:
            row, hop = _forwarded_leg_ends(hops_along[:, jobs], tie_along[:, jobs] if r >= n else None, r % n)
            stops[start[row] + hop] = True
    offsets = np.concatenate(([0], np.cumsum(np.repeat(dist, count))))
    paths = PathSet(np.repeat(np.arange(J), count), offsets, links, J)
    if forwarded:   # kept with the set: its plans' stops need no search (PathSpace.finish_used)
        stops[offsets[1:] - 1] = True
        derived_from(paths, topology)[FORWARDED_STOPS] = stops
    return paths


def _forwarded_leg_ends(hops: np.ndarray, flipped_ties: np.ndarray | None,
                        rotation: int) -> tuple[np.ndarray, np.ndarray]:
    """Where the forwarded legs of one recipe's routes end before the last hop, as
    :func:`~optiq.paths.routing.forwarded_stops` finds them: (column, hop within its path)
    pairs of ``hops`` (by position in the order, then route) and ``flipped_ties`` (where a tie
    is crossed the other way, None where none is). The network routes by the order at rotation
    0, ties one way, and every part of such a route is a route. So a leg runs on until the path
    turns back to a dimension earlier in the order (once, where the rotation wraps), and ends
    one hop before a tie crossed the other way reaches half its ring (the route to there goes
    round the other way)."""
    first = hops[rotation:].sum(axis=0, dtype=np.int64)   # the hops before the rotation wraps
    wraps = np.flatnonzero((first > 0) & hops[:rotation].any(axis=0)) if rotation else np.zeros(0, dtype=np.int64)
    if flipped_ties is None:
        return wraps, first[wraps] - 1
    rotated = np.concatenate([hops[rotation:], hops[:rotation]])
    ties = np.concatenate([flipped_ties[rotation:], flipped_ties[:rotation]])
    position, row = np.nonzero(ties)
    before = np.cumsum(rotated, axis=0, dtype=np.int64) - rotated   # the hops before each dimension's, as routed
    return np.concatenate([wraps, row]), np.concatenate([first[wraps] - 1, (before + rotated - 2)[position, row]])


def _row_hash(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash of the links of every row, ignoring the ``-1`` padding (FNV-1a)."""
    h = np.full(rows.shape[0], 1469598103934665603, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for col in rows.T:
            mixed = (h ^ col.astype(np.uint64)) * np.uint64(1099511628211)
            h = np.where(col >= 0, mixed, h)
    return h
