"""Topologies from any networkx graph or GraphML file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TopologyError
from .base import Topology

if TYPE_CHECKING:
    from typing import Any

__all__ = ["from_networkx", "read_graphml"]


def from_networkx(graph: Any, *, capacity: str = "capacity", default_capacity: float | None = None,
                  spec: str | None = None, name: str | None = None) -> Topology:
    """Build a :class:`Topology` from a networkx graph.

    Undirected edges become two directed links; multigraph edges stay distinct links.
    Nodes with a true ``host`` attribute are the endpoints (all nodes if none has it); they
    are numbered first, in the graph's node order, then the other nodes.

    Parameters
    ----------
    graph : networkx.Graph, DiGraph, MultiGraph or MultiDiGraph
    capacity : str
        Edge attribute holding the capacity in bytes/s.
    default_capacity : float, optional
        Capacity of edges without the attribute; if None, such an edge is an error.

    Raises
    ------
    TopologyError
        If an edge has no or a non-positive capacity, or the endpoints are not connected.

    Examples
    --------
    >>> import networkx as nx
    >>> g = nx.cycle_graph(4)
    >>> nx.set_edge_attributes(g, 1e9, "capacity")
    >>> from_networkx(g).num_links
    8
    """
    nodes = list(graph.nodes)
    if len(nodes) < 2:
        raise TopologyError(f"graph has {len(nodes)} node(s); at least 2 are needed")
    hosts = [v for v in nodes if graph.nodes[v].get("host") in (True, 1, "true", "True", "1")]
    others = [v for v in nodes if v not in set(hosts)] if hosts else []
    order = (hosts + others) if hosts else nodes
    index = {v: i for i, v in enumerate(order)}
    if graph.number_of_edges() == 0:
        raise TopologyError("graph has no edges")
    src, dst, cap = [], [], []
    edges = graph.edges(keys=True, data=True) if graph.is_multigraph() else graph.edges(data=True)
    for edge in edges:
        u, v, data = edge[0], edge[1], edge[-1]
        c = data.get(capacity, default_capacity)
        try:
            c = float(c)
        except (TypeError, ValueError):
            raise TopologyError(f"edge ({u!r}, {v!r}) has no usable {capacity!r} attribute: {c!r}") from None
        if not 0 < c < float("inf"):
            raise TopologyError(f"edge ({u!r}, {v!r}) has capacity {c}: it must be a finite number of bytes/s > 0")
        pairs = [(u, v)] if graph.is_directed() else [(u, v), (v, u)]
        for a, b in pairs:
            src.append(index[a])
            dst.append(index[b])
            cap.append(c)
    topo = Topology(name=name or (graph.name or "graph"), num_nodes=len(order), link_src=np.array(src, dtype=np.int64),
                    link_dst=np.array(dst, dtype=np.int64), capacity=np.array(cap),
                    num_endpoints=len(hosts) if hosts else len(order), spec=spec, node_labels=order)
    topo.check_connected()
    return topo


def read_graphml(path: str | Path, **kwargs: Any) -> Topology:
    """Read a GraphML file into a :class:`Topology` (see :func:`from_networkx`).

    Raises
    ------
    TopologyError
        If the file is missing or not valid GraphML.
    """
    import networkx as nx

    path = Path(path)
    if not path.is_file():
        raise TopologyError(f"GraphML file {str(path)!r} " + ("is a directory" if path.is_dir() else "does not exist"))
    try:
        graph = nx.read_graphml(path)
    except Exception as exc:  # networkx raises several parser error types
        raise TopologyError(f"cannot read GraphML file {str(path)!r}: {exc}") from None
    kwargs.setdefault("spec", f"graphml:{path}")
    kwargs.setdefault("name", path.name)
    return from_networkx(graph, **kwargs)
