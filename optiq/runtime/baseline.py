"""The MPI_Alltoallv baseline: the same demands moved by the MPI library in one collective."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TransferError
from ..mpi.waiting import sleep_until, wait_all
from ..plan import Plan
from .memory import huge_page_buffer

if TYPE_CHECKING:
    from typing import Any

__all__ = ["AlltoallvBaseline"]


class AlltoallvBaseline:
    """``MPI_Alltoallv`` over the plan's demands on ``comm``.

    Jobs between the same pair of ranks are packed back to back in job order. Packing the
    send buffer and unpacking the receive buffer happen outside the timed call. Both
    buffers are on huge pages like the executor's (:mod:`optiq.runtime.memory`), so the
    two are compared on the same memory.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    plan : Plan
    """

    def __init__(self, comm: Any, plan: Plan) -> None:
        dem = plan.demands
        size, rank = comm.Get_size(), comm.Get_rank()
        src, dst = plan.ranks[dem.src], plan.ranks[dem.dst]
        order = np.lexsort((np.arange(dem.num_jobs), dst, src))  # by (src rank, dst rank, job)
        self.comm = comm
        self.send_jobs = [int(j) for j in order if src[j] == rank]
        self.recv_jobs = [int(j) for j in np.lexsort((np.arange(dem.num_jobs), src)) if dst[j] == rank]
        self.nbytes = dem.nbytes
        self.send_counts = np.bincount(dst[src == rank], weights=dem.nbytes[src == rank],
                                       minlength=size).astype(np.int64)
        self.recv_counts = np.bincount(src[dst == rank], weights=dem.nbytes[dst == rank],
                                       minlength=size).astype(np.int64)
        self.send_buf = huge_page_buffer(int(self.send_counts.sum()))  # as the executor's (fair copies)
        self.recv_buf = huge_page_buffer(int(self.recv_counts.sum()))

    def pack(self, send: dict[int, np.ndarray]) -> None:
        """Copy this rank's job buffers into the packed send buffer."""
        pos = 0
        for j in self.send_jobs:
            n = int(self.nbytes[j])
            self.send_buf[pos:pos + n] = send[j].reshape(-1).view(np.uint8)
            pos += n

    def run(self, start_at: float | None = None, *, polite: bool = False, timeout: float | None = None) -> float:
        """One ``Alltoallv``; returns this rank's seconds from ``start_at`` (default: the call) to its end.

        ``polite``: ``MPI_Ialltoallv``, waited for by tests with sleeps between them
        (:func:`~optiq.mpi.waiting.wait_politely`), for ranks that share cores with the network
        they measure (the testbed): a rank polling without pause takes the core its peers and
        the kernel's forwarding need. ``timeout`` (polite only): seconds after which the
        wait gives up with :class:`~optiq.errors.TransferError` (the collective is left in
        flight: abort the communicator).
        """
        from mpi4py import MPI

        send = [self.send_buf, (self.send_counts, _displacements(self.send_counts)), MPI.BYTE]
        recv = [self.recv_buf, (self.recv_counts, _displacements(self.recv_counts)), MPI.BYTE]
        start = sleep_until(start_at)
        if polite:
            if not wait_all([self.comm.Ialltoallv(send, recv)], yields=0, timeout=timeout):
                waited = self.recv_counts > 0
                raise TransferError(f"rank {self.comm.Get_rank()}: MPI_Ialltoallv did not end within {timeout:g} s "
                                    f"(it receives from ranks {np.flatnonzero(waited)[:8].tolist()})")
        else:
            self.comm.Alltoallv(send, recv)
        return time.perf_counter() - start

    def unpack(self) -> dict[int, np.ndarray]:
        """The received jobs, as views into the packed receive buffer."""
        out, pos = {}, 0
        for j in self.recv_jobs:
            n = int(self.nbytes[j])
            out[j] = self.recv_buf[pos:pos + n]
            pos += n
        return out


def _displacements(counts: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
