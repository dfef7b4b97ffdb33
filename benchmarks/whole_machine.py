"""Plans for whole machines, lean plans, fair sharing and the fat-tree study, side by side.

Parts (``--parts``, all by default), each heavy run in its own process so that the peak
memory printed is that run's (``ru_maxrss``):

``opt``      ``opt`` (serial, lean step off: the time is what is measured) on the
             8,192-node torus (``--limit-8k``, 60 s) and the full Blue Gene/Q
             (``--limit-49k``, 600 s), gap target 1%: wall time, completion time, best
             proven bound, gap, peak memory, iterations and one iteration's split (pricing,
             LP, the rest), and the fixed LP over 8 candidates and Heuristic 2 beside it, with
             opt's wall time over the fixed LP's (``wall/LP``).
``pricing``  One pricing step (every job's cheapest path under one price vector) searched
             over the whole graph and within the jobs' regions (:mod:`optiq.paths.regions`),
             on both machines: seconds and the ratio.
``lean``     Hop-bytes of ``opt`` without and with the lean step, the lean step's proven
             least hop-bytes at that time (0 and ``none`` where no Lagrangian bound rose
             above 0), and the minimal routes' hop-bytes (every job on
             a shortest route: the fewest at any time), on bgq:1024 and the 4x4 demo.
``fair``     ``fair_time_s / predicted_time_s`` (the flow simulator with max-min fair
             sharing) of default, heu2 and opt on bgq:1024, with and without paced paths.
``fattree``  The fat-tree study (CG and MILC, built in and as synthetic PFProf traces):
             the busiest link of dynamic routing over D-mod-K's.

    python benchmarks/whole_machine.py [--parts opt,pricing,lean,fair,fattree]
        [--limit-8k 60] [--limit-49k 600] [--ranks N] [--instances t8192,bgq49152]

``--ranks N`` also runs ``opt`` under ``mpiexec -n N`` (pricing spread over N ranks).
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

INSTANCES = {"bgq1024": "bgq:1024", "t8192": "torus:8x8x8x8x2", "bgq49152": "bgq:49152"}


def instance(name: str):
    from optiq import from_spec
    from optiq.workloads import constant_ratio

    topology = from_spec(INSTANCES[name])
    return topology, constant_ratio(topology.num_endpoints, "disjoint")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_opt(name: str, limit: float, comm=None) -> dict:
    from optiq import make_plan

    topology, demands = instance(name)
    start = time.perf_counter()
    plan = make_plan(topology, demands, "opt", gap=0.01, time_limit=limit, lean=False, comm=comm)
    wall = time.perf_counter() - start
    t = plan.info["timings"]
    iters = max(plan.info.get("iterations", 0), 1)
    cg_s = t.get("plan_s", wall) - t.get("paths_s", 0.0)
    return {"wall_s": wall, "time_s": plan.predicted_time_s, "bound_s": plan.lower_bound_time_s,
            "gap": 1 - plan.lower_bound_time_s / plan.predicted_time_s, "iterations": plan.info.get("iterations", 0),
            "status": plan.info.get("cg_status", ""), "paths": plan.paths.num_paths, "jobs": demands.num_jobs,
            "initial_s": t.get("paths_s", 0.0), "iter_s": cg_s / iters, "price_s": t.get("price_s", 0.0) / iters,
            "lp_s": t.get("lp_s", 0.0) / iters, "peak_MiB": peak_mib()}


def run_fixed(name: str, method: str) -> dict:
    from optiq import make_plan
    from optiq.planner import make_candidates

    topology, demands = instance(name)
    start = time.perf_counter()
    kind = "torus" if topology.num_nodes > 16384 else "spread"
    candidates = make_candidates(topology, demands, 8, kind)
    if method == "lp":
        plan = make_plan(topology, demands, "lp", candidates=candidates,
                         solver="hipdlp" if topology.num_nodes > 16384 else "ipm-nox")
    else:
        plan = make_plan(topology, demands, "heu2", candidates=candidates)
    return {"wall_s": time.perf_counter() - start, "time_s": plan.predicted_time_s, "peak_MiB": peak_mib()}


def run_pricing(name: str) -> dict:
    import numpy as np

    from optiq.lp.colgen import CGOptions
    from optiq.paths import least_cost_paths, min_hops

    topology, demands = instance(name)
    hop_limit = min_hops(topology, demands.src, demands.dst) + CGOptions().hop_slack
    out = {}
    for step, regions in (("full", False), ("regions", True)):  # new prices at every step
        cost = (1.0 + np.random.default_rng(len(out)).random(topology.num_links)) / topology.capacity
        start = time.perf_counter()
        _, path_cost, _ = least_cost_paths(topology, demands.src, demands.dst, cost, hop_limit, too_long="penalty",
                                           regions=regions)
        out[step] = time.perf_counter() - start
        _, check, _ = least_cost_paths(topology, demands.src, demands.dst, cost, hop_limit, too_long="penalty",
                                       regions=not regions)  # the same prices searched the other way
        out["same_" + step] = bool(np.allclose(path_cost, check, rtol=1e-9))
    return out


def run_lean(name: str) -> dict:
    from optiq import from_spec, make_plan
    from optiq.paths import min_hops
    from optiq.workloads import constant_ratio

    if name == "demo4x4":
        topology = from_spec("torus:4x4")
        demands = constant_ratio(16, "disjoint", nbytes=8 * 2**20, num_sources=2, ratio=4)
    else:
        topology, demands = instance(name)
    plain = make_plan(topology, demands, "opt", lean=False)
    lean = make_plan(topology, demands, "opt")
    hop_bytes = lambda p: float((p.path_bytes * p.paths.hops).sum())  # noqa: E731
    minimal = float(demands.nbytes.astype(float) @ min_hops(topology, demands.src, demands.dst))
    info = lean.info.get("lean", {})
    return {"time_plain_s": plain.predicted_time_s, "time_lean_s": lean.predicted_time_s,
            "hop_bytes_plain": hop_bytes(plain), "hop_bytes_lean": hop_bytes(lean),
            "hop_bytes_bound": info.get("hop_bytes_bound", float("nan")), "lean_status": info.get("status", ""),
            "lean_s": lean.info["timings"].get("lean_s", 0.0), "minimal": minimal}


def run_fair() -> list[dict]:
    from optiq import make_plan
    from optiq.sim import simulate_flows

    topology, demands = instance("bgq1024")
    rows = []
    for method in ("default", "heu2", "opt"):
        plan = make_plan(topology, demands, method)
        row = {"method": method, "predicted_s": plan.predicted_time_s}
        for paced in (False, True):
            row["paced" if paced else "unpaced"] = simulate_flows(plan, "equal", pace_paths=paced).completion_time_s
        rows.append(row)
    return rows


def run_fattree() -> list[dict]:
    from optiq.experiments.fattree_study import fattree_study

    rows = [dict(r, source="built-in") for r in fattree_study(False, lambda m: None)]
    script = Path(__file__).parent.parent / "scripts" / "synthetic_pfprof.py"
    with tempfile.TemporaryDirectory() as tmp:
        for app in ("cg", "milc"):
            trace = Path(tmp) / f"{app}.tgz"
            subprocess.run([sys.executable, str(script), app, str(trace)], check=True, capture_output=True)
            rows += [dict(r, source="PFProf trace") for r in fattree_study(False, lambda m: None, traffic=str(trace))]
    return rows


def one(kind: str, *args: str) -> object:
    if kind == "opt":
        comm = None
        try:
            from optiq.mpi.launch import world
            comm = world()
        except ImportError:
            pass
        result = run_opt(args[0], float(args[1]), comm)
        return None if comm is not None and comm.Get_rank() != 0 else result
    return {"fixed": lambda: run_fixed(*args), "pricing": lambda: run_pricing(*args), "lean": lambda: run_lean(*args),
            "fair": run_fair, "fattree": run_fattree}[kind]()


def child(kind: str, *args: str, ranks: int = 1):
    argv = [sys.executable, __file__, "--one", kind, *args]
    if ranks > 1:
        argv = [str(Path(sys.executable).parent / "mpiexec"), "-n", str(ranks), *argv]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{kind} {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def part_opt(args) -> None:
    print("== opt, serial, gap target 1%, lean step off (times per iteration: pricing runs beside the LP)")
    print(f"{'instance':9} {'limit s':>7} {'wall s':>7} {'iters':>5} {'time ms':>9} {'bound ms':>9} {'gap':>6} "
          f"{'peak MiB':>8} {'init s':>6} {'iter s':>6} {'price s':>7} {'LP s':>6} {'lp/opt':>6} {'heu2/opt':>8} "
          f"{'wall/LP':>7}  status", flush=True)
    limits = {"t8192": args.limit_8k, "bgq49152": args.limit_49k}
    for name in args.instances.split(","):
        limit = limits[name]
        r = child("opt", name, str(limit))
        lp, heu2 = child("fixed", name, "lp"), child("fixed", name, "heu2")
        print(f"{name:9} {limit:7.0f} {r['wall_s']:7.1f} {r['iterations']:5d} {r['time_s'] * 1e3:9.4f} "
              f"{r['bound_s'] * 1e3:9.4f} {r['gap']:6.2%} {r['peak_MiB']:8.0f} {r['initial_s']:6.1f} {r['iter_s']:6.1f} "
              f"{r['price_s']:7.1f} {r['lp_s']:6.1f} {lp['time_s'] / r['time_s']:6.3f} {heu2['time_s'] / r['time_s']:8.3f} "
              f"{r['wall_s'] / lp['wall_s']:7.2f}  {r['status']}", flush=True)
        print(f"{'':9} fixed LP (k=8): {lp['time_s'] * 1e3:.4f} ms in {lp['wall_s']:.1f} s, {lp['peak_MiB']:.0f} MiB; "
              f"heu2: {heu2['time_s'] * 1e3:.4f} ms in {heu2['wall_s']:.1f} s", flush=True)
        if args.ranks > 1:
            p = child("opt", name, str(limit), ranks=args.ranks)
            print(f"{'':9} under mpiexec -n {args.ranks}: {p['wall_s']:.1f} s ({r['wall_s'] / p['wall_s']:.2f}x the "
                  f"serial run), {p['time_s'] * 1e3:.4f} ms, gap {p['gap']:.2%}, {p['iterations']} iterations, "
                  f"{p['status']}", flush=True)


def part_pricing(args) -> None:
    print("== one pricing step (cheapest path of every job under one price vector, within the default hop limit):")
    print("   the whole graph searched, and only the jobs' regions")
    print(f"{'instance':9} {'whole graph s':>13} {'regions s':>9} {'ratio':>6}  same costs", flush=True)
    for name in args.instances.split(","):
        r = child("pricing", name)
        print(f"{name:9} {r['full']:13.1f} {r['regions']:9.1f} {r['full'] / r['regions']:6.1f}  "
              f"{r['same_full'] and r['same_regions']}", flush=True)


def part_lean(args) -> None:
    print("== hop-bytes of opt: without and with the lean step, the lean step's bound, minimal routes")
    print(f"{'instance':9} {'time ms':>9} {'lean ms':>9} {'opt':>10} {'lean':>10} {'bound':>10} {'minimal':>10} "
          f"{'lean/bound':>10} {'lean s':>6}  status", flush=True)
    for name in ("bgq1024", "demo4x4"):
        r = child("lean", name)
        ratio = f"{r['hop_bytes_lean'] / r['hop_bytes_bound']:10.4f}" if r["hop_bytes_bound"] > 0 else f"{'none':>10}"
        print(f"{name:9} {r['time_plain_s'] * 1e3:9.4f} {r['time_lean_s'] * 1e3:9.4f} {r['hop_bytes_plain']:10.4g} "
              f"{r['hop_bytes_lean']:10.4g} {r['hop_bytes_bound']:10.4g} {r['minimal']:10.4g} "
              f"{ratio} {r['lean_s']:6.1f}  {r['lean_status']}", flush=True)


def part_fair(args) -> None:
    print("== bgq:1024 disjoint: fair_time_s / predicted_time_s (max-min fair sharing, flow level)")
    print(f"{'method':8} {'predicted ms':>12} {'unpaced':>8} {'paced':>8}", flush=True)
    for r in child("fair"):
        print(f"{r['method']:8} {r['predicted_s'] * 1e3:12.4f} {r['unpaced'] / r['predicted_s']:8.4f} "
              f"{r['paced'] / r['predicted_s']:8.4f}", flush=True)


def part_fattree(args) -> None:
    print("== fat-tree study: busiest link of dynamic routing / D-mod-K's")
    rows = child("fattree")
    print(f"{'app':6} {'source':13} {'selection':9} {'placement':9} {'D-mod-K B':>12} {'dynamic B':>12} {'ratio':>6}")
    keyed = {}
    for r in rows:
        keyed.setdefault((r["app"].upper(), r["source"], r["selection"], r["placement"]), {})[r["routing"]] = r
    for (app, source, sel, place), by in keyed.items():
        d, y = by["dmodk"]["max_link_bytes"], by["dynamic"]["max_link_bytes"]
        print(f"{app:6} {source:13} {sel:9} {place:9} {d:12.4g} {y:12.4g} {y / d:6.3f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="opt,pricing,lean,fair,fattree")
    ap.add_argument("--ranks", type=int, default=1, help="also run opt under mpiexec -n RANKS")
    ap.add_argument("--limit-8k", type=float, default=60.0, help="opt time limit on the 8,192-node torus (s)")
    ap.add_argument("--limit-49k", type=float, default=600.0, help="opt time limit on the full Blue Gene/Q (s)")
    ap.add_argument("--instances", default="t8192,bgq49152", help="opt's instances, of t8192 and bgq49152")
    ap.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        result = one(*args.one)
        if result is not None:
            print(json.dumps(result))
        return
    parts = {"opt": part_opt, "pricing": part_pricing, "lean": part_lean, "fair": part_fair, "fattree": part_fattree}
    for name in args.parts.split(","):
        if name not in parts:
            raise SystemExit(f"unknown part {name!r}; choose from {', '.join(parts)}")
    for name in args.parts.split(","):
        parts[name](args)


if __name__ == "__main__":
    main()
