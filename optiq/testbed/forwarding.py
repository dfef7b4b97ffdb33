"""What every node of a testbed does with a packet: a route per destination host, and per-pair rules.

A switch (or a host that routes) holds one route per destination host, ``ip route replace
D/32 via NEXT dev PORT``: a linear forwarding table. The network's own routes (D-mod-K,
forwarding tables, dimension order, dragonfly minimal routes) are destination based, so
they install as such routes alone. A route that depends on the source too (a free plan's
path for one pair: the OpenFlow rules of the fat-tree study) is a *rule*: ``ip rule add from
S to D table T``, where table ``T`` of the node sends everything out of one port
(``1000 + port``).

:class:`Forwarding` holds the route of every ordered host pair (one path each, as links)
and every node's table; the rules are where a pair's route leaves a node by another link
than the node's table says. The kernel's answer for every hop of every pair (``ip route
get D from S iif PORT``, :func:`readback_queries`) must be that link.

Examples
--------
>>> from optiq.topology import kary_ntree
>>> from optiq.testbed.layout import Layout
>>> t = kary_ntree(2, 2)                 # 4 hosts, 4 switches
>>> fwd = Forwarding.network(Layout.of(t, "optiq-doc"))
>>> fwd.num_rules                         # destination based: tables only
0
>>> [t.label(t.link_dst[e]) for e in fwd.pair_route(0, 2)]   # D-mod-K: 2 mod 2 = 0, by S2
['S0', 'S2', 'S1', 'H2']
>>> by_s3 = fwd.with_routes(fwd.pair_index([0], [2]), [[0, 7, 15, 8]])   # H0 -> S0 -> S3 -> S1 -> H2
>>> [(t.label(n), t.link_label(e)) for n, s, d, e in zip(*by_s3.rules())]
[('S0', 'S0 -> S3'), ('S3', 'S3 -> S1')]
>>> fwd.with_routes(fwd.pair_index([0], [2]), [[0, 7, 15, 9]])
Traceback (most recent call last):
...
optiq.errors.TestbedError: the route given for H0 -> H2 does not go from H0 to H2
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TestbedError
from ..paths import PathSet, network_routes
from .layout import DATA_DEVICE, Layout

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..topology import Topology

__all__ = ["Forwarding", "RULE_TABLE_BASE", "all_pairs", "readback_queries", "check_readback", "equal_cost_links"]

#: A node's rule table for port ``k`` is ``RULE_TABLE_BASE + k``.
RULE_TABLE_BASE = 1000


def all_pairs(hosts: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of distinct hosts, by source then destination.

    Examples
    --------
    >>> [a.tolist() for a in all_pairs(3)]
    [[0, 0, 1, 1, 2, 2], [1, 2, 0, 2, 0, 1]]
    """
    s, d = np.divmod(np.arange(hosts * hosts, dtype=np.int64), hosts)
    keep = s != d
    return s[keep], d[keep]


@dataclass(frozen=True, eq=False)
class Forwarding:
    """Every host pair's route, and the table of every node (module docstring).

    Attributes
    ----------
    layout : Layout
    routes : PathSet
        Path ``k`` is the route of pair ``k`` of :func:`all_pairs` (links from source to
        destination).
    table : ndarray of int, shape (nodes, hosts)
        The link each node's route to each host leaves by (-1: none; the node is the host, or
        no pair's route goes through it to that host).
    groups : ndarray of int, shape (nodes, hosts, ways), optional
        ECMP (the topology's ``ecmp_seed``): every equal-cost link a node's route to each host
        may leave by (-1 padded), installed as a multipath route the kernel hashes each flow
        over; :attr:`routes` is then one draw of that hash (the topology's own routes).
    pinned : ndarray of bool, optional
        ECMP: the pairs whose route was given (:meth:`with_routes`): rules hold them on it at
        every hop where the table would hash.
    """

    layout: Layout
    routes: PathSet
    table: np.ndarray
    groups: np.ndarray | None = None
    pinned: np.ndarray | None = None

    # -- making --------------------------------------------------------------------------
    @classmethod
    def network(cls, layout: Layout) -> Forwarding:
        """The network's own routes (:func:`optiq.paths.network_routes`) of ``layout``'s topology."""
        t = layout.topology
        src, dst = all_pairs(t.num_endpoints)
        fwd = cls.of_routes(layout, network_routes(t, src, dst))
        if t.ecmp_seed is None:
            return fwd
        groups = equal_cost_links(t)
        table = np.where((fwd.table < 0) & (groups[:, :, 0] >= 0), groups[:, :, 0], fwd.table)
        return cls(layout, fwd.routes, table, groups, np.zeros(src.size, dtype=bool))

    @classmethod
    def of_routes(cls, layout: Layout, routes: PathSet) -> Forwarding:
        """Forwarding of one route per pair (path ``k``: pair ``k`` of :func:`all_pairs`), every
        node's table the link most of its pairs to each destination take (ties: the lowest).

        Raises
        ------
        TestbedError
            If a route does not go from its pair's source to its destination.
        """
        hosts = layout.topology.num_endpoints
        src, dst = all_pairs(hosts)
        _check_ends(layout, routes, src, dst, np.arange(src.size))
        node, _, d, _, out = _hops(layout, routes, src, dst)
        table = np.full((layout.topology.num_nodes, hosts), -1, dtype=np.int64)
        if node.size:
            key = node * hosts + d
            order = np.lexsort((out, key))
            k, o = key[order], out[order]
            start = np.flatnonzero(np.r_[True, (k[1:] != k[:-1]) | (o[1:] != o[:-1])])
            count = np.diff(np.r_[start, k.size])
            best = np.lexsort((o[start], -count, k[start]))       # per key: most pairs, then lowest link
            first = np.flatnonzero(np.r_[True, k[start][best][1:] != k[start][best][:-1]])
            chosen = start[best][first]
            table.ravel()[k[chosen]] = o[chosen]
        return cls(layout, routes, table)

    def with_routes(self, pairs: ArrayLike, routes: Sequence[ArrayLike] | PathSet) -> Forwarding:
        """The same tables with the routes of ``pairs`` (indices into :func:`all_pairs`) replaced
        by ``routes`` (one link path each): where they leave the tables, rules.

        Raises
        ------
        TestbedError
            If a route does not go from its pair's source to its destination.
        """
        pairs = np.asarray(pairs, dtype=np.int64)
        given = routes if isinstance(routes, PathSet) else PathSet.from_lists(
            [list(np.asarray(r, dtype=np.int64)) for r in routes], np.arange(len(routes)), len(routes))
        src, dst = all_pairs(self.layout.topology.num_endpoints)
        _check_ends(self.layout, given, src[pairs], dst[pairs], pairs)
        hops = self.routes.hops.copy()
        hops[pairs] = given.hops
        offsets = np.concatenate(([0], np.cumsum(hops)))
        links = np.empty(int(offsets[-1]), dtype=np.int64)
        keep = np.ones(self.routes.num_paths, dtype=bool)
        keep[pairs] = False
        kept = np.flatnonzero(keep)
        from ..paths.pathset import csr_positions

        links[csr_positions(offsets[kept], hops[kept])] = self.routes.links[
            csr_positions(self.routes.offsets[kept], hops[kept])]
        links[csr_positions(offsets[pairs], hops[pairs])] = given.links
        routes_all = PathSet(np.arange(hops.size), offsets, links, hops.size)
        pinned = None
        if self.pinned is not None:
            pinned = self.pinned.copy()
            pinned[pairs] = True
        return Forwarding(self.layout, routes_all, self.table, self.groups, pinned)

    def pair_index(self, src: ArrayLike, dst: ArrayLike | None = None) -> np.ndarray:
        """The index in :func:`all_pairs` of each ``(src, dst)`` pair (with one argument: of each
        source's first pair, for examples).

        Examples
        --------
        >>> from optiq.topology import kary_ntree
        >>> fwd = Forwarding.network(Layout.of(kary_ntree(2, 2), "optiq-doc"))
        >>> fwd.pair_index([0, 3], [1, 0]).tolist()
        [0, 9]
        """
        h = self.layout.topology.num_endpoints
        s = np.asarray(src, dtype=np.int64)
        d = (s + 1) % h if dst is None else np.asarray(dst, dtype=np.int64)
        if ((s < 0) | (s >= h) | (d < 0) | (d >= h) | (s == d)).any():
            raise TestbedError(f"host pairs must be two distinct hosts in 0..{h - 1}")
        return s * (h - 1) + d - (d > s)

    def pair_route(self, src: int, dst: int) -> np.ndarray:
        """The links of the route from host ``src`` to host ``dst``."""
        return self.routes.path(int(self.pair_index([src], [dst])[0]))

    # -- what is installed ----------------------------------------------------------------
    def hops(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every hop of every pair's route: ``(node, src, dst, in_link, out_link)``, ``in_link``
        -1 at the source."""
        src, dst = all_pairs(self.layout.topology.num_endpoints)
        return _hops(self.layout, self.routes, src, dst)

    def rules(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The hops whose link is not the node's table's: ``(node, src, dst, link)``."""
        node, s, d, _, out = self.hops()
        differs = self.table[node, d] != out
        if self.groups is not None and self.pinned is not None:  # hashed pairs follow the table's groups;
            hashed = self.groups[node, d, 1] >= 0                # a pinned pair is held at every group
            pair = self.pair_index(s, d) if s.size else np.zeros(0, np.int64)
            differs = np.where(self.pinned[pair], differs | hashed, False)
        return node[differs], s[differs], d[differs], out[differs]

    @property
    def num_rules(self) -> int:
        return int(self.rules()[0].size)

    def route_lines(self, node: int, only: ArrayLike | None = None) -> list[str]:
        """``ip route replace`` lines of ``node``'s table (of the destinations ``only``, if given)."""
        lay = self.layout
        row = self.table[node]
        dests = np.flatnonzero(row >= 0) if only is None else np.asarray(only, dtype=np.int64)
        src = f" src {lay.address(node)}" if node < lay.topology.num_endpoints else ""
        out = []
        for d in dests.tolist():
            e = int(row[d])
            ways = [] if self.groups is None else [int(g) for g in self.groups[node, d] if g >= 0]
            if e < 0:
                out.append(f"route delete {lay.address(d)}/32")
            elif len(ways) > 1:
                hops = " ".join(f"nexthop via {lay.address(int(lay.topology.link_dst[g]))} dev {lay.interface(g)} "
                                f"onlink" for g in ways)
                out.append(f"route replace {lay.address(d)}/32{src} {hops}")
            else:
                out.append(f"route replace {lay.address(d)}/32 via {lay.address(int(lay.topology.link_dst[e]))} "
                           f"dev {lay.interface(e)} onlink{src}")
        return out

    def rule_keys(self) -> dict[int, set[tuple[int, int, int]]]:
        """Node -> its rules as ``(src, dst, link)``."""
        out: dict[int, set[tuple[int, int, int]]] = {}
        for n, s, d, e in zip(*(a.tolist() for a in self.rules())):
            out.setdefault(n, set()).add((s, d, e))
        return out

    def rule_line(self, verb: str, src: int, dst: int, link: int) -> str:
        """``ip rule add|del`` of one pair's rule."""
        lay = self.layout
        return (f"rule {verb} from {lay.address(src)}/32 to {lay.address(dst)}/32 table "
                f"{RULE_TABLE_BASE + int(lay.port[link])}")

    def port_table_lines(self, node: int) -> list[str]:
        """The rule tables of ``node``: one per port, everything out of that port."""
        lay, t = self.layout, self.layout.topology
        return [f"route replace default via {lay.address(int(t.link_dst[e]))} dev {lay.interface(e)} onlink "
                f"table {RULE_TABLE_BASE + int(lay.port[e])}" for e in t.links_from(node).tolist()]


def _check_ends(layout: Layout, routes: PathSet, src: np.ndarray, dst: np.ndarray, pairs: np.ndarray) -> None:
    t = layout.topology
    if routes.num_paths != src.size:
        raise TestbedError(f"{routes.num_paths} routes for {src.size} host pairs")
    hops = routes.hops
    first, last = routes.offsets[:-1], routes.offsets[1:] - 1
    ok = hops > 0
    ok[ok] &= (t.link_src[routes.links[first[ok]]] == src[ok]) & (t.link_dst[routes.links[last[ok]]] == dst[ok])
    if hops.size:  # consecutive links must meet
        inner = np.ones(routes.links.size, dtype=bool)
        inner[first[hops > 0]] = False
        meet = np.ones(routes.links.size, dtype=bool)
        meet[1:] = t.link_src[routes.links[1:]] == t.link_dst[routes.links[:-1]]
        broken = np.flatnonzero(inner & ~meet)
        if broken.size:
            ok[routes.path_of_link_entry[broken]] = False
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise TestbedError(f"the route given for {t.label(int(src[i]))} -> {t.label(int(dst[i]))} does not go from "
                           f"{t.label(int(src[i]))} to {t.label(int(dst[i]))}")


def _hops(layout: Layout, routes: PathSet, src: np.ndarray, dst: np.ndarray):
    t = layout.topology
    path = routes.path_of_link_entry
    out = routes.links
    node = t.link_src[out]
    first = np.zeros(out.size, dtype=bool)
    first[routes.offsets[:-1][routes.hops > 0]] = True
    inl = np.full(out.size, -1, dtype=np.int64)
    inl[~first] = out[np.flatnonzero(~first) - 1]
    return node, src[path], dst[path], inl, out


def readback_queries(fwd: Forwarding, node: int, hops: tuple | None = None) -> tuple[list[str], list[tuple]]:
    """The ``ip route get`` lines that ask ``node``'s kernel for every hop through it, and what
    each answer must be: ``(dst address, src address, in interface or None) -> out interface``."""
    lay = fwd.layout
    n, s, d, inl, out = fwd.hops() if hops is None else hops
    at = np.flatnonzero(n == node)
    lines, expected = [], []
    for i in at.tolist():
        sa, da = lay.address(int(s[i])), lay.address(int(d[i]))
        e_in = int(inl[i])
        if e_in < 0:
            lines.append(f"route get {da} from {sa}")
            iif = None
        else:
            iif = lay.interface(int(lay.peer[e_in]))
            lines.append(f"route get {da} from {sa} iif {iif}")
        want: tuple[str, ...] = (lay.interface(int(out[i])),)
        if fwd.groups is not None and (fwd.pinned is None or not fwd.pinned[fwd.pair_index([s[i]], [d[i]])[0]]):
            want = tuple(lay.interface(int(g)) for g in fwd.groups[node, int(d[i])] if g >= 0) or want  # hashed
        expected.append(((da, sa, iif), want, int(s[i]), int(d[i])))
    return lines, expected


def check_readback(fwd: Forwarding, node: int, answers: list[dict], expected: list[tuple]) -> str:
    """The first hop whose kernel answer differs from the route (``''`` when none), naming the pair.

    ``answers`` are the JSON objects ``ip -j route get`` printed in ``node``'s namespace.
    """
    lay, t = fwd.layout, fwd.layout.topology
    got = {(a.get("dst"), a.get("from"), a.get("iif")): a.get("dev") for a in answers}
    for key, want, s, d in expected:
        dev = got.get(key)
        if dev not in want:
            said = "no route" if dev is None else ("local delivery" if dev in ("lo", DATA_DEVICE) else f"dev {dev}")
            return (f"pair {t.label(s)} -> {t.label(d)}: at {t.label(node)} the kernel routes it by {said}, the "
                    f"route leaves by {' or '.join(want)} ({lay.namespaces[node]})")
    return ""


def equal_cost_links(topology: Topology) -> np.ndarray:
    """``(nodes, hosts, ways)``: the links out of each node that lie on a shortest path to each
    host (by next node, then link id; -1 padded), where no host but the destination carries
    transit: an ECMP network's multipath routes.

    Examples
    --------
    >>> from optiq.topology import kary_ntree
    >>> t = kary_ntree(2, 2)                     # hosts 0-3, leaves 4, 5, spines 6, 7
    >>> [t.label(t.link_dst[e]) for e in equal_cost_links(t)[4, 2] if e >= 0]   # a leaf climbs by either spine
    ['S2', 'S3']
    """
    from scipy.sparse.csgraph import shortest_path

    hosts, n = topology.num_endpoints, topology.num_nodes
    src, dst = topology.link_src, topology.link_dst
    dist = shortest_path(topology.adjacency().T.tocsr(), unweighted=True, indices=np.arange(hosts))  # (hosts, nodes)
    order = np.lexsort((np.arange(topology.num_links), dst, src))
    ways = max(int(np.bincount(src, minlength=n).max(initial=1)), 1)
    out = np.full((n, hosts, ways), -1, dtype=np.int64)
    for d in range(hosts):
        good = (dist[d, dst[order]] == dist[d, src[order]] - 1) & (src[order] != d) \
            & ((dst[order] >= hosts) | (dst[order] == d) | (n == hosts))   # (a torus: every node routes)
        links = order[good]
        node = src[links]
        rank = np.arange(links.size) - np.searchsorted(node, node)   # position among the node's links (sorted)
        out[node, d, rank] = links
    return out
