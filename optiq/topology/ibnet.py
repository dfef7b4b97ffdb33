"""InfiniBand fabrics as ``ibnetdiscover`` prints them, with OpenSM node-name maps.

``ibnetdiscover`` prints one block per node: a header (``Switch 36 "S-<guid>" # "desc"
base port 0 lid 6 lmc 0``, ``Ca 2 "H-<guid>" # "desc"``), then one line per cabled
port: ``[port](portguid) "S-<peer guid>"[peer port](peer portguid) # lid L lmc M "peer
desc" lid PL 4xQDR`` (switch ports print only ``# "peer desc" lid PL 4xQDR``). The grouped
form (``-g``) adds ``Chassis`` lines and ``[ext N]`` port labels, which are read and set
aside, as are ``vendid=``/``devid=``/``*guid=`` lines and comments.

What becomes of it:

* **Nodes.** Every switch is a node named ``S-<guid>``. Channel adapters (CAs) are the
  hosts, the endpoints. A host's name comes from the node-name map (``names=MAP``), else
  from the CA's description when it reads ``HOST DEVICE`` (``"node018 HCA-1"``,
  ``"node018 mlx5_0"``) or is one word, else it is ``H-<guid>``. CAs with the same host
  name are one host with several adapters (a multi-rail host): one endpoint with a cable
  per adapter port. Hosts are numbered in natural order of their names (``node2`` before
  ``node10``), then the switches in file order.
* **Links.** Every cable is two directed links, one each way; parallel cables are
  separate links. A link's capacity is its width times the lane rate of its speed after
  line encoding (:data:`LANE_GBPS`), in bytes/s; a cable whose ends report different
  speeds or widths runs at the slower. ``bw=RATE`` sets every link's capacity instead, and
  ``SPEED=RATE`` (e.g. ``XDR=200Gb/s``) sets or adds a speed's lane rate.
* **Routing.** The LIDs of switches and CA ports are kept (:class:`Fabric`: with LMC = L
  each port's 2**L LIDs, :attr:`Fabric.lid_space`, and its port GUID), so the
  default routes follow the fabric's forwarding tables (``routes=LFTS``, see
  :mod:`optiq.topology.lft`) or, without them, the tables of OpenSM's ``minhop``
  engine (:mod:`optiq.paths.minhop`). A host's routes leave by its first cabled port (the
  first adapter in the file) and reach it at that port's LID.

Refused, with the file's line number: a malformed line, a port line outside a node block,
a port listed twice or beyond the node's port count, a GUID declared twice, a cable to a
node the file never declares or listed from one end only (a truncated or edited file), a
cable from a port to its own node, an unknown width or speed (unless ``bw=`` or that
speed's rate is given), two ports with one LID, a host with no cable, and routers (one
subnet is planned). Switches without hosts and hosts with two ports are handled as
described.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import OptiqError, TopologyError
from ..utils.units import parse_rate
from .base import Topology

if TYPE_CHECKING:
    from typing import Any

    from .lft import ForwardingTables

__all__ = ["Fabric", "read_ibnetdiscover", "read_node_name_map", "host_name_from_description", "LANE_GBPS",
           "natural_key"]

#: Data rate of one lane after line encoding, Gb/s, by the speed ``ibnetdiscover`` prints.
LANE_GBPS = {"SDR": 2.0, "DDR": 4.0, "QDR": 8.0, "FDR10": 10.0, "FDR": 13.64, "EDR": 25.0, "HDR": 50.0,
             "NDR": 100.0}

_WIDTHS = {"1x": 1, "2x": 2, "4x": 4, "8x": 8, "12x": 12}
_HEADER = re.compile(r'^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9A-Fa-f]+)"\s*(?:#\s*(.*))?$')
_PORT = re.compile(r'^\[(\d+)\](?:\[ext \d+\])?(?:\(([0-9A-Fa-f]+)\))?\s*"([SHR])-([0-9A-Fa-f]+)"\[(\d+)\]'
                   r'(?:\[ext \d+\])?\s*(?:\(([0-9A-Fa-f]+)\))?\s*(?:#\s*(.*))?$')
_LINK = re.compile(r'"(.*)"\s+lid\s+(\d+)\s+(\d+x)(\S+)')
_SKIP = re.compile(r"^(#|vendid=|devid=|caguid=|rtguid=|Chassis\b|Non-Chassis|Hostname:)")
_SYSTEM = re.compile(r"^sysimgguid=0x([0-9A-Fa-f]+)")
_SWITCH_GUID = re.compile(r"^switchguid=0x([0-9A-Fa-f]+)(?:\(([0-9A-Fa-f]+)\))?")
_DEVICE = re.compile(r"^(HCA-?\d+|[A-Za-z]+\d*_\d+|[A-Za-z]+\d+)$")


def natural_key(name: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key that orders the numbers inside names by value (``node2`` before ``node10``)."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name))


def host_name_from_description(description: str) -> str | None:
    """The host of a CA description ``"HOST DEVICE"`` or ``"HOST"``, else None.

    Examples
    --------
    >>> host_name_from_description("node018 HCA-1"), host_name_from_description("gpu3 mlx5_2")
    ('node018', 'gpu3')
    >>> host_name_from_description("MT25408 ConnectX Mellanox Technologies") is None
    True
    """
    words = description.split()
    if len(words) == 1 or (len(words) == 2 and _DEVICE.match(words[1])):
        return words[0]
    return None


def _unknown() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class LidSpace:
    """Every LID of a fabric: each port's base LID and, with LMC = L, the 2**L - 1 after it.

    Attributes
    ----------
    lids : ndarray of int
        Every LID, sorted.
    entry : ndarray of int
        For each, its port: the position in :attr:`Fabric.lids`.
    offset : ndarray of int
        For each, its offset from the port's base LID (0 .. 2**lmc - 1).
    """

    lids: np.ndarray
    entry: np.ndarray
    offset: np.ndarray

    def columns(self, lids: np.ndarray) -> np.ndarray:
        """Positions of ``lids`` in :attr:`lids` (-1 for a LID the fabric does not have)."""
        lids = np.asarray(lids, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.lids, lids), max(self.lids.size - 1, 0))
        return np.where(self.lids[at] == lids, at, -1) if self.lids.size else np.full(lids.shape, -1)


@dataclass(frozen=True, eq=False)
class Fabric:
    """What InfiniBand adds to a :class:`Topology` read from ``ibnetdiscover``.

    Attributes
    ----------
    source : str
        The file it was read from.
    link_port : ndarray of int
        Port number at the tail of every link.
    lids, lid_node, lid_link, lid_endpoint : ndarray of int
        Every LID of the fabric (sorted; 0 when the file gave none, after the others), the
        node it belongs to, for a CA port's LID the link from its switch into that port
        (-1 for a switch's own LID), and the endpoint whose routes arrive at it (-1 for
        the LIDs of switches and of a host's other ports).
    endpoint_lid, egress : ndarray of int
        Per endpoint: the LID its routes arrive at and the link they leave by (its first
        cabled port).
    descriptions : list of str
        Every node's description (or its name in the node-name map).
    lines : list of int
        The line of the file where every node is declared.
    forwarding : ForwardingTables, optional
        The fabric's own linear forwarding tables (``routes=LFTS``).
    lid_lmc, lid_guid : ndarray of int
        Per LID of :attr:`lids`: the port's LMC (it owns ``2**lmc`` LIDs from that one) and
        its port GUID (0 where the file gave none).
    num_ports, node_guid, system_guid : ndarray of int
        Per node: the ports it has (as its block's header says), its GUID (a host's first
        adapter's) and the GUID of the system it is part of (``sysimgguid=``; its own GUID
        when the file gives none).
    """

    source: str
    link_port: np.ndarray
    lids: np.ndarray
    lid_node: np.ndarray
    lid_link: np.ndarray
    lid_endpoint: np.ndarray
    endpoint_lid: np.ndarray
    egress: np.ndarray
    descriptions: list[str] = field(repr=False)
    lines: list[int] = field(repr=False)
    forwarding: ForwardingTables | None = field(default=None, repr=False)
    lid_lmc: np.ndarray = field(default_factory=_unknown, repr=False)
    lid_guid: np.ndarray = field(default_factory=_unknown, repr=False)
    num_ports: np.ndarray = field(default_factory=_unknown, repr=False)
    node_guid: np.ndarray = field(default_factory=_unknown, repr=False)
    system_guid: np.ndarray = field(default_factory=_unknown, repr=False)

    def __post_init__(self) -> None:
        """Fill what was not given: LMC 0, no GUIDs, every port count the largest port number."""
        zeros = np.zeros(self.lids.size, dtype=np.int64)
        nodes = len(self.descriptions)
        defaults = {"lid_lmc": zeros, "lid_guid": zeros.astype(np.uint64),
                    "num_ports": np.full(nodes, int(self.link_port.max(initial=0))),
                    "node_guid": np.zeros(nodes, dtype=np.uint64)}
        for name, value in defaults.items():
            if getattr(self, name).size == 0 and value.size:
                object.__setattr__(self, name, value)
        if self.system_guid.size == 0:
            object.__setattr__(self, "system_guid", self.node_guid.copy())

    @property
    def lmc(self) -> int:
        """The largest LMC of any port: each destination has up to ``2**lmc`` LIDs."""
        return int(self.lid_lmc.max(initial=0))

    @cached_property
    def lid_space(self) -> LidSpace:
        """Every LID of the fabric (:class:`LidSpace`): the ports' base LIDs and their LMC LIDs."""
        have = self.lids > 0
        count = np.where(have, 1 << self.lid_lmc, 0)
        entry = np.repeat(np.arange(self.lids.size), count)
        offset = np.arange(entry.size) - np.repeat(np.cumsum(count) - count, count)
        lids = self.lids[entry] + offset
        order = np.argsort(lids, kind="stable")
        return LidSpace(lids[order], entry[order], offset[order])

    @property
    def routing(self) -> str:
        """The default routes' origin: the forwarding tables' file, or the minhop emulation."""
        if self.forwarding is not None:
            return f"linear forwarding tables from {self.forwarding.source}"
        return "OpenSM minhop (emulated)"

    def with_forwarding(self, tables: ForwardingTables) -> Fabric:
        return replace(self, forwarding=tables)

    @cached_property
    def lid_index(self) -> dict[int, int]:
        """LID -> position in :attr:`lids`."""
        return {int(lid): i for i, lid in enumerate(self.lids.tolist()) if lid}

    def describe(self, topology: Topology, node: int) -> str:
        """``S-<guid> ('description')`` of a node, for messages."""
        desc = self.descriptions[node]
        return f"{topology.node_names[node]}" + (f" ({desc!r})" if desc else "")


@dataclass
class _Node:
    kind: str          # "S" or "H"
    guid: int
    ports: int
    description: str
    line: int
    lid: int = 0
    cables: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # port -> (peer kind, guid, port, Gb/s, line, own LID)
    lmc: int = 0                  # a switch's port 0
    system: int = 0               # sysimgguid (0: not given)
    port0_guid: int = 0           # a switch's port GUID (switchguid=0xNODE(PORT)), 0: not given
    port_guid: dict[int, int] = field(default_factory=dict)  # a CA's port -> port GUID
    port_lmc: dict[int, int] = field(default_factory=dict)   # a CA's port -> LMC


def read_node_name_map(path: str | Path) -> dict[int, str]:
    """Read an OpenSM / ibnetdiscover node-name map: ``0x<guid> "name"`` lines (the name may
    be unquoted; ``H-<guid>``/``S-<guid>`` are accepted for the GUID), ``#`` comments.

    Raises
    ------
    TopologyError
        For an unreadable file, a malformed line, or a GUID named twice (both lines named).

    Examples
    --------
    >>> import tempfile, os
    >>> f = tempfile.NamedTemporaryFile("w", suffix=".map", delete=False)
    >>> _ = f.write('0x0002c9030001e0a1 "node001"\\nH-0002c9030001e0a2 node002 # spare\\n'); f.close()
    >>> sorted(read_node_name_map(f.name).values()); os.unlink(f.name)
    ['node001', 'node002']
    """
    text = _read_text(path, "node-name map")
    names: dict[int, str] = {}
    where: dict[int, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^(?:0x|[SHR]-)?([0-9A-Fa-f]+)\s+(?:"([^"]*)"|([^\s#]+))\s*(?:#.*)?$', line)
        if not m:
            raise TopologyError(f"node-name map {str(path)!r}, line {number}: expected '0xGUID \"name\"', "
                                f"got {line!r}")
        guid, name = int(m.group(1), 16), m.group(2) if m.group(2) is not None else m.group(3)
        if not name.strip():
            raise TopologyError(f"node-name map {str(path)!r}, line {number}: an empty name")
        if guid in names:
            raise TopologyError(f"node-name map {str(path)!r}, line {number}: GUID 0x{guid:016x} is named "
                                f"{name!r} here and {names[guid]!r} on line {where[guid]}")
        names[guid], where[guid] = name.strip(), number
    return names


def _read_text(path: str | Path, what: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise TopologyError(f"{what} {str(p)!r} " + ("is a directory" if p.is_dir() else "does not exist"))
    try:
        return p.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise TopologyError(f"cannot read {what} {str(p)!r}: {exc.strerror or exc}") from None


def _lane_rates(overrides: dict[str, str] | None, spec: str) -> dict[str, float]:
    rates = dict(LANE_GBPS)
    for speed, text in (overrides or {}).items():
        try:
            rates[speed.upper()] = parse_rate(text, what=f"{speed} lane rate") * 8 / 1e9
        except OptiqError as exc:
            raise TopologyError(f"topology {spec!r}: {exc}") from None
    return rates


def _parse(text: str, name: str, rates: dict[str, float], any_speed: bool) -> list[_Node]:
    nodes: list[_Node] = []
    by_guid: dict[int, _Node] = {}
    current: _Node | None = None
    system = port0 = 0  # from the sysimgguid= and switchguid= lines before a block
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or _SKIP.match(line):
            continue
        where = f"{name}, line {number}"
        m = _SYSTEM.match(line) or _SWITCH_GUID.match(line)
        if m:
            if line.startswith("sys"):
                system = int(m.group(1), 16)
            else:
                port0 = int(m.group(2) or m.group(1), 16)
            continue
        m = _HEADER.match(line)
        if m:
            kind, ports, letter, guid_hex, comment = m.groups()
            if kind == "Rt":
                raise TopologyError(f"{where}: a router (Rt); optiq plans one subnet, routers are not supported")
            if (kind == "Switch") != (letter == "S") or letter == "R":
                raise TopologyError(f"{where}: a {kind} block names its node {letter}-{guid_hex}")
            guid = int(guid_hex, 16)
            if guid in by_guid:
                raise TopologyError(f"{where}: {letter}-{guid_hex} is declared again (first on line "
                                    f"{by_guid[guid].line})")
            comment = comment or ""
            desc = re.match(r'"(.*?)"', comment)
            lid = re.search(r"\blid\s+(\d+)", comment)
            lmc = re.search(r"\blmc\s+(\d+)", comment)
            current = _Node(letter, guid, int(ports), desc.group(1) if desc else "", number,
                            int(lid.group(1)) if lid and letter == "S" else 0,
                            lmc=int(lmc.group(1)) if lmc and letter == "S" else 0, system=system,
                            port0_guid=port0 if letter == "S" else 0)
            system = port0 = 0
            nodes.append(current)
            by_guid[guid] = current
            continue
        m = _PORT.match(line)
        if not m:
            raise TopologyError(f"{where}: not an ibnetdiscover line: {line[:80]!r}")
        if current is None:
            raise TopologyError(f"{where}: a port line before any Switch or Ca block")
        port, own_guid, peer_letter, peer_hex, peer_port, _, comment = m.groups()
        port, peer_port, peer = int(port), int(peer_port), int(peer_hex, 16)
        if peer_letter == "R":
            raise TopologyError(f"{where}: a cable to a router (R-{peer_hex}); routers are not supported")
        if not 1 <= port <= max(current.ports, 1):
            raise TopologyError(f"{where}: port {port} of {current.kind}-{current.guid:016x}, which has "
                                f"{current.ports} ports")
        if port in current.cables:
            raise TopologyError(f"{where}: port {port} of {current.kind}-{current.guid:016x} is listed again "
                                f"(first on line {current.cables[port][4]})")
        comment = comment or ""
        local_lid = 0
        if current.kind == "H":
            lm = re.match(r"lid\s+(\d+)\s+lmc\s+(\d+)\s*", comment)
            if lm:
                local_lid, comment = int(lm.group(1)), comment[lm.end():]
                current.port_lmc[port] = int(lm.group(2))
            if own_guid:
                current.port_guid[port] = int(own_guid, 16)
        link = _LINK.search(comment)
        if link is None:
            if not any_speed:
                raise TopologyError(f"{where}: no link width and speed (a comment like '# \"desc\" lid 4 4xQDR'); "
                                    f"give bw=RATE to set every link's capacity")
            width, gbps = 1, 1.0
        else:
            width_text, speed = link.group(3), link.group(4).upper()
            if width_text not in _WIDTHS and not any_speed:
                raise TopologyError(f"{where}: unknown link width {width_text!r} (known: {', '.join(_WIDTHS)}); "
                                    f"give every link's capacity as bw=RATE")
            if speed not in rates and not any_speed:
                raise TopologyError(f"{where}: unknown link speed {speed!r} (known: {', '.join(rates)}); give its "
                                    f"lane rate as {speed}=RATE (e.g. {speed}=200Gb/s) or every link's as bw=RATE")
            width, gbps = _WIDTHS.get(width_text, 1), rates.get(speed, 1.0)
        current.cables[port] = (peer_letter, peer, peer_port, width * gbps, number, local_lid)
    if not nodes:
        raise TopologyError(f"{name}: no Switch or Ca blocks: not ibnetdiscover output")
    for node in nodes:
        for port, (letter, peer, peer_port, _, number, _) in node.cables.items():
            here = f"{node.kind}-{node.guid:016x}[{port}]"
            other = by_guid.get(peer)
            where = f"{name}, line {number}"
            if other is None:
                raise TopologyError(f"{where}: {here} is cabled to {letter}-{peer:016x}, which the file never "
                                    f"declares (a truncated file?)")
            if other.kind != letter:
                raise TopologyError(f"{where}: {here} names {letter}-{peer:016x}, declared as "
                                    f"{other.kind}-{peer:016x} on line {other.line}")
            if other is node:
                raise TopologyError(f"{where}: {here} is cabled to port {peer_port} of its own node")
            back = other.cables.get(peer_port)
            if back is None:
                raise TopologyError(f"{where}: the cable {here} -> {letter}-{peer:016x}[{peer_port}] is listed from "
                                    f"one end only: that node's block (line {other.line}) lists no port {peer_port}")
            if back[1] != node.guid or back[2] != port:
                raise TopologyError(f"{where}: {here} -> {letter}-{peer:016x}[{peer_port}], but line {back[4]} "
                                    f"says that port goes to {back[0]}-{back[1]:016x}[{back[2]}]")
        if node.kind == "H" and not node.cables:
            raise TopologyError(f"{name}, line {node.line}: H-{node.guid:016x} has no cabled port")
    return nodes


def read_ibnetdiscover(path: str | Path, *, names: str | Path | None = None, bandwidth: float | None = None,
                       lane_rates: dict[str, str] | None = None, routes: str | Path | None = None,
                       spec: str | None = None) -> Topology:
    """Read ``ibnetdiscover`` output into a :class:`Topology` with a :class:`Fabric` (module docstring).

    Parameters
    ----------
    path : str or Path
        The ``ibnetdiscover`` output (plain or grouped with ``-g``).
    names : str or Path, optional
        A node-name map (:func:`read_node_name_map`).
    bandwidth : float, optional
        Every link's capacity in bytes/s, instead of width x lane rate.
    lane_rates : dict, optional
        Speed name -> lane rate text (``{"XDR": "200Gb/s"}``), setting or adding speeds.
    routes : str or Path, optional
        The fabric's linear forwarding tables (:func:`optiq.topology.lft.read_forwarding_tables`).

    Raises
    ------
    TopologyError
        Naming the file and line of the first problem (module docstring).
    """
    name = str(path)
    spec = spec or f"ibnet:{path}"
    text = _read_text(path, "fabric file")
    nodes = _parse(text, f"fabric file {name!r}", _lane_rates(lane_rates, spec), bandwidth is not None)
    mapped = read_node_name_map(names) if names is not None else {}
    hosts: dict[str, list[_Node]] = {}
    for node in nodes:
        if node.kind == "H":
            host = mapped.get(node.guid) or host_name_from_description(node.description) or f"H-{node.guid:016x}"
            hosts.setdefault(host, []).append(node)
    if len(hosts) < 2:
        raise TopologyError(f"fabric file {name!r} has {len(hosts)} host(s); at least 2 are needed")
    host_order = sorted(hosts, key=natural_key)
    switches = [node for node in nodes if node.kind == "S"]
    ordered = [hosts[h][0] for h in host_order] + switches
    node_of = {node.guid: v for v, node in enumerate(ordered)}
    node_of.update((adapter.guid, v) for v, h in enumerate(host_order) for adapter in hosts[h])
    by_guid = {node.guid: node for node in nodes}

    rows = [(node_of[node.guid], node.line, port, node.guid, peer, peer_port,
             min(gbps, by_guid[peer].cables[peer_port][3]))  # a cable runs at its slower end
            for node in nodes for port, (_, peer, peer_port, gbps, _, _) in node.cables.items()]
    rows.sort(key=lambda r: r[:3])  # by tail node, adapter, port: link ids follow the nodes
    link_of = {(r[3], r[2]): e for e, r in enumerate(rows)}
    tails = np.array([r[0] for r in rows], dtype=np.int64)
    heads = np.array([node_of[r[4]] for r in rows], dtype=np.int64)
    gbps = np.array([r[6] for r in rows])
    capacity = np.full(len(rows), float(bandwidth)) if bandwidth is not None else gbps * 1e9 / 8

    first_ports = ordered[: len(host_order)]
    egress_ports = [(adapter.guid, min(adapter.cables)) for adapter in first_ports]
    primary = {key: t for t, key in enumerate(egress_ports)}
    # lid, node, link into the port, line, endpoint, lmc, port GUID
    lid_rows: list[tuple[int, int, int, int, int, int, int]] = []
    for node in nodes:
        if node.kind == "S":
            lid_rows.append((node.lid, node_of[node.guid], -1, node.line, -1, node.lmc, node.port0_guid or node.guid))
            continue
        for port, (_, peer, peer_port, _, number, local_lid) in sorted(node.cables.items()):
            lid_rows.append((local_lid, node_of[node.guid], link_of[(peer, peer_port)], number,
                             primary.get((node.guid, port), -1), node.port_lmc.get(port, 0),
                             node.port_guid.get(port, 0)))
    lids, lid_node, lid_link, lid_line, lid_endpoint, lid_lmc, lid_guid = (list(column) for column in zip(*lid_rows))
    seen: dict[int, int] = {}
    for lid, lmc, number in zip(lids, lid_lmc, lid_line):
        for own in range(lid, lid + (1 << lmc) if lid else lid):
            if own in seen:
                raise TopologyError(f"fabric file {name!r}, line {number}: LID {own} is also given on line "
                                    f"{seen[own]}")
            seen[own] = number
    order = np.argsort(np.where(np.array(lids) > 0, np.array(lids), np.iinfo(np.int64).max), kind="stable")
    fabric = Fabric(
        source=name, link_port=np.array([r[2] for r in rows], dtype=np.int64),
        lids=np.array(lids, dtype=np.int64)[order], lid_node=np.array(lid_node, dtype=np.int64)[order],
        lid_link=np.array(lid_link, dtype=np.int64)[order], lid_endpoint=np.array(lid_endpoint, dtype=np.int64)[order],
        endpoint_lid=np.array([adapter.cables[port][5] for adapter, (_, port) in zip(first_ports, egress_ports)],
                              dtype=np.int64),
        egress=np.array([link_of[key] for key in egress_ports], dtype=np.int64),
        descriptions=[mapped.get(node.guid, node.description) for node in ordered],
        lines=[node.line for node in ordered],
        lid_lmc=np.array(lid_lmc, dtype=np.int64)[order], lid_guid=np.array(lid_guid, dtype=np.uint64)[order],
        num_ports=np.array([node.ports for node in ordered], dtype=np.int64),
        node_guid=np.array([node.guid for node in ordered], dtype=np.uint64),
        system_guid=np.array([node.system or node.guid for node in ordered], dtype=np.uint64))
    adapters = sum(len(v) for v in hosts.values())
    topology = Topology(
        name=f"fabric {Path(name).name}: {len(host_order)} hosts"
             + (f" ({adapters} adapters)" if adapters > len(host_order) else "") + f", {len(switches)} switches",
        num_nodes=len(ordered), link_src=tails, link_dst=heads, capacity=capacity, num_endpoints=len(host_order),
        spec=spec, names=[f"{node.kind}-{node.guid:016x}" for node in ordered], host_names=host_order, fabric=fabric)
    topology.check_connected()
    if routes is not None:
        from .lft import read_forwarding_tables

        topology.fabric = fabric.with_forwarding(read_forwarding_tables(routes, topology))
    return topology
