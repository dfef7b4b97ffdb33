"""Run under mpiexec: :func:`optiq.waiting.start_together` is a barrier on any communicator.

Ranks arrive 0-60 ms apart, on COMM_WORLD and on a split of it; no rank may leave before
the last one of its communicator arrived (the ranks share a node, so ``time.monotonic``
is one clock). Exit code 0 and "ok" on rank 0 if so.
"""

import time

from mpi4py import MPI

from optiq.waiting import start_together

world = MPI.COMM_WORLD
failures = []
for comm in (world, world.Split(world.Get_rank() % 2, 0)):
    time.sleep(0.02 * (comm.Get_rank() % 4))
    arrived = time.monotonic()
    start_together(comm)
    left = time.monotonic()
    last = comm.allreduce(arrived, op=MPI.MAX)
    if left < last:
        failures.append(f"rank {world.Get_rank()} left {last - left:.4f} s before the last rank arrived")
failures = [f for fs in world.allgather(failures) for f in fs]
if world.Get_rank() == 0:
    print("\n".join(failures) or "ok")
raise SystemExit(1 if failures else 0)
