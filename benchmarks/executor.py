"""The executor measured on this machine, side by side in one run.

(a) Unpaced: the executor replaying the default-routing plan vs MPI_Alltoallv on the
    same jobs (all-to-all, 8 MiB per pair by default; the network's own routes: every path
    one leg, no copy), throughput ratio; then the same for a neighbour exchange (each rank
    to each torus neighbour: every path one hop).
(b) Paced (--link-bw, one or more rates): on a 16-rank 4x4 torus with a pattern where
    multipath helps (2 sources x 4 destinations each, disjoint blocks), the default-routing
    plan, heu2 and opt, each measured against its flow-level predicted time, and the
    measured speedup of opt over default routing against the predicted one.

References printed beside them, measured in the same run:
- (a) the *leg copies* (``message_floor.py``): every leg of every path as one message, all
  posted at once, with no forwarding order and no Python between them. It copies every
  byte once per leg, from and into memory of the executor's kind, and does nothing else:
  what the plan's copies cost this machine. It is no strict floor: the executor reuses
  its forwarding slots, and a chunk is often still in the cache when the next hop reads
  it.
- (b) the same plan replayed *unpaced* by the executor: how fast this machine moves it at
  all. A paced replay predicted to take less than that cannot keep to its prediction.

Launches of one measurement differ more than the repeats within one (the machine is
shared), so every measurement is made in ``--launches`` launches, taken in turn with the
others it is compared with, and the launch with the median ratio is shown beside all of them.

    python benchmarks/executor.py [--size 8MiB] [--chunk-sizes 64KiB,1MiB]
        [--link-bw 25MB/s,50MB/s,100MB/s,200MB/s] [--repeat 3] [--launches 3]
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
from optiq.planner import planner_named
from optiq.utils.units import parse_rate, parse_size
from optiq.workloads import constant_ratio


def under_mpiexec(plan, ranks: int, workdir: Path, argv) -> dict:
    """Save ``plan``, run ``python *argv(PLAN, OUT)`` on ``ranks`` ranks, return what it wrote to OUT."""
    path, out = workdir / "plan.json", workdir / "out.json"
    plan.save(path)
    cmd = [str(Path(sys.executable).parent / "mpiexec"), "-n", str(ranks), sys.executable, *argv(str(path), str(out))]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed ({' '.join(cmd)}):\n{proc.stdout}{proc.stderr}")
    return json.loads(out.read_text())


def leg_copies(plan, ranks: int, workdir: Path, repeat: int) -> float:
    """Median seconds of the leg copies of ``plan`` (see the module docstring)."""
    script = str(Path(__file__).with_name("message_floor.py"))
    return under_mpiexec(plan, ranks, workdir,
                         lambda path, out: [script, path, out, "--repeat", str(repeat)])["elapsed_s"]


def replay(plan, ranks: int, workdir: Path, *options) -> dict:
    """``optiq run`` of ``plan`` on ``ranks`` ranks: its JSON report."""
    return under_mpiexec(plan, ranks, workdir,
                         lambda path, out: ["-m", "optiq.runtime", path, "--json", out, *map(str, options)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="8MiB", help="bytes per pair (default 8MiB)")
    ap.add_argument("--ranks-a", type=int, default=8, help="(a): ranks of the 2x2x2 or 2x..x torus (default 8)")
    ap.add_argument("--link-bw", default="25MB/s,50MB/s,100MB/s,200MB/s",
                    help="(b): emulated link bandwidths, comma-separated (default 25, 50, 100 and 200 MB/s)")
    ap.add_argument("--chunk-sizes", default="64KiB,1MiB", help="(a): executor chunk sizes (default 64KiB,1MiB)")
    ap.add_argument("--repeat", type=int, default=3, help="repeats per launch (default 3)")
    ap.add_argument("--launches", type=int, default=3,
                    help="launches of every measurement, taken in turn; the median is shown (default 3)")
    args = ap.parse_args()
    size = parse_size(args.size)
    with tempfile.TemporaryDirectory(prefix="optiq-bench-") as tmp:
        run(args, size, Path(tmp))


def median_index(values: list[float]) -> int:
    """Index of the median of ``values`` (the upper one of an even count)."""
    return sorted(range(len(values)), key=values.__getitem__)[len(values) // 2]


def against_alltoallv(plan, ranks: int, work: Path, args) -> None:
    """The unpaced executor at every chunk size against MPI_Alltoallv on the same jobs, same launch.

    Each is measured in ``args.launches`` launches, taken in turn with the leg copies, and
    the launch with the median ratio is shown: launches differ more than the repeats of one.
    """
    chunks = args.chunk_sizes.split(",")
    reports: dict[str, list[dict]] = {chunk: [] for chunk in chunks}
    copies = []
    for _ in range(args.launches):
        for chunk in chunks:
            reports[chunk].append(replay(plan, ranks, work, "--baseline", "alltoallv", "--verify", "--repeat",
                                         args.repeat, "--chunk-size", chunk))
        copies.append(leg_copies(plan, ranks, work, args.repeat))
    for chunk in chunks:
        ratios = [r["throughput_Bps"] / r["baseline"]["throughput_Bps"] for r in reports[chunk]]
        mid = median_index(ratios)
        r, base = reports[chunk][mid], reports[chunk][mid]["baseline"]
        print(f"    {'executor, default plan, chunk ' + chunk:34} {r['elapsed_s']:9.4f} "
              f"{r['throughput_Bps'] / 1e9:7.3f} {r['verified']}  window {r['window']}, "
              f"{r['messages']} messages")
        print(f"    {'MPI_Alltoallv (same launch)':34} {base['elapsed_s']:9.4f} "
              f"{base['throughput_Bps'] / 1e9:7.3f} {base['verified']}")
        print(f"    executor / Alltoallv throughput = {ratios[mid]:.3f}"
              + (f" (median of {len(ratios)} launches: {', '.join(f'{x:.3f}' for x in ratios)})"
                 if len(ratios) > 1 else ""))
    copy_s = float(np.median(copies))
    alltoallv = float(np.median([r["baseline"]["elapsed_s"] for rs in reports.values() for r in rs]))
    over = ", ".join(f"{chunk} {np.median([r['elapsed_s'] for r in reports[chunk]]) / copy_s:.2f}" for chunk in chunks)
    print(f"    {'leg copies':34} {copy_s:9.4f} {plan.demands.nbytes.sum() / copy_s / 1e9:7.3f}  "
          f"(their ratio against Alltoallv {alltoallv / copy_s:.3f}; medians of the launches: "
          f"the executor takes {over} x their time)")


def run(args, size: int, work: Path) -> None:
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
    plans = {method: make_plan(topo, demands, planner_named(method, k=8)[0]) for method in ("default", "heu2", "opt")}
    unpaced = {method: replay(plan, 16, work, "--verify", "--repeat", args.repeat)["elapsed_s"]
               for method, plan in plans.items()}
    print(f"\n(b) torus 4x4, 16 ranks, disjoint 2 sources x 4 destinations x {args.size}, chunk "
          f"{plans['opt'].chunk_size // 1024} KiB, {args.repeat} repeats, {args.launches} launch(es) of each "
          f"method in turn, the median launch shown; unpaced = the same replay without pacing")
    print(f"    {'rate':>9} {'method':8} {'paths':>5} {'unpaced s':>9} {'predicted s':>11} {'measured s':>10} "
          f"{'meas/pred':>9} {'messages':>8} verified  meas/pred of every launch")
    for rate in args.link_bw.split(","):
        paced(plans, unpaced, rate, work, args)


def paced(plans: dict, unpaced: dict, rate: str, work: Path, args) -> None:
    """Every plan at ``rate`` per link, ``args.launches`` times in turn: measured over predicted, and speedups.

    A launch measures every method, so each speedup over default routing is taken within
    a launch; the median over the launches is shown.
    """
    bw = parse_rate(rate)
    reports: dict[str, list[dict]] = {method: [] for method in plans}
    for _ in range(args.launches):
        for method, plan in plans.items():
            reports[method].append(replay(plan, 16, work, "--link-bw", rate, "--verify", "--repeat", args.repeat))
    for method, rs in reports.items():
        ratios = [r["measured_over_predicted"] for r in rs]
        r = rs[median_index(ratios)]
        print(f"    {rate:>9} {method:8} {r['paths']:5d} {unpaced[method]:9.4f} {r['predicted_time_s']:11.4f} "
              f"{r['elapsed_s']:10.4f} {r['measured_over_predicted']:9.3f} {r['messages']:8d} {str(r['verified']):8}  "
              + ", ".join(f"{x:.3f}" for x in ratios))
    predicted = {method: rs[0]["predicted_time_s"] for method, rs in reports.items()}
    assert abs(predicted["default"] - plans["default"].link_bytes.max() / bw) < 1e-9
    for method in ("heu2", "opt"):
        speedups = [d["elapsed_s"] / m["elapsed_s"] for d, m in zip(reports["default"], reports[method])]
        print(f"    {rate:>9} {method} over default: measured speedup {float(np.median(speedups)):.2f}x "
              f"(launches: {', '.join(f'{x:.2f}' for x in speedups)}), "
              f"predicted {predicted['default'] / predicted[method]:.2f}x")


if __name__ == "__main__":
    main()
