"""The :class:`Topology`: nodes, directed links numbered ``0..L-1`` and their capacities."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TopologyError
from ..utils.names import close_names

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    import networkx as nx
    from numpy.typing import ArrayLike
    from scipy.sparse import csr_matrix

    from .dragonfly import DragonflyShape
    from .ibnet import Fabric

__all__ = ["Topology", "spec_rate", "capacity_classes"]


def capacity_classes(topology: Topology) -> str:
    """The links' capacities in one line: how many links run at each, most common first.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> capacity_classes(torus((2, 2), bandwidth=2e9))
    '1 link speed: 16 x 2 GB/s'
    """
    values, counts = np.unique(topology.capacity, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    shown = ", ".join(f"{counts[i]:,} x {values[i] / 1e9:.4g} GB/s" for i in order[:4])
    more = f", {values.size - 4} more" if values.size > 4 else ""
    return f"{values.size} link speed{'s' if values.size > 1 else ''}: {shown}{more}"


def spec_rate(key: str, rate: float, default: float) -> str:
    """``",KEY=RATE"`` for a spec string when ``rate`` differs from the kind's ``default``, else ``""``
    (so that a topology saved by its spec comes back with its capacities).

    Examples
    --------
    >>> spec_rate("bw", 1e9, 1.8e9), spec_rate("bw", 1.8e9, 1.8e9)
    (',bw=1000000000.0B/s', '')
    """
    return "" if float(rate) == float(default) else f",{key}={float(rate)!r}B/s"


@dataclass(eq=False)
class Topology:
    """A directed network with numbered links.

    Nodes are ``0..num_nodes-1``; the endpoints (hosts that send and receive data) are the
    first ``num_endpoints`` of them, so endpoint ids, node ids and MPI ranks coincide for
    endpoints. Link ``e`` goes from ``link_src[e]`` to ``link_dst[e]`` with capacity
    ``capacity[e]`` bytes/s. Parallel links (two links with the same ends) are distinct.

    Parameters
    ----------
    name : str
        Human-readable description.
    num_nodes : int
        Number of nodes, endpoints and switches together.
    link_src, link_dst : array of int
        Tail and head node of every link.
    capacity : array of float
        Link capacity in bytes/s (positive).
    num_endpoints : int, optional
        Number of endpoints; defaults to every node.
    spec : str, optional
        The spec string that rebuilds this topology (see :func:`optiq.topology.from_spec`).
    dims, wrap : tuple, optional
        Torus/mesh shape and per-dimension wrap-around.
    link_dim, link_sign : array of int, optional
        For tori: the dimension and direction (+1/-1) of every link.
    node_labels : list, optional
        For graphs read from networkx: the original label of every node.
    names : list of str, optional
        The name of every node (fabrics: ``S-<guid>`` and ``H-<guid>``); default ``H<i>``
        for endpoint ``i`` and ``S<j>`` for the ``j``-th other node (graphs: their labels).
    host_names : list of str, optional
        The name of every endpoint when it is not its node name (fabrics: the host names).
    fabric : Fabric, optional
        InfiniBand port numbers, LIDs and forwarding tables (:mod:`optiq.topology.ibnet`).
    dragonfly : DragonflyShape, optional
        Groups, routers and global links of a dragonfly (:mod:`optiq.topology.dragonfly`).
    ecmp_seed : int, optional
        The network hashes every flow onto one of its equal-cost next hops (ECMP,
        :mod:`optiq.paths.ecmp`) with this seed, instead of its own static routes (spec
        option ``routes=ecmp[:SEED]``).

    Raises
    ------
    TopologyError
        If a link names a node out of range or a capacity is not positive.
    """

    name: str
    num_nodes: int
    link_src: np.ndarray
    link_dst: np.ndarray
    capacity: np.ndarray
    num_endpoints: int = None  # type: ignore[assignment]  # None: every node (set in __post_init__)
    spec: str | None = None
    dims: tuple[int, ...] | None = None
    wrap: tuple[bool, ...] | None = None
    link_dim: np.ndarray | None = field(default=None, repr=False)
    link_sign: np.ndarray | None = field(default=None, repr=False)
    node_labels: list[Any] | None = field(default=None, repr=False)
    names: list[str] | None = field(default=None, repr=False)
    host_names: list[str] | None = field(default=None, repr=False)
    fabric: Fabric | None = field(default=None, repr=False)
    dragonfly: DragonflyShape | None = field(default=None, repr=False)
    ecmp_seed: int | None = None

    def __post_init__(self) -> None:
        self.link_src = np.asarray(self.link_src, dtype=np.int64)
        self.link_dst = np.asarray(self.link_dst, dtype=np.int64)
        self.capacity = np.asarray(self.capacity, dtype=np.float64)
        if self.num_endpoints is None:
            self.num_endpoints = self.num_nodes
        n = self.num_nodes
        if n < 2:
            raise TopologyError(f"topology {self.name!r} needs at least 2 nodes, got {n}")
        if not (self.link_src.shape == self.link_dst.shape == self.capacity.shape):
            raise TopologyError("link_src, link_dst and capacity must have the same length")
        for arr, what in ((self.link_src, "tail"), (self.link_dst, "head")):
            bad = np.flatnonzero((arr < 0) | (arr >= n))
            if bad.size:
                raise TopologyError(f"link {bad[0]} has {what} node {arr[bad[0]]} outside 0..{n - 1}")
        bad = np.flatnonzero(~(self.capacity > 0) | ~np.isfinite(self.capacity))
        if bad.size:
            raise TopologyError(f"link {bad[0]} has capacity {self.capacity[bad[0]]}: it must be a finite number of "
                                f"bytes/s > 0")
        loops = np.flatnonzero(self.link_src == self.link_dst)
        if loops.size:
            raise TopologyError(f"link {loops[0]} is a self-loop at node {self.link_src[loops[0]]}")
        for given, count, what in ((self.names, n, "names"), (self.host_names, self.num_endpoints, "host_names")):
            if given is not None and len(given) != count:
                raise TopologyError(f"topology {self.name!r}: {len(given)} {what} for {count} nodes")

    def __repr__(self) -> str:
        return (f"Topology({self.name!r}, nodes={self.num_nodes}, endpoints={self.num_endpoints}, "
                f"links={self.num_links})")

    @cached_property
    def fingerprint(self) -> str:
        """A short hash of the network: its nodes, endpoints, links, capacities and host names.

        A plan stores it beside the topology's spec, so a plan read against a network that has
        changed since (an edited fabric file, another node-name map) is refused by name.

        Examples
        --------
        >>> from optiq.topology import torus
        >>> torus((4, 4)).fingerprint == torus((4, 4)).fingerprint != torus((4, 4), bandwidth=1e9).fingerprint
        True
        """
        import hashlib

        h = hashlib.sha256(f"{self.num_nodes}|{self.num_endpoints}".encode())
        for arr in (self.link_src, self.link_dst):
            h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(self.capacity, dtype=np.float64).tobytes())
        h.update("\n".join(self.endpoint_names).encode())
        return h.hexdigest()[:16]

    @property
    def num_links(self) -> int:
        return int(self.link_src.size)

    @property
    def is_torus(self) -> bool:
        return self.dims is not None

    @cached_property
    def is_tree(self) -> bool:
        """Whether the cables make a tree, with at most one link each way on each.

        Then every pair of nodes has one route, and any path from one to the other, through
        whatever nodes, crosses every link of that route: no plan of any pattern loads a link
        less than the network's own routes do, whatever the link rates. A tapered cluster of
        one core switch is a tree; a torus, or a fat-tree of several cores, is not.

        Examples
        --------
        >>> from optiq.topology import from_spec
        >>> [from_spec(s).is_tree for s in ("cluster:hosts=16,edges=4,cores=1", "cluster:hosts=16,edges=4,cores=2",
        ...                                  "mesh:3", "mesh:3x3", "torus:4")]
        [True, False, True, False, False]
        """
        n = self.num_nodes
        ends = np.sort(np.stack([self.link_src, self.link_dst]), axis=0)
        cables = np.unique(ends[0] * n + ends[1])
        directed = np.unique(self.link_src * n + self.link_dst)
        if cables.size != n - 1 or directed.size != self.num_links or (ends[0] == ends[1]).any():
            return False
        # n - 1 cables without a cycle join all n nodes (a union-find: only graphs of tree size get here)
        root = list(range(n))

        def find(v: int) -> int:
            while root[v] != v:
                root[v] = root[root[v]]
                v = root[v]
            return v

        for u, v in zip((cables // n).tolist(), (cables % n).tolist()):
            a, b = find(u), find(v)
            if a == b:
                return False
            root[a] = b
        return True

    @cached_property
    def coords(self) -> np.ndarray:
        """Torus coordinates of every node, shape ``(num_nodes, ndim)``; last dimension fastest."""
        if self.dims is None:
            raise TopologyError(f"topology {self.name!r} is not a torus or mesh: it has no coordinates")
        return np.stack(np.unravel_index(np.arange(self.num_nodes), self.dims), axis=1)

    @cached_property
    def out_offsets(self) -> np.ndarray:
        """CSR offsets of the outgoing links: node ``v``'s are ``out_links[out_offsets[v]:out_offsets[v+1]]``."""
        return np.concatenate(([0], np.cumsum(np.bincount(self.link_src, minlength=self.num_nodes))))

    @cached_property
    def out_links(self) -> np.ndarray:
        return np.argsort(self.link_src, kind="stable")

    def links_from(self, node: int) -> np.ndarray:
        """Ids of the links leaving ``node``."""
        return self.out_links[self.out_offsets[node]:self.out_offsets[node + 1]]

    @cached_property
    def _pair_index(self) -> dict[tuple[int, int], list[int]]:
        index: dict[tuple[int, int], list[int]] = {}
        for e, (u, v) in enumerate(zip(self.link_src.tolist(), self.link_dst.tolist())):
            index.setdefault((u, v), []).append(e)
        return index

    def links_between(self, u: int, v: int) -> list[int]:
        """Ids of every link from ``u`` to ``v`` (more than one for parallel links)."""
        return self._pair_index.get((int(u), int(v)), [])

    @cached_property
    def node_names(self) -> list[str]:
        """The name of every node: given (fabrics: ``S-<guid>``, ``H-<guid>``), the labels of a
        graph when they are distinct, else ``H<i>`` for endpoint ``i`` and ``S<j>`` for the
        ``j``-th other node.

        Examples
        --------
        >>> from optiq.topology import cluster
        >>> t = cluster(4, 2, 1)
        >>> t.node_names
        ['H0', 'H1', 'H2', 'H3', 'S0', 'S1', 'S2']
        """
        if self.names is not None:
            return list(self.names)
        if self.node_labels is not None:
            labels = [str(v) for v in self.node_labels]
            if len(set(labels)) == len(labels):
                return labels
        e = self.num_endpoints
        return [f"H{i}" for i in range(e)] + [f"S{j}" for j in range(self.num_nodes - e)]

    @property
    def endpoint_names(self) -> list[str]:
        """The name of every endpoint (fabrics: host names), in endpoint order."""
        return list(self.host_names) if self.host_names is not None else self.node_names[: self.num_endpoints]

    @cached_property
    def _name_index(self) -> dict[str, int]:
        index = {name: v for v, name in enumerate(self.node_names)}
        if self.host_names is not None:
            index.update((name, v) for v, name in enumerate(self.host_names))
        return index

    def node_named(self, name: str) -> int:
        """The node id of a node or host name.

        Raises
        ------
        TopologyError
            Naming the unknown name (and close names, if any).

        Examples
        --------
        >>> from optiq.topology import torus
        >>> torus((4, 4)).node_named("H5")
        5
        """
        try:
            return self._name_index[name]
        except (KeyError, TypeError):
            close = close_names(str(name), self._name_index)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise TopologyError(f"{self.name} has no node or host named {name!r}{hint}") from None

    def endpoints_named(self, names: Iterable[str]) -> np.ndarray:
        """Endpoint ids of host names, in their order.

        Raises
        ------
        TopologyError
            For an unknown name, or a name of a node that is not an endpoint (a switch).
        """
        names = list(names)
        ids = np.array([self.node_named(name) for name in names], dtype=np.int64)
        bad = np.flatnonzero(ids >= self.num_endpoints)
        if bad.size:
            raise TopologyError(f"{names[bad[0]]!r} is not a host of {self.name}: it names a switch")
        return ids

    def label(self, node: int) -> str:
        """A node's host name if it is an endpoint, else its node name."""
        return self.endpoint_names[node] if node < self.num_endpoints else self.node_names[node]

    def link_label(self, link: int) -> str:
        """``tail -> head`` by name, with the tail's port on fabrics (``S-...[17] -> node018``).

        Examples
        --------
        >>> from optiq.topology import cluster
        >>> cluster(4, 2, 1).link_label(0)
        'H0 -> S0'
        """
        u, v = int(self.link_src[link]), int(self.link_dst[link])
        port = f"[{int(self.fabric.link_port[link])}]" if self.fabric is not None else ""
        return f"{self.label(u)}{port} -> {self.label(v)}"

    @property
    def default_routing(self) -> str:
        """How the machine routes by default, as :func:`optiq.paths.system_routes` follows it."""
        if self.ecmp_seed is not None:
            return f"ECMP (hash seed {self.ecmp_seed})"
        if self.fabric is not None:
            return self.fabric.routing
        if self.dragonfly is not None:
            return "dragonfly minimal routes"
        return "dimension order" if self.is_torus else "D-mod-K"

    def check_endpoint(self, node: int, *, what: str = "node") -> int:
        """Return ``node`` as an int, or raise :class:`TopologyError` if it is not an endpoint."""
        try:
            as_int = int(node)
        except (TypeError, ValueError):
            raise TopologyError(f"{what} {node!r} is not an integer node id") from None
        if as_int != node or not 0 <= as_int < self.num_endpoints:
            raise TopologyError(
                f"{what} {node!r} is out of range: {self.name} has endpoints 0..{self.num_endpoints - 1}")
        return as_int

    def adjacency(self) -> csr_matrix:
        """Node adjacency matrix (1 where at least one link exists)."""
        from scipy.sparse import csr_matrix

        n = self.num_nodes
        a = csr_matrix((np.ones(self.num_links), (self.link_src, self.link_dst)), shape=(n, n))
        a.data[:] = 1.0
        return a

    def hop_distances(self, sources: ArrayLike) -> np.ndarray:
        """Hop distance from each of ``sources`` to every node, shape ``(len(sources), num_nodes)``."""
        from scipy.sparse.csgraph import shortest_path

        d = shortest_path(self.adjacency(), unweighted=True, indices=np.asarray(sources, dtype=np.int64))
        return np.atleast_2d(d)

    def pair_hops(self, sources: ArrayLike, targets: ArrayLike) -> np.ndarray:
        """Hop distance of every ``(sources[i], targets[i])`` pair, as int64.

        On tori and meshes this is the closed form (per dimension the shorter way round,
        or the plain difference without wrap-around); elsewhere one breadth-first search
        per distinct source, 512 sources at a time.

        Raises
        ------
        TopologyError
            If a target cannot be reached from its source.

        Examples
        --------
        >>> from optiq.topology import torus
        >>> torus((4, 4)).pair_hops([0, 0, 5], [5, 10, 5]).tolist()
        [2, 4, 0]
        """
        sources = np.asarray(sources, dtype=np.int64).ravel()
        targets = np.asarray(targets, dtype=np.int64).ravel()
        if self.dims is not None:
            out = np.zeros(sources.size, dtype=np.int64)
            for d, (length, wrap) in enumerate(zip(self.dims, self.wrap or ())):
                stride = int(np.prod(self.dims[d + 1:], dtype=np.int64))
                delta = np.abs(sources // stride % length - targets // stride % length)
                out += np.minimum(delta, length - delta) if wrap else delta
            return out
        uniq, row = np.unique(sources, return_inverse=True)
        out = np.empty(sources.size, dtype=np.int64)
        for start in range(0, uniq.size, 512):  # bounded memory: 512 x nodes distances at a time
            block = np.flatnonzero((row >= start) & (row < start + 512))
            dist = self.hop_distances(uniq[start:start + 512])[row[block] - start, targets[block]]
            if np.isinf(dist).any():
                i = block[np.flatnonzero(np.isinf(dist))[0]]
                raise TopologyError(f"node {targets[i]} cannot be reached from node {sources[i]} in {self.name!r}")
            out[block] = dist
        return out

    @cached_property
    def diameter(self) -> int:
        """Largest hop distance between two endpoints (computed exactly for tori, by BFS otherwise)."""
        if self.dims is not None:
            return int(sum((d // 2) if w else (d - 1) for d, w in zip(self.dims, self.wrap or ())))
        ends = np.arange(self.num_endpoints)
        best = 0
        for start in range(0, ends.size, 256):
            d = self.hop_distances(ends[start:start + 256])[:, : self.num_endpoints]
            if np.isinf(d).any():
                raise TopologyError(f"topology {self.name!r} is disconnected")
            best = max(best, int(d.max()))
        return best

    def check_connected(self) -> None:
        """Raise :class:`TopologyError` unless every endpoint reaches every other endpoint."""
        from scipy.sparse.csgraph import shortest_path

        d = self.hop_distances([0])[0]
        back = shortest_path(self.adjacency().T.tocsr(), unweighted=True, indices=[0])[0]
        for dist in (d, back):
            cut = np.flatnonzero(np.isinf(dist[: self.num_endpoints]))
            if cut.size:
                raise TopologyError(
                    f"topology {self.name!r} is disconnected: endpoint {cut[0]} and endpoint 0 "
                    "cannot reach each other")

    def to_networkx(self) -> nx.MultiDiGraph:
        """A :class:`networkx.MultiDiGraph` with ``link`` and ``capacity`` edge attributes."""
        import networkx as nx

        g = nx.MultiDiGraph(name=self.name)
        for v in range(self.num_nodes):
            g.add_node(v, endpoint=v < self.num_endpoints)
        for e in range(self.num_links):
            g.add_edge(int(self.link_src[e]), int(self.link_dst[e]), key=e, link=e,
                       capacity=float(self.capacity[e]))
        return g
