"""An application's loop of ``optiq.alltoallv`` calls through a cable that fails under it.

    optiq testbed exec -t torus:4x4 --fail H0-H1@10 -- python examples/through_failure.py \
        [--seconds 16] [--size 256KiB] [--network torus:4x4] [--json calls.json]

Every rank of a 2-D torus sends ``--size`` bytes to the rank two along its row and to the rank
two along its column (``method="auto"``, planned at the first call), for ``--seconds`` from the
first call. Every call's bytes are checked against what each sender sent; a call that raises is
recorded and the loop goes on. Rank 0 prints the calls around the slowest one (the call the
cable failed under, on the testbed) with why each moved as it did, and ``--json`` writes every
rank's calls (end, method, reason, transfer time, its bytes right, every rank's, the error).
"""

import argparse
import json
import time

import numpy as np
from mpi4py import MPI

import optiq
from optiq.errors import TransferError
from optiq.utils.units import parse_size

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--seconds", type=float, default=16.0, help="how long the loop runs (default 16)")
ap.add_argument("--size", default="256KiB", help="bytes per pair (default 256KiB)")
ap.add_argument("--network", default="torus:4x4", help="the machine as optiq plans it (default torus:4x4)")
ap.add_argument("--json", help="write every rank's calls here")
args = ap.parse_args()
pair = parse_size(args.size)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
side = int(round(size ** 0.5))
x, y = rank % side, rank // side
peers = sorted({y * side + (x + 2) % side, ((y + 2) % side) * side + x} - {rank})
counts = np.zeros(size, np.int64)
counts[peers] = pair
displs = np.concatenate(([0], np.cumsum(counts)[:-1]))


def part(sender: int, receiver: int, call: int) -> np.ndarray:
    return np.random.default_rng([sender, receiver, call]).integers(0, 256, pair, dtype=np.uint8)


calls = []
comm.Barrier()
began = time.perf_counter()
k = 0
while True:
    send = np.zeros(int(counts.sum()), np.uint8)
    for p in peers:
        send[displs[p]: displs[p] + pair] = part(rank, p, k)
    got = np.zeros_like(send)
    record = {"call": k, "error": ""}
    try:
        result = optiq.alltoallv(comm, [send, (counts, displs)], [got, (counts, displs)], network=args.network,
                                 plan_budget=float("inf"))
        record.update(method=result.method, reason=result.reason, transfer_s=result.transfer_s)
    except TransferError as exc:
        record.update(method="", reason="", transfer_s=float("nan"), error=str(exc))
    right = all(np.array_equal(got[displs[p]: displs[p] + pair], part(p, rank, k)) for p in peers)
    record.update(end_s=time.perf_counter() - began, right=right,
                  verified=bool(comm.allreduce(int(right), MPI.MIN)))  # every rank's bytes
    calls.append(record)
    k += 1
    if comm.bcast(time.perf_counter() - began > args.seconds, root=0):
        break

everyone = comm.gather(calls, root=0)
if rank == 0:
    errors = sum(bool(c["error"]) for each in everyone for c in each)
    print(f"{len(calls)} calls in {calls[-1]['end_s']:.1f} s; every byte as sent: "
          f"{'yes' if all(c['verified'] for c in calls) else 'NO'}; calls that raised on some rank: {errors}")
    slowest = int(np.nanargmax([c["transfer_s"] for c in calls]))
    for c in calls[max(slowest - 1, 0): slowest + 3]:
        print(f"  call {c['call']} ended at {c['end_s']:.2f} s: {c['method']} {c['transfer_s']:.3f} s; "
              f"{c['reason'] or c['error']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ranks": size, "calls": everyone}, f)
