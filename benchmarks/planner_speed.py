"""Planner speed and quality on bgq:1024 disjoint 1:8, 8 MiB per pair (512 jobs).

Prints, side by side in one run: candidate-path time; LP model build and solve time for
the Pyomo route vs the direct highspy route (same candidates, same HiGHS algorithm);
the heuristics' times; and plan quality as completion time over the cut lower bound.
Also the LP over plain Yen k-shortest paths on the same jobs, to show why diversity matters.

    python benchmarks/planner_speed.py [--k 16 32] [--skip-yen]
"""

from __future__ import annotations

import argparse
import time

from optiq import from_spec, plan_metrics
from optiq.lp import build_pyomo_model, cut_lower_bound, solve_lp, solve_pyomo_model
from optiq.paths import diverse_paths, yen_paths
from optiq.planner import make_plan
from optiq.workloads import constant_ratio


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topology", default="bgq:1024")
    ap.add_argument("--k", type=int, nargs="+", default=[16, 32])
    ap.add_argument("--skip-yen", action="store_true")
    args = ap.parse_args()
    topo = from_spec(args.topology)
    demands = constant_ratio(topo.num_endpoints, "disjoint")
    bound = cut_lower_bound(topo, demands).time_s
    print(f"{topo.name}, {demands.num_jobs} jobs x 8 MiB; cut lower bound {bound * 1e3:.3f} ms")
    header = f"{'k':>3}  {'route/method':<16} {'paths s':>8} {'build s':>8} {'solve s':>8} {'total s':>8} {'time/bound':>10}"
    print(header)
    print("-" * len(header))
    for k in args.k:
        cand, paths_s = timed(diverse_paths, topo, demands, k)
        direct = solve_lp(topo, demands, cand)
        print(f"{k:>3}  {'LP highspy':<16} {paths_s:8.2f} {direct.build_s:8.2f} {direct.solve_s:8.2f} "
              f"{paths_s + direct.build_s + direct.solve_s:8.2f} {direct.time_s / bound:10.4f}")
        model, build_s = timed(build_pyomo_model, topo, demands, cand)
        via = solve_pyomo_model(model, build_s=build_s)
        print(f"{k:>3}  {'LP pyomo':<16} {paths_s:8.2f} {build_s:8.2f} {via.solve_s:8.2f} "
              f"{paths_s + build_s + via.solve_s:8.2f} {via.time_s / bound:10.4f}")
        print(f"{'':>3}  pyomo/highspy build+solve time ratio: "
              f"{(build_s + via.solve_s) / (direct.build_s + direct.solve_s):.2f}x")
        for method in ("opt", "heu1", "heu2", "dynamic", "default"):
            plan, plan_s = timed(make_plan, topo, demands, method, k=k, candidates=cand)
            m = plan_metrics(plan)
            print(f"{k:>3}  {'plan ' + method:<16} {paths_s if method != 'default' else 0:8.2f} {'':>8} "
                  f"{plan_s:8.2f} {plan_s + (paths_s if method != 'default' else 0):8.2f} "
                  f"{m.predicted_time_s / bound:10.4f}")
        if not args.skip_yen:
            yen, yen_s = timed(yen_paths, topo, demands, k)
            lp = solve_lp(topo, demands, yen)
            print(f"{k:>3}  {'LP over Yen':<16} {yen_s:8.2f} {lp.build_s:8.2f} {lp.solve_s:8.2f} "
                  f"{yen_s + lp.build_s + lp.solve_s:8.2f} {lp.time_s / bound:10.4f}   "
                  f"(Yen reaches {bound / lp.time_s:.0%} of the best throughput, diverse {bound / direct.time_s:.0%})")


if __name__ == "__main__":
    main()
