"""Column generation at scale: time, bound and gap, against the fixed-k LP and Heuristic 2.

Every instance runs in its own process (so the peak memory printed is that instance's):
column generation (``opt``, gap target 1%, time limit ``--time-limit``), the LP over ``k``
fixed diverse candidates (``lp``), and Heuristic 2 on the same candidates.

    python benchmarks/colgen_scale.py [--instances bgq1024,bgq2048,t8192,t8192pair0,fattree]
        [--k 16] [--k-large 4] [--time-limit 120]

Instances: ``bgq1024`` (disjoint 1:8, 512 jobs), ``bgq2048`` (128 sources x 8, 1,024 jobs),
``t8192`` (8x8x8x8x2 torus, 1:8, 4,096 jobs), ``t8192pairS`` (the same with random pairing,
seed S), ``fattree`` (8-ary 3-tree, 512 hosts, random permutation).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

from optiq import Demands, from_spec, make_plan
from optiq.planner import make_candidates
from optiq.workloads import constant_ratio, random_pairing

PAPER_OPT_BUSIEST_MB = 18.28  # seed 000, bgq:1024 disjoint, OPT's busiest link


def instance(name: str):
    if name == "bgq1024":
        t = from_spec("bgq:1024")
        return t, constant_ratio(1024, "disjoint")
    if name == "bgq2048":
        t = from_spec("bgq:2048")
        return t, constant_ratio(2048, "disjoint", num_sources=128, ratio=8)
    if name.startswith("t8192"):
        t = from_spec("torus:8x8x8x8x2")
        d = constant_ratio(8192, "disjoint")
        if name.startswith("t8192pair"):
            d = random_pairing(d, seed=int(name.removeprefix("t8192pair")))
        return t, d
    if name == "fattree":
        t = from_spec("fattree:k=8,n=3")
        n = t.num_endpoints
        perm = np.random.default_rng(0).permutation(n)
        keep = perm != np.arange(n)
        return t, Demands(np.arange(n)[keep], perm[keep], np.full(int(keep.sum()), 8 * 2**20))
    raise SystemExit(f"unknown instance {name!r}")


def run_one(name: str, k: int, time_limit: float) -> dict:
    t, d = instance(name)
    start = time.perf_counter()
    opt = make_plan(t, d, "opt", time_limit=time_limit)
    opt_s = time.perf_counter() - start
    start = time.perf_counter()
    cands = make_candidates(t, d, k)  # diverse up to 2,048 nodes, spread beyond
    cand_s = time.perf_counter() - start
    start = time.perf_counter()
    lp = make_plan(t, d, "lp", candidates=cands, time_limit=time_limit)
    lp_s = time.perf_counter() - start + cand_s
    start = time.perf_counter()
    heu2 = make_plan(t, d, "heu2", candidates=cands)
    heu2_s = time.perf_counter() - start + cand_s
    return {"instance": name, "nodes": t.num_nodes, "jobs": d.num_jobs, "paths": opt.paths.num_paths,
            "opt_s": opt_s, "time_s": opt.predicted_time_s, "bound_s": opt.lower_bound_time_s,
            "gap": 1 - opt.lower_bound_time_s / opt.predicted_time_s, "iterations": opt.info["iterations"],
            "status": opt.info["cg_status"], "busiest_MB": float(opt.link_bytes.max() / 1e6),
            "k": k, "lp_time_s": lp.predicted_time_s, "lp_s": lp_s, "heu2_time_s": heu2.predicted_time_s,
            "heu2_s": heu2_s, "peak_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", default="bgq1024,bgq2048,t8192,t8192pair0,fattree")
    ap.add_argument("--k", type=int, default=16, help="fixed candidates for lp/heu2 up to 2,048 nodes")
    ap.add_argument("--k-large", type=int, default=4, help="fixed candidates for lp/heu2 at 8,192 nodes")
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        k = args.k_large if args.one.startswith("t8192") else args.k
        print(json.dumps(run_one(args.one, k, args.time_limit)))
        return
    print(f"{'instance':11} {'nodes':>6} {'jobs':>5} {'paths':>6} {'iters':>5} {'opt s':>7} {'time ms':>9} "
          f"{'bound ms':>9} {'gap':>7} {'lp(k)/opt':>10} {'heu2/opt':>8} {'lp s':>7} {'heu2 s':>7} {'peak MiB':>8}")
    for name in args.instances.split(","):
        out = subprocess.run([sys.executable, __file__, "--one", name, "--k", str(args.k), "--k-large",
                              str(args.k_large), "--time-limit", str(args.time_limit)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{name}: failed\n{out.stderr[-2000:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{name:11} {r['nodes']:6d} {r['jobs']:5d} {r['paths']:6d} {r['iterations']:5d} {r['opt_s']:7.1f} "
              f"{r['time_s'] * 1e3:9.4f} {r['bound_s'] * 1e3:9.4f} {r['gap']:7.2%} "
              f"{r['lp_time_s'] / r['time_s']:9.3f}({r['k']}) {r['heu2_time_s'] / r['time_s']:8.3f} "
              f"{r['lp_s']:7.1f} {r['heu2_s']:7.1f} {r['peak_MiB']:8.0f}", flush=True)
        if name == "bgq1024":
            print(f"{'':11} busiest link {r['busiest_MB']:.2f} MB (paper's OPT: {PAPER_OPT_BUSIEST_MB} MB); "
                  f"status {r['status']}", flush=True)
        elif r["status"] != "gap reached":
            print(f"{'':11} status: {r['status']}", flush=True)


if __name__ == "__main__":
    main()
