"""optiq.runtime.alltoallv against comm.Alltoallv, 16 ranks on an emulated 4x4 torus, in one run.

Two patterns: the demo's disjoint pattern (2 sources x 4 destinations, 8 MiB per pair) and
random counts (every rank pair with probability 0.3, 1-8 MiB, seeded).

(a) Unpaced: the first call's planning time (``opt``: gather, plan, compile), then the
    cached call (``method="opt"``) against ``comm.Alltoallv`` on the same buffers, time
    ratio; and what ``method="auto"`` chose.
(b) Links paced at ``--link-bw`` (default 100 MB/s): ``method="opt"`` against
    ``method="default"`` (the torus's dimension-order routes through the same executor),
    measured speedup beside the predicted one; the cached call's overhead (checks,
    fingerprint, buffer views: everything before the transfer, on the slowest rank) as a
    fraction of the transfer; and a whole cached call against its compiled plan's transfer
    alone (the executor run by itself, timed alike): what the call adds.

Every timed call starts at a moment the ranks agree on (``start_together``) and lasts until
the last rank is done. Every measurement is made in ``--launches`` launches of
``--repeat`` calls; per launch the median call, then the median launch is shown beside all
of them.

    python benchmarks/alltoallv_api.py [--size 8MiB] [--link-bw 100MB/s] [--repeat 5] [--launches 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RANKS = 16
NETWORK = "torus:4x4"


def patterns(size: int) -> dict[str, np.ndarray]:
    from optiq.workloads import constant_ratio

    demo = constant_ratio(RANKS, "disjoint", nbytes=size, num_sources=2, ratio=4)
    disjoint = np.zeros((RANKS, RANKS), dtype=np.int64)
    disjoint[demo.src, demo.dst] = demo.nbytes
    rng = np.random.default_rng(7)
    random = rng.integers(2**20, size + 1, (RANKS, RANKS))
    random[(rng.random((RANKS, RANKS)) > 0.3) | np.eye(RANKS, dtype=bool)] = 0
    return {"disjoint": disjoint, "random": random}


def message(buf, counts, displs, readonly):
    """The call's message as the module reads it (to move a compiled plan's bytes alone)."""
    from mpi4py import MPI

    from optiq.runtime.messages import read_message

    return read_message([buf, (counts, displs), MPI.BYTE], readonly=readonly, blocks=RANKS)


def worker(args) -> None:
    """Under mpiexec: every measurement of one launch; rank 0 prints one JSON line."""
    from mpi4py import MPI

    from optiq.mpi.waiting import allreduce_asleep, start_together
    from optiq.runtime import alltoallv
    from optiq.runtime.memory import huge_page_buffer

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    host = comm.Split_type(MPI.COMM_TYPE_SHARED)
    out: dict = {}

    def timed(call) -> tuple[float, object]:
        start = start_together(comm, host=host)
        result = call()
        return allreduce_asleep(comm, time.perf_counter() - start, MPI.MAX), result

    for name, matrix in patterns(args.size).items():
        sc, rc = matrix[rank], matrix[:, rank]
        sd = np.concatenate(([0], np.cumsum(sc)[:-1]))
        rd = np.concatenate(([0], np.cumsum(rc)[:-1]))
        send = huge_page_buffer(int(sc.sum()))  # the kind of memory both sides copy fastest from
        send[:] = rank
        recv = huge_page_buffer(int(rc.sum()))
        sendbuf, recvbuf = [send, (sc, sd), MPI.BYTE], [recv, (rc, rd), MPI.BYTE]
        side_send, side_recv = message(send, sc, sd, True), message(recv, rc, rd, False)
        row: dict = {}

        def ours(method, **kw):
            return lambda: alltoallv(comm, sendbuf, recvbuf, network=NETWORK, method=method, **kw)

        def mpi():
            comm.Alltoallv([send, (sc, sd), MPI.BYTE], [recv, (rc, rd), MPI.BYTE])

        # (a) unpaced
        first = ours("opt")()
        row["plan_s"] = allreduce_asleep(comm, first.plan_s, MPI.MAX)
        ours("opt")()  # warm
        mpi()
        ratios, times = [], []
        for _ in range(args.repeat):  # in turn, so both see the same machine
            t_ours, _ = timed(ours("opt"))
            t_mpi, _ = timed(mpi)
            ratios.append(t_ours / t_mpi)
            times.append((t_ours, t_mpi))
        row["unpaced_ratio"] = float(np.median(ratios))
        row["unpaced_s"] = [float(np.median([t[0] for t in times])), float(np.median([t[1] for t in times]))]
        t_auto, chose = timed(ours("auto"))
        row["auto"] = {"method": chose.method, "reason": chose.reason}
        # (b) paced; and a cached call against the executor alone on the same compiled plan
        from optiq.runtime.agreement import Call
        from optiq.runtime.context import context
        from optiq.runtime.forms import VECTOR
        from optiq.runtime.moves import move

        paced = {}
        for method in ("opt", "default"):
            call = ours(method, link_bw=args.link_bw)
            first = call()
            ctx = context(comm)
            entry = ctx.entries[(int(first.fingerprint[:16], 16), int(first.fingerprint[16:], 16))]
            alone_call = Call(VECTOR, ctx.comm, ctx.whole, sendbuf, recvbuf, side_send, side_recv, entry, (0, 0), "",
                              0.0, 0.0)
            calls, alone = [], []
            for _ in range(args.repeat):  # in turn
                calls.append(timed(call))
                alone.append(timed(lambda: move(alone_call, entry, 60.0))[0])
            overhead = [allreduce_asleep(comm, r.overhead_s, MPI.MAX) for _, r in calls]
            transfer = [allreduce_asleep(comm, r.transfer_s, MPI.MAX) for _, r in calls]
            whole = [t for t, _ in calls]
            paced[method] = {"s": float(np.median(whole)), "predicted_s": first.predicted_s,
                             "default_s": first.default_s,
                             "overhead_fraction": float(np.median(np.array(overhead) / np.array(transfer))),
                             "overhead_s": float(np.median(overhead)),
                             "call_over_executor": float(np.median(whole) / np.median(alone))}
        row["paced"] = paced
        out[name] = row
    if rank == 0:
        print(json.dumps(out))
    host.Free()


def main() -> None:
    from optiq.utils.units import parse_rate, parse_size

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="8MiB", help="bytes per pair of the disjoint pattern (default 8MiB)")
    ap.add_argument("--link-bw", default="100MB/s", help="(b): emulated link bandwidth (default 100MB/s)")
    ap.add_argument("--repeat", type=int, default=5, help="timed calls per measurement and launch (default 5)")
    ap.add_argument("--launches", type=int, default=3, help="launches; the median is shown (default 3)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.size, args.link_bw = parse_size(args.size), parse_rate(args.link_bw)
    if args.worker:
        worker(args)
        return
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    runs = []
    for launch in range(args.launches):
        cmd = [mpiexec, "-n", str(RANKS), sys.executable, __file__, "--worker", "--size", str(args.size),
               "--link-bw", f"{args.link_bw:g}B/s", "--repeat", str(args.repeat)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"launch {launch} failed:\n{proc.stdout}{proc.stderr}")
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"launch {launch + 1} of {args.launches} done", file=sys.stderr, flush=True)
    print(f"{RANKS} ranks on an emulated {NETWORK}, {args.size / 2**20:g} MiB per pair (disjoint), {args.repeat} calls "
          f"per launch; median launch (every launch)")
    for name in runs[0]:
        rows = [r[name] for r in runs]

        def show(values: list[float], fmt: str) -> str:
            order = sorted(values)
            return f"{format(order[len(order) // 2], fmt)} ({', '.join(format(v, fmt) for v in values)})"

        print(f"\n== {name}")
        print(f"(a) unpaced: first call planned (opt) in {show([r['plan_s'] for r in rows], '.3f')} s")
        print(f"    cached optiq.alltoallv(opt) / comm.Alltoallv time: {show([r['unpaced_ratio'] for r in rows], '.3f')}"
              f"  [{rows[0]['unpaced_s'][0]:.4f} s vs {rows[0]['unpaced_s'][1]:.4f} s in launch 1]")
        print(f"    method='auto' chose {rows[0]['auto']['method']}: {rows[0]['auto']['reason']}")
        opt, default = [r["paced"]["opt"] for r in rows], [r["paced"]["default"] for r in rows]
        predicted = default[0]["predicted_s"] / opt[0]["predicted_s"]
        rate = args.link_bw / 1e6
        print(f"(b) paced at {rate:g} MB/s: opt {show([o['s'] for o in opt], '.4f')} s "
              f"({opt[0]['s'] / opt[0]['predicted_s']:.3f} x predicted in launch 1), default "
              f"{show([d['s'] for d in default], '.4f')} s")
        print(f"    opt speedup over default: {show([d['s'] / o['s'] for d, o in zip(default, opt)], '.2f')} measured, "
              f"{predicted:.2f} predicted")
        print(f"    cached call overhead / transfer (opt): {show([o['overhead_fraction'] * 100 for o in opt], '.2f')} % "
              f"({show([o['overhead_s'] * 1e3 for o in opt], '.2f')} ms, the slowest rank's)")
        for method in ("opt", "default"):
            extra = [(r["paced"][method]["call_over_executor"] - 1) * 100 for r in rows]
            print(f"    a cached call ({method}) against its executor alone, same plan, same timing: "
                  f"{show(extra, '+.2f')} %")


if __name__ == "__main__":
    main()
