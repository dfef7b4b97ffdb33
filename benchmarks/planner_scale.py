"""The planners on a full all-to-all-v of random sizes: time against ``default``, plan against ``opt``.

Every host sends every other host a random number of float64 elements, up to 64 Ki (seeded),
as an application's all-to-all-v. For each machine, every method plans the same demands in
this process; printed: its planning time (the first plan of the process, and the same plan
again: the median of 5 where the first took under a second), the first over ``default``'s, its
plan's predicted time over ``opt``'s (where ``opt`` runs) and over the cut bound, the plan's
predicted exchange at the topology's link rates and the second planning time over it (the
issue's "planning in well under the exchange's own time"), the same again once the compiled
kernels are loaded (``kernels s``: a process that planned at scale before, or imported
numba; a small plan alone does not load them) and over the exchange, and whether it kept the
default routes (``info.fallback``, or ``info.default_optimal``: shortest routes at the cut
bound, kept without planning). The issue's marks:
``heu2`` within 5x ``default``'s time on 512 hosts, its plan within 1.15x of ``opt``'s. The
512-host fat-tree's default routes are at the bound, so its ``heu2`` keeps them; the
two-level tree of 512 hosts (16 per edge switch, 8 uplinks each: tapered 2:1) and the
8x8x8 torus are where ``heu2`` plans at that size.

Every machine is planned in ``--repeat`` fresh processes (3); the times and the ratio to
``default`` (each process's own) printed are their medians: a first plan is at the mercy of
the machine's fresh memory. With ``--against DIR`` the same runs are repeated with the package
found in ``DIR`` (another checkout), the processes in turn, so that before and after share
the machine's state.

    python benchmarks/planner_scale.py [--machines "fattree:k=4,n=3;torus:4x4x4"]
        [--methods default,heu2,opt] [--no-opt-above 64] [--repeat 3] [--against ../old-checkout]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

MACHINES = "fattree:k=4,n=3;torus:4x4x4;fattree:k=8,n=3;cluster:hosts=512,edges=32,cores=8;torus:8x8x8"


def plan_all(spec: str, methods: list[str], no_opt_above: int, seed: int) -> list[dict]:
    import numpy as np

    from optiq.lp import cut_lower_bound
    from optiq.planner import make_plan
    from optiq.topology import from_spec
    from optiq.workloads import Demands

    try:
        from optiq.paths.system import forget_routes
    except ImportError:  # a checkout from before the routes were kept
        def forget_routes() -> None:
            pass

    topology = from_spec(spec)
    n = topology.num_endpoints
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 64 * 2**10 + 1, (n, n)) * 8
    np.fill_diagonal(sizes, 0)
    src, dst = np.nonzero(sizes)
    demands = Demands(src, dst, sizes[src, dst])
    bound = cut_lower_bound(topology, demands).time_s
    rows = []
    for method in methods:
        if method == "opt" and n > no_opt_above:
            continue
        forget_routes()  # every method's first plan routes afresh (the network's routes are kept between plans)
        start = time.perf_counter()
        plan = make_plan(topology, demands, method)
        seconds = time.perf_counter() - start
        rows.append({"machine": spec, "jobs": demands.num_jobs, "method": method, "seconds": seconds,
                     "again_s": _again(topology, demands, method, seconds), "predicted_s": plan.predicted_time_s,
                     "bound_s": bound, "fallback": plan.info.get("fallback") is not None,
                     "at_bound": bool(plan.info.get("default_optimal")),
                     "link_Bps": float(topology.capacity.max())})
    # the same again where the compiled kernels are loaded, as in a process that planned at scale
    # before (or imported numba): a small plan alone never loads them (optiq.heuristics.common)
    import numba  # noqa: F401

    for row in rows:
        make_plan(topology, demands, row["method"])   # the kernels' machine code loaded from numba's cache
        row["kernels_s"] = _again(topology, demands, row["method"], row["seconds"])
    return rows


def _again(topology, demands, method: str, first_s: float) -> float:
    """A plan made again in this process: the median of 5 where the first took under a second, else one."""
    from optiq.planner import make_plan

    times = []
    for _ in range(5 if first_s < 1.0 else 1):
        start = time.perf_counter()
        make_plan(topology, demands, method)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machines", default=MACHINES, help="topology specs separated by ';'")
    ap.add_argument("--methods", default="default,heu2,opt")
    ap.add_argument("--no-opt-above", type=int, default=64, help="hosts beyond which opt is not run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--against", help="another checkout: its package planned in turn with this one")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per machine and checkout (medians)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    methods = args.methods.split(",")
    if args.one:
        print(json.dumps(plan_all(args.one, methods, args.no_opt_above, args.seed)))
        return
    trees = {"this": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    if args.against:
        trees["other"] = os.path.abspath(args.against)
    print(f"{'checkout':8} {'machine':34} {'jobs':>7} {'method':8} {'plan s':>8} {'again s':>8} {'/default':>9} "
          f"{'/opt':>7} {'/bound':>7} {'exch ms':>8} {'again/exch':>10} {'kernels s':>9} {'kern/exch':>9}"
          f"  kept default")
    for spec in args.machines.split(";"):
        runs: dict[str, list[list[dict]]] = {name: [] for name in trees}
        for _ in range(args.repeat):   # the checkouts in turn, so a busy moment hits each alike
            for name, tree in trees.items():
                runs[name].append(_one_process(spec, tree, args))
        for name, processes in runs.items():
            rows = _medians(processes)
            opt = next((r["predicted_s"] for r in rows if r["method"] == "opt"), None)
            for r in rows:
                versus_opt = f"{r['predicted_s'] / opt:7.3f}" if opt else f"{'':>7}"
                print(f"{name:8} {spec:34} {r['jobs']:7d} {r['method']:8} {r['seconds']:8.2f} {r['again_s']:8.2f} "
                      f"{r['over_default']:9.2f} {versus_opt} {r['predicted_s'] / r['bound_s']:7.3f} "
                      f"{r['predicted_s'] * 1e3:8.2f} {r['again_s'] / r['predicted_s']:10.2f} "
                      f"{r['kernels_s']:9.3f} {r['kernels_s'] / r['predicted_s']:9.2f}  "
                      f"{'yes' if r['fallback'] else 'at the bound' if r.get('at_bound') else ''}", flush=True)
            rates = sorted({r["link_Bps"] for r in rows})
            print(f"{'':8} {spec}: links at {', '.join(f'{b / 1e9:g} GB/s' for b in rates)} (the topology's own)")


def _one_process(spec: str, tree: str, args: argparse.Namespace) -> list[dict]:
    """One fresh process's rows for ``spec`` with the package in ``tree``; each with its first
    plan's time over the same process's first ``default`` plan."""
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, __file__, "--one", spec, "--methods", args.methods,
                          "--no-opt-above", str(args.no_opt_above), "--seed", str(args.seed)],
                         capture_output=True, text=True, env=env, cwd=tree)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    default = next(r["seconds"] for r in rows if r["method"] == "default")
    for r in rows:
        r["over_default"] = r["seconds"] / default
    return rows


def _medians(processes: list[list[dict]]) -> list[dict]:
    """The rows of several processes (the same plans) with the median of every time and ratio."""
    rows = [dict(r) for r in processes[0]]
    for i, r in enumerate(rows):
        for key in ("seconds", "again_s", "kernels_s", "over_default"):
            r[key] = float(np.median([run[i][key] for run in processes]))
    return rows


if __name__ == "__main__":
    main()
