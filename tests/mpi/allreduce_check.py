"""Every allreduce algorithm equals MPI's Allreduce, for any rank count (run under mpiexec).

Values are integers stored as float64, so every summation order gives the same bits.
Prints one line per (algorithm, length) on rank 0 and exits 1 on any difference.
"""

import sys

import numpy as np
from mpi4py import MPI

from optiq.collectives import allreduce
from optiq.collectives.cost import algorithms

comm = MPI.COMM_WORLD
N, rank = comm.Get_size(), comm.Get_rank()
failures = 0
for length in (0, 1, N - 1, 7, 3 * N + 1, 1000, 4099):
    data = np.random.default_rng(1000 * length + rank).integers(-1000, 1000, length).astype(np.float64)
    expected = np.empty_like(data)
    comm.Allreduce(data, expected, op=MPI.SUM)
    before = data.copy()
    for name in algorithms(N):
        got = allreduce(comm, data, name, None if length % 2 else np.full(length, np.nan))
        ok = got.shape == expected.shape and np.array_equal(got, expected) and np.array_equal(data, before)
        ok = comm.allreduce(ok, op=MPI.LAND)
        failures += not ok
        if rank == 0:
            print(f"N={N} length={length} {name}: {'ok' if ok else 'MISMATCH'}")
sys.exit(1 if failures else 0)
