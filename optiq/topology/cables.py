"""Cables by name: ``A-B`` (the cable between two nodes) or ``A:pN`` (the cable on port ``N`` of ``A``).

A cable is a pair of opposite links. A node's ports are numbered as the fabric numbers them
(``ibnetdiscover``'s port numbers), or elsewhere ``1, 2, ...`` over the links leaving it in the
order of their ids, as the emulated network numbers its interfaces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import TopologyError

if TYPE_CHECKING:
    from .base import Topology

__all__ = ["link_ports", "cable_link", "reverse_link"]


def link_ports(topology: Topology) -> np.ndarray:
    """The port number of every link at its tail node.

    Examples
    --------
    >>> from optiq.topology import cluster
    >>> link_ports(cluster(4, 2, 1)).tolist()[:4]
    [1, 1, 1, 1]
    """
    t = topology
    if t.fabric is not None:
        ports: np.ndarray = np.asarray(t.fabric.link_port, dtype=np.int64).copy()
        return ports
    src = t.link_src
    order = np.lexsort((np.arange(t.num_links), src))
    rank = np.empty(t.num_links, dtype=np.int64)
    rank[order] = np.arange(t.num_links) - t.out_offsets[src[order]]
    return rank + 1


def reverse_link(topology: Topology, link: int) -> int:
    """The link the other way along ``link``'s cable: among parallel links, the one in the same
    place by id (as the emulated network pairs them).

    Raises
    ------
    TopologyError
        If no link runs the other way.
    """
    u, v = int(topology.link_src[link]), int(topology.link_dst[link])
    there, back = topology.links_between(u, v), topology.links_between(v, u)
    if len(there) != len(back):
        raise TopologyError(f"link {topology.link_label(link)} has no reverse link: it is not a cable")
    return int(back[there.index(int(link))])


def cable_link(topology: Topology, name: str) -> int:
    """The link that leaves the first end of the cable ``name`` (``A-B`` or ``A:pN``).

    Raises
    ------
    TopologyError
        Naming the cable: no such node, port or cable, or ``A-B`` where several cables join
        the two nodes (then each is named by its port).

    Examples
    --------
    >>> from optiq.topology import cluster
    >>> t = cluster(4, 2, 1)
    >>> t.link_label(cable_link(t, "S0-S2")), t.link_label(cable_link(t, "H1:p1"))
    ('S0 -> S2', 'H1 -> S0')
    """
    text = str(name).strip()
    if ":p" in text:
        node_name, _, port_text = text.rpartition(":p")
        node = topology.node_named(node_name)
        try:
            port = int(port_text)
        except ValueError:
            raise TopologyError(f"cable {text!r}: the port after ':p' must be a number, got {port_text!r}") from None
        leaving = topology.links_from(node)
        hit = leaving[link_ports(topology)[leaving] == port]
        if not hit.size:
            raise TopologyError(f"cable {text!r}: {node_name} has no cable on port {port} (its ports: "
                                f"{', '.join(str(p) for p in sorted(link_ports(topology)[leaving].tolist()))})")
        return int(hit[0])
    ends = _split_ends(topology, text)
    if ends is None:
        raise TopologyError(f"no cable {text!r} in {topology.name}: name it A-B by its two nodes (e.g. "
                            f"{topology.label(int(topology.link_src[0]))}-{topology.label(int(topology.link_dst[0]))}) "
                            f"or A:pN by a node's port")
    u, v = ends
    links = topology.links_between(u, v)
    if not links:
        raise TopologyError(f"no cable joins {topology.label(u)} and {topology.label(v)} in {topology.name}")
    if len(links) > 1:
        ports = link_ports(topology)[links]
        raise TopologyError(f"{len(links)} cables join {topology.label(u)} and {topology.label(v)}: name one by its "
                            f"port, {', '.join(f'{topology.label(u)}:p{p}' for p in ports.tolist())}")
    return int(links[0])


def _split_ends(topology: Topology, text: str) -> tuple[int, int] | None:
    """The two nodes of ``A-B``, trying every ``-`` (node names may hold one: ``S-<guid>``)."""
    found = []
    for at in (i for i, c in enumerate(text) if c == "-"):
        a, b = text[:at], text[at + 1:]
        try:
            found.append((topology.node_named(a), topology.node_named(b)))
        except TopologyError:
            continue
    if len(found) > 1:
        raise TopologyError(f"cable {text!r} reads as {len(found)} pairs of nodes: name it by a port, A:pN")
    return found[0] if found else None
