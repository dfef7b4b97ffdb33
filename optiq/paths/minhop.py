"""The forwarding tables OpenSM's ``minhop`` engine computes, as OpenSM 3.3.23 computes them.

Every switch routes every LID of the fabric (:attr:`~optiq.topology.ibnet.Fabric.lid_space`)
on its own, one LID after another, counting the routes it has put on each port:

* **Order of the destinations.** The CA ports first: the switches sorted by how many CA
  ports are cabled to them, most first, ties in the order of OpenSM's switch map (node
  GUIDs compared as stored, in network byte order: the GUID with its bytes reversed), and
  each switch's CA ports in its port order. Then every other port (the switches' own port
  0) in the order of OpenSM's port map (port GUIDs with their bytes reversed). With LMC =
  L > 0 this whole order is walked 2**L times, the k-th time for each port's LID ``base + k``.
* **The port.** A switch routes its own LID to port 0, and a CA port cabled to it to that
  cable's port. Otherwise it takes, among its ports on a minimum-hop path to the switch the
  LID belongs to (the CA's switch), the one with the fewest routes counted so far, ties to
  the first in port order; no such port leaves the entry empty. Routes to a switch's LID
  are not counted (OpenSM's ``port_profile_switch_nodes`` is off by default).
* **LMC > 0.** The ports are taken in order starting after the port of the LID before
  (``base + k - 1``), and a port toward a system (``sysimgguid``) that none of the port's
  earlier LIDs went to is preferred, the fewest routes first, then one toward another node;
  else the fewest routes, ties to the port whose neighbour took fewer of the earlier LIDs.

Defaults assumed: no hop weights, no port search ordering, no GUID routing order file, no
port shifting or scattering, tables built from scratch (a fresh OpenSM).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TopologyError
from ..topology.lft import ForwardingTables, empty_tables

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..topology import Topology

__all__ = ["minhop_tables", "SOURCE", "switch_slots"]

#: The source named by the emulated tables.
SOURCE = "OpenSM minhop (emulated)"

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _bswap(values: np.ndarray) -> np.ndarray:
    """64-bit GUIDs with their bytes reversed: the order OpenSM's maps keep them in."""
    return np.asarray(values, dtype=np.uint64).byteswap()


def switch_slots(topology: Topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every switch's cables to other switches, in port order.

    Returns
    -------
    nb, nb_port, nb_link : ndarray of int, shape (switches, D)
        Slot ``d`` of row ``s``: the switch (row index) the cable leads to (-1: no slot), its
        port number on switch ``s`` and its link id. ``D`` is the most such cables of a switch.
    """
    fabric = topology.fabric
    if fabric is None:
        raise TopologyError(f"{topology.name} is not an InfiniBand fabric (ibnet:FILE)")
    E, S = topology.num_endpoints, topology.num_nodes - topology.num_endpoints
    tail, head, ports = topology.link_src, topology.link_dst, fabric.link_port
    inter = np.flatnonzero((tail >= E) & (head >= E))
    inter = inter[np.lexsort((ports[inter], tail[inter]))]
    rows = tail[inter] - E
    degree = np.bincount(rows, minlength=S)
    D = max(int(degree.max(initial=0)), 1)
    slot = np.arange(inter.size) - np.concatenate(([0], np.cumsum(degree)[:-1]))[rows]
    nb = np.full((S, D), -1, dtype=np.int64)
    nb_port = np.zeros((S, D), dtype=np.int64)
    nb_link = np.full((S, D), -1, dtype=np.int64)
    nb[rows, slot], nb_port[rows, slot], nb_link[rows, slot] = head[inter] - E, ports[inter], inter
    return nb, nb_port, nb_link


def destination_order(topology: Topology) -> np.ndarray:
    """The ports (indices of :attr:`Fabric.lids`) in the order minhop routes them (module docstring)."""
    fabric = topology.fabric
    assert fabric is not None
    E = topology.num_endpoints
    ca = np.flatnonzero((fabric.lid_link >= 0) & (fabric.lids > 0))
    ca = ca[topology.link_src[fabric.lid_link[ca]] >= E]  # CA ports cabled to a switch
    sw_of, port_on = topology.link_src[fabric.lid_link[ca]], fabric.link_port[fabric.lid_link[ca]]
    S = topology.num_nodes - E
    endports = np.bincount(sw_of - E, minlength=S)
    switch_rank = np.empty(S, dtype=np.int64)
    switch_rank[np.lexsort((_bswap(fabric.node_guid[E:]), -endports))] = np.arange(S)
    first = ca[np.lexsort((port_on, switch_rank[sw_of - E]))]
    rest = np.setdiff1d(np.flatnonzero(fabric.lids > 0), first)
    rest = rest[np.argsort(_bswap(fabric.lid_guid[rest]), kind="stable")]
    return np.concatenate((first, rest))


def minhop_tables(topology: Topology, *, progress: Callable[[str], None] | None = None) -> ForwardingTables:
    """The tables OpenSM 3.3.23's ``minhop`` engine writes for ``topology``'s fabric (module docstring).

    One step per LID for every switch at once; computed once per topology object and kept.

    Examples
    --------
    >>> import numpy as np
    >>> from optiq.topology import Topology
    >>> from optiq.topology.ibnet import Fabric
    >>> # two hosts (0, 1) on switches 2 and 3, joined by two parallel cables (ports 2 and 3)
    >>> src, dst, port = [0, 2, 1, 3, 2, 3, 2, 3], [2, 0, 3, 1, 3, 2, 3, 2], [1, 1, 1, 1, 2, 2, 3, 3]
    >>> fab = Fabric("example", np.array(port), lids=np.array([1, 2, 3, 4]), lid_node=np.array([2, 3, 0, 1]),
    ...              lid_link=np.array([-1, -1, 1, 3]), lid_endpoint=np.array([-1, -1, 0, 1]),
    ...              endpoint_lid=np.array([3, 4]), egress=np.array([0, 2]), descriptions=[""] * 4, lines=[0] * 4,
    ...              lid_guid=np.array([2, 3, 10, 11], dtype=np.uint64), node_guid=np.arange(4, dtype=np.uint64))
    >>> t = Topology("two switches", 4, src, dst, np.ones(8), num_endpoints=2, fabric=fab)
    >>> # columns: LIDs 1, 2 (the switches), 3, 4 (the hosts). Host LIDs first: each switch sends the
    >>> # other's host out of port 2 (tied at 0 routes); the other switch's LID then takes port 3
    >>> minhop_tables(t).table.tolist()
    [[0, 3, 1, 2], [3, 0, 2, 1]]
    """
    cached = _CACHE.get(topology)
    if cached is not None:
        return cached
    fabric = topology.fabric
    if fabric is None:
        raise TopologyError(f"{topology.name} is not an InfiniBand fabric (ibnet:FILE)")
    E, S = topology.num_endpoints, topology.num_nodes - topology.num_endpoints
    nb, nb_port, _ = switch_slots(topology)
    D = nb.shape[1]
    tables = empty_tables(topology, SOURCE)
    table, space = tables.table, fabric.lid_space
    column_of = {(int(e), int(o)): c for c, (e, o) in enumerate(zip(space.entry.tolist(), space.offset.tolist()))}
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path
    adjacency = csr_matrix((np.ones(int((nb >= 0).sum())), (np.nonzero(nb >= 0)[0], nb[nb >= 0])), shape=(S, S))
    is_ca = fabric.lid_link >= 0
    link = np.maximum(fabric.lid_link, 0)
    target = np.where(is_ca, topology.link_src[link], fabric.lid_node) - E   # the switch a LID's traffic heads for
    final = np.where(is_ca, fabric.link_port[link], 0)                         # its port there
    order = destination_order(topology)
    order = order[target[order] >= 0]                                          # CA ports cabled to a switch
    targets, where = np.unique(target[order], return_inverse=True)
    far = np.iinfo(np.int32).max // 2
    dist = shortest_path(adjacency, unweighted=True, indices=targets)
    dist = np.where(np.isfinite(dist), dist, far).astype(np.int32).T        # (S, targets)
    counts = np.zeros((S, D), dtype=np.int64)
    big = np.iinfo(np.int64).max // 4
    rows = np.arange(S)
    system = fabric.system_guid[E:].astype(np.uint64)
    lmc_all = int(fabric.lid_lmc.max(initial=0))
    nodes_per_port = fabric.num_ports[E:] + 1                                  # ports 0..num_ports
    last, penalty, has = -1, np.zeros((S, D), np.int64), np.zeros(S, bool)
    steps = [(offset, int(i), int(x)) for offset in range(1 << lmc_all) for i, x in zip(order, where)
             if offset < (1 << int(fabric.lid_lmc[i]))]
    for n, (offset, i, x) in enumerate(steps):
        if progress and n and n % 4096 == 0:
            progress(f"minhop tables: LID {n:,} of {len(steps):,} on {S:,} switches")
        if x != last:
            cand = (nb >= 0) & (dist[np.maximum(nb, 0), x] == dist[:, x, None] - 1)
            penalty = np.where(cand, 0, big)
            has, last = cand.any(axis=1), x
        col, r = column_of[i, offset], int(target[i])
        live = has.copy()
        live[r] = False
        if lmc_all == 0:
            slot = (counts + penalty).argmin(axis=1)
        else:
            prev = [column_of[i, k] for k in range(offset)]
            slot = _lmc_slots(table, prev, col, nb, nb_port, cand, counts, system, nodes_per_port, offset)
            live &= slot >= 0
        picked = rows[live], slot[live]
        table[picked[0], col] = nb_port[picked]
        table[r, col] = final[i]
        if is_ca[i]:
            counts[picked] += 1
    _CACHE[topology] = tables
    return tables


def _lmc_slots(table: np.ndarray, prev: list[int], col: int, nb: np.ndarray, nb_port: np.ndarray, cand: np.ndarray,
               counts: np.ndarray, system: np.ndarray, nodes_per_port: np.ndarray, offset: int) -> np.ndarray:
    """Every switch's slot for a LID at ``offset`` > 0 of its port, by OpenSM's LMC rule
    (module docstring); -1 where no port leads closer."""
    S, D = nb.shape
    rows = np.arange(S)
    start = (table[:, prev[-1]].astype(np.int64) + 1) if offset else np.ones(S, dtype=np.int64)
    rank = np.where(nb >= 0, (nb_port - start[:, None]) % nodes_per_port[:, None], np.iinfo(np.int64).max)
    scan = np.argsort(rank, axis=1, kind="stable")
    # the switches the earlier LIDs of this port went to, from every switch
    went = np.full((S, max(len(prev), 1)), -1, dtype=np.int64)
    for k, c in enumerate(prev):
        port = table[:, c].astype(np.int64)
        match = (nb_port == port[:, None]) & (nb >= 0)
        went[:, k] = np.where(match.any(axis=1), nb[rows, match.argmax(axis=1)], -1)
    inf = np.iinfo(np.int64).max
    least = np.full(S, inf)
    least_sys, least_node, least_fwd = least.copy(), least.copy(), least.copy()
    best, best_sys, best_node = (np.full(S, -1, dtype=np.int64) for _ in range(3))
    for j in range(D):
        slot = scan[:, j]
        ok = cand[rows, slot]
        peer = nb[rows, slot]
        used = counts[rows, slot]
        same_node = went == peer[:, None]
        sys_found = ((went >= 0) & (system[np.maximum(went, 0)] == system[np.maximum(peer, 0)][:, None])).any(axis=1)
        node_found = same_node.any(axis=1)
        fwd = same_node.sum(axis=1)
        a = ok & ~sys_found & (used < least_sys)
        least_sys, best_sys, least_fwd = np.where(a, used, least_sys), np.where(a, slot, best_sys), np.where(a, 0, least_fwd)
        b = ok & sys_found & ~node_found & (used < least_node)
        least_node, best_node, least_fwd = (np.where(b, used, least_node), np.where(b, slot, best_node),
                                            np.where(b, 0, least_fwd))
        guid = sys_found & node_found
        lower = ok & (used < least)
        least_fwd = np.where(lower & guid & (fwd < least_fwd), fwd, least_fwd)
        best, least = np.where(lower, slot, best), np.where(lower, used, least)
        tie = ok & ~lower & guid & (used == least) & (fwd < least_fwd)
        least_fwd, best = np.where(tie, fwd, least_fwd), np.where(tie, slot, best)
    chosen = np.where(best_sys >= 0, best_sys, np.where(best_node >= 0, best_node, best))
    return np.where(best >= 0, chosen, -1)
