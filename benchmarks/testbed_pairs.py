"""A pair's exchange on the emulated network against the wire's time, message size by size.

Builds a star of ``--ranks`` hosts (``optiq testbed exec -t fattree:k=RANKS,n=1``) and runs
this script on every rank: ranks ``r`` and ``r xor 1`` exchange one message of each size
both ways, every pair at once, as one step of ring or the first step of hierarchical CPS
``2 x b``. Printed per size: the slowest rank's median time, three exchanges back to back
(a timed run over 3) and one at a time, each over the time its bytes take at the link rate.
The allreduce model is linear in a message's bytes, so these ratios should not depend on
the size; where they do, the network's TCP, not the model, is at fault.

    python benchmarks/testbed_pairs.py [--ranks 12] [--rate 20Mb/s] [--sizes 32,64,96,128,160,192,256]
        [--repeat 5]

Sizes are KiB. Needs root.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

OPTIQ = str(Path(sys.executable).parent / "optiq")  # the command installed beside this Python


def measure(sizes_kib: list[int], rate_bytes: float, repeat: int) -> None:
    """On every rank, under mpiexec: the table (printed by rank 0)."""
    import numpy as np
    from mpi4py import MPI

    from optiq.collectives.algorithms import exchange
    from optiq.collectives.bench import _timed

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if rank == 0:
        print(f"{'KiB':>5} {'back to back ms':>16} {'x wire':>7} {'one at a time ms':>17} {'x wire':>7}", flush=True)
    for kib in sizes_kib:
        out, inbox = np.ones(kib * 128), np.empty(kib * 128)

        def pair() -> None:
            exchange(comm, [(out, rank ^ 1)], [(inbox, rank ^ 1)], 1)

        back_to_back = _timed(comm, pair, repeat, 1, 3)[0]
        alone = _timed(comm, pair, repeat, 1, 1)[0]
        if rank == 0:
            wire = kib * 1024 / rate_bytes
            print(f"{kib:5d} {back_to_back * 1e3:16.2f} {back_to_back / wire:7.2f} {alone * 1e3:17.2f} "
                  f"{alone / wire:7.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=12, help="an even number of hosts on one switch")
    ap.add_argument("--rate", default="20Mb/s")
    ap.add_argument("--sizes", default="32,64,96,128,160,192,256", help="KiB, comma-separated")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rank-side", action="store_true", help=argparse.SUPPRESS)  # under mpiexec
    args = ap.parse_args()
    from optiq.utils.units import parse_rate

    sizes = [int(s) for s in args.sizes.split(",")]
    if args.rank_side:
        measure(sizes, parse_rate(args.rate), args.repeat)
        return
    if args.ranks < 2 or args.ranks % 2:
        ap.error("--ranks must be an even number of at least 2: ranks exchange in pairs")
    from children import run_cleanly

    print(f"pairs of {args.ranks} ranks on a star, links at {args.rate}, {args.repeat} timed runs a size")
    run = run_cleanly([OPTIQ, "testbed", "exec", "-t", f"fattree:k={args.ranks},n=1", "--rate", args.rate, "-q", "--",
                       sys.executable, "-m", "mpi4py", __file__, "--rank-side", "--rate", args.rate, "--sizes", args.sizes,
                       "--repeat", str(args.repeat)])
    print(run.stdout, end="")
    if run.returncode:
        sys.exit(run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"exit code {run.returncode}")


if __name__ == "__main__":
    main()
