"""Run under mpiexec: how fast this machine's MPI moves a plan's chunk messages at best.

Every rank posts, at once, every chunk message it would send and receive when replaying
the plan unpaced (the same messages and sizes as the executor), then waits for all of them.
Forwarding order is ignored and no Python runs between messages, so no executor that
sends one MPI message per chunk can be faster: the time is a floor for the replay.

    mpiexec -n N python benchmarks/chunk_floor.py PLAN.json OUT.json [--chunk-size B] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from mpi4py import MPI

from optiq.plan import load_plan
from optiq.runtime import compile_schedule
from optiq.runtime.transport import message_size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("out")
    ap.add_argument("--chunk-size", type=int)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    plan = load_plan(args.plan)
    chunk = args.chunk_size or plan.chunk_size
    streams = compile_schedule(plan, comm.Get_rank()).streams
    pieces = []  # (stream, offset, size, is_send)
    for k, s in enumerate(streams):
        unit = message_size(s, chunk, paced=False)
        for off in range(0, s.nbytes, unit):
            size = min(unit, s.nbytes - off)
            if s.next >= 0:
                pieces.append((k, off, size, True))
            if s.prev >= 0:
                pieces.append((k, off, size, False))
    inbox = [np.empty(s.nbytes, np.uint8) if s.prev >= 0 else None for s in streams]
    outbox = np.zeros(max([s.nbytes for s in streams] + [1]), np.uint8)
    times = []
    for it in range(args.repeat + 1):
        comm.Barrier()
        start = time.perf_counter()
        reqs = [comm.Irecv([inbox[k][o:o + n], MPI.BYTE], source=streams[k].prev, tag=streams[k].path)
                for k, o, n, out in pieces if not out]
        reqs += [comm.Isend([outbox[o:o + n], MPI.BYTE], dest=streams[k].next, tag=streams[k].path)
                 for k, o, n, out in pieces if out]
        MPI.Request.Waitall(reqs)
        elapsed = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
        if it:
            times.append(elapsed)
    if comm.Get_rank() == 0:
        messages = comm.reduce(sum(out for *_, out in pieces), op=MPI.SUM, root=0)
        with open(args.out, "w") as f:
            json.dump({"elapsed_s": float(np.median(times)), "times_s": times, "messages": messages}, f)
    else:
        comm.reduce(sum(out for *_, out in pieces), op=MPI.SUM, root=0)


if __name__ == "__main__":
    main()
