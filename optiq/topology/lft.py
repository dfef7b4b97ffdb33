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
    from collections.abc import Iterator

    from .base import Topology
    from .ibnet import Fabric

__all__ = ["ForwardingTables", "read_forwarding_tables", "write_forwarding_tables", "NO_PORT"]

#: Table entry of a destination the switch has no route for.
NO_PORT = 255

_HEADER = re.compile(r"^Unicast lids\b.*?\bguid\s+0x([0-9A-Fa-f]+)")


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
    where = f"forwarding tables {str(p)!r}"
    # the port (its index among the fabric's LIDs) each line's port GUID names, -1: none or unknown
    order = np.argsort(fabric.lid_guid, kind="stable")
    known = fabric.lid_guid[order]
    seen: dict[int, int] = {}
    entries = foreign = remapped = 0
    for data, first_line in _pieces(p, where):  # a piece at a time: memory grows with a piece, not the file
        rows, lids, guid_of, ports = _entries(data, where, switch_of, topology.name, E, seen, first_line)
        at = np.minimum(np.searchsorted(known, guid_of), max(known.size - 1, 0))
        owner = np.where((guid_of > 0) & (known[at] == guid_of), order[at], -1) if known.size else \
            np.full(lids.size, -1)
        moved = _remap(fabric, lids, owner)
        columns = space.columns(moved)
        ok = columns >= 0
        tables.table[rows[ok], columns[ok]] = ports[ok].astype(np.uint8)
        entries, foreign, remapped = entries + ok.size, foreign + int((~ok).sum()), remapped + int((moved != lids).sum())
    if not seen:
        raise TopologyError(f"{where}: no 'Unicast lids ... of switch ... guid 0x...' table")
    listed = np.array([switch_of[g] - E for g in seen])
    if foreign * 2 > entries and (tables.table[listed][:, tables.endpoint_column] == NO_PORT).any():
        raise TopologyError(f"{where}: {foreign:,} of its {entries:,} entries are for LIDs {fabric.source} does not "
                            f"have, and its hosts' LIDs are missing: the tables are of another sweep (the LIDs "
                            f"moved); dump them with their port GUIDs (dump_lfts) or discover the fabric again")
    return ForwardingTables(str(p), tables.table, tables.lids, tables.endpoint_column, remapped)


#: Bytes of the file read at once (cut where a table starts), so a dump of any size fits.
PIECE_BYTES = 64 << 20


def _pieces(path: Path, where: str) -> Iterator[tuple[bytes, int]]:
    """The file in pieces of whole tables of about :data:`PIECE_BYTES`, each with the number
    of its first line."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise TopologyError(f"cannot read {where}: {exc.strerror or exc}") from None
    with fh:
        carry, line = b"", 1
        while True:
            try:
                block = fh.read(PIECE_BYTES)
            except OSError as exc:
                raise TopologyError(f"cannot read {where}: {exc.strerror or exc}") from None
            data = carry + block
            if not block:
                if data:
                    yield data, line
                return
            cut = max(data.rfind(b"\nUnicast lids"), data.rfind(b"\nMulticast"))
            if cut <= 0:  # no table starts in it: read on
                carry = data
                continue
            piece, carry = data[:cut + 1], data[cut + 1:]
            yield piece, line
            line += piece.count(b"\n")


_HEX = np.full(256, 255, dtype=np.uint8)
_HEX[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10)
_HEX[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16)
_HEX[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16)
_SPACE = np.zeros(256, dtype=bool)
_SPACE[np.frombuffer(b" \t", np.uint8)] = True


#: Entries parsed at once (bounds the memory of reading a table of any size).
_CHUNK = 1 << 18


def _digits(arr: np.ndarray, at: np.ndarray, width: int, base: int) -> tuple[np.ndarray, np.ndarray]:
    """The number of base ``base`` (10 or 16) written at every position ``at`` of ``arr``, at
    most ``width`` (<= 8) digits: its value and how many digits it has."""
    value = np.zeros(at.size, dtype=np.int64)
    count = np.zeros(at.size, dtype=np.int64)
    k = np.arange(width)
    for lo in range(0, at.size, _CHUNK):
        where = at[lo:lo + _CHUNK, None] + k
        d = _HEX[arr[np.minimum(where, arr.size - 1)]].astype(np.int64)
        ok = (d < base) & (where < arr.size)
        n = np.where(ok.all(axis=1), width, (~ok).argmax(axis=1))
        power = n[:, None] - 1 - k
        value[lo:lo + _CHUNK] = (np.where(power >= 0, d, 0) * base ** np.maximum(power, 0)).sum(axis=1)
        count[lo:lo + _CHUNK] = n
    return value, count


def _guids(arr: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The hex numbers written at positions ``at``: 16 digits, as ``dump_lfts`` writes GUIDs,
    read at fixed places; shorter ones digit by digit."""
    out = np.zeros(at.size, dtype=np.uint64)
    weight = np.uint64(16) ** np.arange(15, -1, -1, dtype=np.uint64)
    for lo in range(0, at.size, _CHUNK):
        where = np.minimum(at[lo:lo + _CHUNK, None] + np.arange(17), arr.size - 1)
        d = _HEX[arr[where]]
        whole = (d[:, :16] < 16).all(axis=1) & (d[:, 16] >= 16)
        out[lo:lo + _CHUNK] = (np.where(whole[:, None], d[:, :16], 0).astype(np.uint64) * weight).sum(axis=1)
        for k in np.flatnonzero(~whole).tolist():  # rare: read as text
            i = int(at[lo + k])
            n = next((j for j in range(17) if i + j >= arr.size or _HEX[arr[i + j]] >= 16), 17)
            out[lo + k] = int(arr[i:i + n].tobytes() or b"0", 16) if n <= 16 else 0
    return out


def _find(arr: np.ndarray, pattern: bytes, at: np.ndarray | None = None) -> np.ndarray:
    """Positions of ``arr`` (or of those in ``at``) where ``pattern`` starts."""
    n = len(pattern)
    where = np.flatnonzero(arr[: max(arr.size - n + 1, 0)] == pattern[0]) if at is None else \
        at[(at + n <= arr.size)]
    for k in range(at is None, n):
        where = where[arr[where + k] == pattern[k]]
    return where


def _lid_and_port(arr: np.ndarray, entry: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The LID and port of the entry lines starting at ``entry`` ("0x<hex> <decimal>" and a
    break), and which lines are entries. The layout ``dump_lfts`` writes (four hex digits,
    a space, three digits, a space) is read at fixed places; any other line digit by digit."""
    lid = np.zeros(entry.size, dtype=np.int64)
    port = np.zeros(entry.size, dtype=np.int64)
    valid = np.zeros(entry.size, dtype=bool)
    breaks = np.zeros(256, dtype=bool)
    breaks[np.frombuffer(b" \t:#\r\n", np.uint8)] = True
    for lo in range(0, entry.size, _CHUNK):
        at = entry[lo:lo + _CHUNK]
        b = arr[np.minimum(at[:, None] + np.arange(11, dtype=np.int64), arr.size - 1)]
        d = _HEX[b].astype(np.int32)
        valid[lo:lo + _CHUNK] = (at + 11 <= arr.size) & (d[:, 2:6] < 16).all(axis=1) & _SPACE[b[:, 6]] \
            & (d[:, 7:10] < 10).all(axis=1) & breaks[b[:, 10]]
        lid[lo:lo + _CHUNK] = d[:, 2] * 4096 + d[:, 3] * 256 + d[:, 4] * 16 + d[:, 5]
        port[lo:lo + _CHUNK] = d[:, 7] * 100 + d[:, 8] * 10 + d[:, 9]
    other = np.flatnonzero(~valid)
    if other.size:
        start = entry[other]
        lid_o, lid_len = _digits(arr, start + 2, 6, 16)
        gap_at = start + 2 + lid_len
        window = arr[np.minimum(gap_at[:, None] + np.arange(8), arr.size - 1)]
        gap = (~_SPACE[window]).argmax(axis=1)
        port_o, port_len = _digits(arr, gap_at + gap, 4, 10)
        end = gap_at + gap + port_len
        after = arr[np.minimum(end, arr.size - 1)]
        word = (_HEX[after] < 10) | (after == ord("_")) | (((after | 0x20) >= ord("a")) & ((after | 0x20) <= ord("z")))
        valid[other] = (lid_len > 0) & (lid_len < 6) & (gap > 0) & (port_len > 0) & ~(word & (end < arr.size))
        lid[other], port[other] = lid_o, port_o
    return lid, port, valid


def _entries(data: bytes, where: str, switch_of: dict[int, int], name: str, E: int, seen: dict[int, int],
             first_line: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every unicast entry of a piece of the file (starting at line ``first_line``), read from
    its bytes at once: per entry its switch row, LID, port GUID (0: none on the line) and port;
    the switches' GUIDs go into ``seen`` (GUID -> line of its table), in file order.

    Raises TopologyError naming the line of an entry outside a table, a header without a
    switch GUID, a switch not in the fabric or listed twice, or a port beyond 254."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = b" " * 3 + data[3:]
    arr = np.frombuffer(data, dtype=np.uint8)
    starts = np.concatenate(([0], np.flatnonzero(arr == 10) + 1))
    starts = starts[starts < arr.size]

    def line_of(pos: int) -> int:  # 1-based, in the file
        return int(np.searchsorted(starts, pos, side="right")) + first_line - 1

    # tables: "Unicast lids" starts one, "Multicast" starts one whose entries are skipped
    heads = sorted([(int(pos), b"Unicast lids") for pos in _find(arr, b"Unicast lids", starts)]
                   + [(int(pos), b"Multicast") for pos in _find(arr, b"Multicast", starts)])
    section_row = []
    for pos, kind in heads:
        if kind == b"Multicast":
            section_row.append(-2)
            continue
        line = data[pos:data.find(b"\n", pos) if data.find(b"\n", pos) >= 0 else len(data)].decode("utf-8", "replace")
        h = _HEADER.match(line)
        number = line_of(pos)
        if not h:
            raise TopologyError(f"{where}, line {number}: a table header without the switch's 'guid 0x...'")
        guid = int(h.group(1), 16)
        if guid not in switch_of:
            raise TopologyError(f"{where}, line {number}: switch 0x{guid:016x} is not in {name}")
        if guid in seen:
            raise TopologyError(f"{where}, line {number}: a second table of switch 0x{guid:016x} (the first on line "
                                f"{seen[guid]})")
        seen[guid] = number
        section_row.append(switch_of[guid] - E)
    head_pos = np.array([pos for pos, _ in heads], dtype=np.int64)
    rows_of = np.array(section_row, dtype=np.int64)
    # entries: lines "0x<lid hex> <port decimal>..."
    entry = starts[(starts + 2 < arr.size)]
    entry = entry[(arr[entry] == ord("0")) & ((arr[entry + 1] | 0x20) == ord("x"))]
    lid, port, valid = _lid_and_port(arr, entry)
    entry, lid, port = entry[valid], lid[valid], port[valid]
    section = np.searchsorted(head_pos, entry, side="right") - 1
    if (section < 0).any():
        raise TopologyError(f"{where}, line {line_of(entry[section < 0][0])}: an entry before any 'Unicast lids ... "
                            f"guid 0x...' header")
    row = rows_of[section]
    unicast = row >= 0
    entry, lid, port, row = entry[unicast], lid[unicast], port[unicast], row[unicast]
    beyond = np.flatnonzero(port >= NO_PORT)
    if beyond.size:
        raise TopologyError(f"{where}, line {line_of(entry[beyond[0]])}: port {int(port[beyond[0]])} (switch ports "
                            f"are 0..254)")
    # a port GUID on the line: " portguid 0x<hex>", the hex digits from where the match ends
    port_guid = np.zeros(entry.size, dtype=np.uint64)
    marks = _find(arr, b"portguid")
    marks = marks[(marks > 0) & _SPACE[arr[np.maximum(marks - 1, 0)]]]
    gap = np.zeros(marks.size, dtype=np.int64)
    for lo in range(0, marks.size, _CHUNK):
        window = arr[np.minimum(marks[lo:lo + _CHUNK, None] + 8 + np.arange(8), arr.size - 1)]
        gap[lo:lo + _CHUNK] = (~_SPACE[window]).argmax(axis=1)
    marks = marks + 8 + gap
    marks = marks[(gap > 0) & (arr[np.minimum(marks, arr.size - 1)] == ord("0"))
                  & ((arr[np.minimum(marks + 1, arr.size - 1)] | 0x20) == ord("x"))] + 2
    if marks.size and entry.size:
        ends = np.concatenate((starts[1:], [arr.size]))
        owner = np.searchsorted(entry, marks, side="right") - 1
        line_end = ends[np.searchsorted(starts, entry[np.maximum(owner, 0)], side="right") - 1]
        mine = (owner >= 0) & (marks < line_end)
        marks, owner = marks[mine], owner[mine]
        value = _guids(arr, marks)
        first = np.unique(owner, return_index=True)[1]  # the first on a line
        port_guid[owner[first]] = value[first]
    return row, lid.astype(np.int64), port_guid, port.astype(np.int64)


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
    """Write ``tables`` for OpenSM's ``file`` engine (``opensm -R file,no_fallback -U PATH``), in
    the format ``dump_lfts`` prints: a table per switch, a line per LID with its port GUID.

    Raises
    ------
    TopologyError
        If a switch has no entry for a LID (the engine would drop its traffic) or one beyond
        its ports (the engine would refuse the file, and without ``no_fallback`` route minhop
        instead, saying so only in its log), or the file cannot be written.
    """
    fabric = _fabric_of(topology)
    E = topology.num_endpoints
    missing = np.argwhere(tables.table == NO_PORT)
    if missing.size:
        s, c = missing[0]
        raise TopologyError(f"switch {fabric.describe(topology, int(s) + E)} has no entry for LID "
                            f"0x{int(tables.lids[c]):04x} ({missing.shape[0]} entries missing): OpenSM would drop "
                            f"that traffic")
    beyond = np.argwhere(tables.table.astype(np.int64) > fabric.num_ports[E:, None])
    if beyond.size:
        s, c = beyond[0]
        raise TopologyError(f"switch {fabric.describe(topology, int(s) + E)} sends LID 0x{int(tables.lids[c]):04x} to "
                            f"port {int(tables.table[s, c])}, and it has {int(fabric.num_ports[int(s) + E])} ports "
                            f"({beyond.shape[0]} such entries): OpenSM's file engine would refuse the file")
    space = fabric.lid_space
    entry = space.entry
    kinds = np.where(fabric.lid_link[entry] < 0, "Switch", "Channel Adapter")
    info = [f" : ({kind} portguid 0x{int(guid):016x}: '{fabric.descriptions[int(node)]}')"
            for kind, guid, node in zip(kinds, fabric.lid_guid[entry], fabric.lid_node[entry])]
    lid_text = [f"0x{int(lid):04x} " for lid in tables.lids]
    top = int(tables.lids.max(initial=0))
    own = {int(node): int(fabric.lids[i]) for i, node in enumerate(fabric.lid_node.tolist())
           if fabric.lid_link[i] < 0}
    port_text = [f"{p:03d}" for p in range(256)]
    try:
        with open(path, "w") as fh:  # a switch at a time: the text of all of them may be gigabytes
            for row in range(tables.table.shape[0]):
                v = row + E
                fh.write(f"Unicast lids [0x0-0x{top:x}] of switch Lid {own.get(v, 0)} guid "
                         f"0x{int(fabric.node_guid[v]):016x} ({fabric.descriptions[v]}):\n"
                         "  Lid  Out   Destination\n       Port     Info \n")
                fh.write("\n".join([lid + port_text[port] + text for lid, port, text in
                                    zip(lid_text, tables.table[row].tolist(), info)]))
                fh.write(f"\n{tables.lids.size} valid lids dumped \n")
    except OSError as exc:
        raise TopologyError(f"cannot write forwarding tables {str(path)!r}: {exc.strerror or exc}") from None
