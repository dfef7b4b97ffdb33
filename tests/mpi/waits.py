"""Run under mpiexec: the waits of :mod:`optiq.mpi.waiting` on any communicator.

Ranks arrive 0-60 ms apart, on COMM_WORLD and on a split of it.
- :func:`~optiq.mpi.waiting.start_together` is a barrier that agrees on a start: every rank
  of the communicator gets the same moment, after the last one arrived, and none leaves
  before it (the ranks share a node, so ``time.perf_counter`` is one clock).
- :func:`~optiq.mpi.waiting.allreduce_asleep` gives the maximum and the minimum over the
  communicator, and the ranks that wait never yield the CPU (they sleep instead).
- :func:`~optiq.mpi.connect.connect_in_turn` hears from every other rank once, from
  ``rank - 1`` first and ``rank + 1`` last.
Exit code 0 and "ok" on rank 0 if so.
"""

import os
import time

from mpi4py import MPI

from optiq.mpi.connect import connect_in_turn
from optiq.mpi.waiting import allreduce_asleep, start_together

world = MPI.COMM_WORLD
failures = []
yields = 0
real_yield = os.sched_yield


def counting_yield() -> None:
    global yields
    yields += 1
    real_yield()


for comm in (world, world.Split(world.Get_rank() % 2, 0)):
    rank, size = comm.Get_rank(), comm.Get_size()
    time.sleep(0.02 * (rank % 4))
    arrived = time.perf_counter()
    start = start_together(comm)
    left = time.perf_counter()
    last = comm.allreduce(arrived, op=MPI.MAX)
    if not last < start <= left:
        failures.append(f"rank {world.Get_rank()}: the last rank arrived at {last:.4f}, the agreed start is "
                        f"{start:.4f}, the rank left at {left:.4f}")
    if comm.allreduce(start, op=MPI.MIN) != comm.allreduce(start, op=MPI.MAX):
        failures.append(f"rank {world.Get_rank()}: the ranks agreed on different starts")

    time.sleep(0.02 * (rank % 4))
    os.sched_yield = counting_yield  # what optiq.mpi.waiting calls to yield
    try:
        got = (allreduce_asleep(comm, rank + 0.5, MPI.MAX), allreduce_asleep(comm, rank + 0.5, MPI.MIN))
    finally:
        os.sched_yield = real_yield
    if got != (size - 0.5, 0.5):
        failures.append(f"rank {world.Get_rank()}: allreduce_asleep gave {got}, not {(size - 0.5, 0.5)}")
    if yields:
        failures.append(f"rank {world.Get_rank()} yielded {yields} times in allreduce_asleep")
    heard, turns = connect_in_turn(comm), [(rank - r) % size for r in range(1, size)]
    if heard != turns:
        failures.append(f"rank {world.Get_rank()}: connect_in_turn heard from {heard}, not {turns}")
failures = [f for fs in world.allgather(failures) for f in fs]
if world.Get_rank() == 0:
    print("\n".join(failures) or "ok")
raise SystemExit(1 if failures else 0)
