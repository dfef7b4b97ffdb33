"""Every gain over the routing users' networks really do: ECMP hashing, OpenSM's own engines, and
the bound of ideal adaptive routing, side by side in one run (model figures: busiest links).

    python benchmarks/baselines.py [--quick]

1. **ECMP against a brute-force count.** Random permutations of the hosts of
   ``fattree:k=4,n=2`` and ``fattree:k=8,n=2`` (one flow per pair, fixed points dropped): the
   busiest link's flows under D-mod-K, under the model's ECMP (one hash draw per permutation,
   :mod:`optiq.paths.ecmp`) and under a brute-force count that draws every flow's next hop at
   every switch with Python's ``random`` over networkx's distances; and ``adaptive``.
2. **OpenSM's engines.** The ibsim 4-ary 3-tree (64 hosts) and a 192-host leaf-spine (12 leaves
   of 16 hosts, 4 spines, 2 cables each), discovered by the real ``ibnetdiscover``. Five jobs:
   a permutation, 32 random pairs, a shift by 5, a 12-host all-to-all (1 MiB pairs) and a
   many-to-few aggregation (16 hosts to 4, 4 each). Rows: the tables of minhop, updn, ftree and
   dfsssp (the real OpenSM on the fabric simulated, :func:`optiq.paths.opensm.opensm_tables`),
   ECMP's mean over hash draws, the job tables (``optiq tables``, from minhop's), forwarded
   ``opt`` over minhop and ``adaptive``; each over the best engine.

Part 2 needs Debian's opensm, ibsim-utils and infiniband-diags (skipped, saying so, without them).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import networkx as nx
import numpy as np
from _scripts import discovered

from optiq import Demands, from_spec, make_plan
from optiq.paths import dmodk_routes, forwarding_routes
from optiq.paths.ecmp import ecmp_draw_times, ecmp_spread
from optiq.paths.opensm import missing_opensm_tools, opensm_tables
from optiq.planner import compare_methods, job_tables
from optiq.topology import kary_ntree, read_ibnetdiscover
from optiq.topology.lft import read_forwarding_tables
from optiq.workloads import permutation

ENGINES = ("minhop", "updn", "ftree", "dfsssp")


def brute_force_max(graph: nx.DiGraph, dist: dict, src: list[int], dst: list[int], rng: random.Random) -> int:
    load: dict[tuple[int, int], int] = {}
    for s, d in zip(src, dst):
        v = s
        while v != d:
            w = rng.choice([u for u in graph.successors(v) if dist[d].get(u, 1 << 30) == dist[d][v] - 1])
            load[v, w] = load.get((v, w), 0) + 1
            v = w
    return max(load.values())


def part1(draws: int) -> None:
    print(f"== 1. ECMP on random permutations ({draws} draws), busiest link in flows")
    print(f"  {'fabric':16} {'D-mod-K':>8} {'ECMP':>8} {'brute':>8} {'ECMP/brute':>10} {'adaptive':>9}")
    for k in (4, 8):
        t = kary_ntree(k, 2, bandwidth=1.0)
        n = t.num_endpoints
        g = nx.DiGraph(list(zip(t.link_src.tolist(), t.link_dst.tolist())))
        dist = {d: nx.single_target_shortest_path_length(g, d) for d in range(n)}
        rng, brute_rng = np.random.default_rng(0), random.Random(0)
        dmodk, ecmp, brute, adaptive = [], [], [], []
        for i in range(draws):
            perm = rng.permutation(n)
            keep = perm != np.arange(n)
            src, dst = np.arange(n)[keep], perm[keep]
            ones = np.ones(src.size)
            dmodk.append(dmodk_routes(t, Demands(src, dst, ones.astype(int))).busiest_link_time(ones, t.capacity))
            ecmp.append(ecmp_draw_times(t, src, dst, ones, seed=i, draws=1)[0])
            brute.append(brute_force_max(g, dist, src.tolist(), dst.tolist(), brute_rng))
            if i < 50:
                adaptive.append(make_plan(t, Demands(src, dst, np.full(src.size, 2**20)), "adaptive")
                                .predicted_time_s / 2**20)
        print(f"  {f'fattree:k={k},n=2':16} {np.mean(dmodk):8.3f} {np.mean(ecmp):8.3f} {np.mean(brute):8.3f} "
              f"{np.mean(ecmp) / np.mean(brute):10.3f} {np.mean(adaptive):9.3f}")


def jobs(n: int, seed: int) -> dict[str, Demands]:
    rng = np.random.default_rng(seed)
    mib8 = 8 * 2**20
    pairs = rng.permutation(n)[:64].reshape(32, 2)
    subset = rng.choice(n, 12, replace=False)
    a, b = np.meshgrid(subset, subset)
    keep = a != b
    senders = rng.choice(n, 20, replace=False)
    return {
        "permutation": permutation(n, nbytes=mib8, seed=seed),
        "32 random pairs": Demands(pairs[:, 0], pairs[:, 1], [mib8] * 32),
        "shift by 5": Demands(np.arange(n), (np.arange(n) + 5) % n, [mib8] * n),
        "12-host all-to-all": Demands(a[keep], b[keep], [2**20] * int(keep.sum())),
        "many-to-few 16->4": Demands(senders[4:], np.repeat(senders[:4], 4), [mib8] * 16),
    }


def part2(work: Path, quick: bool) -> None:
    missing = missing_opensm_tools()
    if missing:
        print(f"== 2. skipped: {', '.join(missing)} not installed (apt-get install opensm ibsim-utils "
              f"infiniband-diags)")
        return
    fabrics = [("tree", ["--k", "4", "--levels", "3"], "ibsim 4-ary 3-tree")]
    if not quick:
        fabrics.append(("leaf-spine", ["--leaves", "12", "--hosts-per-leaf", "16"], "192-host leaf-spine"))
    for kind, args, label in fabrics:
        fabric = discovered(kind, args, work)
        topo = read_ibnetdiscover(fabric)
        tables = {e: read_forwarding_tables(opensm_tables(topo, e), topo) for e in ENGINES}
        hashed = from_spec(f"ibnet:{fabric},routes=ecmp:0")
        print(f"== 2. {label}: {topo.num_endpoints} hosts; busiest link ms (over the best engine)")
        for name, d in jobs(topo.num_endpoints, seed=1).items():
            start = time.perf_counter()
            rows = {e: forwarding_routes(topo, d, tab).busiest_link_time(d.nbytes.astype(float), topo.capacity)
                    for e, tab in tables.items()}
            rows["ECMP mean"] = ecmp_spread(hashed, d).mean_s
            made = job_tables(topo, d)
            rows["job tables"] = made.time_s
            runs = {r.method: r.plan for r in compare_methods(topo, d, ["opt", "adaptive"])}
            rows["opt"], rows["adaptive"] = runs["opt"].predicted_time_s, runs["adaptive"].predicted_time_s
            best = min(rows[e] for e in ENGINES)
            engine = min(ENGINES, key=lambda e: rows[e])
            cells = "  ".join(f"{k} {v * 1e3:.3f} ({best / v:.2f}x)" for k, v in rows.items())
            print(f"  {name} [best engine {engine}, bound of one-LID tables {made.bound_s * 1e3:.3f}]: {cells} "
                  f"[{time.perf_counter() - start:.1f} s]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer draws, the 64-host tree only")
    args = ap.parse_args()
    part1(200 if args.quick else 2000)
    with tempfile.TemporaryDirectory(prefix="optiq-baselines-") as work:
        part2(Path(work), args.quick)


if __name__ == "__main__":
    main()
