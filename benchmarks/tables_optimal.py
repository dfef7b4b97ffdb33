"""Tables against their bound and against the exact optimum, several jobs at once, and scale.

    python benchmarks/tables_optimal.py [--quick]

Synthetic k-ary n-trees (``scripts/synthetic_fabric.py``, D-mod-K tables given), every
figure a busiest link measured in this run:

1. 20 random permutations of 8 MiB pairs on the 4-ary 3-tree: the given tables, optiq's, the
   single-path bound (the hosts' cables), how many tables meet it.
2. The exact tables (``optiq.planner.exact_tables``, an integer program) against optiq's
   heuristic alone (``exact_routes=0``) and against ``job_tables`` as it runs by default
   (which solves the program where it is small) on small trees: 3 random permutations and 3
   random pair sets of 1-3 MiB each (several senders per host; hosts cabled at NDR so that
   the switches' cables bind), how many equal, the heuristic's worst ratio.
3. Three jobs on disjoint random host lists of the 4-ary 3-tree: CG (16 ranks), MILC
   (2x2x2x4, 32 ranks) and a random permutation of 16: each job's busiest link under tables
   made for it alone, under the cluster's tables and under the given ones; links shared.
4. A permutation on 4,096 hosts (16-ary 3-tree): time and peak memory to write the tables
   (``--quick``: 1,024 hosts, 32-ary 2-tree).
5. Where neither the Clos routing nor the exact program applies: 512 random pairs of 1-3 MiB
   (several senders per host, hosts at NDR) on the 8-ary 3-tree, 6 seeds: the given tables,
   optiq's and the single-path bound.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from optiq import Demands
from optiq.planner import cluster_tables, exact_tables, job_tables
from optiq.topology import read_ibnetdiscover
from optiq.workloads import host_demands, milc_traffic, nas_cg_traffic
from optiq.workloads.jobs import ClusterJob

ROOT = Path(__file__).resolve().parent.parent


def _synthetic():
    spec = importlib.util.spec_from_file_location("synthetic_fabric", ROOT / "scripts" / "synthetic_fabric.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["synthetic_fabric"] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def fabric(work: Path, k: int, levels: int, **build):
    sf = _synthetic()
    name = f"k{k}n{levels}" + "".join(f"-{v}" for v in build.values())
    model = sf.build(k, levels, seed=1, **build)
    sf.write_ibnetdiscover(model, str(work / f"{name}.txt"))
    sf.write_lfts(model, str(work / f"{name}.lfts"))
    return read_ibnetdiscover(work / f"{name}.txt", routes=work / f"{name}.lfts")


def permutation(P: int, seed: int, nbytes: int = 8 << 20) -> Demands:
    rng = np.random.default_rng(seed)
    perm = rng.permutation(P)
    while (perm == np.arange(P)).all():  # a tiny tree may draw no move at all
        perm = rng.permutation(P)
    moved = perm != np.arange(P)
    return Demands(np.flatnonzero(moved), perm[moved], np.full(int(moved.sum()), nbytes))


def part_permutations(work: Path) -> None:
    t = fabric(work, 4, 3)
    print("== 1. 20 random permutations of 8 MiB, 4-ary 3-tree (64 hosts, 48 switches), D-mod-K given")
    at, gains = 0, []
    for seed in range(20):
        made = job_tables(t, permutation(t.num_endpoints, seed))
        at += made.gap <= 1e-9
        gains.append(made.gain)
        if seed < 3:
            print(f"  seed {seed}: given {made.given_time_s * 1e3:.4f} ms, tables {made.time_s * 1e3:.4f} ms, bound "
                  f"{made.bound_s * 1e3:.4f} ms")
    print(f"  at the bound: {at} of 20; given / tables: median {np.median(gains):.2f}x, {min(gains):.2f}-"
          f"{max(gains):.2f}x", flush=True)


def part_exact(work: Path) -> None:
    print("== 2. exact tables (integer program) against optiq's, hosts at NDR")
    print(f"  {'tree':8} {'kind':12} {'instances':>9} {'heuristic equal':>15} {'worst heuristic/exact':>21} "
          f"{'job_tables equal':>16} {'IP s (max)':>10}")
    total = same = reached = 0
    for k, levels in ((2, 2), (2, 3), (3, 2), (4, 2), (2, 4), (4, 3)):
        t = fabric(work, k, levels, host_speed="NDR")
        P = t.num_endpoints
        for kind in ("permutation", "random pairs"):
            n = eq = full = 0
            worst, slowest = 1.0, 0.0
            for seed in range(3):
                rng = np.random.default_rng(seed)
                if kind == "permutation":
                    d = permutation(P, seed, 1 << 20)
                else:
                    pairs = np.unique(rng.integers(0, P, (P, 2)), axis=0)
                    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
                    d = Demands(pairs[:, 0], pairs[:, 1], rng.integers(1, 4, len(pairs)) << 20)
                start = time.perf_counter()
                best = exact_tables(t, d)
                slowest = max(slowest, time.perf_counter() - start)
                made = job_tables(t, d, exact_routes=0)  # the heuristic alone
                n += 1
                eq += made.time_s <= best.time_s * (1 + 1e-9)
                worst = max(worst, made.time_s / best.time_s)
                full += job_tables(t, d).time_s <= best.time_s * (1 + 1e-9)
            total, same, reached = total + n, same + eq, reached + full
            print(f"  {k}-ary {levels} {kind:12} {n:9d} {eq:15d} {worst:21.3f} {full:16d} {slowest:10.2f}", flush=True)
    print(f"  all: the heuristic alone {same} of {total} equal, job_tables (which solves the program where it is "
          f"small) {reached} of {total}")


def part_jobs(work: Path) -> None:
    print("== 3. three jobs on disjoint random host lists of the 4-ary 3-tree (1 MiB per rank pair)")
    t = fabric(work, 4, 3)
    hosts = np.random.default_rng(4).permutation(t.num_endpoints)
    lists = {"CG": hosts[:16], "MILC": hosts[16:48], "perm": hosts[48:]}
    traffic = {"CG": nas_cg_traffic(16, rows=4), "MILC": milc_traffic((2, 2, 2, 4))}
    jobs = []
    for name, h in lists.items():
        if name in traffic:
            d = host_demands(traffic[name], t.num_endpoints, hosts=h).demands
        else:
            local = permutation(h.size, 9, 1 << 20)
            d = Demands(h[local.src], h[local.dst], local.nbytes)
        jobs.append(ClusterJob(name, h, d))
    result = cluster_tables(t, jobs)
    print("\n".join("  " + line for line in str(result).splitlines()), flush=True)


def part_scale(work: Path, quick: bool) -> None:
    k, levels = (32, 2) if quick else (16, 3)
    t = fabric(work, k, levels)
    print(f"== 4. a random permutation on {t.num_endpoints:,} hosts ({k}-ary {levels}-tree, "
          f"{t.num_nodes - t.num_endpoints} switches)")
    made = job_tables(t, permutation(t.num_endpoints, 1))
    print(f"  given {made.given_time_s * 1e3:.4f} ms, tables {made.time_s * 1e3:.4f} ms, bound "
          f"{made.bound_s * 1e3:.4f} ms; {made.seconds:.1f} s, peak memory {made.memory_mib:.0f} MiB", flush=True)


def part_general(work: Path) -> None:
    print("== 5. 512 random pairs of 1-3 MiB on the 8-ary 3-tree (512 hosts, hosts at NDR), 6 seeds")
    t = fabric(work, 8, 3, host_speed="NDR")
    P = t.num_endpoints
    for seed in range(6):
        rng = np.random.default_rng(seed)
        pairs = np.unique(rng.integers(0, P, (P, 2)), axis=0)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        made = job_tables(t, Demands(pairs[:, 0], pairs[:, 1], rng.integers(1, 4, len(pairs)) << 20))
        print(f"  seed {seed}: given {made.given_time_s * 1e3:.4f} ms, tables {made.time_s * 1e3:.4f} ms, bound "
              f"{made.bound_s * 1e3:.4f} ms ({made.gap:.0%} above it), {made.seconds:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="part 4 on 1,024 hosts")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="optiq-tables-") as tmp:
        work = Path(tmp)
        part_permutations(work)
        part_exact(work)
        part_jobs(work)
        part_scale(work, args.quick)
        part_general(work)


if __name__ == "__main__":
    sys.exit(main())
