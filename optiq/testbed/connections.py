"""The paths a running MPI job's TCP connections really take on an ECMP testbed.

Each pair of ranks holds one TCP connection (MPI's), and on a network that hashes (the
topology's ``ecmp_seed``) each of its two directions is a flow of its own, hashed at every
switch by its addresses and ports. So the paths are known only once the connections are open:
:func:`connection_routes` lists them (``ss`` in every host's namespace) and asks the kernel of
every node on the way where that flow goes next (``ip route get D from S iif PORT ipproto tcp
sport P dport Q``), hop by hop from the source to the destination.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TestbedError
from ..paths import PathSet
from .system import each, in_namespace, ip_batch

if TYPE_CHECKING:
    from .layout import Layout

__all__ = ["Connection", "list_connections", "connection_routes"]

#: (source host, destination host, source port, destination port): one direction of a connection.
Connection = tuple[int, int, int, int]


def _endpoint(text: str) -> tuple[str, int]:
    address, _, port = text.rpartition(":")
    return address.strip("[]"), int(port)


def list_connections(layout: Layout) -> list[Connection]:
    """Every direction of every established TCP connection between two hosts' data addresses,
    as its source sees it (``ss -tnH state established`` in each host's namespace)."""
    t = layout.topology
    host_of = {layout.address(h): h for h in range(t.num_endpoints)}

    def read(h: int) -> list[Connection]:
        out = in_namespace(layout.namespaces[h], ["ss", "-tnH", "state", "established"], what="ss")
        found = []
        for line in out.splitlines():
            fields = line.split()
            if len(fields) < 4:
                continue
            (la, lp), (pa, pp) = _endpoint(fields[-2]), _endpoint(fields[-1])
            if host_of.get(la) == h and pa in host_of and host_of[pa] != h:
                found.append((h, host_of[pa], lp, pp))
        return found

    return sorted({c for found in each(read, range(t.num_endpoints)) for c in found})


def connection_routes(layout: Layout, connections: list[Connection]) -> PathSet:
    """The route (links) of every connection direction as the kernels route it: path ``i`` is
    ``connections[i]``'s.

    Raises
    ------
    TestbedError
        If a kernel has no route for a flow, or a flow does not reach its destination within
        as many hops as the network has nodes (a loop).
    """
    t = layout.topology
    at = np.array([c[0] for c in connections], dtype=np.int64)
    iif: list[str | None] = [None] * len(connections)
    walked: list[list[int]] = [[] for _ in connections]
    port_link = {(int(t.link_src[e]), layout.interface(e)): e for e in range(t.num_links)}
    for _ in range(t.num_nodes):
        live = [i for i, c in enumerate(connections) if at[i] != c[1]]
        if not live:
            break
        by_node: dict[int, list[int]] = {}
        for i in live:
            by_node.setdefault(int(at[i]), []).append(i)

        def ask(node: int) -> list[str]:
            lines = []
            for i in by_node[node]:
                s, d, sp, dp = connections[i]
                lines.append(f"route get {layout.address(d)} from {layout.address(s)}"
                             + (f" iif {iif[i]}" if iif[i] else "") + f" ipproto tcp sport {sp} dport {dp}")
            out = ip_batch(layout.namespaces[node], lines, json_out=True, what=f"flows through {layout.namespaces[node]}")
            return [a.get("dev", "") for line in out.splitlines() if line.strip() for a in json.loads(line)]

        nodes = sorted(by_node)
        for node, devs in zip(nodes, each(ask, nodes)):
            for i, dev in zip(by_node[node], devs):
                e = port_link.get((node, dev))
                if e is None:
                    s, d, _, _ = connections[i]
                    raise TestbedError(f"the flow {t.label(s)} -> {t.label(d)} has no route out of {t.label(node)} "
                                       f"(the kernel answered dev {dev or 'none'})")
                walked[i].append(e)
                at[i] = int(t.link_dst[e])
                iif[i] = layout.interface(int(layout.peer[e]))
    stuck = [i for i, c in enumerate(connections) if at[i] != c[1]]
    if stuck:
        s, d, _, _ = connections[stuck[0]]
        raise TestbedError(f"the flow {t.label(s)} -> {t.label(d)} does not reach its destination (a routing loop)")
    return PathSet.from_lists(walked, np.arange(len(connections)), len(connections))
