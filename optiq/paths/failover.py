"""The network's own routes after cables fail: what its routing computes once it has swept the fabric.

A subnet manager notices a failed cable within a sweep and routes again on what is left. Which
routes the network then takes depends on its routing:

* **Tori and meshes** (dimension order): a pair whose route does not cross a dead link keeps it.
  One that does goes the other way round the ring where its route met the dead cable (the
  detour a torus's routing takes); where there is no other way round (a mesh, or that way is
  dead too) it takes a shortest path of what is left.
* **InfiniBand fabrics**: OpenSM's ``minhop`` (:mod:`optiq.paths.minhop`) on the fabric without
  the dead cables, every table computed anew, as a fresh sweep computes them.
* **Everything else** (fat-trees, dragonflies, graphs): D-mod-K
  (:func:`~optiq.paths.system.dmodk_routes`) on the network without the dead cables.

A pair that no route joins any more keeps the route it had (into the dead cable): it is
*stranded*, and nothing the network does delivers its bytes. Link ids are those of the whole
network throughout.

Examples
--------
>>> from optiq.topology import torus
>>> t = torus((4,))
>>> dead = [t.links_between(0, 1)[0], t.links_between(1, 0)[0]]
>>> after = routes_after_failure(t, [0, 2], [1, 3], dead)
>>> [after.routes.nodes(p, t) for p in range(2)], after.stranded.tolist()
([[0, 3, 2, 1], [2, 3]], [False, False])
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PathError
from ..workloads import Demands
from .pathset import PathSet, csr_positions
from .system import dmodk_routes, network_routes

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..topology import Topology

__all__ = ["Failover", "routes_after_failure", "crossing"]


@dataclass(frozen=True)
class Failover:
    """What the network routes once it has swept around dead links.

    Attributes
    ----------
    routes : PathSet
        Path ``i``: the route of pair ``i`` now (link ids of the whole network).
    crossed : ndarray of bool
        Pairs whose route before the failure crossed a dead link.
    stranded : ndarray of bool
        Pairs no route joins without a dead link: their route is the one they had.
    engine : str
        How the routes were computed, in words.
    """

    routes: PathSet
    crossed: np.ndarray
    stranded: np.ndarray
    engine: str

    def __repr__(self) -> str:
        return (f"Failover({self.engine}: {int(self.crossed.sum())} of {self.crossed.size} routes crossed a dead "
                f"link, {int(self.stranded.sum())} stranded)")


def crossing(routes: PathSet, dead: ArrayLike) -> np.ndarray:
    """Which paths of ``routes`` cross one of the links ``dead``.

    Examples
    --------
    >>> ps = PathSet.from_lists([[0, 1], [2]], [0, 1], 2)
    >>> crossing(ps, [1]).tolist()
    [True, False]
    """
    dead_mask = np.zeros(int(routes.links.max(initial=-1)) + 1, dtype=bool)
    ids = np.asarray(dead, dtype=np.int64)
    ids = ids[ids < dead_mask.size]
    dead_mask[ids] = True
    hit = dead_mask[routes.links].astype(np.int64)
    sums = np.add.reduceat(hit, routes.offsets[:-1]) if routes.links.size else np.zeros(routes.num_paths, np.int64)
    return (sums > 0) & (routes.hops > 0)


def routes_after_failure(topology: Topology, src: ArrayLike, dst: ArrayLike, dead: ArrayLike) -> Failover:
    """The network's route from ``src[i]`` to ``dst[i]`` once it has routed around the links ``dead``
    (module docstring); both directions of a cable should be given.

    Raises
    ------
    PathError
        If a link id is not one of the network's, or a pair is not two distinct endpoints.
    """
    src, dst = np.asarray(src, dtype=np.int64).ravel(), np.asarray(dst, dtype=np.int64).ravel()
    dead = np.unique(np.asarray(dead, dtype=np.int64).ravel())
    bad = dead[(dead < 0) | (dead >= topology.num_links)]
    if bad.size:
        raise PathError(f"link {int(bad[0])} is not a link of {topology.name} (links are 0..{topology.num_links - 1})")
    before = network_routes(topology, src, dst)
    crossed = crossing(before, dead)
    alive = np.ones(topology.num_links, dtype=bool)
    alive[dead] = False
    stranded = ~_joined(topology, alive, src, dst)  # only pairs that crossed: the others' routes are alive
    if not crossed.any():
        return Failover(before, crossed, stranded, "no route crossed a dead link")
    if topology.is_torus:
        routes, engine = (_torus_detours(topology, before, src, dst, crossed & ~stranded, alive),
                          "dimension order with detours")
    elif topology.fabric is not None:
        routes, engine = _fabric_minhop(topology, before, src, dst, alive, stranded), "minhop without the dead cables"
    else:
        routes, engine = _dmodk_without(topology, before, src, dst, alive, stranded), "D-mod-K without the dead cables"
    return Failover(routes, crossed, stranded, engine)


def _joined(topology: Topology, alive: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Whether a path of live links leads from each source to its destination."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = topology.num_nodes
    graph = csr_matrix((np.ones(int(alive.sum())), (topology.link_src[alive], topology.link_dst[alive])), shape=(n, n))
    _, label = connected_components(graph, directed=True, connection="strong")
    return label[src] == label[dst]


def _without(topology: Topology, alive: np.ndarray) -> tuple[Topology, np.ndarray]:
    """The network with only the live links (no torus shape), and the whole network's id of each."""
    kept = np.flatnonzero(alive)
    return replace(topology, name=f"{topology.name} without {topology.num_links - kept.size} links",
                   link_src=topology.link_src[kept], link_dst=topology.link_dst[kept],
                   capacity=topology.capacity[kept], spec=None, dims=None, wrap=None, link_dim=None,
                   link_sign=None, dragonfly=None, fabric=None), kept


def _replaced(before: PathSet, pairs: np.ndarray, new_hops: np.ndarray, new_links: np.ndarray) -> PathSet:
    """``before`` with the routes of ``pairs`` replaced, in order, by routes of ``new_hops`` links
    each, ``new_links`` end to end (link ids of the whole network)."""
    hops = before.hops.copy()
    hops[pairs] = new_hops
    offsets = np.concatenate(([0], np.cumsum(hops)))
    links = np.empty(int(offsets[-1]), dtype=np.int64)
    keep = np.ones(before.num_paths, dtype=bool)
    keep[pairs] = False
    kept = np.flatnonzero(keep)
    links[csr_positions(offsets[kept], hops[kept])] = before.links[csr_positions(before.offsets[kept], hops[kept])]
    links[csr_positions(offsets[pairs], hops[pairs])] = new_links
    return PathSet(np.arange(before.num_paths), offsets, links, before.num_paths)


def _dmodk_without(topology: Topology, before: PathSet, src: np.ndarray, dst: np.ndarray, alive: np.ndarray,
                   stranded: np.ndarray) -> PathSet:
    """Every joined pair on D-mod-K of the live links; stranded pairs as they were."""
    pairs = np.flatnonzero(~stranded)
    if not pairs.size:
        return before
    reduced, kept = _without(topology, alive)
    new = dmodk_routes(reduced, Demands(src[pairs], dst[pairs], np.ones(pairs.size, np.int64), name="reroute"))
    return _replaced(before, pairs, new.hops, kept[new.links])


def _fabric_minhop(topology: Topology, before: PathSet, src: np.ndarray, dst: np.ndarray, alive: np.ndarray,
                   stranded: np.ndarray) -> PathSet:
    """Every joined pair through ``minhop``'s tables of the fabric without its dead cables."""
    from .fabric import forwarding_routes
    from .minhop import minhop_tables

    fabric = topology.fabric
    assert fabric is not None
    pairs = np.flatnonzero(~stranded)
    if not pairs.size:
        return before
    reduced, kept = _without(topology, alive)
    new_id = np.full(topology.num_links, -1, dtype=np.int64)
    new_id[kept] = np.arange(kept.size)
    lid_link = np.where(fabric.lid_link >= 0, new_id[np.maximum(fabric.lid_link, 0)], fabric.lid_link)
    egress = new_id[fabric.egress]
    cut_off = np.flatnonzero((fabric.lid_link >= 0) & (lid_link < 0))
    # a host whose own cable died has no LID route to it: its pairs are stranded, the others route as before
    lid_link[cut_off] = -2
    reduced = replace(reduced, fabric=replace(fabric, link_port=fabric.link_port[kept], lid_link=lid_link,
                                              egress=np.maximum(egress, 0), forwarding=None))
    joined = pairs[(egress[src[pairs]] >= 0) & (new_id[fabric.egress[dst[pairs]]] >= 0)]
    if not joined.size:
        return before
    new = forwarding_routes(reduced, Demands(src[joined], dst[joined], np.ones(joined.size, np.int64), name="reroute"),
                            minhop_tables(reduced))
    return _replaced(before, joined, new.hops, kept[new.links])


def _torus_detours(topology: Topology, before: PathSet, src: np.ndarray, dst: np.ndarray, moved: np.ndarray,
                   alive: np.ndarray) -> PathSet:
    """The routes of ``moved`` pairs the other way round the ring where they met a dead link;
    where that way is not there or dead too, D-mod-K on the live links."""
    from .torus import _link_table

    assert topology.dims is not None and topology.wrap is not None
    assert topology.link_dim is not None and topology.link_sign is not None
    pairs = np.flatnonzero(moved)
    if not pairs.size:
        return before
    table = _link_table(topology)
    dims, wrap = topology.dims, topology.wrap
    sign_side = np.asarray(topology.link_sign < 0, dtype=np.int64)
    routes: list[np.ndarray] = []
    fallback: list[int] = []
    for i, p in enumerate(pairs.tolist()):
        links = before.links[before.offsets[p]:before.offsets[p + 1]]
        route = links
        for _ in range(len(dims) + 1):  # each detour clears a dead link of one ring
            dead_at = np.flatnonzero(~alive[route])
            if not dead_at.size:
                break
            k = int(dead_at[0])
            dim = int(topology.link_dim[route[k]])
            same = topology.link_dim[route] == dim
            lo, hi = k, k
            while lo > 0 and same[lo - 1]:
                lo -= 1
            while hi + 1 < route.size and same[hi + 1]:
                hi += 1
            if not wrap[dim]:
                route = None  # type: ignore[assignment]
                break
            side = 1 - int(sign_side[route[k]])
            node, way = int(topology.link_src[route[lo]]), []
            for _ in range(int(dims[dim]) - (hi - lo + 1)):
                link = int(table[node, dim, side])
                way.append(link)
                node = int(topology.link_dst[link])
            route = np.concatenate((route[:lo], np.asarray(way, dtype=np.int64), route[hi + 1:]))
        if route is None or not alive[route].all():
            fallback.append(i)
            route = links
        routes.append(route)
    if fallback:
        reduced, kept = _without(topology, alive)
        fb = pairs[fallback]
        new = dmodk_routes(reduced, Demands(src[fb], dst[fb], np.ones(fb.size, np.int64), name="reroute"))
        for j, i in enumerate(fallback):
            routes[i] = kept[new.links[new.offsets[j]:new.offsets[j + 1]]]
    return _replaced(before, pairs, np.array([r.size for r in routes], dtype=np.int64), np.concatenate(routes))
