"""The default routes of an InfiniBand fabric: its forwarding tables walked hop by hop, or,
without them, the tables OpenSM's ``minhop`` engine would compute.

**Walking.** A job leaves its source host by the host's first cabled port
(:attr:`~optiq.topology.ibnet.Fabric.egress`). At every switch the table entry for the
destination host's LID names the output port, whose cable leads to the next node, until
the destination host is reached. An entry the table lacks, a port without a cable, a
cable to another host, or a walk longer than the number of switches (a loop) stops with a
:class:`~optiq.errors.PathError` naming the switch and the LID.

**minhop, as emulated here.** For every LID of the fabric in increasing order (switch
LIDs and the LIDs of CA ports; ports without a LID after them, in file order), every
switch picks its output port: its own LID goes to port 0; at the switch a CA port is
cabled to, that cable's port; elsewhere, among the ports whose cable leads to a switch one
hop closer to the LID's switch (a minimum-hop port), the one with the fewest routes
assigned so far, ties going to the lowest port number. Every route counts, whatever its
destination. This is OpenSM's ``minhop`` rule without its refinements for LMC > 0, port
shifting or scattering; only base LIDs are routed.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from ..errors import PathError, TopologyError
from ..topology.lft import NO_PORT, ForwardingTables
from .pathset import PathSet

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["forwarding_routes", "minhop_tables", "port_links"]

_MINHOP: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _fabric(topology: Topology):
    if topology.fabric is None:
        raise TopologyError(f"{topology.name} is not an InfiniBand fabric (ibnet:FILE)")
    return topology.fabric


def port_links(topology: Topology) -> np.ndarray:
    """``out[v - E, port]``: the link out of switch ``v`` by ``port`` (-1: no cable), E endpoints."""
    fabric = _fabric(topology)
    E = topology.num_endpoints
    on_switch = topology.link_src >= E
    out = np.full((topology.num_nodes - E, int(fabric.link_port.max(initial=0)) + 1), -1, dtype=np.int64)
    out[topology.link_src[on_switch] - E, fabric.link_port[on_switch]] = np.flatnonzero(on_switch)
    return out


def forwarding_routes(topology: Topology, demands: Demands, tables: ForwardingTables | None = None) -> PathSet:
    """Every job's route through the fabric's forwarding tables (module docstring).

    ``tables`` defaults to the fabric's own (``routes=``), else :func:`minhop_tables`.

    Raises
    ------
    PathError
        Naming the switch and LID of a missing entry, a dead end or a loop.
    """
    demands.check_against(topology)
    fabric = _fabric(topology)
    tables = tables or fabric.forwarding or minhop_tables(topology)
    E, heads = topology.num_endpoints, topology.link_dst
    links_of = port_links(topology)
    src, dst = demands.src, demands.dst
    link = fabric.egress[src]
    steps = [link]
    v = heads[link]
    live = v != dst
    for _ in range(topology.num_nodes - E + 1):
        if not live.any():
            break
        jobs = np.flatnonzero(live)
        at = v[jobs]
        stray = np.flatnonzero(at < E)
        if stray.size:
            j = jobs[stray[0]]
            raise PathError(f"the route from {_host(topology, src[j])} to {_host(topology, dst[j])} reaches host "
                            f"{_host(topology, at[stray[0]])} instead (a dead end at {_prev_switch(topology, steps, j)} "
                            f"for LID {_lid(fabric, dst[j])})")
        port = tables.ports[at - E, dst[jobs]].astype(np.int64)
        nxt = np.where(port < links_of.shape[1], links_of[at - E, np.minimum(port, links_of.shape[1] - 1)], -1)
        bad = np.flatnonzero((port == NO_PORT) | (nxt < 0))
        if bad.size:
            i = bad[0]
            what = ("has no entry for" if port[i] == NO_PORT else
                    f"sends to port {port[i]}, which has no cable, for")
            raise PathError(f"switch {fabric.describe(topology, at[i])} {what} LID {_lid(fabric, dst[jobs[i]])} "
                            f"(host {_host(topology, dst[jobs[i]])}), on the route from "
                            f"{_host(topology, src[jobs[i]])} ({tables.source})")
        link = np.full(src.size, -1, dtype=np.int64)
        link[jobs] = nxt
        steps.append(link)
        v = np.where(live, heads[np.maximum(link, 0)], v)
        live = live & (v != dst)
    if live.any():
        j = int(np.flatnonzero(live)[0])
        raise PathError(f"the route from {_host(topology, src[j])} to LID {_lid(fabric, dst[j])} (host "
                        f"{_host(topology, dst[j])}) loops through switch {fabric.describe(topology, v[j])} "
                        f"({tables.source})")
    walked = np.stack(steps, axis=1)
    hops = (walked >= 0).sum(axis=1)
    return PathSet(np.arange(demands.num_jobs), np.concatenate(([0], np.cumsum(hops))), walked[walked >= 0],
                   demands.num_jobs)


def _host(topology: Topology, t: int) -> str:
    return topology.endpoint_names[int(t)]


def _lid(fabric, t: int) -> str:
    return f"0x{int(fabric.endpoint_lid[int(t)]):04x}"


def _prev_switch(topology: Topology, steps: list[np.ndarray], j: int) -> str:
    last = steps[-1][j]
    return topology.fabric.describe(topology, int(topology.link_src[last]))  # type: ignore[union-attr]


def minhop_tables(topology: Topology, *, progress: Callable[[str], None] | None = None) -> ForwardingTables:
    """The forwarding tables of OpenSM's ``minhop`` engine, emulated (module docstring).

    One step per LID, every switch at once: the time grows as LIDs x switches x ports.
    Computed once per topology object and kept.

    Examples
    --------
    >>> import numpy as np
    >>> from optiq.topology import Topology
    >>> from optiq.topology.ibnet import Fabric
    >>> # two hosts (0, 1) on switches 2 and 3, joined by two parallel cables (ports 2 and 3)
    >>> src, dst, port = [0, 2, 1, 3, 2, 3, 2, 3], [2, 0, 3, 1, 3, 2, 3, 2], [1, 1, 1, 1, 2, 2, 3, 3]
    >>> fab = Fabric("example", np.array(port), lids=np.array([1, 2, 3, 4]), lid_node=np.array([2, 3, 0, 1]),
    ...              lid_link=np.array([-1, -1, 1, 3]), lid_endpoint=np.array([-1, -1, 0, 1]),
    ...              endpoint_lid=np.array([3, 4]), egress=np.array([0, 2]), descriptions=[""] * 4, lines=[0] * 4)
    >>> t = Topology("two switches", 4, src, dst, np.ones(8), num_endpoints=2, fabric=fab)
    >>> minhop_tables(t).ports.tolist()  # the switches' LIDs 1, 2 take port 2, then the hosts' LIDs port 3
    [[1, 3], [3, 1]]
    """
    cached = _MINHOP.get(topology)
    if cached is not None:
        return cached
    fabric = _fabric(topology)
    E = topology.num_endpoints
    S = topology.num_nodes - E
    tail, head, ports = topology.link_src, topology.link_dst, fabric.link_port
    inter = (tail >= E) & (head >= E)
    # switch-to-switch ports of every switch, in port order: slot d of row s
    order = np.lexsort((ports[inter], tail[inter]))
    t_rows, h_rows, p_num = tail[inter][order] - E, head[inter][order] - E, ports[inter][order]
    degree = np.bincount(t_rows, minlength=S)
    D = max(int(degree.max(initial=0)), 1)
    first = np.concatenate(([0], np.cumsum(degree)[:-1]))
    slot = np.arange(t_rows.size) - first[t_rows]
    nb = np.full((S, D), -1, dtype=np.int64)
    nb_port = np.zeros((S, D), dtype=np.int64)
    nb[t_rows, slot], nb_port[t_rows, slot] = h_rows, p_num
    adjacency = csr_matrix((np.ones(t_rows.size), (t_rows, h_rows)), shape=(S, S))
    far = np.int32(np.iinfo(np.int32).max // 2)
    # LIDs in order: the switch a LID's traffic heads for, and the port it leaves that switch by
    lid_link = fabric.lid_link
    target = np.where(lid_link >= 0, tail[np.maximum(lid_link, 0)], fabric.lid_node) - E
    final = np.where(lid_link >= 0, ports[np.maximum(lid_link, 0)], 0)
    column = fabric.lid_endpoint
    targets, tix = np.unique(target, return_inverse=True)
    dist = shortest_path(adjacency, unweighted=True, indices=targets)  # (targets, S)
    dist = np.where(np.isfinite(dist), dist, far).astype(np.int32).T   # (S, targets)
    table = np.full((S, E), NO_PORT, dtype=np.uint8)
    counts = np.zeros(S * D, dtype=np.int32)  # routes assigned to every slot so far
    big = np.int32(np.iinfo(np.int32).max // 2)
    rows, flat_port = np.arange(S), nb_port.ravel()
    last, penalty, has = -1, np.zeros((S, D), np.int32), np.zeros(S, bool)
    for i in range(tix.size):
        if progress and i and i % 4096 == 0:
            progress(f"minhop tables: LID {i:,} of {tix.size:,} on {S:,} switches")
        x = tix[i]
        if x != last:  # the LIDs of one switch's hosts usually come together: the same candidates
            cand = (nb >= 0) & (dist[np.maximum(nb, 0), x] == dist[:, x, None] - 1)
            penalty = np.where(cand, 0, big).astype(np.int32)
            has, last = cand.any(axis=1), x
        live = has.copy()
        live[target[i]] = False
        pick = rows[live] * D + (counts.reshape(S, D) + penalty).argmin(axis=1)[live]
        counts[pick] += 1
        if column[i] >= 0:
            table[live, column[i]] = flat_port[pick]
            table[target[i], column[i]] = final[i]
    result = ForwardingTables(source="OpenSM minhop (emulated)", ports=table)
    _MINHOP[topology] = result
    return result
