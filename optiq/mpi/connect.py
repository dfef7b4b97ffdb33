"""Connections made before anything is timed, one partner at a time.

An MPI library over TCP (MPICH with libfabric's ``tcp`` provider, as on the emulated
network) opens a connection to a peer with the first message to it. When a step's
concurrent messages open them all at once, the transport goes on moving a step's messages
more slowly than the wire allows, by an amount that differs from one MPI job to the next;
opened one partner at a time, every job runs alike (the runs: ``benchmarks/RESULTS.md``,
"connections made in turn"). So timings of steps start after :func:`connect_in_turn`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .comms import mpi_module

__all__ = ["connect_in_turn", "CONNECT_TAG"]

#: The tag of the messages :func:`connect_in_turn` exchanges.
CONNECT_TAG = 31_061


def connect_in_turn(comm: Any) -> list[int]:
    """Exchange one small message with every other rank of ``comm``, one partner at a time:
    in turn ``r = 1 .. N-1`` each rank sends to ``rank + r`` and receives from ``rank - r``
    (modulo ``N``), so the MPI library has opened every connection among ``comm``'s
    processes, in that order, before a timed run. Collective.

    Returns
    -------
    list of int
        The ranks heard from, in turn (each sends its own rank).
    """
    MPI = mpi_module()
    rank, size = comm.Get_rank(), comm.Get_size()
    out, got = np.array([rank], dtype=np.int64), np.empty(1, dtype=np.int64)
    heard = []
    for r in range(1, size):
        comm.Sendrecv([out, MPI.INT64_T], (rank + r) % size, CONNECT_TAG, [got, MPI.INT64_T], (rank - r) % size,
                      CONNECT_TAG)
        heard.append(int(got[0]))
    return heard
