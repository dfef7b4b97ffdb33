"""Write a synthetic InfiniBand fat-tree as ``ibnetdiscover`` prints it, with its forwarding tables.

    python scripts/synthetic_fabric.py fabric.txt --k 4 --levels 3 --lfts lfts.txt --names names.map
    python scripts/synthetic_fabric.py big.txt --k 32 --levels 3 --hosts 30000

The fabric is a k-ary n-tree (``--levels`` n): ``k**n`` host slots on ``k**(n-1)`` leaf
switches, ``n`` levels of ``k**(n-1)`` switches. Each switch has ports ``1..k`` down and
``k+1..`` up (``--parallel P`` cables between the top two levels). ``--hosts H`` populates
only ``H`` slots, spread over the leaves; ``--seed`` hangs each leaf's hosts on random
free down ports; ``--drop C`` removes ``C`` random switch-to-switch cables (the tree stays
connected); host cables run at ``--host-speed``, switch cables at ``--speed``, and a
fraction ``--slow`` of switch cables at ``--slow-speed``. ``--grouped`` adds what
``ibnetdiscover -g`` prints (a chassis heading, ``[ext N]`` port labels).

``--lfts FILE`` writes linear forwarding tables (``--lft-format ibroute`` or ``opensm``)
by a rule of this script, not OpenSM's: D-mod-K, that is at a level-``l`` switch, among
the ports on a shortest path to the destination (in port order), number
``(t // k**l + o) % count`` for LID ``base + o`` of the host in slot ``t``. ``--lmc L``
gives every host port ``2**L`` LIDs (the base a multiple of ``2**L``, as OpenSM assigns
them), each routed by that rule. ``--names FILE`` writes an OpenSM node-name map; with
``--anonymous`` the CAs' descriptions carry no host names, so only the map names them.

Nothing here uses optiq: the model is built, written and routed on its own, so reading the
file back with optiq checks optiq.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field

import numpy as np

LANE_GBPS = {"SDR": 2.0, "DDR": 4.0, "QDR": 8.0, "FDR10": 10.0, "FDR": 13.64, "EDR": 25.0, "HDR": 50.0,
             "NDR": 100.0}
SWITCH_GUID, CA_GUID = 0x0002C90300A00000, 0x0002C90300B00000


@dataclass
class Node:
    kind: str                 # "S" or "H"
    guid: int
    description: str
    ports: int
    lid: int = 0
    lmc: int = 0              # hosts: the port has 2**lmc LIDs from lid
    level: int = 0            # switches: 0 = leaf
    word: int = 0             # switches: position in the level
    down: int = 0             # switches: ports 1..down lead down the tree
    slot: int = -1            # hosts: slot in the tree (leaf * k + down port index)
    host: str = ""
    cables: dict[int, tuple[Node, int, str]] = field(default_factory=dict)  # port -> (peer, peer port, speed)

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.guid:016x}"


@dataclass
class FabricModel:
    """The fabric as built: switches, hosts (in slot order) and the tree's shape."""

    k: int
    levels: int
    parallel: int
    switches: list[Node]
    hosts: list[Node]

    def cables(self) -> set[tuple[str, int, str, int, float]]:
        """Every directed cable end: (node, port, peer, peer port, Gb/s)."""
        out = set()
        for node in self.switches + self.hosts:
            for port, (peer, peer_port, speed) in node.cables.items():
                out.add((node.name, port, peer.name, peer_port, 4 * LANE_GBPS[speed]))
        return out


def _connect(a: Node, pa: int, b: Node, pb: int, speed: str) -> None:
    a.cables[pa] = (b, pb, speed)
    b.cables[pb] = (a, pa, speed)


def build(k: int, levels: int, *, hosts: int | None = None, parallel: int = 1, seed: int | None = None,
          drop: int = 0, speed: str = "EDR", host_speed: str = "EDR", slow: float = 0.0,
          slow_speed: str = "FDR", anonymous: bool = False, lmc: int = 0) -> FabricModel:
    """Build the model (see the module docstring)."""
    rng = random.Random(seed)
    per_level = k ** (levels - 1)
    slots = k ** levels
    hosts = slots if hosts is None else hosts
    if not 2 <= hosts <= slots:
        raise SystemExit(f"--hosts must be in 2..{slots}")
    par = lambda level: parallel if level == levels - 2 else 1  # noqa: E731  cables from level to level + 1
    up = lambda level: k * par(level) if level < levels - 1 else 0  # noqa: E731
    down = lambda level: k if level == 0 else k * par(level - 1)  # noqa: E731
    switches = []
    for level in range(levels):
        for w in range(per_level):
            switches.append(Node("S", SWITCH_GUID + len(switches), f"switch L{level}-{w} MF0;sw{level}-{w}:SX6036/U1",
                                 down(level) + up(level), level=level, word=w, down=down(level)))
    lid = 1
    for s in switches:
        s.lid, lid = lid, lid + 1
    # hosts spread over the leaves: slot j of leaf l is filled when l*k + j < hosts taken round-robin by leaf
    order = sorted(range(slots), key=lambda t: (t % k, t // k))[:hosts]
    filled = sorted(order)
    host_nodes = []
    width = max(3, len(str(hosts)))  # node001..node064, as a cluster's host names are padded
    for i, t in enumerate(filled):
        name = f"node{i + 1:0{width}d}"
        desc = "MT4123 ConnectX6 Mellanox Technologies" if anonymous else f"{name} HCA-1"
        host_nodes.append(Node("H", CA_GUID + 2 * i, desc, 1, slot=t, host=name))  # its port: the GUID + 1
    for leaf in range(per_level):
        mine = [h for h in host_nodes if h.slot // k == leaf]
        ports = list(range(1, k + 1))
        if seed is not None:
            rng.shuffle(ports)
        for h, port in zip(mine, ports if seed is not None else [h.slot % k + 1 for h in mine]):
            _connect(switches[leaf], port, h, 1, host_speed)
            lid = -(-lid // (1 << lmc)) * (1 << lmc)  # aligned to 2**lmc
            h.lid, h.lmc, lid = lid, lmc, lid + (1 << lmc)
    for level in range(levels - 1):
        place, p = k ** level, par(level)
        for w in range(per_level):
            lower = switches[level * per_level + w]
            digit = (w // place) % k
            for other in range(k):
                upper = switches[(level + 1) * per_level + w + (other - digit) * place]
                for c in range(p):
                    _connect(lower, lower.down + 1 + other * p + c, upper, 1 + digit * p + c,
                             slow_speed if rng.random() < slow else speed)
    model = FabricModel(k, levels, parallel, switches, host_nodes)
    for _ in range(drop):
        _drop_one(model, rng)
    return model


def _connected(model: FabricModel) -> bool:
    start = model.hosts[0]
    seen, todo = {id(start)}, [start]
    while todo:
        node = todo.pop()
        for peer, _, _ in node.cables.values():
            if id(peer) not in seen:
                seen.add(id(peer))
                todo.append(peer)
    return all(id(h) in seen for h in model.hosts)


def _drop_one(model: FabricModel, rng: random.Random) -> None:
    cables = [(s, p) for s in model.switches for p, (peer, _, _) in s.cables.items() if peer.kind == "S" and p > s.down]
    rng.shuffle(cables)
    for s, p in cables:
        peer, pp, speed = s.cables.pop(p)
        del peer.cables[pp]
        if _connected(model):
            return
        _connect(s, p, peer, pp, speed)
    raise SystemExit("no cable can be dropped without disconnecting the fabric")


def write_ibnetdiscover(model: FabricModel, path: str, *, grouped: bool = False) -> None:
    lines = ["#", "# Topology file: generated by scripts/synthetic_fabric.py", "#",
             f"# Initiated from node {model.hosts[0].guid:016x} port {model.hosts[0].guid + 1:016x}"]
    if grouped:
        lines += ["", "Non-Chassis Nodes"]
    for s in model.switches:
        lines += ["", "vendid=0x2c9", "devid=0xc738", f"sysimgguid=0x{s.guid:x}",
                  f"switchguid=0x{s.guid:x}({s.guid:x})",
                  f'Switch\t{s.ports} "{s.name}"\t\t# "{s.description}" enhanced port 0 lid {s.lid} lmc 0']
        for port in sorted(s.cables):
            peer, pp, speed = s.cables[port]
            ext = f"[ext {port}]" if grouped and port <= s.down else ""
            guid = f"({peer.guid + pp:x}) " if peer.kind == "H" else ""
            lines.append(f'[{port}]{ext}\t"{peer.name}"[{pp}]{guid}\t\t# "{peer.description}" lid {peer.lid} 4x{speed}')
    for h in model.hosts:
        lines += ["", "vendid=0x2c9", "devid=0x101b", f"sysimgguid=0x{h.guid:x}", f"caguid=0x{h.guid:x}",
                  f'Ca\t{h.ports} "{h.name}"\t\t# "{h.description}"']
        for port in sorted(h.cables):
            peer, pp, speed = h.cables[port]
            lines.append(f'[{port}]({h.guid + port:x}) \t"{peer.name}"[{pp}]\t\t# lid {h.lid} lmc {h.lmc} '
                         f'"{peer.description}" lid {peer.lid} 4x{speed}')
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def _distances(model: FabricModel, target: Node) -> dict[int, int]:
    """Hops from every switch to ``target`` (breadth-first search through switches)."""
    dist = {id(target): 0}
    frontier = [target]
    while frontier:
        nxt = []
        for node in frontier:
            for peer, _, _ in node.cables.values():
                if peer.kind == "S" and id(peer) not in dist:
                    dist[id(peer)] = dist[id(node)] + 1
                    nxt.append(peer)
        frontier = nxt
    return dist


def route_port(model: FabricModel, switch: Node, target: Node, dist: dict[int, int], offset: int = 0) -> int:
    """This script's rule (D-mod-K), one entry at a time (:func:`write_lfts` applies it to
    whole tables at once, and the tests hold the two alike): among ``switch``'s ports on a shortest path to ``target``,
    in port order, number ``(t // k**level + offset) % count``, with ``t`` the target host's
    slot (a switch's own word for switch targets) and ``offset`` the LID's past the port's
    base LID; port 0 for the switch itself."""
    if target is switch:
        return 0
    closer = [p for p, (peer, _, _) in sorted(switch.cables.items())
              if peer is target or dist.get(id(peer), -9) == dist[id(switch)] - 1]
    if not closer:
        raise SystemExit(f"{switch.name} cannot reach {target.name}")
    t = target.slot if target.kind == "H" else target.word
    return closer[(t // model.k ** switch.level + offset) % len(closer)]


def _switch_distances(model: FabricModel) -> np.ndarray:
    """Hops between every two switches, through switches (breadth-first, by scipy)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    index = {id(s): i for i, s in enumerate(model.switches)}
    pairs = [(i, index[id(peer)]) for i, s in enumerate(model.switches) for peer, _, _ in s.cables.values()
             if peer.kind == "S"]
    rows, cols = (np.array(c, dtype=np.int64) for c in zip(*pairs)) if pairs else (np.zeros(0, int),) * 2
    n = len(model.switches)
    graph = csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    return shortest_path(graph, unweighted=True)


def write_lfts(model: FabricModel, path: str, fmt: str = "ibroute") -> None:
    """Every switch's table: a line per LID of the fabric, switches' and hosts'.

    The rule (D-mod-K): among a switch's ports on a shortest path to the target, in port
    order, number ``(t // k**level + offset) % count``, with ``t`` the target host's slot (a
    switch's own word for switch targets) and ``offset`` the LID's past the port's base LID;
    port 0 for the switch itself. A host is one hop below its leaf, so the ports towards it
    are those towards its leaf (or the host's own, on its leaf). The tables are written a
    switch at a time, from arrays, so a 10,000-host fabric fits in memory.
    """
    switches = model.switches
    index = {id(s): i for i, s in enumerate(switches)}
    dist = _switch_distances(model)
    nodes = sorted(switches + model.hosts, key=lambda n: n.lid)
    targets = [(n, o) for n in nodes for o in range(1 << n.lmc)]
    top = max(n.lid + o for n, o in targets)
    host_leaf = {id(h): index[id(peer)] for h in model.hosts for peer, _, _ in h.cables.values()}
    leaf = np.array([index[id(n)] if n.kind == "S" else host_leaf[id(n)] for n, _ in targets], dtype=np.int64)
    is_host = np.array([n.kind == "H" for n, _ in targets])
    word = np.array([n.slot if n.kind == "H" else n.word for n, _ in targets], dtype=np.int64)
    offset = np.array([o for _, o in targets], dtype=np.int64)
    ids = [id(n) for n, _ in targets]
    heads, tails = [], []
    for n, o in targets:
        kind = "Switch" if n.kind == "S" else "Channel Adapter"
        info = f"{kind} portguid 0x{n.guid + (n.kind == 'H'):016x}: '{n.description}'"
        heads.append(f"0x{n.lid + o:04x} ")
        tails.append(f" : ({info})" if fmt == "ibroute" else f" # {info}")
    text = [f"{p:03d}" for p in range(256)]
    with open(path, "w") as fh:
        for i, s in enumerate(switches):
            ports = sorted(s.cables)
            peer_switch = np.array([index.get(id(s.cables[p][0]), -1) for p in ports], dtype=np.int64)
            number = np.array(ports, dtype=np.int64)
            towards = (peer_switch[:, None] >= 0) & (dist[np.maximum(peer_switch, 0)] == dist[i] - 1)[:, leaf]
            count = towards.sum(axis=0)
            pick = (word // model.k ** s.level + offset) % np.maximum(count, 1)
            rank = np.cumsum(towards, axis=0) - 1
            port = number[np.argmax(towards & (rank == pick), axis=0)]
            own = np.flatnonzero(leaf == i)   # this switch itself (port 0), and its own hosts
            by_host = {id(s.cables[p][0]): p for p in ports if s.cables[p][0].kind == "H"}
            for t in own.tolist():
                port[t] = by_host[ids[t]] if is_host[t] else 0
            stuck = np.flatnonzero((count == 0) & (leaf != i))
            if stuck.size:
                raise SystemExit(f"{s.name} cannot reach {targets[int(stuck[0])][0].name}")
            if fmt == "ibroute":
                fh.write(f"Unicast lids [0x0-0x{top:x}] of switch Lid {s.lid} guid 0x{s.guid:016x} ({s.description}):\n"
                         "  Lid  Out   Destination\n       Port     Info \n")
            else:
                fh.write(f"Unicast lids [0-{top}] of switch Lid {s.lid} guid 0x{s.guid:016x} ('{s.description}'):\n")
            fh.write("\n".join([h + text[p] + t for h, p, t in zip(heads, port.tolist(), tails)]) + "\n")
            fh.write(f"{len(targets)} valid lids dumped \n" if fmt == "ibroute" else f"{top} lids dumped\n")


def write_names(model: FabricModel, path: str) -> None:
    with open(path, "w") as fh:
        fh.write("# node-name map written by scripts/synthetic_fabric.py\n")
        for h in model.hosts:
            fh.write(f'0x{h.guid:016x} "{h.host}"\n')
        for s in model.switches:
            fh.write(f'0x{s.guid:016x} "sw-L{s.level}-{s.word}"\n')


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the ibnetdiscover file to write")
    ap.add_argument("--k", type=int, default=4, help="down ports per switch (default 4)")
    ap.add_argument("--levels", type=int, default=3, help="switch levels (default 3)")
    ap.add_argument("--hosts", type=int, help="hosts (default k**levels)")
    ap.add_argument("--parallel", type=int, default=1, help="cables between the top two levels (default 1)")
    ap.add_argument("--seed", type=int, help="hang hosts on random free ports (and pick dropped/slow cables)")
    ap.add_argument("--drop", type=int, default=0, help="switch-to-switch cables to remove")
    ap.add_argument("--speed", default="EDR", choices=LANE_GBPS, help="switch cables (default EDR)")
    ap.add_argument("--host-speed", default="EDR", choices=LANE_GBPS, help="host cables (default EDR)")
    ap.add_argument("--slow", type=float, default=0.0, help="fraction of switch cables at --slow-speed")
    ap.add_argument("--slow-speed", default="FDR", choices=LANE_GBPS)
    ap.add_argument("--anonymous", action="store_true", help="CA descriptions without host names")
    ap.add_argument("--lmc", type=int, default=0, choices=range(8), help="LIDs per host port: 2**LMC (default 0)")
    ap.add_argument("--grouped", action="store_true", help="the decorations of ibnetdiscover -g")
    ap.add_argument("--lfts", help="also write forwarding tables here")
    ap.add_argument("--lft-format", choices=("ibroute", "opensm"), default="ibroute")
    ap.add_argument("--names", help="also write a node-name map here")
    args = ap.parse_args(argv)
    model = build(args.k, args.levels, hosts=args.hosts, parallel=args.parallel, seed=args.seed, drop=args.drop,
                  speed=args.speed, host_speed=args.host_speed, slow=args.slow, slow_speed=args.slow_speed,
                  anonymous=args.anonymous, lmc=args.lmc)
    write_ibnetdiscover(model, args.out, grouped=args.grouped)
    if args.lfts:
        write_lfts(model, args.lfts, args.lft_format)
    if args.names:
        write_names(model, args.names)
    print(f"wrote {args.out}: {len(model.hosts)} hosts, {len(model.switches)} switches, "
          f"{len(model.cables()) // 2} cables" + (f"; {args.lfts}" if args.lfts else "")
          + (f"; {args.names}" if args.names else ""))


if __name__ == "__main__":
    main()
