"""The system's own routes, one path per job: what MPI does today; :func:`system_routes` for a
demand set and :func:`network_routes` for any pairs of endpoints, dispatched here for every network.

* Tori: Blue Gene/Q deterministic dimension-order routing. Dimensions are routed in the
  order given by a selection sort on length, descending, starting from A, B, C, D, E and
  swapping the first longest remaining dimension into place (4x4x4x8x2 routes D, B, C, A,
  E). Along a dimension the packet goes the shorter way round; when the distance is
  exactly half the ring, a source coordinate that is even goes the way that does not
  cross the wrap-around link and an odd one goes the way that does. On a length-2
  dimension this always picks the ``+`` link.
* Other graphs (fat-trees included): D-mod-K. The packet follows shortest paths; at each
  node where several next links lie on a shortest path, they are sorted by (next node,
  link id) and candidate number ``(t // M) mod m`` is taken, where ``t`` is the
  destination's endpoint index, ``m`` the number of candidates and ``M`` the product of
  the candidate counts of the earlier such choices on the path (so the first choice is
  ``t mod m``, as in D-mod-K).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PathError, WorkloadError
from ..workloads import Demands
from .kept import forget_candidates
from .pathset import PathSet, csr_positions
from .torus import bgq_dimension_order, dimension_order_walk
from .walk import shortest_walk

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import ArrayLike

    from ..topology import Topology

__all__ = ["system_routes", "network_routes", "route_rows", "bgq_dimension_order", "torus_routes", "dmodk_routes",
           "ROUTE_MEMO_LINKS", "DENSE_INDEX_RATIO", "forget_routes"]

#: :func:`network_routes` keeps the routes it made for a topology, up to this many links in all,
#: and routes only the pairs it has not routed before: a plan asks for the same pairs several
#: times (the default routes, its candidates' legs, its own check).
ROUTE_MEMO_LINKS = 4_000_000


#: :class:`_Routes` indexes every pair key directly (4 bytes a key of the nodes' square) where
#: that square is at most this many times the pairs it holds: a plan's stops look legs up a
#: dozen times, and a gather costs far less than the sort of a search.
DENSE_INDEX_RATIO = 16


class _Routes:
    """Routes by pair key (``src * nodes + dst``, sorted), as CSR arrays, and the fabric (with
    its forwarding tables) they were read from: routes of another fabric are not these. Where
    the routes cover enough of the ``nodes``-squared pairs, a row per key (``-1``: none)."""

    def __init__(self, keys: np.ndarray, offsets: np.ndarray, links: np.ndarray, fabric: object = None,
                 nodes: int = 0) -> None:
        self.keys, self.offsets, self.links, self.fabric, self.nodes = keys, offsets, links, fabric, nodes
        self.index: np.ndarray | None = None
        if keys.size and nodes * nodes <= DENSE_INDEX_RATIO * keys.size and keys.size < 2**31:
            self.index = np.full(nodes * nodes, -1, dtype=np.int32)
            self.index[keys] = np.arange(keys.size, dtype=np.int32)

    def find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where each of ``keys`` is (its row), and whether it is there."""
        if self.index is not None:
            rows = self.index[keys]
            return rows, rows >= 0
        rows = np.asarray(np.searchsorted(self.keys, keys))
        if not self.keys.size:
            return rows, np.zeros(keys.size, dtype=bool)
        return rows, self.keys[np.minimum(rows, self.keys.size - 1)] == keys

    def merged(self, keys: np.ndarray, routes: PathSet) -> _Routes:
        """These routes and ``routes`` (path ``i`` the route of ``keys[i]``), by key."""
        all_keys = np.concatenate((self.keys, keys))
        starts = np.concatenate((self.offsets[:-1], self.links.size + routes.offsets[:-1]))
        hops = np.concatenate((np.diff(self.offsets), routes.hops))
        order = np.argsort(all_keys, kind="stable")
        links = np.concatenate((self.links, routes.links))[csr_positions(starts[order], hops[order])]
        return _Routes(all_keys[order], np.concatenate(([0], np.cumsum(hops[order]))), links, self.fabric,
                       self.nodes)


_MEMO: weakref.WeakKeyDictionary[Topology, _Routes] = weakref.WeakKeyDictionary()


def forget_routes() -> None:
    """Drop the routes :func:`network_routes` kept, and the candidate paths kept for pairs
    planned again (:mod:`optiq.paths.kept`), for timing a cold start, or memory."""
    _MEMO.clear()
    forget_candidates()


def torus_routes(topology: Topology, demands: Demands) -> PathSet:
    """Dimension-order routes on a torus or mesh, by the Blue Gene/Q rule (module docstring).

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> t = torus((4, 2))
    >>> ps = torus_routes(t, Demands([0, 2], [4, 6], [1, 1]))   # distance 2 = half of 4
    >>> [ps.nodes(p, t) for p in range(2)]   # coordinate 0 (even): 0->1->2; 1 (odd) wraps: 1->0->3
    [[0, 2, 4], [2, 0, 6]]
    """
    demands.check_against(topology)
    if topology.dims is None:
        raise PathError(f"dimension-order routes need a torus or mesh, not {topology.name!r}")
    rows = dimension_order_walk(topology, demands.src, demands.dst, bgq_dimension_order(topology.dims))
    hops = (rows >= 0).sum(axis=1)
    return PathSet(np.arange(demands.num_jobs), np.concatenate(([0], np.cumsum(hops))), rows[rows >= 0],
                   demands.num_jobs)


def dmodk_routes(topology: Topology, demands: Demands) -> PathSet:
    """D-mod-K shortest-path routes (module docstring) for any topology.

    Examples
    --------
    >>> from optiq.topology import cluster
    >>> from optiq.workloads import Demands
    >>> t = cluster()                       # hosts 0..19, edges 20..23, cores 24, 25
    >>> ps = dmodk_routes(t, Demands([0, 0], [6, 7], [1, 1]))
    >>> [ps.nodes(p, t) for p in range(2)]  # 6 mod 2 = 0 -> core 24, 7 mod 2 = 1 -> core 25
    [[0, 20, 24, 21, 6], [0, 20, 25, 21, 7]]
    """
    demands.check_against(topology)
    divisor = np.ones(demands.num_jobs, dtype=np.int64)

    def choose(jobs: np.ndarray, at: np.ndarray, m: np.ndarray) -> np.ndarray:
        pick = (demands.dst[jobs] // divisor[jobs]) % m
        divisor[jobs] *= m
        return pick

    return shortest_walk(topology, demands.src, demands.dst, choose)


def system_routes(topology: Topology, demands: Demands, *, progress: Callable[[str], None] | None = None) -> PathSet:
    """The default route of every job, as the machine routes it (``topology.default_routing``):
    an InfiniBand fabric's forwarding tables, or OpenSM's minhop emulated
    (:mod:`optiq.paths.minhop`, reporting to ``progress``); a dragonfly's minimal routes
    (:mod:`optiq.paths.dragonfly`); dimension order on tori and meshes; D-mod-K elsewhere;
    ECMP with the topology's hash seed wherever it has one (:mod:`optiq.paths.ecmp`)."""
    if topology.ecmp_seed is not None:
        from .ecmp import ecmp_routes

        return ecmp_routes(topology, demands, seed=topology.ecmp_seed)
    if topology.fabric is not None:
        from .fabric import forwarding_routes
        from .minhop import minhop_tables

        tables = topology.fabric.forwarding or minhop_tables(topology, progress=progress)
        return forwarding_routes(topology, demands, tables)
    if topology.dragonfly is not None:
        from .dragonfly import dragonfly_routes

        return dragonfly_routes(topology, demands)
    return torus_routes(topology, demands) if topology.is_torus else dmodk_routes(topology, demands)


def network_routes(topology: Topology, src: ArrayLike, dst: ArrayLike, *,
                   progress: Callable[[str], None] | None = None) -> PathSet:
    """The network's own route (:func:`optiq.paths.system_routes`) from ``src[i]`` to ``dst[i]``
    for every ``i``, as path ``i`` (one leg each); pairs may repeat and are routed once.

    The routes made for a topology are kept with it (up to :data:`ROUTE_MEMO_LINKS` links;
    :func:`forget_routes` drops them), and a later call routes only the pairs it brings anew:
    a plan asks for the same pairs as its default routes, its candidates' legs and its check.

    Raises
    ------
    PathError
        If an end is not a node, a pair is not two distinct endpoints, or the network cannot
        route it.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> t = torus((4, 2))
    >>> ps = network_routes(t, [0, 0, 2], [4, 4, 0])
    >>> [ps.nodes(p, t) for p in range(3)]
    [[0, 2, 4], [0, 2, 4], [2, 0]]
    """
    offsets, links, rows = route_rows(topology, src, dst, progress=progress)
    hops = np.diff(offsets)[rows]
    return PathSet(np.arange(rows.size), np.concatenate(([0], np.cumsum(hops))),
                   links[csr_positions(offsets[rows], hops)], rows.size)


def route_rows(topology: Topology, src: ArrayLike, dst: ArrayLike, *,
               progress: Callable[[str], None] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`network_routes` without gathering them: the routes kept (CSR ``offsets`` and
    ``links``) and the row of each pair's route there, so a caller that compares only some
    of them (a leg's hop count first) gathers only those."""
    src, dst = np.asarray(src, dtype=np.int64).ravel(), np.asarray(dst, dtype=np.int64).ravel()
    if src.size == 0:
        return np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    n = topology.num_nodes
    for name, ends in (("source", src), ("destination", dst)):
        outside = np.flatnonzero((ends < 0) | (ends >= n))
        if outside.size:
            raise PathError(f"cannot route a leg: {name} {int(ends[outside[0]])} is not a node of "
                            f"{topology.name} (nodes are 0..{n - 1})")
    key = src * n + dst
    memo = _MEMO.get(topology)
    if memo is None or memo.fabric is not topology.fabric:
        memo = _Routes(np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), topology.fabric, n)
    if memo.index is not None:   # every pair looked up directly; only where one is not kept are they sorted
        rows, found = memo.find(key)
        if found.all():
            return memo.offsets, memo.links, rows
    uniq, inverse = np.unique(key, return_inverse=True)
    rows, found = memo.find(uniq)
    new = uniq[~found]
    if new.size:
        try:
            pairs = Demands(new // n, new % n, np.ones(new.size, np.int64), name="legs")
        except WorkloadError as exc:
            raise PathError(f"cannot route a leg: {exc}") from None
        memo = memo.merged(new, system_routes(topology, pairs, progress=progress))
        if memo.links.size <= ROUTE_MEMO_LINKS:
            _MEMO[topology] = memo
        rows, _ = memo.find(uniq)
    return memo.offsets, memo.links, rows[inverse]
