"""What a cached call costs a rank's CPU, beside ``comm.Alltoallv`` on the same buffers, in one run.

Every rank of ``--ranks`` (default 16, on this machine's shared memory: no emulated links, so
what is left is the calls' own cost) makes an all-to-all of ``--pairs`` bytes per pair
(default 256 B and 16 KiB), ``--calls`` calls at a time, in turn: ``comm.Alltoallv``, then
:func:`optiq.alltoallv` with ``method="default"`` (the network's routes through the executor)
and ``method="opt"`` on ``--network``, each plan made before the timing (the calls are
cached). Per call it gives the process CPU per rank (the median rank and the busiest) and the
wall time of the slowest rank, the median of ``--repeat`` rounds, and optiq's CPU over
MPI's. With more ranks than cores, the CPU a call takes is time the other ranks wait for a
core: on an emulated network whose host is busy, it is what stands between the plan's
prediction and the measured time (``benchmarks/application.py``'s ``busy`` column).

    python benchmarks/call_cost.py [--ranks 16] [--network torus:4x4] [--pairs 256,16KiB] [--calls 30] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

METHODS = ("mpi", "default", "opt")


def worker(args: argparse.Namespace) -> None:
    """Under mpiexec: every round of every pair size; rank 0 prints one JSON line."""
    from mpi4py import MPI

    from optiq.runtime import alltoallv, clear_cache

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    out = []
    for pair in args.pairs:
        counts = np.full(size, pair, dtype=np.int64)
        counts[rank] = 0
        displs = np.concatenate(([0], np.cumsum(counts)[:-1]))
        send = np.random.default_rng(rank).integers(0, 256, int(counts.sum()), dtype=np.uint8)
        recv = np.empty_like(send)
        want = np.empty_like(send)
        message = lambda buf: [buf, (counts, displs), MPI.BYTE]  # noqa: E731
        comm.Alltoallv(message(send), message(want))

        def call(method: str) -> None:
            if method == "mpi":
                comm.Alltoallv(message(send), message(recv))
            else:
                alltoallv(comm, message(send), message(recv), network=args.network, method=method)

        for method in METHODS:  # plans made, connections open, caches warm
            for _ in range(3):
                call(method)
            if not np.array_equal(recv, want):
                raise SystemExit(f"rank {rank}: {method} did not deliver comm.Alltoallv's bytes")
        cpu: dict[str, list[float]] = {m: [] for m in METHODS}
        wall: dict[str, list[float]] = {m: [] for m in METHODS}
        for _ in range(args.repeat):
            for method in METHODS:  # in turn, so every method sees the same machine
                comm.Barrier()
                c0, w0 = time.process_time(), time.perf_counter()
                for _ in range(args.calls):
                    call(method)
                cpu[method].append((time.process_time() - c0) / args.calls)
                wall[method].append(comm.allreduce(time.perf_counter() - w0, op=MPI.MAX) / args.calls)
        mine = {m: float(np.median(cpu[m])) for m in METHODS}
        every = comm.gather(mine)
        if rank == 0:
            out.append({"pair": pair, **{m: {"cpu_median_s": float(np.median([e[m] for e in every])),
                                             "cpu_max_s": float(max(e[m] for e in every)),
                                             "wall_s": float(np.median(wall[m]))} for m in METHODS}})
        clear_cache(comm)
    if rank == 0:
        print(json.dumps(out))


def main() -> None:
    from optiq.errors import OptiqError
    from optiq.utils.units import parse_size

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--network", default="torus:4x4")
    ap.add_argument("--pairs", default="256,16KiB", help="bytes per pair, comma-separated (default 256,16KiB)")
    ap.add_argument("--calls", type=int, default=30, help="calls timed together (default 30)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of every method in turn (default 5)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        args.pairs = [parse_size(p, what="pair size") for p in args.pairs.split(",")]
    except OptiqError as exc:
        ap.error(str(exc))
    if min(args.ranks, args.calls, args.repeat) < 1:
        ap.error("--ranks, --calls and --repeat must be at least 1")
    if args.worker:
        worker(args)
        return
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    cmd = [mpiexec, "-n", str(args.ranks), sys.executable, __file__, "--worker", "--network", args.network,
           "--pairs", ",".join(map(str, args.pairs)), "--calls", str(args.calls), "--repeat", str(args.repeat)]
    print(f"{args.ranks} ranks on this machine's shared memory, an all-to-all per call, {args.network}; "
          f"{args.calls} calls a round, medians of {args.repeat} rounds in turn", flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"the MPI run failed:\n{done.stdout}{done.stderr}")
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    head = f"{'pair B':>8}  {'method':8} {'CPU ms':>8} {'busiest':>8} {'wall ms':>8} {'CPU/MPI':>8}"
    print(head)
    print("-" * len(head))
    for row in rows:
        for method in METHODS:
            r = row[method]
            print(f"{row['pair']:>8}  {method:8} {r['cpu_median_s'] * 1e3:8.3f} {r['cpu_max_s'] * 1e3:8.3f} "
                  f"{r['wall_s'] * 1e3:8.3f} {r['cpu_median_s'] / row['mpi']['cpu_median_s']:8.1f}")
    print("CPU ms: process CPU per rank per call, the median rank; busiest: the rank that took the most; "
          "wall ms: the slowest rank's time per call; CPU/MPI: the median rank's CPU over comm.Alltoallv's. "
          "Every method delivered comm.Alltoallv's bytes.")


if __name__ == "__main__":
    main()
