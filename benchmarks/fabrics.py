"""The machines users have: an InfiniBand fat-tree read from ibnetdiscover with its forwarding
tables, a Slurm topology.conf, a dragonfly preset, and a 30,000-host fabric, side by side.

For every instance, in its own process (so the peak memory, ``VmHWM``, is that run's):
what was read (hosts, switches, links, link speeds), the time and memory to load it, the
default routes' busiest link (by name) and time, and ``heu2`` and ``opt`` against them
(plan time, completion time, ratio to the default routes, proven bound), for two patterns on
all of the instance's hosts: the disjoint 1:8 pattern and random pairs (half the hosts each
send to one other, shuffled, seed 1). Then every mistake the readers refuse, with its message.

    python benchmarks/fabrics.py [--instances fattree,slurm,dragonfly,big] [--big-hosts 30000] [--dir DIR]

The synthetic fabrics come from ``scripts/synthetic_fabric.py`` (with its own D-mod-K
forwarding tables); the Slurm file is written from the same tree, as ``slurmibtopology``
would. ``big`` loads a k=32 three-level fat-tree with ``--big-hosts`` hosts (3,072
switches) and computes its minhop routes, without planning.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "synthetic_fabric.py"


def _synthetic():
    import importlib.util

    spec = importlib.util.spec_from_file_location("synthetic_fabric", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["synthetic_fabric"] = module
    spec.loader.exec_module(module)
    return module


def write_inputs(d: Path, big_hosts: int) -> dict[str, str]:
    """Write the fabric files; the topology spec of every instance."""
    sf = _synthetic()
    model = sf.build(8, 3, seed=1, parallel=2, drop=4, slow=0.2)
    sf.write_ibnetdiscover(model, str(d / "fabric.txt"))
    sf.write_lfts(model, str(d / "lfts.txt"))
    lines = ["# written by benchmarks/fabrics.py from the synthetic fabric's tree"]
    from optiq.topology import compress_hostlist

    for s in model.switches:
        hosts = [peer.host for peer, _, _ in s.cables.values() if peer.kind == "H"]
        below = [f"s{peer.level}-{peer.word}" for p, (peer, _, _) in sorted(s.cables.items())
                 if peer.kind == "S" and peer.level < s.level]
        part = f"Nodes={compress_hostlist(sorted(hosts))}" if hosts else f"Switches={','.join(dict.fromkeys(below))}"
        lines.append(f"SwitchName=s{s.level}-{s.word} {part}")
    (d / "topology.conf").write_text("\n".join(lines) + "\n")
    specs = {"fattree": f"ibnet:{d / 'fabric.txt'},routes={d / 'lfts.txt'}",
             "slurm": f"slurm:{d / 'topology.conf'},bw=12.5GB/s", "dragonfly": "dragonfly:p=4,a=8,h=4"}
    if big_hosts:
        big = sf.build(32, 3, hosts=big_hosts, seed=2)
        sf.write_ibnetdiscover(big, str(d / "big.txt"))
        specs["big"] = f"ibnet:{d / 'big.txt'}"
    return specs


def peak_mib() -> float:
    """This process's peak resident memory (``VmHWM``; ``ru_maxrss`` would keep the parent's across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_instance(spec: str, plan: bool) -> dict:
    import numpy as np

    from optiq import from_spec, make_plan, plan_metrics
    from optiq.paths import system_routes
    from optiq.workloads import constant_ratio, random_pairing

    start = time.perf_counter()
    topo = from_spec(spec)
    load_s = time.perf_counter() - start
    load_rss = peak_mib()
    speeds, counts = np.unique(topo.capacity * 8 / 1e9, return_counts=True)
    out = {"name": topo.name, "hosts": topo.num_endpoints, "switches": topo.num_nodes - topo.num_endpoints,
           "links": topo.num_links, "speeds_Gbps": {f"{s:g}": int(c) for s, c in zip(speeds, counts)},
           "routing": topo.default_routing, "load_s": load_s, "load_rss_MiB": load_rss}
    P = topo.num_endpoints
    patterns = {"disjoint 1:8": constant_ratio(P, "disjoint"),
                "random pairs": random_pairing(constant_ratio(P, "disjoint", num_sources=P // 2, ratio=1), seed=1)}
    out["patterns"] = {}
    for label, demands in patterns.items():
        row: dict = {"jobs": demands.num_jobs}
        start = time.perf_counter()
        default = system_routes(topo, demands)
        row["default_routes_s"] = time.perf_counter() - start
        seconds = default.link_loads(demands.nbytes.astype(float), topo.num_links) / topo.capacity
        busiest = int(np.argmax(seconds))
        row.update(default_time_s=float(seconds[busiest]), busiest=topo.link_label(busiest))
        for method in ("heu2", "opt") if plan else ():
            start = time.perf_counter()
            p = make_plan(topo, demands, method)
            elapsed = time.perf_counter() - start
            m = plan_metrics(p, check_bound=False)
            row[method] = {"plan_s": elapsed, "time_s": m.predicted_time_s, "bound_s": m.lower_bound_time_s,
                           "paths": m.total_paths}
        out["patterns"][label] = row
        if not plan:
            break
    out["peak_rss_MiB"] = peak_mib()
    return out


def errors(d: Path) -> list[tuple[str, str]]:
    """Every mistake the readers refuse: (what, the message)."""
    from optiq.errors import OptiqError
    from optiq.topology import from_spec
    from optiq.workloads import named_hosts

    good = (d / "fabric.txt").read_text().splitlines()
    lfts = (d / "lfts.txt").read_text()
    sw = next(i for i, line in enumerate(good) if line.startswith("Switch"))
    port = sw + 1
    ca = next(i for i, line in enumerate(good) if line.startswith("Ca"))

    def fabric(lines):
        return lambda: (d / "bad.txt").write_text("\n".join(lines) + "\n") and f"ibnet:{d / 'bad.txt'}"

    def edit(i, old, new):
        lines = list(good)
        lines[i] = lines[i].replace(old, new)
        return lines

    def file(name, text, spec):
        return lambda: (d / name).write_text(text) and spec

    cases = [
        ("malformed line", fabric(edit(port, "[", "{"))),
        ("port line before any block", fabric([good[port]] + good)),
        ("port listed twice", fabric(good[: port + 1] + [good[port]] + good[port + 1:])),
        ("port beyond the node's ports", fabric(edit(sw, "Switch\t16", "Switch\t2"))),
        ("GUID declared twice", fabric(good + good[ca:ca + 2])),
        ("cable to an undeclared node", fabric(edit(port, '"H-0002c90300b0', '"H-0002c90300c0'))),
        ("cable listed from one end only", fabric(good[:ca + 1] + good[ca + 2:])),
        ("unknown speed", fabric(edit(port, "4xEDR", "4xXDR"))),
        ("unknown width", fabric(edit(port, "4xEDR", "3xEDR"))),
        ("router", fabric(edit(sw, 'Switch\t16 "S-', 'Rt\t16 "R-'))),
        ("LID given twice", fabric(edit(ca + 1, "lid 1", "lid 2"))),
        ("node-name map names a GUID twice",
         file("names.map", '0x0002c90300b00000 "a"\n0x0002c90300b00000 "b"\n',
              f"ibnet:{d / 'fabric.txt'},names={d / 'names.map'}")),
        ("forwarding table of an unknown switch",
         file("bad.lft", lfts.replace("Lid 2 guid 0x0002c90300a00001", "Lid 2 guid 0x00000000000000ff"),
              f"ibnet:{d / 'fabric.txt'},routes={d / 'bad.lft'}")),
        ("Slurm switch defined twice",
         file("bad.conf", "SwitchName=s0 Nodes=n[1-2]\nSwitchName=s0 Nodes=n[3-4]\n", f"slurm:{d / 'bad.conf'}")),
        ("Slurm child switch never defined",
         file("bad.conf", "SwitchName=s0 Switches=s9\nSwitchName=s1 Nodes=n[1-2]\n", f"slurm:{d / 'bad.conf'}")),
        ("Slurm block plugin", file("bad.conf", "BlockName=b1 Nodes=n[1-4]\n", f"slurm:{d / 'bad.conf'}")),
        ("dragonfly with too many groups", lambda: "dragonfly:p=4,a=8,h=4,g=40"),
    ]
    out = []
    for what, make in cases:
        try:
            from_spec(make())
            out.append((what, "NOT REFUSED"))
        except OptiqError as exc:
            out.append((what, str(exc).replace(str(d) + "/", "")))
    topo = from_spec(f"ibnet:{d / 'fabric.txt'}")
    for what, expr in (("unknown host", "node[001-002],node999"), ("malformed host list", "node[1-")):
        try:
            named_hosts(topo, expr)
            out.append((what, "NOT REFUSED"))
        except OptiqError as exc:
            out.append((what, str(exc)))
    # missing entry, loop, dead end: found when the routes are walked
    from optiq import Demands
    from optiq.paths import system_routes

    target = topo.fabric.endpoint_lid[9]
    lines = [line for line in lfts.splitlines() if not line.startswith(f"0x{target:04x} ")]
    (d / "bad.lft").write_text("\n".join(lines) + "\n")
    try:
        system_routes(from_spec(f"ibnet:{d / 'fabric.txt'},routes={d / 'bad.lft'}"), Demands([0], [9], [1]))
        out.append(("LID missing from the tables", "NOT REFUSED"))
    except OptiqError as exc:
        out.append(("LID missing from the tables", str(exc).replace(str(d) + "/", "")))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", default="fattree,slurm,dragonfly,big")
    ap.add_argument("--big-hosts", type=int, default=30000)
    ap.add_argument("--dir", help="where to write the fabric files (default: a temporary directory)")
    ap.add_argument("--one", nargs=2, metavar=("SPEC", "PLAN"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_instance(args.one[0], args.one[1] == "1")))
        return
    names = args.instances.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(args.dir or tmp)
        d.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        specs = write_inputs(d, args.big_hosts if "big" in names else 0)
        print(f"wrote the inputs in {time.perf_counter() - start:.1f} s to {d}", flush=True)
        for name in names:
            proc = subprocess.run([sys.executable, __file__, "--one", specs[name], "0" if name == "big" else "1"],
                                  capture_output=True, text=True)
            if proc.returncode:
                print(f"{name}: failed\n{proc.stderr}")
                continue
            r = json.loads(proc.stdout.splitlines()[-1])
            print(f"\n== {name}: {r['name']}")
            print(f"   read {r['hosts']:,} hosts, {r['switches']:,} switches, {r['links']:,} links; link speeds "
                  f"(Gb/s: links) {r['speeds_Gbps']}")
            print(f"   load {r['load_s']:.2f} s, {r['load_rss_MiB']:.0f} MiB; default routes: {r['routing']}")
            for label, row in r["patterns"].items():
                print(f"   {label}, {row['jobs']:,} jobs: default routes in {row['default_routes_s']:.2f} s, busiest link "
                      f"{row['busiest']}, {row['default_time_s'] * 1e3:.3f} ms")
                for method in ("heu2", "opt"):
                    if method in row:
                        m = row[method]
                        print(f"     {method:4}: planned in {m['plan_s']:.2f} s, {m['time_s'] * 1e3:.3f} ms = "
                              f"{m['time_s'] / row['default_time_s']:.3f} x default "
                              f"({row['default_time_s'] / m['time_s']:.2f}x faster), "
                              f"{m['time_s'] / m['bound_s']:.3f} x the bound, {m['paths']:,} paths")
            print(f"   peak memory {r['peak_rss_MiB']:.0f} MiB")
        print("\n== mistakes the readers refuse")
        for what, message in errors(d):
            print(f"   {what}: {message}")


if __name__ == "__main__":
    main()
