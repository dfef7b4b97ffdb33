"""Plans for whole machines: column generation against the fixed-k LP and Heuristic 2, side by side.

Every (instance, method) runs in its own process, so the peak memory printed is that run's
(``ru_maxrss``). Per instance it prints nodes, jobs, the plan's paths, wall time, completion
time, best proven bound, gap and peak memory of ``opt``, and the completion-time ratios of
the fixed-k LP and of Heuristic 2 (over the same candidates) to ``opt``. Then, for the
8,192-node disjoint instance, ``opt --time-limit 20`` against the fixed LP over 8 spread
candidates, and for the 49,152-node machine every fast method end to end.

    python benchmarks/whole_machine.py [--instances bgq1024,t8192,t8192pair0,t8192pair1,t8192pair2,bgq49152]
        [--ranks N] [--limit-8k 60] [--limit-49k 900]

``--ranks N`` runs ``opt`` under ``mpiexec -n N`` (pricing spread over N ranks) and also
serially, and prints the speed-up.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

GAP = {"bgq49152": 0.02}
SIZES = {"bgq1024": "bgq:1024", "bgq49152": "bgq:49152"}


def instance(name: str):
    from optiq import from_spec
    from optiq.workloads import constant_ratio, random_pairing

    spec = SIZES.get(name, "torus:8x8x8x8x2")
    topology = from_spec(spec)
    demands = constant_ratio(topology.num_endpoints, "disjoint")
    if name.startswith("t8192pair"):
        demands = random_pairing(demands, seed=int(name.removeprefix("t8192pair")))
    return topology, demands


def run_one(name: str, method: str, limit: float | None, comm=None) -> dict:
    from optiq import make_plan
    from optiq.planner import make_candidates, planner_named

    topology, demands = instance(name)
    start = time.perf_counter()
    if method == "opt":
        plan = make_plan(topology, demands, "opt", gap=GAP.get(name, 0.01), time_limit=limit, comm=comm)
    elif method in ("lp", "heu2-same"):
        kind = "torus" if topology.num_nodes > 16384 else "spread"
        candidates = make_candidates(topology, demands, 8, kind)
        if method == "lp":
            solver = "hipdlp" if topology.num_nodes > 16384 else "ipm-nox"  # interior point takes >10 min at 49k
            plan = make_plan(topology, demands, "lp", candidates=candidates, solver=solver, time_limit=limit)
        else:
            plan = make_plan(topology, demands, "heu2", candidates=candidates)
    else:
        plan = make_plan(topology, demands, planner_named(method, k=8)[0])
    wall = time.perf_counter() - start
    return {"instance": name, "method": method, "nodes": topology.num_nodes, "jobs": demands.num_jobs,
            "paths": plan.paths.num_paths, "wall_s": wall, "time_s": plan.predicted_time_s,
            "bound_s": plan.lower_bound_time_s, "gap": 1 - plan.lower_bound_time_s / plan.predicted_time_s,
            "status": plan.info.get("cg_status", ""), "iterations": plan.info.get("iterations", 0),
            "ranks": plan.info["timings"]["ranks"], "peak_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child(name: str, method: str, limit: float | None, ranks: int = 1) -> dict:
    argv = [sys.executable, __file__, "--one", name, method, str(limit or 0)]
    if ranks > 1:
        argv = [str(Path(sys.executable).parent / "mpiexec"), "-n", str(ranks), *argv]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{name} {method} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", default="bgq1024,t8192,t8192pair0,t8192pair1,t8192pair2,bgq49152")
    ap.add_argument("--ranks", type=int, default=1, help="also run opt under mpiexec -n RANKS")
    ap.add_argument("--limit-8k", type=float, default=60.0, help="opt time limit up to 8,192 nodes (s)")
    ap.add_argument("--limit-49k", type=float, default=900.0, help="opt time limit at 49,152 nodes (s)")
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        name, method, limit = args.one
        comm = None
        try:
            from optiq.mpi.launch import world
            comm = world()
        except ImportError:
            pass
        result = run_one(name, method, float(limit) or None, comm)
        if comm is None or comm.Get_rank() == 0:
            print(json.dumps(result))
        return
    print(f"{'instance':11} {'nodes':>6} {'jobs':>6} {'paths':>7} {'iters':>5} {'opt s':>7} {'time ms':>9} "
          f"{'bound ms':>9} {'gap':>7} {'peak MiB':>8} {'lp/opt':>7} {'heu2/opt':>8}  status", flush=True)
    for name in args.instances.split(","):
        limit = args.limit_49k if name == "bgq49152" else args.limit_8k
        opt = child(name, "opt", limit)
        lp, heu2 = child(name, "lp", None), child(name, "heu2-same", None)
        print(f"{name:11} {opt['nodes']:6d} {opt['jobs']:6d} {opt['paths']:7d} {opt['iterations']:5d} "
              f"{opt['wall_s']:7.1f} {opt['time_s'] * 1e3:9.4f} {opt['bound_s'] * 1e3:9.4f} {opt['gap']:7.2%} "
              f"{opt['peak_MiB']:8.0f} {lp['time_s'] / opt['time_s']:7.3f} {heu2['time_s'] / opt['time_s']:8.3f}  "
              f"{opt['status']}", flush=True)
        print(f"{'':11} fixed LP (k=8): {lp['time_s'] * 1e3:.4f} ms in {lp['wall_s']:.1f} s, {lp['peak_MiB']:.0f} MiB; "
              f"heu2 (same candidates): {heu2['time_s'] * 1e3:.4f} ms in {heu2['wall_s']:.1f} s", flush=True)
        if args.ranks > 1:
            par = child(name, "opt", limit, args.ranks)
            print(f"{'':11} opt under mpiexec -n {args.ranks}: {par['wall_s']:.1f} s (serial {opt['wall_s']:.1f} s, "
                  f"speed-up {opt['wall_s'] / par['wall_s']:.2f}), {par['time_s'] * 1e3:.4f} ms, gap {par['gap']:.2%}",
                  flush=True)
        if name == "t8192":
            short = child(name, "opt", 20.0)
            print(f"{'':11} opt --time-limit 20: {short['time_s'] * 1e3:.4f} ms in {short['wall_s']:.1f} s "
                  f"({short['time_s'] / lp['time_s']:.3f} x the fixed LP over 8 spread candidates)", flush=True)
        if name == "bgq49152":
            for method in ("default", "heu1", "heu2", "dynamic"):
                r = child(name, method, None)
                print(f"{'':11} {method:8} end to end {r['wall_s']:6.1f} s, {r['time_s'] * 1e3:9.4f} ms, "
                      f"peak {r['peak_MiB']:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
