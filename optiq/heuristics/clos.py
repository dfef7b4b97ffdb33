"""Permutations routed with no shared link on full-bisection fat-trees, as Clos networks are.

A k-ary n-tree is a recursive Clos network: take away the leaf switches (those with hosts)
and the switches left fall apart into ``m`` parts, each a smaller tree cabled once to every
leaf. A flow between two leaves crosses exactly one part. For a permutation (each host
sends to at most one host and hears from at most one) a leaf has at most as many flows out
and in as hosts, so where it has at most ``m`` hosts the leaf-to-leaf flows form a bipartite
multigraph of degree at most ``m``, which König's theorem colours with ``m`` colours: colour
``c`` takes part ``c``. Within a part each leaf then sends and hears at most one flow: a
smaller permutation, with the leaves as the part's hosts. Recursing to the top gives every
flow a shortest route and every link at most one flow each way, so the busiest link is a
host's own cable: no routing can do better.

The colouring pads the multigraph to ``m``-regular and takes ``m`` perfect matchings
(:func:`scipy.sparse.csgraph.maximum_bipartite_matching`), so the routes depend only on
the fabric and the flows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["clos_routes", "is_partial_permutation"]


def is_partial_permutation(demands: Demands) -> bool:
    """Whether every host sends to at most one host and hears from at most one (self pairs aside).

    Examples
    --------
    >>> from optiq.workloads import Demands
    >>> is_partial_permutation(Demands([0, 1], [1, 0], [5, 5])), is_partial_permutation(Demands([0, 1], [2, 2], [5, 5]))
    (True, False)
    """
    moving = demands.src != demands.dst
    src, dst = demands.src[moving], demands.dst[moving]
    return bool(np.unique(src).size == src.size and np.unique(dst).size == dst.size)


def clos_routes(topology: Topology, demands: Demands) -> list[np.ndarray] | None:
    """Every pair's route (link ids, host to host) with no link carrying two pairs, or ``None``
    where the fabric is not a recursive Clos network with room for the pairs (module
    docstring) or the pairs are not a partial permutation.

    Parameters
    ----------
    topology : Topology
        A switched network: endpoints ``0..E-1``, each cabled to one switch.
    demands : Demands

    Returns
    -------
    list of ndarray or None
        Per job, the links of its route in order (empty for a pair from a host to itself).

    Examples
    --------
    >>> from optiq.topology import Topology
    >>> from optiq.workloads import Demands
    >>> # hosts 0, 1 on leaf 4 and 2, 3 on leaf 5; two spines 6 and 7, each cabled to both leaves
    >>> ends = [(0, 4), (1, 4), (2, 5), (3, 5), (4, 6), (4, 7), (5, 6), (5, 7)]
    >>> src = [a for a, b in ends] + [b for a, b in ends]; dst = [b for a, b in ends] + [a for a, b in ends]
    >>> t = Topology("two spines", 8, src, dst, [1.0] * 16, num_endpoints=4)
    >>> routes = clos_routes(t, Demands([0, 1], [2, 3], [1, 1]))
    >>> [sorted({int(t.link_dst[r[1]]) for r in routes})]   # the two pairs take different spines
    [[6, 7]]
    """
    if not is_partial_permutation(demands):
        return None
    E, N = topology.num_endpoints, topology.num_nodes
    src, dst = topology.link_src, topology.link_dst
    host_up = np.full(E, -1)
    host_down = np.full(E, -1)
    out_host = np.flatnonzero(src < E)
    host_up[src[out_host]] = out_host
    into_host = np.flatnonzero(dst < E)
    host_down[dst[into_host]] = into_host
    if (host_up < 0).any() or (host_down < 0).any() or (dst[out_host] < E).any():
        return None
    between = np.flatnonzero((src >= E) & (dst >= E))
    routes: list[np.ndarray] = [np.zeros(0, dtype=np.int64) for _ in range(demands.num_jobs)]
    moving = np.flatnonzero(demands.src != demands.dst)
    terminals = np.arange(E)
    inner = _route(topology, between, np.arange(E, N), terminals, host_up, host_down, demands.src[moving],
                   demands.dst[moving])
    if inner is None:
        return None
    for j, links in zip(moving, inner):
        routes[j] = np.asarray(links, dtype=np.int64)
    return routes


def _route(topology: Topology, between: np.ndarray, region: np.ndarray, terminals: np.ndarray, up: np.ndarray,
           down: np.ndarray, f_src: np.ndarray, f_dst: np.ndarray) -> list[list[int]] | None:
    """Routes within ``region`` (switch ids) for flows between terminals (``f_src`` to
    ``f_dst``, positions in ``terminals``), each terminal cabled into the region by link
    ``up[t]`` and out of it by ``down[t]``; every terminal in at most one flow each way."""
    src, dst = topology.link_src, topology.link_dst
    attach = dst[up]                                     # the region's switch under each terminal
    routes: list[list[int]] = [[int(up[a])] for a in f_src]
    leaf_of_src, leaf_of_dst = attach[f_src], attach[f_dst]
    crossing = np.flatnonzero(leaf_of_src != leaf_of_dst)
    if crossing.size:
        leaves = np.unique(attach)
        rest = np.setdiff1d(region, leaves)
        parts = _parts(topology, between, rest)
        if parts is None:
            return None
        part_of, m = parts
        # the one cable from every leaf into every part, and back
        in_rest = np.isin(src[between], leaves) & (part_of[dst[between]] >= 0)
        cables = between[in_rest]
        key = np.searchsorted(leaves, src[cables]) * m + part_of[dst[cables]]
        if np.bincount(key, minlength=leaves.size * m).max(initial=0) != 1 or key.size != leaves.size * m:
            return None
        leaf_up = np.empty(leaves.size * m, dtype=np.int64)
        leaf_up[key] = cables
        back = np.isin(dst[between], leaves) & (part_of[src[between]] >= 0)
        back_cables = between[back]
        back_key = np.searchsorted(leaves, dst[back_cables]) * m + part_of[src[back_cables]]
        if np.bincount(back_key, minlength=leaves.size * m).max(initial=0) != 1:
            return None
        leaf_down = np.empty(leaves.size * m, dtype=np.int64)
        leaf_down[back_key] = back_cables
        a = np.searchsorted(leaves, leaf_of_src[crossing])
        b = np.searchsorted(leaves, leaf_of_dst[crossing])
        colour = _edge_colour(a, b, leaves.size, m)
        if colour is None:
            return None
        for c in range(m):
            mine = crossing[colour == c]
            if not mine.size:
                continue
            sub = _route(topology, between, rest[part_of[rest] == c], leaves, leaf_up[np.arange(leaves.size) * m + c],
                         leaf_down[np.arange(leaves.size) * m + c], a[colour == c], b[colour == c])
            if sub is None:
                return None
            for f, links in zip(mine, sub):
                routes[f].extend(links)
    for f in range(f_src.size):
        routes[f].append(int(down[f_dst[f]]))
    return routes


def _parts(topology: Topology, between: np.ndarray, rest: np.ndarray) -> tuple[np.ndarray, int] | None:
    """The connected parts of the switches ``rest``: each switch's part (-1 outside), and how many."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    if not rest.size:
        return None
    N = topology.num_nodes
    keep = np.isin(topology.link_src[between], rest) & np.isin(topology.link_dst[between], rest)
    links = between[keep]
    index = np.full(N, -1)
    index[rest] = np.arange(rest.size)
    graph = coo_matrix((np.ones(links.size), (index[topology.link_src[links]], index[topology.link_dst[links]])),
                       shape=(rest.size, rest.size)).tocsr()
    m, label = connected_components(graph, directed=False)
    part_of = np.full(N, -1)
    part_of[rest] = label
    return part_of, int(m)


def _edge_colour(a: np.ndarray, b: np.ndarray, n: int, m: int) -> np.ndarray | None:
    """Colours ``0..m-1`` for the edges ``a[i] -> b[i]`` of a bipartite multigraph on ``n + n``
    vertices, no two edges at a vertex alike; ``None`` if a vertex has more than ``m`` edges."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    deg_a, deg_b = np.bincount(a, minlength=n), np.bincount(b, minlength=n)
    if deg_a.max(initial=0) > m or deg_b.max(initial=0) > m:
        return None
    # pad to m-regular: deficits on both sides are equal in total (n * m - edges)
    pad_a = np.repeat(np.arange(n), m - deg_a)
    pad_b = np.repeat(np.arange(n), m - deg_b)
    count = np.zeros((n, n), dtype=np.int64)
    np.add.at(count, (np.concatenate([a, pad_a]), np.concatenate([b, pad_b])), 1)
    rows = np.arange(n)
    matched = []  # per colour, the column every row is matched to
    for _ in range(m):
        match = maximum_bipartite_matching(csr_matrix(count > 0), perm_type="column")
        if (match < 0).any():  # cannot happen for a regular bipartite multigraph
            return None
        count[rows, match] -= 1
        matched.append(match)
    # the real edges of each (a, b) take, in turn, the colours whose matching holds (a, b)
    key = (rows[None, :] * n + np.array(matched)).ravel()          # colour c, row u: key of (u, match)
    colours = np.repeat(np.arange(m), n)
    by_key = np.argsort(key, kind="stable")
    edge_key = a.astype(np.int64) * n + b
    edge_order = np.argsort(edge_key, kind="stable")
    first = np.searchsorted(key[by_key], edge_key[edge_order])    # the group's first matching
    rank = np.arange(a.size) - np.searchsorted(edge_key[edge_order], edge_key[edge_order])  # place in group
    colour = np.empty(a.size, dtype=np.int64)
    colour[edge_order] = colours[by_key[first + rank]]
    return colour
