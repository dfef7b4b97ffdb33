"""Job tables against the best known for any traffic: their busiest link beside the bound they
print, the integer program's best tables and proven bound where it runs, and the best of
OpenSM's own engines (the real OpenSM on the fabric simulated by ibsim), in one run.

    python benchmarks/tables_best.py [--quick]

Fabrics: the ibsim 4-ary 3-tree (64 hosts, a quarter of its switch cables at DDR), a 192-host
leaf-spine (12 leaves of 16 hosts, 4 spines, 2 cables each) and the synthetic 8-ary 3-tree
(500 of its 512 host slots filled: ibsim drops a 512th host; hosts at NDR so that the switch
cables bind); the first two as the real
``ibnetdiscover`` prints them after OpenSM's minhop, the third as the script writes it (ibsim
simulates SDR to QDR only; the engines' tables are made on it all the same). Jobs: random pairs (3 seeds: half the hosts each
send to one other, 1-3 MiB), many-to-few (16 hosts to 4, 4 each, 8 MiB), a 12-host
all-to-all (1 MiB), a shift by 5, a random permutation (8 MiB) and the seeds' disjoint,
overlap and subset patterns (P/16 sources, 8 destinations each, 8 MiB). "best known" is the least
of the tables, the program's incumbent and the engines; the last column is the tables over
it. Needs Debian's opensm, ibsim-utils and infiniband-diags.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from _scripts import discovered, load_script

from optiq import Demands
from optiq.errors import OptiqError
from optiq.paths import forwarding_routes
from optiq.paths.opensm import missing_opensm_tools, opensm_tables
from optiq.planner import exact_tables, job_tables
from optiq.topology import read_ibnetdiscover
from optiq.topology.lft import read_forwarding_tables
from optiq.workloads import constant_ratio, permutation

ENGINES = ("minhop", "updn", "ftree", "dfsssp")


def fabrics(work: Path, quick: bool, ibsim_only: bool = False) -> list[tuple[str, Path]]:
    out = [("ibsim 4-ary 3-tree", discovered("tree", ["--k", "4", "--levels", "3"], work))]
    if quick:
        return out
    out.append(("192-host leaf-spine", discovered("leaf-spine", ["--leaves", "12", "--hosts-per-leaf", "16"], work)))
    if ibsim_only:
        return out
    sf = load_script("synthetic_fabric")
    model = sf.build(8, 3, hosts=500, seed=1, host_speed="NDR")  # ibsim loses a 512th host
    sf.write_ibnetdiscover(model, str(work / "k8.txt"))  # as written: ibsim would slow its NDR cables to QDR
    out.append(("synthetic 8-ary 3-tree, 500 hosts at NDR", work / "k8.txt"))
    return out


def jobs(n: int) -> dict[str, Demands]:
    out = {}
    for seed in range(3):
        rng = np.random.default_rng(seed)
        pairs = np.unique(rng.integers(0, n, (n // 2, 2)), axis=0)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        out[f"random pairs {seed}"] = Demands(pairs[:, 0], pairs[:, 1], rng.integers(1, 4, len(pairs)) << 20)
    rng = np.random.default_rng(7)
    hosts = rng.permutation(n)
    out["many-to-few 16->4"] = Demands(hosts[4:20], np.repeat(hosts[:4], 4), [8 << 20] * 16)
    a, b = np.meshgrid(hosts[20:32], hosts[20:32])
    keep = a != b
    out["12-host all-to-all"] = Demands(a[keep], b[keep], [1 << 20] * int(keep.sum()))
    out["shift by 5"] = Demands(np.arange(n), (np.arange(n) + 5) % n, [8 << 20] * n)
    out["permutation"] = permutation(n, nbytes=8 << 20, seed=1)
    for pattern in ("disjoint", "overlap", "subset"):   # the seeds' patterns: P/16 sources, 8 destinations each
        out[f"{pattern} {n // 16}x8"] = constant_ratio(n, pattern, num_sources=max(2, n // 16), ratio=8)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the 64-host tree only")
    ap.add_argument("--ibsim-only", action="store_true", help="the two ibsim fabrics, not the 8-ary 3-tree")
    args = ap.parse_args()
    missing = missing_opensm_tools()
    if missing:
        raise SystemExit(f"needs {', '.join(missing)}: apt-get install opensm ibsim-utils infiniband-diags")
    worst = 1.0
    with tempfile.TemporaryDirectory(prefix="optiq-best-") as tmp:
        for label, fabric in fabrics(Path(tmp), args.quick, args.ibsim_only):
            t = read_ibnetdiscover(fabric)
            engines = {e: read_forwarding_tables(opensm_tables(t, e), t) for e in ENGINES}
            print(f"== {label}: {t.num_endpoints} hosts, {t.num_nodes - t.num_endpoints} switches; busiest links in ms")
            print(f"  {'job':20} {'tables':>8} {'bound':>8} {'program':>8} {'proven':>8} {'engine':>16} "
                  f"{'best known':>10} {'tables/best':>11} {'s':>5}")
            for name, d in jobs(t.num_endpoints).items():
                start = time.perf_counter()
                made = job_tables(t, d)
                seconds = time.perf_counter() - start
                try:
                    program = exact_tables(t, d, time_limit=None, node_limit=2000)
                    incumbent, proven = program.time_s, program.bound_s
                except OptiqError:  # too big for the program
                    incumbent = proven = float("nan")
                times = {e: forwarding_routes(t, d, tab).busiest_link_time(d.nbytes.astype(float), t.capacity)
                         for e, tab in engines.items()}
                engine = min(times, key=lambda e: times[e])
                best = np.nanmin([made.time_s, incumbent, times[engine]])
                worst = max(worst, made.time_s / best)
                cell = "-" if np.isnan(incumbent) else f"{incumbent * 1e3:8.4f}"
                proof = "-" if np.isnan(proven) else f"{proven * 1e3:8.4f}"
                print(f"  {name:20} {made.time_s * 1e3:8.4f} {made.bound_s * 1e3:8.4f} {cell:>8} {proof:>8} "
                      f"{engine + ' ' + format(times[engine] * 1e3, '.4f'):>16} {best * 1e3:10.4f} "
                      f"{made.time_s / best:11.3f} {seconds:5.1f}", flush=True)
    print(f"worst tables over the best known: {worst:.3f}")


if __name__ == "__main__":
    main()
