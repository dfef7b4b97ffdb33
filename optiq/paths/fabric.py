"""The default routes of an InfiniBand fabric: its forwarding tables walked hop by hop, or,
without them, the tables OpenSM's ``minhop`` engine would compute (:mod:`optiq.paths.minhop`).

**Walking.** A job leaves its source host by the host's first cabled port
(:attr:`~optiq.topology.ibnet.Fabric.egress`). At every switch the table entry for the
destination host's LID (or another of its LIDs, with LMC > 0) names the output port, whose
cable leads to the next node, until the destination host is reached. An entry the table
lacks, a port without a cable, a cable to another host, or a walk longer than the number of
switches (a loop) stops with a :class:`~optiq.errors.PathError` naming the switch and the LID.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import PathError, TopologyError
from ..topology.lft import NO_PORT, ForwardingTables
from .minhop import minhop_tables
from .pathset import PathSet

if TYPE_CHECKING:
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["forwarding_routes", "minhop_tables", "port_links"]


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


def forwarding_routes(topology: Topology, demands: Demands, tables: ForwardingTables | None = None, *,
                      lid_offset: np.ndarray | None = None) -> PathSet:
    """Every job's route through the fabric's forwarding tables (module docstring).

    ``tables`` defaults to the fabric's own (``routes=``), else :func:`minhop_tables`.
    ``lid_offset`` (per job) sends to the destination's LID that many after its base LID
    (with LMC > 0; default 0).

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
    column = tables.endpoint_column[dst]
    if lid_offset is not None:
        column = fabric.lid_space.columns(fabric.endpoint_lid[dst] + np.asarray(lid_offset, dtype=np.int64))
        if (column < 0).any():
            j = int(np.flatnonzero(column < 0)[0])
            raise PathError(f"host {_host(topology, dst[j])} has no LID {int(lid_offset[j])} after its base LID "
                            f"{_lid(fabric, dst[j])} (LMC {int(fabric.lmc)})")
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
                            f"for LID 0x{int(tables.lids[column[j]]):04x})")
        port = tables.table[at - E, column[jobs]].astype(np.int64)
        nxt = np.where(port < links_of.shape[1], links_of[at - E, np.minimum(port, links_of.shape[1] - 1)], -1)
        bad = np.flatnonzero((port == NO_PORT) | (nxt < 0))
        if bad.size:
            i = bad[0]
            what = ("has no entry for" if port[i] == NO_PORT else
                    f"sends to port {port[i]}, which has no cable, for")
            raise PathError(f"switch {fabric.describe(topology, at[i])} {what} LID 0x{int(tables.lids[column[jobs[i]]]):04x} "
                            f"(host {_host(topology, dst[jobs[i]])}), on the route from "
                            f"{_host(topology, src[jobs[i]])} ({tables.source})")
        link = np.full(src.size, -1, dtype=np.int64)
        link[jobs] = nxt
        steps.append(link)
        v = np.where(live, heads[np.maximum(link, 0)], v)
        live = live & (v != dst)
    if live.any():
        j = int(np.flatnonzero(live)[0])
        raise PathError(f"the route from {_host(topology, src[j])} to LID 0x{int(tables.lids[column[j]]):04x} (host "
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
