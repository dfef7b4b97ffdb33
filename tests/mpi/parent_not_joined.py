"""Run under mpiexec -n N (N >= 2): the last rank of the parent never joins an exchange with
``parent=``; every other rank ends it within ``timeout`` with one message, the same on every rank,
and a later call with that parent is refused at once. Prints "ok" on rank 0 and exits 0."""

import sys
import time

import numpy as np
from mpi4py import MPI

from optiq.errors import ArgumentError
from optiq.runtime import alltoallv

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
report = world.Dup()  # the parent is left with the others' duplicate pending: the outcome is told on another
failures: list[str] = []
joined = world.Split(0 if rank < size - 1 else MPI.UNDEFINED, rank)
messages = []
if rank < size - 1:
    for attempt in range(2):
        began = time.perf_counter()
        try:
            alltoallv(joined, np.zeros(size - 1, "i"), np.zeros(size - 1, "i"), network=f"torus:{size}",
                      parent=world, timeout=2.0)
            failures.append(f"rank {rank}: call {attempt} with a rank of the parent missing ended without an error")
        except ArgumentError as exc:
            messages.append(str(exc))
            took = time.perf_counter() - began
            if not ("not every rank of parent= joined" in str(exc) and took < (10 if attempt == 0 else 1)):
                failures.append(f"rank {rank}: call {attempt}: {exc!r} after {took:.1f} s")
said = [m for ms in report.allgather(messages) for m in ms]
if len(set(said)) != 1:
    failures.append(f"the ranks said different things: {sorted(set(said))}")
failures = [f for fs in report.allgather(failures) for f in fs]
if rank == 0:
    print("\n".join(failures) or "ok", flush=True)
sys.exit(1 if failures else 0)
