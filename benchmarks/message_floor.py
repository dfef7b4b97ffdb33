"""Run under mpiexec: how fast this machine's MPI moves a plan's legs, with nothing else.

Every rank posts, at once, every message it would send and receive when replaying the plan
unpaced, each leg of a path (from a rank to the next rank it stops at) cut into messages of
``--message-size`` bytes (default: one message per leg), then waits for all of them.
Forwarding order is ignored (a forwarder sends bytes it has not received yet) and no Python
runs between messages: with whole legs, every byte is copied once per leg and nothing else. The memory is of the executor's
kind (:mod:`optiq.runtime.memory`): a source sends from a buffer of its own per path and a
forwarder from the one it receives into, a whole path long, every page written beforehand.

It is a floor for replays whose forwarders read every byte from memory, not for the
executor: its forwarding slots are reused, and a chunk is often still in the cache when
the next hop reads it. On huge pages the executor took 0.85-1.19 x this time. (Sending
everything from one shared buffer, never written, made this 0.050-0.061 s instead of
0.066-0.086 s for the 2x2x2 all-to-all of ``executor.py``: its pages stay in cache.)

    mpiexec -n N python benchmarks/message_floor.py PLAN.json OUT.json [--message-size B] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from mpi4py import MPI

from optiq.mpi.waiting import allreduce_asleep, start_together, wait_all
from optiq.plan import load_plan
from optiq.runtime import compile_schedule
from optiq.runtime.memory import job_buffers


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("out")
    ap.add_argument("--message-size", type=int, help="bytes per message (default: one message per leg)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    plan = load_plan(args.plan)
    unit = args.message_size or max(int(plan.path_bytes.max()), 1)
    streams = compile_schedule(plan, comm.Get_rank()).streams
    pieces = []  # (stream, offset, size, is_send)
    for k, s in enumerate(streams):
        for off in range(0, s.nbytes, unit):
            size = min(unit, s.nbytes - off)
            if s.next >= 0:
                pieces.append((k, off, size, True))
            if s.prev >= 0:
                pieces.append((k, off, size, False))
    # memory like the executor's (on huge pages): a source sends from its own buffer per
    # path, a forwarder from what it receives, every page written before the clock starts
    inbox = job_buffers({k: s.nbytes for k, s in enumerate(streams) if s.prev >= 0})
    outbox = {**job_buffers({k: s.nbytes for k, s in enumerate(streams) if s.prev < 0}), **inbox}
    for buf in outbox.values():
        buf.fill(1)
    times = []
    for it in range(args.repeat + 1):
        start = start_together(comm)
        reqs = [comm.Irecv([inbox[k][o:o + n], MPI.BYTE], source=streams[k].prev, tag=streams[k].path)
                for k, o, n, out in pieces if not out]
        reqs += [comm.Isend([outbox[k][o:o + n], MPI.BYTE], dest=streams[k].next, tag=streams[k].path)
                 for k, o, n, out in pieces if out]
        wait_all(reqs)
        elapsed = allreduce_asleep(comm, time.perf_counter() - start, MPI.MAX)
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
