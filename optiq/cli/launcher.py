"""``optiq run`` and ``python -m optiq.runtime``: replay a plan file on every rank of ``mpiexec``.

The launch protocol (:mod:`optiq.mpi.launch`): every rank parses the same arguments; the checks
before the transfer (the ``--json`` file, the plan, the rank count) fail together on every
rank; a rank failing during the transfer prints its message and aborts them all.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..mpi.launch import abort_on_failure, command_main, need_mpi, together
from ..runtime.runner import BASELINES
from ..utils.jsonfile import check_writable, write_results
from . import argtypes

__all__ = ["add_arguments", "replay", "main", "MANY_CHUNKS"]

#: Chunk legs per transfer beyond which a run warns (the executor's per-chunk work is Python).
MANY_CHUNKS = 1_000_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of a replay (shared by ``optiq run`` and ``python -m optiq.runtime``)."""
    p.add_argument("plan", help="plan file (JSON) from optiq plan")
    p.add_argument("--verify", action="store_true", help="send seeded patterns and check every byte received")
    p.add_argument("--json", metavar="FILE", help="write the measurements as JSON (rank 0)")
    p.add_argument("--baseline", choices=BASELINES, default="none", help="also time MPI_Alltoallv on the same jobs")
    p.add_argument("--repeat", type=argtypes.positive_int, default=3, help="measured repeats (default 3)")
    p.add_argument("--warmup", type=argtypes.non_negative_int, default=1, help="unmeasured runs first (default 1)")
    p.add_argument("--link-bw", type=argtypes.rate, help="emulate links of this bandwidth, e.g. 200MB/s")
    p.add_argument("--pace-paths", action="store_true",
                   help="send every path at most at its planned rate (its bytes over the predicted time), so a "
                        "network that shares links max-min fairly keeps the plan's time")
    p.add_argument("--window", type=argtypes.positive_int,
                   help="source chunks in flight per link and slots per forwarded path; a message carries up to "
                        "half of it (default: messages of at most 20 ms on the plan's slowest link and 4 MiB; with "
                        "--pace-paths at least 1 s of that link in flight; with --link-bw, 20 ms of a link's "
                        "traffic, 4 to 64 chunks)")
    p.add_argument("--chunk-size", type=argtypes.size,
                   help="override the plan's chunk size (default: the plan's, smaller where a chunk would last more "
                        "than 50 ms on the plan's slowest link)")
    p.add_argument("--timeout", type=argtypes.positive_float,
                   help="seconds per transfer before every rank gives up (default 60 + 10x the predicted time)")
    p.add_argument("--seed", type=argtypes.non_negative_int, default=0,
                   help="seed of the --verify patterns (default 0)")
    p.add_argument("--routing", choices=("free",),
                   help="free: this network routes every path as planned (per-flow rules, source routing), so run "
                        "a free plan even where the network's own routes would carry it more slowly (refused "
                        "otherwise)")


def replay(args: argparse.Namespace) -> int:
    """Replay ``args.plan`` on ``COMM_WORLD``; the exit code (1 if verification failed)."""
    MPI = need_mpi("optiq run")
    from ..runtime.executor import bcast_plan, check_comm, check_routes, default_chunk_size
    from ..runtime.runner import measure, predicted_time

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    together(comm, lambda: check_writable(args.json, "--json") if rank == 0 and args.json else None)
    plan = bcast_plan(comm, args.plan)
    if args.routing != "free":
        check_routes(plan)
    check_comm(comm, plan)
    used = int(plan.ranks.max()) + 1
    if rank == 0 and comm.Get_size() > used:
        print(f"optiq: warning: the plan has {plan.topology.num_endpoints} endpoints on ranks 0..{used - 1}: ranks "
              f"{used}..{comm.Get_size() - 1} have nothing to send and wait (mpiexec -n {used} is enough)",
              file=sys.stderr, flush=True)
    predicted, at = predicted_time(plan, args.link_bw)
    timeout = args.timeout or 60.0 + 10 * predicted
    runs = (args.warmup + args.repeat) * (2 if args.baseline != "none" else 1)
    chunk = args.chunk_size or default_chunk_size(plan)
    chunks = int((-(-plan.path_bytes // chunk) * plan.paths.legs).sum())
    if rank == 0 and chunks > MANY_CHUNKS:
        print(f"optiq: warning: {chunks:,} chunk legs per transfer at --chunk-size {chunk:,} B; each costs the "
              f"executor a few microseconds of Python, so expect at least {chunks * 5e-6:.0f} s per transfer",
              file=sys.stderr, flush=True)
    if rank == 0 and predicted * runs > 2.0:
        print(f"optiq run: {runs} transfers of about {predicted:.3g} s each (predicted {at}); each gives up after "
              f"{timeout:.3g} s", file=sys.stderr, flush=True)
    with abort_on_failure(comm):
        report = measure(comm, plan, repeat=args.repeat, warmup=args.warmup, verify=args.verify, seed=args.seed,
                         window=args.window, link_bw=args.link_bw, chunk_size=args.chunk_size,
                         baseline=args.baseline, timeout=timeout, pace_paths=args.pace_paths,
                         routes_as_planned=args.routing == "free")
    failed = [t.name for t in (report.plan, report.baseline) if t is not None and t.verified is False]
    if rank == 0:
        print(report, flush=True)
        if not args.link_bw and not os.environ.get("OPTIQ_TESTBED"):
            print("caution: the prediction is for the modelled links; without --link-bw no link runs at their "
                  "rates here (the ranks share this machine's memory and cores), so measured / predicted does not "
                  "check the plan (--link-bw RATE emulates the links; optiq testbed run builds a network)", flush=True)
        if args.json:
            write_results(args.json, report.to_dict(), "--json")
        if failed:
            print(f"optiq: error: verification failed for {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m optiq.runtime PLAN [options]``: the same as ``optiq run``."""
    parser = argtypes.Parser(prog="python -m optiq.runtime", description="Replay a plan with chunked "
                             "store-and-forward, under mpiexec -n N with one rank per endpoint of the plan.")
    add_arguments(parser)
    return command_main(lambda: parser.parse_args(argv), replay, argtypes.UsageError)
