"""Run under mpiexec: ``optiq run`` while rank 1 fails mid-run in the way MODE says.

    mpiexec -n N python failing_rank.py MODE PLAN [optiq run options]

MODE: ``raise`` (rank 1 hits an error inside the run), ``vanish`` (rank 1 skips the
transfer, so the others wait for it), ``exit`` (rank 1's process dies). Whatever happens,
every rank must end with a non-zero exit code and nothing may hang.
"""

import os
import sys

import numpy as np
from mpi4py import MPI

import optiq.runtime.executor
import optiq.runtime.runner
from optiq.cli import main

mode, argv = sys.argv[1], sys.argv[2:]
if MPI.COMM_WORLD.Get_rank() == 1:
    if mode == "raise":
        optiq.runtime.runner.fill_send_buffers = lambda jobs, seed=0: {j: np.zeros(n + 1, np.uint8)
                                                                      for j, n in jobs.items()}
    elif mode == "vanish":
        real = optiq.runtime.executor.transfer

        def skip(comm, schedule, chunk_size, send, recv, **kw):
            return real(comm, type(schedule)(schedule.rank, (), {}, {}), chunk_size, {}, {}, **kw)
        optiq.runtime.executor.transfer = skip
    elif mode == "exit":
        optiq.runtime.executor.transfer = lambda *a, **kw: os._exit(3)
sys.exit(main(["run", *argv]))
