"""Chunked store-and-forward of a plan over MPI point-to-point messages.

Every path is cut into chunks of the plan's chunk size (the last one may be short). The
source sends them to the next rank on the path; a forwarder receives them into slots of
its own and sends them on as soon as it has them; the destination receives straight into
the job's receive buffer. All calls are non-blocking ``Isend``/``Irecv`` on numpy memory,
matched by ``(source, tag=path id)``; MPI delivers messages with the same source and tag
in order.

**Messages carry runs of chunks.** Chunks of a path that are ready together travel in one
message: unpaced, everything the sender holds (up to the limits below); paced, as much as
the link carries in ``message_s`` (one chunk at slow rates), plus whatever is overdue. A
forwarder's slots of a path are whole *segments* of ``window // 2`` chunks (two for an
even window, :func:`path_slots`) and no message crosses a segment boundary, so a message
always lands in consecutive slots and is sent on from them without a copy. Each rank has
one receive posted per path at a time, for the rest of the current segment (the
destination: for the rest of the path), and learns from the status how many chunks came.
A message to the destination from the source itself (a path of one rank hop) is limited
by the window only.

Why it cannot deadlock: a forwarder posts a path's receive into a segment only once the
chunks it held there before have been sent on, which needs room one hop later; these waits
follow the path forward and end at the destination, which always has a receive posted.
The window limits only the *source* chunks in flight on a link, never forwarded ones, so
a link full of new data cannot hold up data already on its way: there is no cycle,
whatever the cycles between ranks.

**Pacing** (``link_bw``): each outgoing link is a token bucket that earns ``link_bw``
bytes per second from the start of the transfer and can save up to ``burst_s`` of them;
a message leaves once the link has earned all its bytes. So no link carries more than
``link_bw * t`` bytes in the first ``t`` seconds (no replay beats the flow-level predicted
time), and a link that stood idle because a rank woke late catches up by at most
``burst_s``. The link serves the ready path that is least far along, so paths sharing it
finish together, as the flow-level plan assumes.

**Paced paths** (``path_rate``): each path's source also keeps a token bucket of the
path's own rate (its bytes over the plan's predicted time), and a link serves only paths
whose bucket has earned a chunk. No path then asks any link for more than the plan gives
it, so a network that shares links max-min fairly per flow grants every path its rate
and the plan keeps its predicted time (:func:`optiq.sim.simulate_flows` with
``pace_paths``); without it, flows alone on their links run ahead and the others fall
behind.

The progress loop reuses one request slot per message in flight (``Testsome`` sets it to
``REQUEST_NULL`` in place) and sleeps with a growing back-off (:mod:`optiq.mpi.waiting`) as
soon as nothing moved, so oversubscribed ranks leave the cores to the ranks with work.

Why runs of chunks and not one message per chunk, what the copies cost and which other
designs were tried and dropped: ``benchmarks/executor.py`` against ``MPI_Alltoallv`` and
``benchmarks/message_floor.py``, with the figures in ``benchmarks/RESULTS.md``. MPI's
cost per message, not Python, sets the pace when ranks share cores.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import TransferError
from ..mpi.waiting import idle_pause, sleep_until
from .memory import job_buffers
from .schedule import RankSchedule

__all__ = ["TransferResult", "Transfer", "transfer", "segment_chunks", "path_slots", "forwarding_slots",
           "paced_message_chunks"]

_SEND, _FORWARD_RECV, _FINAL_RECV = 0, 1, 2
#: Paced: link time an idle link may make up for (seconds), so that ranks which wake late
#: (oversubscribed cores) do not stretch the emulated link's schedule.
PACED_BURST_S = 0.02
#: Longest pause of a rank that has received everything and handed all its chunks to MPI,
#: and so only waits for its own sends to complete (seconds): the receivers take the bytes
#: within moments, and the last forwarder to notice sets the transfer's time.
SEND_COMPLETION_POLL_S = 1e-4
#: Paced: link time one message carries at most (seconds), so that the cost of an MPI
#: message (a few tens of microseconds with ranks sharing cores) stays below the link time
#: it stands for.
PACED_MESSAGE_S = 0.005


def segment_chunks(window: int) -> int:
    """Most chunks one message carries: half the window (one if the window is 1).

    A forwarder's slots of a path are whole segments of this many chunks
    (:func:`path_slots`); no message crosses a segment boundary of its path, so every
    message lands in consecutive slots.

    Examples
    --------
    >>> segment_chunks(1), segment_chunks(4), segment_chunks(5)
    (1, 2, 2)
    """
    return max(1, window // 2)


def paced_message_chunks(chunk_size: int, link_bw: float, message_s: float = PACED_MESSAGE_S) -> int:
    """Chunks a paced message carries when none are overdue: ``message_s`` of link time, at least one.

    Examples
    --------
    >>> paced_message_chunks(65536, 25e6), paced_message_chunks(65536, 200e6)
    (1, 15)
    """
    return max(1, int(message_s * link_bw / chunk_size))


def path_slots(window: int) -> int:
    """Slots a forwarder keeps per path: the window rounded down to whole segments.

    Examples
    --------
    >>> path_slots(1), path_slots(3), path_slots(4), path_slots(5)
    (1, 3, 4, 4)
    """
    seg = segment_chunks(window)
    return seg * (window // seg)


def forwarding_slots(schedule: RankSchedule, chunk_size: int, window: int) -> list[np.ndarray]:
    """Memory for the chunks this rank forwards: :func:`path_slots` slots per forwarded path.

    One ``(slots, chunk_size)`` array per stream of ``schedule`` (empty unless the rank
    forwards it), with fewer slots when the path has fewer chunks, all in one region on
    huge pages (:mod:`optiq.runtime.memory`). The pages are written once here, so a
    transfer that reuses them does not pay for the kernel mapping them in.

    Examples
    --------
    >>> from optiq.runtime import Stream, RankSchedule
    >>> s = Stream(path=0, job=0, offset=0, nbytes=10_000, prev=0, next=2, link=1)
    >>> [a.shape for a in forwarding_slots(RankSchedule(1, (s,), {}, {}), 1000, 4)]
    [(4, 1000)]
    """
    ring = path_slots(window)
    sizes = {k: (min(ring, s.num_chunks(chunk_size)) if s.prev >= 0 and s.next >= 0 else 0) * chunk_size
             for k, s in enumerate(schedule.streams)}
    slots = [buf.reshape(-1, chunk_size) for buf in job_buffers(sizes).values()]
    for buf in slots:
        buf.fill(0)
    return slots


@dataclass
class TransferResult:
    """What one rank saw of one transfer.

    Attributes
    ----------
    recv : dict
        Job id -> received bytes (``uint8`` array), for the jobs this rank is the
        destination of.
    elapsed_s : float
        This rank's wall time from the start (``start_at``, or the call) to its last
        completed message.
    chunks_sent : int
        Chunks this rank sent as a source.
    chunks_forwarded : int
        Chunks this rank forwarded for others.
    buffer_bytes : int
        Memory this rank reserved for chunks in flight (forwarding slots).
    messages : int
        MPI messages this rank sent (sources and forwarders); chunks ready together on
        a path travel in one message.
    """

    recv: dict[int, np.ndarray] = field(repr=False)
    elapsed_s: float
    chunks_sent: int
    chunks_forwarded: int
    buffer_bytes: int
    messages: int


class _Link:
    """An outgoing link of this rank: streams with a chunk ready, source chunks in flight, pacing.

    The link serves the ready stream that is least far along (fraction of its chunks
    sent), so paths sharing a link advance in proportion to their sizes and all finish
    together, as the flow-level plan assumes, instead of small paths finishing first.
    """

    __slots__ = ("queue", "inflight", "pending", "busy_until")

    def __init__(self) -> None:
        self.queue: list[int] = []
        self.inflight = 0  # source chunks in flight
        self.pending: tuple[int, int, int, float] | None = None  # stream, first chunk, chunks, time it leaves
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
        Source chunks in flight per outgoing link, and receive slots per forwarded path
        (rounded down to whole segments, :func:`path_slots`); a message carries at most
        :func:`segment_chunks` chunks.
    link_bw : float, optional
        Emulated bandwidth of every outgoing link in bytes/s: a message leaves only once
        the link has earned the time to carry it (see the module docstring).
    timeout : float
        Seconds before :meth:`run` gives up with :class:`TransferError`.
    slots : list of ndarray, optional
        :func:`forwarding_slots` of the same schedule, chunk size and window, to reuse
        memory across transfers; allocated here when not given.
    burst_s : float
        Paced: link time an idle link may make up for later (its token bucket's depth).
    message_s : float
        Paced: link time one message carries at most, unless its chunks are overdue.
    path_rate : dict, optional
        Paced paths: path id -> bytes/s its source sends at most (a token bucket per path,
        like a link's, with the same burst), for the paths this rank is the source of.
    """

    def __init__(self, comm: Any, schedule: RankSchedule, chunk_size: int, send: dict[int, np.ndarray],
                 recv: dict[int, np.ndarray], *, window: int = 4, link_bw: float | None = None,
                 timeout: float = 60.0, slots: list[np.ndarray] | None = None, burst_s: float = PACED_BURST_S,
                 message_s: float = PACED_MESSAGE_S, path_rate: dict[int, float] | None = None) -> None:
        from mpi4py import MPI

        self._byte, self._status, self._testsome = MPI.BYTE, MPI.Status, MPI.Request.Testsome  # bound once: hot loop
        self.comm, self.window, self.link_bw, self.timeout = comm, window, link_bw, timeout
        self.burst_s, self.message_s = burst_s, message_s
        self.chunk, self.send, self.recv = chunk_size, send, recv
        self.seg = segment_chunks(window)
        self.paced_chunks = 1 if link_bw is None else paced_message_chunks(chunk_size, link_bw, message_s)
        self.nseg = path_slots(window) // self.seg  # segments of slots per forwarded path
        streams = self.streams = schedule.streams
        self.nchunks = [s.num_chunks(chunk_size) for s in streams]
        self.forwards = [s.prev >= 0 and s.next >= 0 for s in streams]
        self.links: dict[int, _Link] = {s.link: _Link() for s in streams if s.next >= 0}
        #: forwarding slots of every stream this rank forwards (none for the others)
        self.slots = forwarding_slots(schedule, chunk_size, window) if slots is None else slots
        #: chunks of a forwarded path received into each segment of its slots and not yet sent on
        self.held = [[0] * self.nseg if f else [] for f in self.forwards]
        #: chunks this rank holds, in order (all of them at the source)
        self.ready = [c if s.prev < 0 else 0 for s, c in zip(streams, self.nchunks)]
        self.sent = [0] * len(streams)       # chunks handed to a link
        self.receiving = [False] * len(streams)  # a receive is posted (one at a time: message sizes vary)
        self.queued = [False] * len(streams)
        # one slot per request in flight, reused once it completes (Testsome sets it to
        # REQUEST_NULL in place), so nothing is rebuilt per completion
        self.requests: list = []
        self.statuses: list = []
        self.what: list[tuple[int, int, int, int] | None] = []  # (kind, stream, first chunk, chunks) per request
        self.free: list[int] = []
        # every chunk is sent once where the stream has a next rank and received once where it has a previous one
        self.remaining = sum(c * ((s.next >= 0) + (s.prev >= 0)) for s, c in zip(streams, self.nchunks))
        self.chunks_sent = self.chunks_forwarded = self.messages = 0
        self.unsent = sum(c for s, c in zip(streams, self.nchunks) if s.next >= 0)  # chunks not handed to MPI yet
        #: paced paths: the rate of every source stream (None: unpaced) and when its bucket is next empty
        self.rate = [path_rate.get(s.path) if path_rate and s.prev < 0 and s.next >= 0 else None for s in streams]
        self.busy_until = [0.0] * len(streams)
        self.path_paced = any(r is not None for r in self.rate)

    def run(self, start_at: float | None = None) -> TransferResult:
        """Move the bytes; returns when this rank's chunks have all been sent and received.

        Parameters
        ----------
        start_at : float, optional
            The :func:`time.perf_counter` moment the ranks agreed to start at
            (:func:`~optiq.mpi.waiting.start_together`): nothing moves before it, links earn
            their bytes from it and the elapsed time counts from it. By default, now.

        Raises
        ------
        TransferError
            On timeout, naming the paths and ranks still waited for. Requests are left
            outstanding then: treat the communicator as broken and abort.
        """
        start = sleep_until(start_at)
        for k, s in enumerate(self.streams):
            if s.prev >= 0:
                self._post_recv(k)
            else:
                self._enqueue(k)
        for link in self.links.values():
            link.busy_until = start
        self.busy_until = [start] * len(self.streams)
        idle = 0
        while self.remaining:
            now = time.perf_counter()
            done = self._testsome(self.requests, self.statuses) if self.requests else None
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
            pause = idle_pause(idle)
            if not self.unsent and not any(self.receiving):
                pause = min(pause, SEND_COMPLETION_POLL_S)  # only its own sends are left to complete
            time.sleep(min(pause, max(0.0, deadline - now)))
        return TransferResult(recv=self.recv, elapsed_s=time.perf_counter() - start, chunks_sent=self.chunks_sent,
                              chunks_forwarded=self.chunks_forwarded,
                              buffer_bytes=sum(b.nbytes for b in self.slots), messages=self.messages)

    def _completed(self, done: list[int]) -> None:
        """Free the completed requests' slots and act on what each completion allows."""
        for j, d in enumerate(done):  # Testsome fills the statuses in the order of ``done``
            kind, k, i, m = self.what[d]  # type: ignore[misc]
            self.what[d] = None
            self.free.append(d)
            if kind == _SEND:
                self.remaining -= m
                if self.forwards[k]:
                    self.held[k][(i // self.seg) % self.nseg] -= m
                    if not self.receiving[k]:
                        self._post_recv(k)  # the slots may be free again
                else:
                    self.links[self.streams[k].link].inflight -= m
                continue
            m = -(-self.statuses[j].Get_count(self._byte) // self.chunk)  # whole chunks, the last may be short
            self.remaining -= m
            self.receiving[k] = False
            if kind == _FORWARD_RECV:
                self.held[k][(i // self.seg) % self.nseg] += m
                self.ready[k] += m
                self._enqueue(k)
            else:
                self.ready[k] += m  # the destination counts what arrived the same way
            self._post_recv(k)

    def _add(self, request: Any, what: tuple[int, int, int, int]) -> None:
        if self.free:
            j = self.free.pop()
            self.requests[j], self.what[j] = request, what
        else:
            self.requests.append(request)
            self.statuses.append(self._status())
            self.what.append(what)

    def _span(self, k: int, i: int, m: int) -> tuple[int, int]:
        """Byte range of chunks ``i .. i + m - 1`` of stream ``k``, relative to the path's start."""
        return i * self.chunk, min((i + m) * self.chunk, self.streams[k].nbytes)

    def _slot_view(self, k: int, i: int, m: int) -> np.ndarray:
        """The slots of chunks ``i .. i + m - 1`` of forwarded stream ``k`` (one segment, so consecutive)."""
        first = i % (self.seg * self.nseg)  # slots cycle through the segments
        lo, hi = self._span(k, i, m)
        return self.slots[k][first:first + m].reshape(-1)[:hi - lo]

    def _post_recv(self, k: int) -> None:
        """Post the receive of the path's next message, if there is one and room for it.

        A message never crosses a segment boundary, so a forwarder receives up to the end
        of the current segment of its slots, once the chunks held in that segment before
        have been sent on; the destination receives up to the end of the path.
        """
        s, i = self.streams[k], self.ready[k]
        if i >= self.nchunks[k]:
            return
        if self.forwards[k]:
            if i % self.seg == 0 and self.held[k][(i // self.seg) % self.nseg]:
                return  # the segment's previous chunks are still on their way out
            m = min(self.seg - i % self.seg, self.nchunks[k] - i)
            buf, kind = self._slot_view(k, i, m), _FORWARD_RECV
        else:
            lo = s.offset + i * self.chunk
            buf, kind = self.recv[s.job][lo:s.offset + s.nbytes], _FINAL_RECV
            m = self.nchunks[k] - i
        self._add(self.comm.Irecv([buf, self._byte], source=s.prev, tag=s.path), (kind, k, i, m))
        self.receiving[k] = True

    def _enqueue(self, k: int) -> None:
        if not self.queued[k] and self.sent[k] < self.ready[k]:
            self.links[self.streams[k].link].queue.append(k)
            self.queued[k] = True

    def _progress_of(self, k: int) -> float:
        return self.sent[k] / self.nchunks[k]

    def _start_send(self, k: int, i: int, m: int) -> None:
        s = self.streams[k]
        if self.forwards[k]:
            buf = self._slot_view(k, i, m)
            self.chunks_forwarded += m
        else:
            lo, hi = self._span(k, i, m)
            buf = self.send[s.job][s.offset + lo:s.offset + hi]
            self.chunks_sent += m
            self.links[s.link].inflight += m
        self.messages += 1
        self.unsent -= m
        self._add(self.comm.Isend([buf, self._byte], dest=s.next, tag=s.path), (_SEND, k, i, m))

    def _pump(self, now: float) -> tuple[bool, float]:
        """Start what the links allow; return whether anything started and the next pacing deadline."""
        moved, deadline = False, float("inf")
        for link in self.links.values():
            while True:
                if link.pending is not None:
                    k, i, m, leaves = link.pending
                    if leaves > now:
                        deadline = min(deadline, leaves)
                        break
                    self._start_send(k, i, m)
                    self._enqueue(k)
                    link.pending, moved = None, True
                if not link.queue:
                    break
                if link.inflight < self.window:
                    candidates = link.queue
                else:  # the window holds source chunks only: forwarded ones always go
                    candidates = [q for q in link.queue if self.forwards[q]]
                    if not candidates:
                        break
                if self.path_paced:  # a paced path waits for its own bucket, not the link
                    free = [q for q in candidates if self._path_free(q) <= now]
                    if not free:
                        deadline = min(deadline, min(self._path_free(q) for q in candidates))
                        break
                    candidates = free
                k = min(candidates, key=self._progress_of)
                link.queue.remove(k)
                self.queued[k] = False
                link.pending = self._message(link, k, now)
        return moved, deadline

    def _message(self, link: _Link, k: int, now: float) -> tuple[int, int, int, float]:
        """The next message of stream ``k`` on ``link``: its first chunk, chunks and the time it leaves.

        It takes the stream's next chunk and every further one that is ready, in the same
        segment (the receiver's slots) and within the window; paced, as long as the
        message lasts at most ``message_s`` on the link or its chunks were due by ``now``
        anyway. It leaves once the link has earned the time to carry all of it.
        """
        i = self.sent[k]
        s = self.streams[k]
        limit = self.ready[k] - i
        if not self.forwards[k]:
            limit = min(limit, self.window - link.inflight)
        if not s.direct:
            limit = min(limit, self.seg - i % self.seg)
        rate = self.rate[k]
        if rate is not None:  # a paced path: at most the chunks its bucket has earned
            begin = max(self.busy_until[k], now - self.burst_s)
            limit = max(1, min(limit, int((now - begin) * rate / self.chunk)))
        if self.link_bw is None:
            m, leaves = limit, now
        else:
            begin = max(link.busy_until, now - self.burst_s)
            overdue = int((now - begin) * self.link_bw / self.chunk)  # chunks the link has earned the time for
            m = max(1, min(limit, max(self.paced_chunks, overdue)))
            lo, hi = self._span(k, i, m)
            leaves = link.busy_until = begin + (hi - lo) / self.link_bw
        if rate is not None:
            lo, hi = self._span(k, i, m)
            path_leaves = self.busy_until[k] = max(self.busy_until[k], now - self.burst_s) + (hi - lo) / rate
            leaves = max(leaves, path_leaves)
        self.sent[k] = i + m
        return k, i, m, leaves

    def _path_free(self, k: int) -> float:
        """When stream ``k``'s bucket holds a message: ``message_s`` of its rate, or what is
        left of the path (0, for a stream whose path is not paced)."""
        rate = self.rate[k]
        if rate is None:
            return 0.0
        message = max(self.chunk, int(self.message_s * rate / self.chunk) * self.chunk)
        left = self.streams[k].nbytes - self.sent[k] * self.chunk
        return max(self.busy_until[k], time.perf_counter() - self.burst_s) + min(message, left) / rate


def transfer(comm: Any, schedule: RankSchedule, chunk_size: int, send: dict[int, np.ndarray],
             recv: dict[int, np.ndarray], *, window: int = 4, link_bw: float | None = None,
             timeout: float = 60.0, slots: list[np.ndarray] | None = None,
             start_at: float | None = None, path_rate: dict[int, float] | None = None) -> TransferResult:
    """Run this rank's part of a plan (:class:`Transfer`); every rank of ``comm`` calls it at once."""
    return Transfer(comm, schedule, chunk_size, send, recv, window=window, link_bw=link_bw, timeout=timeout,
                    slots=slots, path_rate=path_rate).run(start_at)


def _timeout_message(rank: int, timeout: float, streams, meta) -> str:
    waiting = sorted({(streams[k].path, streams[k].prev) for kind, k, *_ in meta if kind != _SEND})
    sending = sorted({(streams[k].path, streams[k].next) for kind, k, *_ in meta if kind == _SEND})
    parts = []
    if waiting:
        parts.append("waiting for " + ", ".join(f"path {p} from rank {r}" for p, r in waiting[:5])
                     + (" ..." if len(waiting) > 5 else ""))
    if sending:
        parts.append("unmatched sends " + ", ".join(f"path {p} to rank {r}" for p, r in sending[:5])
                     + (" ..." if len(sending) > 5 else ""))
    return f"rank {rank}: transfer timed out after {timeout:g} s ({'; '.join(parts) or 'nothing pending'})"
