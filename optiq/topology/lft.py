"""A fabric's linear forwarding tables (LFTs), as ``ibroute``, ``dump_lfts`` and OpenSM's
``opensm-lfts.dump`` write them, and as OpenSM's ``file`` routing engine loads them.

Every switch's table starts with a header line ``Unicast lids [0x0-0x1d] of switch Lid 2
guid 0x0002c90200405b30 (...)`` (``ibroute``, ``dump_lfts``) or ``Unicast lids [0-29]
of switch Lid 2 guid 0x... ('...')`` (``opensm-lfts.dump``), followed by one line per
destination LID: ``0x0004 017 : (Channel Adapter portguid 0x...: 'node01 HCA-1')`` or
``0x0004 017 # Channel Adapter portguid ...``, that is the LID in hex and the output port
in decimal. Column headings, ``N valid lids dumped`` lines, blank lines and multicast
tables (``Multicast mlids ...`` sections) are skipped.

Every LID of the fabric is kept, the LMC LIDs of a port too (:attr:`Fabric.lid_space`).
A dump of another sweep than the ``ibnetdiscover`` file (every LID moves when the LMC
changes) is recognised by the port GUIDs on its lines: a LID the fabric gives another port,
or none, is taken to the port of that GUID as OpenSM's ``file`` engine does (the same
offset within the port's LIDs), and the tables say how many were (:attr:`remapped`). A
switch's table is refused when the file names a switch the fabric does not have, gives a
switch two tables, or gives a port beyond 254. A missing entry, a loop or a dead end are
found when the routes are walked (:func:`optiq.paths.fabric.forwarding_routes`) or the
tables checked (:func:`optiq.paths.tablecheck.check_tables`), naming the switch and the LID.

:func:`write_forwarding_tables` writes tables for OpenSM's ``file`` engine (``opensm -R
file -U FILE``): a table for every switch, a line for every LID, each with the port GUID
the engine uses to follow a LID that moved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TopologyError

if TYPE_CHECKING:
    from .base import Topology
    from .ibnet import Fabric

__all__ = ["ForwardingTables", "read_forwarding_tables", "write_forwarding_tables", "NO_PORT"]

#: Table entry of a destination the switch has no route for.
NO_PORT = 255

_HEADER = re.compile(r"^Unicast lids\b.*?\bguid\s+0x([0-9A-Fa-f]+)")
_ENTRY = re.compile(r"^0x([0-9A-Fa-f]+)\s+(\d+)\b")
_PORTGUID = re.compile(r"\sportguid\s+0x([0-9A-Fa-f]+)")


@dataclass(frozen=True, eq=False)
class ForwardingTables:
    """Destination-based routes: the output port of every switch for every LID of a fabric.

    Attributes
    ----------
    source : str
        Where the tables come from (a file, or what computed them).
    table : ndarray of uint8, shape (switches, LIDs)
        ``table[v - E, c]``: the port switch ``v`` sends LID ``lids[c]`` out of (port 0:
        the switch itself); :data:`NO_PORT` where it has no entry. ``E`` endpoints.
    lids : ndarray of int
        The LID of every column: every LID of the fabric (:attr:`Fabric.lid_space`).
    endpoint_column : ndarray of int
        Per endpoint, the column of the LID its routes arrive at.
    remapped : int
        LIDs of the file taken to another LID by their port GUID (a dump of another sweep).
    """

    source: str
    table: np.ndarray
    lids: np.ndarray
    endpoint_column: np.ndarray
    remapped: int = 0

    @cached_property
    def ports(self) -> np.ndarray:
        """``ports[v - E, t]``: the port switch ``v`` sends endpoint ``t``'s traffic out of."""
        return self.table[:, self.endpoint_column]

    def with_table(self, table: np.ndarray, source: str) -> ForwardingTables:
        """The same LIDs routed by ``table``."""
        return ForwardingTables(source, table, self.lids, self.endpoint_column)

    def __repr__(self) -> str:
        missing = int((self.table == NO_PORT).sum())
        return (f"ForwardingTables({self.source!r}, switches={self.table.shape[0]}, lids={self.lids.size}, "
                f"missing={missing})")


def empty_tables(topology: Topology, source: str) -> ForwardingTables:
    """Tables of ``topology``'s fabric with no entry yet."""
    fabric = _fabric_of(topology)
    space = fabric.lid_space
    return ForwardingTables(source, np.full((topology.num_nodes - topology.num_endpoints, space.lids.size), NO_PORT,
                                            dtype=np.uint8), space.lids, space.columns(fabric.endpoint_lid))


def _fabric_of(topology: Topology) -> Fabric:
    if topology.fabric is None:
        raise TopologyError(f"forwarding tables need an InfiniBand fabric (ibnet:FILE), not {topology.name}")
    return topology.fabric


def read_forwarding_tables(path: str | Path, topology: Topology) -> ForwardingTables:
    """Read the LFTs of ``topology``'s switches (module docstring for the format).

    Raises
    ------
    TopologyError
        If the topology is not an InfiniBand fabric, or naming the line of a switch the
        fabric lacks, a second table of one switch, an entry outside a table, or a port
        beyond 254.
    """
    fabric = _fabric_of(topology)
    p = Path(path)
    if not p.is_file():
        raise TopologyError(f"forwarding tables {str(p)!r} " + ("is a directory" if p.is_dir() else "do not exist"))
    E = topology.num_endpoints
    tables = empty_tables(topology, str(p))
    space = fabric.lid_space
    switch_of = {int(name[2:], 16): v for v, name in enumerate(topology.node_names) if v >= E}
    port_of_guid = {int(g): i for i, g in enumerate(fabric.lid_guid.tolist()) if g}
    seen: dict[int, int] = {}
    row = -1
    rows: list[int] = []
    lids: list[int] = []
    guids: list[int] = []
    ports: list[int] = []
    where = f"forwarding tables {str(p)!r}"
    try:
        fh = p.open(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise TopologyError(f"cannot read {where}: {exc.strerror or exc}") from None
    with fh:
        for number, line in enumerate(fh, 1):
            m = _ENTRY.match(line)
            if m:
                if row == -1:
                    raise TopologyError(f"{where}, line {number}: an entry before any 'Unicast lids ... guid 0x...' "
                                        f"header")
                if row >= 0:
                    port = int(m.group(2))
                    if port >= NO_PORT:
                        raise TopologyError(f"{where}, line {number}: port {port} (switch ports are 0..254)")
                    g = _PORTGUID.search(line)
                    rows.append(row)
                    lids.append(int(m.group(1), 16))
                    guids.append(port_of_guid.get(int(g.group(1), 16), -1) if g else -1)
                    ports.append(port)
                continue
            if line.startswith("Unicast lids"):
                h = _HEADER.match(line)
                if not h:
                    raise TopologyError(f"{where}, line {number}: a table header without the switch's "
                                        f"'guid 0x...'")
                guid = int(h.group(1), 16)
                if guid not in switch_of:
                    raise TopologyError(f"{where}, line {number}: switch 0x{guid:016x} is not in {topology.name}")
                if guid in seen:
                    raise TopologyError(f"{where}, line {number}: a second table of switch 0x{guid:016x} (the "
                                        f"first on line {seen[guid]})")
                seen[guid] = number
                row = switch_of[guid] - E
            elif line.startswith("Multicast"):
                row = -2  # entries of a multicast table: skipped
    if not seen:
        raise TopologyError(f"{where}: no 'Unicast lids ... of switch ... guid 0x...' table")
    lid, owner = np.array(lids, dtype=np.int64), np.array(guids, dtype=np.int64)
    moved = _remap(fabric, lid, owner)
    columns = space.columns(moved)
    ok = columns >= 0
    tables.table[np.array(rows, dtype=np.int64)[ok], columns[ok]] = np.array(ports, dtype=np.uint8)[ok]
    listed = np.array([switch_of[g] - E for g in seen])
    foreign = int((~ok).sum())
    if foreign * 2 > ok.size and (tables.table[listed][:, tables.endpoint_column] == NO_PORT).any():
        raise TopologyError(f"{where}: {foreign:,} of its {ok.size:,} entries are for LIDs {fabric.source} does not "
                            f"have, and its hosts' LIDs are missing: the tables are of another sweep (the LIDs "
                            f"moved); dump them with their port GUIDs (dump_lfts) or discover the fabric again")
    return ForwardingTables(str(p), tables.table, tables.lids, tables.endpoint_column, int((moved != lid).sum()))


def _remap(fabric: Fabric, lid: np.ndarray, port: np.ndarray) -> np.ndarray:
    """The LIDs OpenSM's ``file`` engine routes for lines of ``lid`` whose port GUIDs name
    ``port`` (indices of :attr:`Fabric.lids`, -1: none): ``lid`` where the port owns it, else
    the port's LID at the same offset within its ``2**lmc``."""
    known = port >= 0
    base = np.where(known, fabric.lids[np.maximum(port, 0)], lid)
    size = np.where(known, 1 << fabric.lid_lmc[np.maximum(port, 0)], 1)
    owns = (base <= lid) & (lid < base + size)
    return np.where(known & ~owns, base + (lid & (size - 1)), lid)


def write_forwarding_tables(tables: ForwardingTables, topology: Topology, path: str | Path) -> None:
    """Write ``tables`` for OpenSM's ``file`` engine (``opensm -R file -U PATH``), in the
    format ``dump_lfts`` prints: a table per switch, a line per LID with its port GUID.

    Raises
    ------
    TopologyError
        If a switch has no entry for a LID (the engine would drop its traffic), or the file
        cannot be written.
    """
    fabric = _fabric_of(topology)
    E = topology.num_endpoints
    missing = np.argwhere(tables.table == NO_PORT)
    if missing.size:
        s, c = missing[0]
        raise TopologyError(f"switch {fabric.describe(topology, int(s) + E)} has no entry for LID "
                            f"0x{int(tables.lids[c]):04x} ({missing.shape[0]} entries missing): OpenSM would drop "
                            f"that traffic")
    space = fabric.lid_space
    entry = space.entry
    kinds = np.where(fabric.lid_link[entry] < 0, "Switch", "Channel Adapter")
    info = [f" : ({kind} portguid 0x{int(guid):016x}: '{fabric.descriptions[int(node)]}')"
            for kind, guid, node in zip(kinds, fabric.lid_guid[entry], fabric.lid_node[entry])]
    lid_text = [f"0x{int(lid):04x} " for lid in tables.lids]
    top = int(tables.lids.max(initial=0))
    own = {int(node): int(fabric.lids[i]) for i, node in enumerate(fabric.lid_node.tolist())
           if fabric.lid_link[i] < 0}
    lines = []
    for row in range(tables.table.shape[0]):
        v = row + E
        lines.append(f"Unicast lids [0x0-0x{top:x}] of switch Lid {own.get(v, 0)} guid "
                     f"0x{int(fabric.node_guid[v]):016x} ({fabric.descriptions[v]}):")
        lines.append("  Lid  Out   Destination")
        lines.append("       Port     Info ")
        ports = tables.table[row]
        lines.extend(f"{lid}{int(port):03d}{text}" for lid, port, text in zip(lid_text, ports, info))
        lines.append(f"{tables.lids.size} valid lids dumped ")
    try:
        Path(path).write_text("\n".join(lines) + "\n")
    except OSError as exc:
        raise TopologyError(f"cannot write forwarding tables {str(path)!r}: {exc.strerror or exc}") from None
