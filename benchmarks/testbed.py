"""Predicted against measured, on a network that decides for itself: ``optiq testbed run`` on four networks.

Every case builds its network of namespaces (needs root), measures one flow's goodput, and
runs every method in turn, ``--repeat`` measured rounds after one warm-up; the tables are
medians. Targets: measured gain at least 0.9x the predicted gain for forwarded plans, tables
and per-pair rules (a free plan that splits pairs: its realized gain), measured time at most
1.15x predicted, link counts within 5% of the plan's bytes plus overhead.

Cases (``--cases``):

- ``fattree``: fattree:k=4,n=2, a random permutation of 4 MiB pairs (seed 1): default, heu2,
  opt, dynamic, opt:free;
- ``fabric``: the 32-host synthetic fabric (``scripts/synthetic_fabric.py --hosts 32``) on its
  D-mod-K tables, 16 random pairs of 4 MiB (disjoint 16x1, random pairing seed 1): default,
  heu2, opt, tables;
- ``torus``: torus:4x4, disjoint 2 sources x 4 destinations of 4 MiB, every node a host that
  routes by dimension order: default, heu2, opt;
- ``dragonfly``: dragonfly:p=2,a=4,h=2 (72 hosts, 36 routers), 16 random pairs of 2 MiB
  (disjoint 16x1, random pairing seed 0): default, opt;
- ``split``: cluster:hosts=8,edges=2,cores=2, 3 pairs of 4 MiB from one edge switch to the
  other: default, opt, dynamic, opt:free (its free plan splits a pair over both cores, which
  per-pair rules cannot carry: measured on the network's routes, against its realized time).

``benchmarks/testbed_rates.py`` runs the cases at other rates, paced and unpaced (no replay may
hang); ``benchmarks/testbed_budget.py`` finds the rate at which the machine's cores, not the
links, set the pace.

    python benchmarks/testbed.py [--cases fattree,fabric,torus,dragonfly] [--rate MBIT] [--repeat 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MiB = 2**20
CASES = ("fattree", "fabric", "torus", "dragonfly", "split")
#: Per case: link rate (Mbit/s) when --rate is not given, so that the link traffic stays under about
#: 1 Gbit/s, where 2 cores forward it without holding it back (benchmarks/testbed_budget.py).
RATES = {"fattree": 10, "fabric": 10, "torus": 20, "dragonfly": 10, "split": 20}


def case(name: str, workdir: Path):
    """``(topology, demands, methods)`` of a case."""
    from optiq import Demands, from_spec
    from optiq.workloads import constant_ratio, permutation, random_pairing

    if name == "fattree":
        t = from_spec("fattree:k=4,n=2")
        return t, permutation(t.num_endpoints, nbytes=4 * MiB, seed=1), "default,heu2,opt,dynamic,opt:free"
    if name == "fabric":
        spec = importlib.util.spec_from_file_location("synthetic_fabric", ROOT / "scripts" / "synthetic_fabric.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["synthetic_fabric"] = module
        spec.loader.exec_module(module)
        module.main([str(workdir / "fabric.txt"), "--hosts", "32", "--lfts", str(workdir / "lfts.txt")])
        t = from_spec(f"ibnet:{workdir / 'fabric.txt'},routes={workdir / 'lfts.txt'}")
        demands = random_pairing(constant_ratio(32, "disjoint", nbytes=4 * MiB, num_sources=16, ratio=1), seed=1)
        return t, demands, "default,heu2,opt,tables"
    if name == "torus":
        t = from_spec("torus:4x4")
        return t, constant_ratio(16, "disjoint", nbytes=4 * MiB, num_sources=2, ratio=4), "default,heu2,opt"
    if name == "dragonfly":
        t = from_spec("dragonfly:p=2,a=4,h=2")
        demands = random_pairing(constant_ratio(t.num_endpoints, "disjoint", nbytes=2 * MiB, num_sources=16, ratio=1),
                                 seed=0)
        return t, demands, "default,opt"
    if name == "split":
        t = from_spec("cluster:hosts=8,edges=2,cores=2")
        return t, Demands([0, 1, 2], [4, 5, 6], [4 * MiB] * 3, name="3 pairs across 2 cores"), "default,opt,dynamic,opt:free"
    raise SystemExit(f"unknown case {name!r} (choose from {', '.join(CASES)})")


def targets(report) -> str:
    """One line per method: the targets this run met or missed."""
    out = []
    for r in report.rows[1:]:
        gain = r.measured_gain / r.predicted_gain
        time_ratio = r.measured_time_s / r.predicted_time_s
        ok = gain >= 0.9 and time_ratio <= 1.15 and r.link_bytes_deviation <= 0.05 and r.verified
        out.append(f"  {r.method:9} measured gain / predicted gain {gain:.2f} (>= 0.90), measured / predicted "
                   f"{time_ratio:.2f} (<= 1.15), links {r.link_bytes_deviation:.1%} (<= 5%): "
                   f"{'met' if ok else 'MISSED'}")
    return "\n".join(out)


def run(name: str, rate_mbit: float, repeat: int, pace: bool, workdir: Path) -> object:
    from optiq.testbed import run_testbed

    topology, demands, methods = case(name, workdir)
    return run_testbed(topology, demands, methods=methods, rate=rate_mbit * 1e6 / 8, repeat=repeat, warmup=1,
                       name=f"optiq-bench{name[:4]}", pace_paths=pace, options={"k": 8})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--rate", type=float, help="Mbit/s of the fastest link (default per case: "
                                               + ", ".join(f"{k} {v}" for k, v in RATES.items()) + ")")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in (c.strip() for c in args.cases.split(",") if c.strip()):
            report = run(name, args.rate or RATES[name], args.repeat, True, Path(tmp))
            print(f"== {name}\n{report}\n{targets(report)}\n", flush=True)


if __name__ == "__main__":
    main()
