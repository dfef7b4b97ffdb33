"""The executor measured on this machine, side by side in one run.

(a) Unpaced: the executor replaying the default-routing plan vs MPI_Alltoallv on the
    same jobs (all-to-all, 8 MiB per pair by default), throughput ratio; then the same for
    a neighbour exchange (each rank to each torus neighbour: every path one hop).
(b) Paced (--link-bw): on a 16-rank 4x4 torus with a pattern where multipath helps
    (2 sources x 4 destinations each, disjoint blocks), the default-routing plan, heu2
    and opt, each measured against its flow-level predicted time, and the measured
    speedup of opt over default routing against the predicted one.

    python benchmarks/executor.py [--size 8MiB] [--chunk-sizes 64KiB,1MiB] [--link-bw 25MB/s] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from optiq import Demands, from_spec, make_plan
from optiq.units import parse_rate, parse_size
from optiq.workloads import constant_ratio


def replay(plan, ranks: int, workdir: Path, *options) -> dict:
    path, out = workdir / "plan.json", workdir / "out.json"
    plan.save(path)
    mpiexec = Path(sys.executable).parent / "mpiexec"
    cmd = [str(mpiexec), "-n", str(ranks), sys.executable, "-m", "optiq.runtime", str(path), "--json", str(out),
           *map(str, options)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"replay failed ({' '.join(cmd)}):\n{proc.stdout}{proc.stderr}")
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="8MiB", help="bytes per pair (default 8MiB)")
    ap.add_argument("--ranks-a", type=int, default=8, help="(a): ranks of the 2x2x2 or 2x..x torus (default 8)")
    ap.add_argument("--link-bw", default="25MB/s", help="(b): emulated link bandwidth (default 25MB/s)")
    ap.add_argument("--chunk-sizes", default="64KiB,1MiB", help="(a): executor chunk sizes (default 64KiB,1MiB)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    size, bw = parse_size(args.size), parse_rate(args.link_bw)
    with tempfile.TemporaryDirectory(prefix="optiq-bench-") as tmp:
        run(args, size, bw, Path(tmp))


def against_alltoallv(plan, ranks: int, work: Path, args) -> None:
    """The unpaced executor at every chunk size against MPI_Alltoallv on the same jobs, same run."""
    for chunk in args.chunk_sizes.split(","):
        r = replay(plan, ranks, work, "--baseline", "alltoallv", "--verify", "--repeat", args.repeat,
                   "--chunk-size", chunk)
        base = r["baseline"]
        print(f"    {'executor, default plan, chunk ' + chunk:34} {r['elapsed_s']:9.4f} "
              f"{r['throughput_Bps'] / 1e9:7.3f} {r['verified']}")
        print(f"    {'MPI_Alltoallv (same run)':34} {base['elapsed_s']:9.4f} {base['throughput_Bps'] / 1e9:7.3f} "
              f"{base['verified']}")
        print(f"    executor / Alltoallv throughput = {r['throughput_Bps'] / base['throughput_Bps']:.3f}")


def run(args, size: int, bw: float, work: Path) -> None:

    spec = {4: "torus:2x2", 8: "torus:2x2x2", 16: "torus:4x4"}[args.ranks_a]
    topo = from_spec(spec)
    n = topo.num_endpoints
    src, dst = np.nonzero(~np.eye(n, dtype=bool))
    plan = make_plan(topo, Demands(src, dst, np.full(src.size, size)), "default")
    print(f"(a) {spec}, all-to-all, {n} ranks, {len(src)} pairs x {args.size} = "
          f"{plan.demands.nbytes.sum() / 2**20:.0f} MiB, {args.repeat} repeats, no pacing")
    print(f"    {'':34} {'median s':>9} {'GB/s':>7} verified")
    against_alltoallv(plan, n, work, args)

    # every rank sends to each torus neighbour: every path one hop, so the copy ceiling is 1
    pairs = sorted({(int(u), int(v)) for u, v in zip(topo.link_src, topo.link_dst)
                    if u < n and v < n and u != v})
    src, dst = (np.array(x) for x in zip(*pairs))
    plan = make_plan(topo, Demands(src, dst, np.full(src.size, size)), "default")
    print(f"    neighbour exchange: {len(pairs)} pairs x {args.size}, every path one hop")
    against_alltoallv(plan, n, work, args)

    topo = from_spec("torus:4x4")
    demands = constant_ratio(16, "disjoint", nbytes=size, num_sources=2, ratio=4)
    print(f"\n(b) torus 4x4, 16 ranks, disjoint 2 sources x 4 destinations x {args.size}, links paced at "
          f"{args.link_bw}, {args.repeat} repeats")
    print(f"    {'method':8} {'paths':>5} {'predicted s':>11} {'measured s':>10} {'meas/pred':>9} verified")
    measured, predicted = {}, {}
    for method in ("default", "heu2", "opt"):
        plan = make_plan(topo, demands, method, k=8)
        r = replay(plan, 16, work, "--link-bw", args.link_bw, "--verify", "--repeat", args.repeat)
        measured[method], predicted[method] = r["elapsed_s"], r["predicted_time_s"]
        print(f"    {method:8} {r['paths']:5d} {r['predicted_time_s']:11.4f} {r['elapsed_s']:10.4f} "
              f"{r['measured_over_predicted']:9.3f} {r['verified']}")
    assert abs(predicted["default"] - make_plan(topo, demands, "default").link_bytes.max() / bw) < 1e-9
    for method in ("heu2", "opt"):
        print(f"    {method} over default: measured speedup {measured['default'] / measured[method]:.2f}x, "
              f"predicted {predicted['default'] / predicted[method]:.2f}x")


if __name__ == "__main__":
    main()
