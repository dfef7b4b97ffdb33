"""What plans promise and what the network delivers: forwarded against free plans, side by side.

For each instance, ``default``, ``heu2`` and ``opt`` planned forwarded (legs of the network's
own routes, the default) and free (paths that pick switches, as optiq planned before plans
said how they are carried): the predicted time (busiest link), the realized time (every
leg routed by the network's own rule: forwarding tables, D-mod-K, minimal, dimension order),
the realized gain over the default routes, copies per path (chunks times intermediate
stops, mean and max) and planning seconds. Beside them the reference the forwarded ``opt``
must reach: the LP over every job's direct route and its chains through 16 sampled
intermediate hosts (seed 0), on the networks whose switches are not ranks.

Instances: ``fattree`` (fattree:k=4,n=3, a random permutation of the 64 hosts,
``default_rng(1)``, 8 MiB per pair, self-pairs dropped); ``fabric`` (the 512-host fabric of
``scripts/synthetic_fabric.py --k 8 --levels 3 --hosts 512 --parallel 2 --seed 3 --drop 8
--slow 0.1 --slow-speed FDR`` with its tables, 256 random pairs: disjoint 256x1, random
pairing seed 1); ``dragonfly`` (dragonfly:p=4,a=8,h=4, disjoint 1:8, random pairing seed
0); ``bgq1024`` (bgq:1024 disjoint 1:8); ``torus8`` (torus:8x8x8, no length-2 ring: forwarded
``opt`` reaches free ``opt``'s time).

    python benchmarks/realizable.py [--instances fattree,fabric,dragonfly,bgq1024,torus8]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MiB = 2**20


def _synthetic():
    spec = importlib.util.spec_from_file_location("synthetic_fabric", ROOT / "scripts" / "synthetic_fabric.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["synthetic_fabric"] = module
    spec.loader.exec_module(module)
    return module


def instance(name: str, workdir: Path):
    from optiq import Demands, from_spec
    from optiq.workloads import constant_ratio, random_pairing

    if name == "fattree":
        t = from_spec("fattree:k=4,n=3")
        perm = np.random.default_rng(1).permutation(64)
        keep = perm != np.arange(64)
        return t, Demands(np.arange(64)[keep], perm[keep], np.full(int(keep.sum()), 8 * MiB), name="permutation")
    if name == "fabric":
        sf = _synthetic()
        model = sf.build(8, 3, hosts=512, parallel=2, seed=3, drop=8, slow=0.1, slow_speed="FDR")
        sf.write_ibnetdiscover(model, str(workdir / "fabric.txt"))
        sf.write_lfts(model, str(workdir / "lfts.txt"))
        t = from_spec(f"ibnet:{workdir / 'fabric.txt'},routes={workdir / 'lfts.txt'}")
        d = constant_ratio(t.num_endpoints, "disjoint", num_sources=256, ratio=1)
        return t, random_pairing(d, seed=1)
    if name == "dragonfly":
        t = from_spec("dragonfly:p=4,a=8,h=4")
        return t, random_pairing(constant_ratio(t.num_endpoints, "disjoint"), seed=0)
    if name == "bgq1024":
        t = from_spec("bgq:1024")
        return t, constant_ratio(t.num_endpoints, "disjoint")
    t = from_spec("torus:8x8x8")
    return t, constant_ratio(t.num_endpoints, "disjoint")


def sampled_chains_lp(t, d, count: int = 16, seed: int = 0) -> float:
    """The LP over every job's direct route and its chains through ``count`` random hosts."""
    from optiq.lp import solve_lp
    from optiq.paths import PathSet, network_routes

    rng = np.random.default_rng(seed)
    J = d.num_jobs
    via = np.array([rng.choice(np.setdiff1d(np.arange(t.num_endpoints), [s, e]), count, replace=False)
                    for s, e in zip(d.src, d.dst)])
    jobs = np.repeat(np.arange(J), count)
    first, second = network_routes(t, d.src[jobs], via.ravel()), network_routes(t, via.ravel(), d.dst[jobs])
    direct = network_routes(t, d.src, d.dst)
    links = [direct.path(j) for j in range(J)] + [np.concatenate([first.path(i), second.path(i)])
                                                  for i in range(jobs.size)]
    stops = [np.arange(direct.hops[j]) == direct.hops[j] - 1 for j in range(J)] + [
        np.concatenate([np.arange(first.hops[i]) == first.hops[i] - 1, np.arange(second.hops[i]) == second.hops[i] - 1])
        for i in range(jobs.size)]
    paths = PathSet.from_lists(links, np.concatenate([np.arange(J), jobs]), J, stops)
    return solve_lp(t, d, paths, solver="ipm").time_s


def main() -> None:
    from optiq import make_plan

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", default="fattree,fabric,dragonfly,bgq1024,torus8")
    args = parser.parse_args()
    print("realized: every leg routed by the network's own rule; gain: default's realized time over the plan's")
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.instances.split(","):
            t, d = instance(name, Path(workdir))
            print(f"\n== {name}: {t.name}, {d.name}, {d.num_jobs:,} jobs, default routes: {t.default_routing}")
            print(f"{'method':8} {'routing':9} {'predicted ms':>12} {'realized ms':>11} {'gain':>6} "
                  f"{'copies avg':>10} {'max':>6} {'paths':>6} {'plan s':>7}")
            base = None
            for routing in ("forwarded", "free"):
                for method in ("default", "heu2", "opt"):
                    start = time.perf_counter()
                    plan = make_plan(t, d, method, routing=routing)
                    seconds = time.perf_counter() - start
                    realized = plan.realized_time_s
                    base = realized if base is None else base
                    copies = -(-plan.path_bytes // plan.chunk_size) * plan.paths.copies
                    print(f"{method:8} {routing:9} {plan.predicted_time_s * 1e3:12.3f} {realized * 1e3:11.3f} "
                          f"{base / realized:5.2f}x {copies.mean():10.1f} {copies.max():6d} {plan.paths.num_paths:6,} "
                          f"{seconds:7.2f}")
            if t.num_endpoints < t.num_nodes:
                ref = sampled_chains_lp(t, d)
                print(f"reference: LP over the direct routes and chains through 16 sampled hosts: {ref * 1e3:.3f} ms, "
                      f"{base / ref:.2f}x")


if __name__ == "__main__":
    main()
