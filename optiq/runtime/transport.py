"""Chunked store-and-forward of a plan over MPI point-to-point messages.

Every path is cut into chunks of the plan's chunk size (the last one may be short). The
source sends them to the next rank on the path; a forwarder receives each chunk into a
slot of its own and sends it on as soon as it has it; the destination receives straight
into the job's receive buffer at the chunk's offset. All calls are non-blocking
``Isend``/``Irecv`` on numpy memory, matched by ``(source, tag=path id)``: MPI delivers
messages with the same source and tag in order, so chunk ``i`` of a path lands in the
``i``-th receive posted for it. A path with one rank-level hop is stored nowhere on the
way, so when links are not paced it moves in messages of at least :data:`DIRECT_CHUNK`
bytes (fewer messages, less Python per byte; both ends agree from the schedule).

Why it cannot deadlock: every forwarder owns ``window`` slots *per path* and posts a
receive for a path's next chunk only into a free slot of that path. A slot is freed when
the chunk in it has been sent on, which needs a free slot of the same path one hop later.
These waits follow the path forward and end at the destination, which always has room,
so there is no cycle, whatever the cycles between ranks. The same ``window`` bounds the
chunks in flight on every outgoing link.

The progress loop keeps one slot per request in flight and reuses it once ``Testsome``
has completed it (nothing is rebuilt per completion); it sleeps (with a growing back-off,
:mod:`optiq.waiting`) as soon as nothing moved, so oversubscribed ranks leave the cores to
the ranks that have work.

Why one message per chunk, measured (2x2x2 all-to-all, 8 ranks on 2 cores, 8 MiB per
pair, MPICH 5): the same chunk messages posted all at once with no Python between them
(``benchmarks/chunk_floor.py``) take 0.17-0.21 s at 64 KiB, against 0.37 s for this loop
and 0.046 s for ``MPI_Alltoallv``; MPI's cost per message sets most of the time. The
alternatives were slower: one message per neighbour and round described by an
``hindexed`` datatype (no packing) took 9.8 s, because MPICH moves non-contiguous data
through a pipeline that needs both ranks scheduled at every step; the same rounds sent as
one contiguous message per chunk took 0.6-0.9 s, because a round waits for its slowest
chunk and the ranks fall into lockstep; spinning before sleeping (0.1-1 ms) took
0.41-0.87 s; posting every message of the one-hop paths at once took 0.47 s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import TransferError
from ..waiting import idle_pause
from .schedule import RankSchedule, Stream

__all__ = ["TransferResult", "Transfer", "transfer", "message_size"]

_SEND, _FORWARD_RECV, _FINAL_RECV = 0, 1, 2
#: Message size of unpaced direct paths (one rank hop), when larger than the chunk size.
DIRECT_CHUNK = 2**20


def message_size(stream: Stream, chunk_size: int, paced: bool) -> int:
    """Bytes per message of ``stream``: the chunk size, or at least :data:`DIRECT_CHUNK` for an
    unpaced direct path (stored nowhere on the way, so it needs no pipelining).

    Examples
    --------
    >>> from optiq.runtime import Stream
    >>> direct = Stream(path=0, job=0, offset=0, nbytes=10**7, prev=-1, next=1, link=0, direct=True)
    >>> message_size(direct, 65536, paced=False), message_size(direct, 65536, paced=True)
    (1048576, 65536)
    """
    return max(chunk_size, DIRECT_CHUNK) if stream.direct and not paced else chunk_size


@dataclass
class TransferResult:
    """What one rank saw of one transfer.

    Attributes
    ----------
    recv : dict
        Job id -> received bytes (``uint8`` array), for the jobs this rank is the
        destination of.
    elapsed_s : float
        This rank's wall time from start to its last completed message.
    chunks_sent : int
        Chunks this rank sent as a source.
    chunks_forwarded : int
        Chunks this rank forwarded for others.
    buffer_bytes : int
        Memory this rank reserved for chunks in flight (forwarding slots).
    """

    recv: dict[int, np.ndarray] = field(repr=False)
    elapsed_s: float
    chunks_sent: int
    chunks_forwarded: int
    buffer_bytes: int


class _Link:
    """An outgoing link of this rank: streams with a chunk ready, chunks in flight, pacing.

    The link serves the ready stream that is least far along (fraction of its chunks
    sent), so paths sharing a link advance in proportion to their sizes and all finish
    together, as the flow-level plan assumes, instead of small paths finishing first.
    """

    __slots__ = ("queue", "inflight", "pending", "busy_until")

    def __init__(self) -> None:
        self.queue: list[int] = []
        self.inflight = 0
        self.pending: tuple[int, int, int, float] | None = None  # stream, chunk, bytes, time it leaves
        self.busy_until = 0.0


class Transfer:
    """This rank's part of one run of a plan: its streams, their chunks, and the requests in flight.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        Every rank of it runs its own transfer at the same time.
    schedule : RankSchedule
        This rank's streams (:func:`~optiq.runtime.compile_schedule`).
    chunk_size : int
    send, recv : dict
        Job id -> contiguous ``uint8`` buffer of the job's size, for the jobs this rank
        sends and receives (checked by the caller).
    window : int
        Chunks in flight per outgoing link and receive slots per forwarded path.
    link_bw : float, optional
        Emulated bandwidth of every outgoing link in bytes/s: a chunk leaves only after
        the time the link would need to carry it.
    timeout : float
        Seconds before :meth:`run` gives up with :class:`TransferError`.
    """

    def __init__(self, comm: Any, schedule: RankSchedule, chunk_size: int, send: dict[int, np.ndarray],
                 recv: dict[int, np.ndarray], *, window: int = 4, link_bw: float | None = None,
                 timeout: float = 60.0) -> None:
        self.comm, self.window, self.link_bw, self.timeout = comm, window, link_bw, timeout
        self.send, self.recv = send, recv
        streams = self.streams = schedule.streams
        self.unit = [message_size(s, chunk_size, paced=link_bw is not None) for s in streams]
        self.nchunks = [s.num_chunks(u) for s, u in zip(streams, self.unit)]
        self.links: dict[int, _Link] = {s.link: _Link() for s in streams if s.next >= 0}
        #: forwarding slots of every stream this rank forwards (none for the others)
        self.slots = [np.empty((min(window, c) if s.prev >= 0 and s.next >= 0 else 0, chunk_size), dtype=np.uint8)
                      for s, c in zip(streams, self.nchunks)]
        #: chunks this rank holds, in order (all of them at the source)
        self.ready = [c if s.prev < 0 else 0 for s, c in zip(streams, self.nchunks)]
        self.got = [np.zeros(c if s.prev >= 0 else 0, dtype=bool) for s, c in zip(streams, self.nchunks)]
        self.sent = [0] * len(streams)     # chunks handed to a link
        self.posted = [0] * len(streams)   # receives posted
        self.queued = [False] * len(streams)
        # one slot per request in flight, reused once it completes (Testsome sets it to
        # REQUEST_NULL in place), so nothing is rebuilt per completion
        self.requests: list = []
        self.what: list[tuple[int, int, int] | None] = []  # (kind, stream, chunk) per request slot
        self.free: list[int] = []
        self.remaining = sum(c for s, c in zip(streams, self.nchunks) if s.next >= 0) + \
            sum(c for s, c in zip(streams, self.nchunks) if s.prev >= 0)
        self.chunks_sent = self.chunks_forwarded = 0

    def run(self) -> TransferResult:
        """Move the bytes; returns when this rank's chunks have all been sent and received.

        Raises
        ------
        TransferError
            On timeout, naming the paths and ranks still waited for. Requests are left
            outstanding then: treat the communicator as broken and abort.
        """
        from mpi4py import MPI

        for k, s in enumerate(self.streams):
            if s.prev >= 0:
                for _ in range(min(self.window, self.nchunks[k])):
                    self._post_recv(k)
            else:
                self._enqueue(k)
        start = time.perf_counter()
        idle = 0
        while self.remaining:
            now = time.perf_counter()
            done = MPI.Request.Testsome(self.requests) if self.requests else None
            if done:
                self._completed(done)
            moved, deadline = self._pump(now)
            if done or moved:
                idle = 0
                continue
            if now - start > self.timeout:
                raise TransferError(_timeout_message(self.comm.Get_rank(), self.timeout, self.streams,
                                                     [m for m in self.what if m]))
            idle += 1
            time.sleep(min(idle_pause(idle), max(0.0, deadline - now)))
        return TransferResult(recv=self.recv, elapsed_s=time.perf_counter() - start, chunks_sent=self.chunks_sent,
                              chunks_forwarded=self.chunks_forwarded,
                              buffer_bytes=sum(b.nbytes for b in self.slots))

    def _completed(self, done: list[int]) -> None:
        """Free the completed requests' slots and act on what each completion allows."""
        for d in done:
            kind, k, i = self.what[d]  # type: ignore[misc]
            self.what[d] = None
            self.free.append(d)
            self.remaining -= 1
            s = self.streams[k]
            if kind == _SEND:
                self.links[s.link].inflight -= 1
                if s.prev >= 0 and self.posted[k] < self.nchunks[k]:
                    self._post_recv(k)  # the slot of chunk i is free again
            elif kind == _FORWARD_RECV:
                got = self.got[k]
                got[i] = True
                while self.ready[k] < self.nchunks[k] and got[self.ready[k]]:
                    self.ready[k] += 1
                self._enqueue(k)
            elif self.posted[k] < self.nchunks[k]:
                self._post_recv(k)

    def _add(self, request: Any, what: tuple[int, int, int]) -> None:
        if self.free:
            j = self.free.pop()
            self.requests[j], self.what[j] = request, what
        else:
            self.requests.append(request)
            self.what.append(what)

    def _chunk_bytes(self, k: int, i: int) -> int:
        return min(self.unit[k], self.streams[k].nbytes - i * self.unit[k])

    def _post_recv(self, k: int) -> None:
        from mpi4py import MPI

        s, i = self.streams[k], self.posted[k]
        size = self._chunk_bytes(k, i)
        if s.next >= 0:
            slots = self.slots[k]
            buf, kind = slots[i % len(slots)][:size], _FORWARD_RECV
        else:
            start = s.offset + i * self.unit[k]
            buf, kind = self.recv[s.job][start:start + size], _FINAL_RECV
        self._add(self.comm.Irecv([buf, MPI.BYTE], source=s.prev, tag=s.path), (kind, k, i))
        self.posted[k] += 1

    def _enqueue(self, k: int) -> None:
        if not self.queued[k] and self.sent[k] < self.ready[k]:
            self.links[self.streams[k].link].queue.append(k)
            self.queued[k] = True

    def _progress_of(self, k: int) -> float:
        return self.sent[k] / self.nchunks[k]

    def _start_send(self, k: int, i: int, size: int) -> None:
        from mpi4py import MPI

        s = self.streams[k]
        if s.prev < 0:
            start = s.offset + i * self.unit[k]
            buf = self.send[s.job][start:start + size]
            self.chunks_sent += 1
        else:
            slots = self.slots[k]
            buf = slots[i % len(slots)][:size]
            self.chunks_forwarded += 1
        self._add(self.comm.Isend([buf, MPI.BYTE], dest=s.next, tag=s.path), (_SEND, k, i))

    def _pump(self, now: float) -> tuple[bool, float]:
        """Start what the links allow; return whether anything started and the next pacing deadline."""
        moved, deadline = False, float("inf")
        for link in self.links.values():
            chained = False
            while True:
                if link.pending is not None:
                    k, i, size, leaves = link.pending
                    if leaves > now:
                        deadline = min(deadline, leaves)
                        break
                    self._start_send(k, i, size)
                    link.pending, link.busy_until, chained, moved = None, leaves, True, True
                if link.inflight >= self.window or not link.queue:
                    break
                k = min(link.queue, key=self._progress_of)
                link.queue.remove(k)
                i = self.sent[k]
                self.sent[k] += 1
                self.queued[k] = False
                self._enqueue(k)
                size = self._chunk_bytes(k, i)
                link.inflight += 1
                if self.link_bw is None:
                    leaves = now
                else:  # back to back behind the previous chunk, or from now if the link was idle
                    begin = link.busy_until if chained else max(link.busy_until, now)
                    leaves = begin + size / self.link_bw
                link.pending = (k, i, size, leaves)
        return moved, deadline


def transfer(comm: Any, schedule: RankSchedule, chunk_size: int, send: dict[int, np.ndarray],
             recv: dict[int, np.ndarray], *, window: int = 4, link_bw: float | None = None,
             timeout: float = 60.0) -> TransferResult:
    """Run this rank's part of a plan (:class:`Transfer`); every rank of ``comm`` calls it at once."""
    return Transfer(comm, schedule, chunk_size, send, recv, window=window, link_bw=link_bw, timeout=timeout).run()


def _timeout_message(rank: int, timeout: float, streams, meta) -> str:
    waiting = sorted({(streams[k].path, streams[k].prev) for kind, k, _ in meta if kind != _SEND})
    sending = sorted({(streams[k].path, streams[k].next) for kind, k, _ in meta if kind == _SEND})
    parts = []
    if waiting:
        parts.append("waiting for " + ", ".join(f"path {p} from rank {r}" for p, r in waiting[:5])
                     + (" ..." if len(waiting) > 5 else ""))
    if sending:
        parts.append("unmatched sends " + ", ".join(f"path {p} to rank {r}" for p, r in sending[:5])
                     + (" ..." if len(sending) > 5 else ""))
    return f"rank {rank}: transfer timed out after {timeout:g} s ({'; '.join(parts) or 'nothing pending'})"
