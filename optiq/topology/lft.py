"""A fabric's linear forwarding tables (LFTs), as ``ibroute``, ``dump_lfts.sh`` and OpenSM's
``opensm-lfts.dump`` write them.

Every switch's table starts with a header line ``Unicast lids [0x0-0x1d] of switch Lid 2
guid 0x0002c90200405b30 (...)`` (``ibroute``, ``dump_lfts.sh``) or ``Unicast lids [0-29]
of switch Lid 2 guid 0x... ('...')`` (``opensm-lfts.dump``), followed by one line per
destination LID: ``0x0004 017 : (Channel Adapter portguid 0x...: 'node01 HCA-1')`` or
``0x0004 017 # Channel Adapter portguid ...``, that is the LID in hex and the output port
in decimal. Column headings, ``N valid lids dumped`` lines, blank lines and multicast
tables (``Multicast mlids ...`` sections) are skipped.

Only the entries for the hosts' LIDs are kept (:attr:`Fabric.endpoint_lid`): routes are
followed from each source host to each destination host. A switch's table is refused when
the file names a switch the fabric does not have, gives a switch two tables, or gives a
port beyond 254; a missing entry, a loop or a dead end are found when the routes are
walked (:func:`optiq.paths.fabric.forwarding_routes`), naming the switch and the LID.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TopologyError

if TYPE_CHECKING:
    from .base import Topology

__all__ = ["ForwardingTables", "read_forwarding_tables", "NO_PORT"]

#: Table entry of a destination the switch has no route for.
NO_PORT = 255

_HEADER = re.compile(r"^Unicast lids\b.*?\bguid\s+0x([0-9A-Fa-f]+)")
_ENTRY = re.compile(r"^0x([0-9A-Fa-f]+)\s+(\d+)\b")


@dataclass(frozen=True, eq=False)
class ForwardingTables:
    """Destination-based routes: the output port of every switch for every endpoint.

    Attributes
    ----------
    source : str
        Where the tables come from (a file, or the emulation that computed them).
    ports : ndarray of uint8, shape (switches, endpoints)
        ``ports[v - num_endpoints, t]``: the port switch ``v`` sends traffic for endpoint
        ``t`` out of; :data:`NO_PORT` where it has no entry.
    """

    source: str
    ports: np.ndarray

    def __repr__(self) -> str:
        missing = int((self.ports == NO_PORT).sum())
        return f"ForwardingTables({self.source!r}, switches={self.ports.shape[0]}, missing={missing})"


def read_forwarding_tables(path: str | Path, topology: Topology) -> ForwardingTables:
    """Read the LFTs of ``topology``'s switches (module docstring for the format).

    Raises
    ------
    TopologyError
        If the topology is not an InfiniBand fabric, or naming the line of a switch the
        fabric lacks, a second table of one switch, an entry outside a table, or a port
        beyond 254.
    """
    fabric = topology.fabric
    if fabric is None:
        raise TopologyError(f"forwarding tables need an InfiniBand fabric (ibnet:FILE), not {topology.name}")
    p = Path(path)
    if not p.is_file():
        raise TopologyError(f"forwarding tables {str(p)!r} " + ("is a directory" if p.is_dir() else "do not exist"))
    E = topology.num_endpoints
    switch_of = {int(name[2:], 16): v for v, name in enumerate(topology.node_names) if v >= E}
    endpoint_of = {int(lid): t for t, lid in enumerate(fabric.endpoint_lid.tolist()) if lid}
    ports = np.full((topology.num_nodes - E, E), NO_PORT, dtype=np.uint8)
    seen: dict[int, int] = {}
    row = -1
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
                    t = endpoint_of.get(int(m.group(1), 16))
                    if t is not None:
                        ports[row, t] = port
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
    return ForwardingTables(source=str(p), ports=ports)
