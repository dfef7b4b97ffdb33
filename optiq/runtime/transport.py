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

import numpy as np

from ..errors import TransferError
from ..waiting import idle_pause
from .schedule import RankSchedule

__all__ = ["TransferResult", "transfer"]

_SEND, _FORWARD_RECV, _FINAL_RECV = 0, 1, 2
#: Message size of unpaced direct paths (one rank hop), when larger than the chunk size.
DIRECT_CHUNK = 2**20


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


def transfer(comm, schedule: RankSchedule, chunk_size: int, send: dict[int, np.ndarray],
             recv: dict[int, np.ndarray], *, window: int = 4, link_bw: float | None = None,
             timeout: float = 60.0) -> TransferResult:
    """Run this rank's part of a plan; every rank of ``comm`` calls it at the same time.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
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
        Seconds before giving up with :class:`TransferError`.

    Raises
    ------
    TransferError
        On timeout, naming the paths and ranks still waited for. Requests are left
        outstanding then: treat the communicator as broken and abort.
    """
    from mpi4py import MPI

    streams = schedule.streams
    n = len(streams)
    # a direct path is stored nowhere on the way, so unpaced it needs no pipelining: larger
    # messages, fewer of them, less Python per byte
    unit = [max(chunk_size, DIRECT_CHUNK) if s.direct and link_bw is None else chunk_size for s in streams]
    nchunks = [s.num_chunks(u) for s, u in zip(streams, unit)]
    links: dict[int, _Link] = {s.link: _Link() for s in streams if s.next >= 0}
    slots = [np.empty((min(window, c) if s.prev >= 0 and s.next >= 0 else 0, chunk_size), dtype=np.uint8)
             for s, c in zip(streams, nchunks)]
    ready = [c if s.prev < 0 else 0 for s, c in zip(streams, nchunks)]  # chunks here, in order
    got = [np.zeros(c if s.prev >= 0 else 0, dtype=bool) for s, c in zip(streams, nchunks)]
    sent = [0] * n        # chunks handed to a link
    posted = [0] * n      # receives posted
    queued = [False] * n
    # a slot per request in flight, reused once it completes (Testsome sets it to
    # REQUEST_NULL in place), so nothing is rebuilt per completion
    reqs: list = []
    meta: list[tuple[int, int, int] | None] = []
    free: list[int] = []
    remaining = sum(c for s, c in zip(streams, nchunks) if s.next >= 0) + \
        sum(c for s, c in zip(streams, nchunks) if s.prev >= 0)
    counts = [0, 0]

    def add(request, what: tuple[int, int, int]) -> None:
        if free:
            j = free.pop()
            reqs[j], meta[j] = request, what
        else:
            reqs.append(request)
            meta.append(what)

    def chunk_bytes(k: int, i: int) -> int:
        return min(unit[k], streams[k].nbytes - i * unit[k])

    def post_recv(k: int) -> None:
        s, i = streams[k], posted[k]
        size = chunk_bytes(k, i)
        if s.next >= 0:
            buf, kind = slots[k][i % len(slots[k])][:size], _FORWARD_RECV
        else:
            start = s.offset + i * unit[k]
            buf, kind = recv[s.job][start:start + size], _FINAL_RECV
        add(comm.Irecv([buf, MPI.BYTE], source=s.prev, tag=s.path), (kind, k, i))
        posted[k] += 1

    def enqueue(k: int) -> None:
        if not queued[k] and sent[k] < ready[k]:
            links[streams[k].link].queue.append(k)
            queued[k] = True

    def progress(k: int) -> float:
        return sent[k] / nchunks[k]

    def start_send(k: int, i: int, size: int) -> None:
        s = streams[k]
        if s.prev < 0:
            start = s.offset + i * unit[k]
            buf = send[s.job][start:start + size]
            counts[0] += 1
        else:
            buf = slots[k][i % len(slots[k])][:size]
            counts[1] += 1
        add(comm.Isend([buf, MPI.BYTE], dest=s.next, tag=s.path), (_SEND, k, i))

    def pump(now: float) -> tuple[bool, float]:
        """Start what the links allow; return whether anything started and the next pacing deadline."""
        moved, deadline = False, float("inf")
        for link in links.values():
            chained = False
            while True:
                if link.pending is not None:
                    k, i, size, leaves = link.pending
                    if leaves > now:
                        deadline = min(deadline, leaves)
                        break
                    start_send(k, i, size)
                    link.pending, link.busy_until, chained, moved = None, leaves, True, True
                if link.inflight >= window or not link.queue:
                    break
                k = min(link.queue, key=progress)
                link.queue.remove(k)
                i = sent[k]
                sent[k] += 1
                queued[k] = False
                enqueue(k)
                size = chunk_bytes(k, i)
                link.inflight += 1
                if link_bw is None:
                    leaves = now
                else:  # back to back behind the previous chunk, or from now if the link was idle
                    begin = link.busy_until if chained else max(link.busy_until, now)
                    leaves = begin + size / link_bw
                link.pending = (k, i, size, leaves)
        return moved, deadline

    for k, s in enumerate(streams):
        if s.prev >= 0:
            for _ in range(min(window, nchunks[k])):
                post_recv(k)
        else:
            enqueue(k)

    start = time.perf_counter()
    idle = 0
    while remaining:
        now = time.perf_counter()
        done = MPI.Request.Testsome(reqs) if reqs else None
        if done:
            for d in done:
                kind, k, i = meta[d]  # type: ignore[misc]
                meta[d] = None
                free.append(d)
                remaining -= 1
                s = streams[k]
                if kind == _SEND:
                    links[s.link].inflight -= 1
                    if s.prev >= 0 and posted[k] < nchunks[k]:
                        post_recv(k)  # the slot of chunk i is free again
                elif kind == _FORWARD_RECV:
                    got[k][i] = True
                    while ready[k] < nchunks[k] and got[k][ready[k]]:
                        ready[k] += 1
                    enqueue(k)
                elif posted[k] < nchunks[k]:
                    post_recv(k)
        moved, deadline = pump(now)
        if done or moved:
            idle = 0
            continue
        if now - start > timeout:
            raise TransferError(_timeout_message(comm.Get_rank(), timeout, streams, [m for m in meta if m]))
        idle += 1
        pause = min(idle_pause(idle), max(0.0, deadline - now))
        time.sleep(pause)
    return TransferResult(recv=recv, elapsed_s=time.perf_counter() - start, chunks_sent=counts[0],
                          chunks_forwarded=counts[1], buffer_bytes=sum(b.nbytes for b in slots))


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
