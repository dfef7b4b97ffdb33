"""How a command learns it runs under ``mpiexec``: the world communicator, or none.

Only the command line reaches for ``COMM_WORLD``; the library takes communicators as
arguments. A process counts as launched by ``mpiexec`` when the launcher's environment
says so (MPICH, Open MPI, PMIx) and the world has more than one rank; otherwise mpi4py
is not even imported, so a serial run needs no MPI library.
"""

from __future__ import annotations

import os

__all__ = ["world", "world_rank"]

_LAUNCHER_VARIABLES = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")


def world():
    """``MPI.COMM_WORLD`` when launched by ``mpiexec`` with more than one rank, else ``None``."""
    if not any(name in os.environ for name in _LAUNCHER_VARIABLES):
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI.COMM_WORLD if MPI.COMM_WORLD.Get_size() > 1 else None


def world_rank() -> int:
    """This process's rank in :func:`world` (0 when serial)."""
    comm = world()
    return 0 if comm is None else comm.Get_rank()
