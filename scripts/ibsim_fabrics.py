"""Write InfiniBand fabrics as ``ibsim`` net files, for tests against the real subnet manager.

    python scripts/ibsim_fabrics.py leaf-spine net.txt
    python scripts/ibsim_fabrics.py tree net.txt --k 4 --levels 3
    python scripts/ibsim_fabrics.py irregular net.txt --seed 1
    python scripts/ibsim_fabrics.py torus net.txt

Fabrics:

- ``leaf-spine``: ``--leaves`` 36-port leaf switches (default 8) with ``--hosts-per-leaf``
  hosts (16), every leaf cabled to each of ``--spines`` 36-port spines (4) by ``--parallel``
  cables (2).
- ``tree``: a k-ary n-tree (``--k``, ``--levels``): ``k**n`` hosts, ``n`` levels of
  ``k**(n-1)`` switches with ``2k`` ports (the top level ``k``).
- ``irregular``: a k-ary 3-tree (``--k``, default 4) with ``--missing-hosts`` empty host
  slots, ``--drop`` switch cables removed (seeded, the fabric stays connected) and one
  dual-ported host whose second port is cabled to another leaf.
- ``torus``: an ``--dims`` torus of switches (default 4x4), ``--hosts-per-switch`` hosts on
  each (1): minimal routes there close credit loops.

Every switch-to-switch cable runs at ``--speed`` (default QDR) except a seeded fraction
``--slow`` (default 0.25) at ``--slow-speed`` (DDR); host cables at ``--host-speed`` (QDR).
ibsim 0.10 simulates SDR, DDR and QDR, so the fabrics are scaled in speed. Hosts are
named ``node001``.. (the HCA's node description, so ``ibnetdiscover`` prints it), switches
``leaf1``, ``spine1``, ``sw-L<level>-<i>``, ``sw-<x>-<y>``. ``--json`` writes the model (nodes,
ports and cables as written) for tests to compare with what the tools discover.

``Simulator`` runs the real tools against such a file (tests and ``benchmarks/tables.py``):

    with Simulator(net_file, workdir) as sim:
        sim.route("minhop", lmc=0)          # opensm -o: route once and exit
        fabric, lfts = sim.discover()       # ibnetdiscover and dump_lfts output, as files
        sim.route("file", tables=path, fallback=False)  # load tables: opensm -R file,no_fallback -U PATH

Each simulator listens on its own socket (``IBSIM_SOCKNAME``) and is stopped by its process id.

Nothing here uses optiq: the file is written on its own, so reading what the real tools
print with optiq checks optiq.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SPEEDS = ("SDR", "DDR", "QDR")


@dataclass
class Node:
    kind: str                  # "Switch" or "Hca"
    name: str
    ports: int
    cables: dict[int, tuple[str, int, str]] = field(default_factory=dict)  # port -> (peer, peer port, speed)


@dataclass
class Net:
    nodes: dict[str, Node] = field(default_factory=dict)

    def add(self, kind: str, name: str, ports: int) -> Node:
        node = self.nodes[name] = Node(kind, name, ports)
        return node

    def cable(self, a: str, pa: int, b: str, pb: int, speed: str) -> None:
        for x, px in ((a, pa), (b, pb)):
            if px in self.nodes[x].cables or not 1 <= px <= self.nodes[x].ports:
                raise SystemExit(f"port {px} of {x} is taken or out of range")
        self.nodes[a].cables[pa] = (b, pb, speed)
        self.nodes[b].cables[pb] = (a, pa, speed)

    def uncable(self, a: str, pa: int) -> tuple[str, int, str]:
        b, pb, speed = self.nodes[a].cables.pop(pa)
        del self.nodes[b].cables[pb]
        return b, pb, speed

    def connected(self) -> bool:
        start = next(iter(self.nodes))
        seen, todo = {start}, [start]
        while todo:
            for peer, _, _ in self.nodes[todo.pop()].cables.values():
                if peer not in seen:
                    seen.add(peer)
                    todo.append(peer)
        return len(seen) == len(self.nodes)

    def write(self, path: str) -> None:
        """The ibsim net file: switches first (the subnet manager attaches to the first)."""
        order = sorted(self.nodes.values(), key=lambda n: n.kind != "Switch")
        lines = [f"# ibsim net file written by scripts/ibsim_fabrics.py: {len(self.nodes)} nodes", ""]
        for node in order:
            lines.append(f'{node.kind}\t{node.ports} "{node.name}"\t# "{node.name}"')
            for port in sorted(node.cables):
                peer, pp, speed = node.cables[port]
                lid = "lid 0 lmc 0 " if node.kind == "Hca" else ""
                lines.append(f'[{port}]\t"{peer}"[{pp}]\t# {lid}"{peer}" lid 0 4x{speed}')
            lines.append("")
        with open(path, "w") as fh:
            fh.write("\n".join(lines))

    def to_json(self) -> dict:
        return {name: {"kind": n.kind, "ports": n.ports,
                       "cables": {str(p): [peer, pp, speed] for p, (peer, pp, speed) in sorted(n.cables.items())}}
                for name, n in self.nodes.items()}


def _speed(rng: random.Random, speed: str, slow: float, slow_speed: str) -> str:
    return slow_speed if rng.random() < slow else speed


def _hosts(net: Net, count: int) -> list[str]:
    width = max(3, len(str(count)))
    return [net.add("Hca", f"node{i + 1:0{width}d}", 1).name for i in range(count)]


def leaf_spine(leaves: int = 8, hosts_per_leaf: int = 16, spines: int = 4, parallel: int = 2, *, seed: int = 0,
               speed: str = "QDR", slow: float = 0.25, slow_speed: str = "DDR", host_speed: str = "QDR") -> Net:
    rng, net = random.Random(seed), Net()
    if hosts_per_leaf + spines * parallel > 36 or leaves * parallel > 36:
        raise SystemExit("a 36-port switch cannot take that many cables")
    for i in range(spines):
        net.add("Switch", f"spine{i + 1}", 36)
    for i in range(leaves):
        net.add("Switch", f"leaf{i + 1}", 36)
    hosts = _hosts(net, leaves * hosts_per_leaf)
    for i, h in enumerate(hosts):
        net.cable(f"leaf{i // hosts_per_leaf + 1}", i % hosts_per_leaf + 1, h, 1, host_speed)
    for leaf, spine, c in itertools.product(range(leaves), range(spines), range(parallel)):
        net.cable(f"leaf{leaf + 1}", hosts_per_leaf + 1 + spine * parallel + c, f"spine{spine + 1}",
                  1 + leaf * parallel + c, _speed(rng, speed, slow, slow_speed))
    return net


def tree(k: int = 4, levels: int = 3, *, seed: int = 0, speed: str = "QDR", slow: float = 0.25,
         slow_speed: str = "DDR", host_speed: str = "QDR", hosts: int | None = None) -> Net:
    """A k-ary n-tree; switch ``sw-L<l>-<w>``: ports 1..k down, k+1..2k up."""
    rng, net = random.Random(seed), Net()
    per_level = k ** (levels - 1)
    for level in range(levels - 1, -1, -1):  # the top first: the subnet manager sits on a core switch
        for w in range(per_level):
            net.add("Switch", f"sw-L{level}-{w}", k if level == levels - 1 else 2 * k)
    names = _hosts(net, k ** levels if hosts is None else hosts)
    slots = sorted(range(k ** levels), key=lambda t: (t % k, t // k))[:len(names)]
    for h, t in zip(names, sorted(slots)):
        net.cable(f"sw-L0-{t // k}", t % k + 1, h, 1, host_speed)
    for level in range(levels - 1):
        place = k ** level
        for w in range(per_level):
            digit = (w // place) % k
            for other in range(k):
                upper = w + (other - digit) * place
                net.cable(f"sw-L{level}-{w}", k + 1 + other, f"sw-L{level + 1}-{upper}", 1 + digit,
                          _speed(rng, speed, slow, slow_speed))
    return net


def irregular(k: int = 4, *, seed: int = 1, missing_hosts: int = 5, drop: int = 3, **speeds: str | float) -> Net:
    """A k-ary 3-tree with empty host slots, cables missing and a dual-ported host."""
    rng = random.Random(seed)
    net = tree(k, 3, seed=seed, hosts=k ** 3 - missing_hosts, **speeds)  # type: ignore[arg-type]
    cables = sorted((n.name, p) for n in net.nodes.values() if n.kind == "Switch"
                    for p, (peer, _, _) in n.cables.items() if net.nodes[peer].kind == "Switch" and p > k
                    and n.name.startswith("sw-L"))
    rng.shuffle(cables)
    dropped = 0
    for name, port in cables:
        if dropped == drop:
            break
        if port not in net.nodes[name].cables:
            continue
        peer, pp, speed = net.uncable(name, port)
        if net.connected():
            dropped += 1
        else:
            net.cable(name, port, peer, pp, speed)
    # the dual-ported host: the first host gets a second port on a leaf with a free port
    host = next(n for n in net.nodes.values() if n.kind == "Hca")
    home = host.cables[1][0]
    leaf, port = next((n.name, p) for n in net.nodes.values() if n.name.startswith("sw-L0-") and n.name != home
                      for p in range(1, k + 1) if p not in n.cables)
    host.ports = 2
    net.cable(host.name, 2, leaf, port, str(speeds.get("host_speed", "QDR")))
    return net


def torus(dims: tuple[int, ...] = (4, 4), hosts_per_switch: int = 1, *, speed: str = "QDR") -> Net:
    """A torus of switches (``sw-x-y``), ports ``2d+1``/``2d+2`` to the -/+ neighbour in dimension d."""
    net = Net()
    ports = 2 * len(dims) + hosts_per_switch
    coords = list(itertools.product(*(range(n) for n in dims)))
    name = lambda c: "sw-" + "-".join(map(str, c))  # noqa: E731
    for c in coords:
        net.add("Switch", name(c), ports)
    hosts = _hosts(net, len(coords) * hosts_per_switch)
    for i, h in enumerate(hosts):
        net.cable(name(coords[i // hosts_per_switch]), 2 * len(dims) + 1 + i % hosts_per_switch, h, 1, speed)
    for c in coords:
        for d, n in enumerate(dims):
            if n < 3:
                raise SystemExit("every dimension of the torus needs 3 or more switches")
            up = list(c)
            up[d] = (c[d] + 1) % n
            net.cable(name(c), 2 * d + 2, name(tuple(up)), 2 * d + 1, speed)
    return net


#: The real tools a ``Simulator`` runs (Debian: opensm, ibsim-utils, infiniband-diags).
TOOLS = ("ibsim", "ibsim-run", "opensm", "ibnetdiscover", "dump_lfts", "ibtracert")


def _which(name: str) -> str | None:
    """A tool on PATH, or in /usr/sbin where the subnet manager and diagnostics live."""
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.path.exists(p)),
                                      None)


def missing_tools() -> list[str]:
    return [t for t in TOOLS if _which(t) is None]


def _tool(name: str) -> str:
    where = _which(name)
    if where is None:
        raise SystemExit(f"{name} is not installed: apt-get install opensm ibsim-utils infiniband-diags")
    return where


class Simulator:
    """An ``ibsim`` fabric and the tools run against it (module docstring)."""

    _count = 0

    def __init__(self, net: Path, workdir: Path, *, console: bool = False):
        """``console``: keep ibsim's console on a pipe, for :meth:`unlink` (otherwise ``-n``)."""
        self.console = console
        Simulator._count += 1
        self.net, self.dir = Path(net), Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, IBSIM_SOCKNAME=f"optiq-{os.getpid()}-{Simulator._count}",
                        OSM_TMP_DIR=str(self.dir), OSM_CACHE_DIR=str(self.dir))
        self.proc: subprocess.Popen | None = None
        self.runs = 0

    def __enter__(self) -> Simulator:
        log = open(self.dir / "ibsim.log", "w")
        self.proc = subprocess.Popen([_tool("ibsim"), "-s", *([] if self.console else ["-n"]), str(self.net)],
                                     stdin=subprocess.PIPE if self.console else subprocess.DEVNULL, text=True,
                                     stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        deadline = time.monotonic() + 20
        while "simulator ready" not in (self.dir / "ibsim.log").read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if self.proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"ibsim ended: {(self.dir / 'ibsim.log').read_text()[-2000:]}")
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def unlink(self, node: str, port: int, timeout: float = 10) -> None:
        """Take the cable on ``port`` of ``node`` (its name in the net file) down, as a failed cable
        is: ibsim's console ``Unlink``; waits for the console's next prompt."""
        if not self.console or self.proc is None or self.proc.stdin is None:
            raise RuntimeError("unlink needs Simulator(..., console=True)")
        log = self.dir / "ibsim.log"
        prompts = log.read_text().count("sim>")
        self.proc.stdin.write(f'Unlink "{node}"[{port}]\n')
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while log.read_text().count("sim>") <= prompts:
            if time.monotonic() > deadline:
                raise RuntimeError(f"ibsim did not take Unlink {node}[{port}]: {log.read_text()[-500:]}")
            time.sleep(0.05)
        if "not found" in log.read_text().split("sim>")[-2]:
            raise RuntimeError(f"ibsim has no node {node!r}")

    def run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """A tool with the simulator's library preloaded (as ``ibsim-run`` does), run in the work
        directory: the library keeps a fake ``sys-PID`` tree in the current one."""
        return subprocess.run([_tool("ibsim-run"), _tool(argv[0]), *argv[1:]], env=self.env, capture_output=True,
                              text=True, timeout=timeout, cwd=self.dir)

    def route(self, engine: str, *, lmc: int = 0, tables: Path | None = None, fallback: bool = True,
              timeout: float = 120) -> str:
        """Run OpenSM once (``-o``) with ``engine``; the log's last lines. Fails unless its log
        says that engine's tables were configured on every switch (OpenSM falls back to
        minhop with exit code 0 when an engine refuses a fabric). ``fallback=False`` adds
        ``no_fallback`` to the engines: then a refused engine leaves the switches unrouted and
        OpenSM sweeps again and again instead of ending, so it is stopped after ``timeout``."""
        self.runs += 1
        log = self.dir / f"osm-{self.runs}.log"
        argv = ["opensm", "-o", "-f", str(log), "-R", engine + ("" if fallback else ",no_fallback"), "-l", str(lmc)]
        if tables is not None:
            argv += ["-U", str(tables)]
        try:
            self.run(*argv, timeout=timeout)
        except subprocess.TimeoutExpired:
            pass  # subprocess.run killed it; the log says why it did not end
        text = log.read_text(errors="replace")
        if f"{engine} tables configured on all switches" not in text:
            raise AssertionError(f"opensm -R {engine} did not configure its tables:\n" +
                                 "\n".join(line for line in text.splitlines() if "ERR" in line or "tables" in line)[-3000:])
        return text

    def discover(self, name: str = "") -> tuple[Path, Path]:
        """``ibnetdiscover`` and ``dump_lfts`` output, written to files in the work directory."""
        fabric, lfts = self.dir / f"fabric{name}.txt", self.dir / f"lfts{name}.txt"
        for tool, out in (("ibnetdiscover", fabric), ("dump_lfts", lfts)):
            proc = self.run(tool)
            if proc.returncode != 0 or not proc.stdout.strip():
                raise AssertionError(f"{tool} failed: {proc.stderr[-2000:]}")
            out.write_text(proc.stdout)
        return fabric, lfts

    def tracert(self, src_lid: int, dst_lid: int) -> str:
        proc = self.run("ibtracert", str(src_lid), str(dst_lid))
        if proc.returncode != 0:
            raise AssertionError(f"ibtracert {src_lid} {dst_lid}: {proc.stderr[-1000:]}")
        return proc.stdout


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=("leaf-spine", "tree", "irregular", "torus"))
    ap.add_argument("out", help="the net file to write")
    ap.add_argument("--leaves", type=int, default=8)
    ap.add_argument("--hosts-per-leaf", type=int, default=16)
    ap.add_argument("--spines", type=int, default=4)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--levels", type=int, default=3)
    ap.add_argument("--missing-hosts", type=int, default=5)
    ap.add_argument("--drop", type=int, default=3)
    ap.add_argument("--dims", default="4x4")
    ap.add_argument("--hosts-per-switch", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--speed", choices=SPEEDS, default="QDR")
    ap.add_argument("--slow", type=float, default=0.25)
    ap.add_argument("--slow-speed", choices=SPEEDS, default="DDR")
    ap.add_argument("--host-speed", choices=SPEEDS, default="QDR")
    ap.add_argument("--json", help="also write the model here")
    args = ap.parse_args(argv)
    speeds = dict(speed=args.speed, slow=args.slow, slow_speed=args.slow_speed, host_speed=args.host_speed)
    if args.kind == "leaf-spine":
        net = leaf_spine(args.leaves, args.hosts_per_leaf, args.spines, args.parallel, seed=args.seed, **speeds)
    elif args.kind == "tree":
        net = tree(args.k, args.levels, seed=args.seed, **speeds)
    elif args.kind == "irregular":
        net = irregular(args.k, seed=args.seed, missing_hosts=args.missing_hosts, drop=args.drop, **speeds)
    else:
        net = torus(tuple(int(n) for n in args.dims.split("x")), args.hosts_per_switch, speed=args.speed)
    net.write(args.out)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(net.to_json(), fh, indent=1)
    hosts = sum(n.kind == "Hca" for n in net.nodes.values())
    cables = sum(len(n.cables) for n in net.nodes.values()) // 2
    print(f"wrote {args.out}: {hosts} hosts, {len(net.nodes) - hosts} switches, {cables} cables")


if __name__ == "__main__":
    main()
