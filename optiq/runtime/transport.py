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

**Paced paths** (``path_rate``): each path's source also keeps the schedule of the path's
own rate (its bytes over the plan's predicted time): its byte ``k`` leaves no earlier than
``k / rate`` after the start, less one message (its first message goes at once, and its
last one a message's time before the plan's end, the time the way to the destination then
takes), and a link serves only paths whose schedule has reached their next message. No
path then runs ahead of the plan, so a network that shares links max-min fairly per flow
grants every path its rate and the plan keeps its predicted time
(:func:`optiq.sim.simulate_flows` with ``pace_paths``); without it, flows alone on their
links run ahead and the others fall behind. A path that fell behind (its rank woke late, a
connection stalled) catches up as fast as the network lets it: a plan whose busiest links
are full has no other time to make it up in.

The state is in named objects: a ``_StreamState`` per stream (chunks held, sent, in which
segment), a ``_Link`` per outgoing link (its queue, window and token bucket), and
``_Requests``, the requests in flight, each with the ``_Message`` it moves (which chunks of
which stream, sent or received). The progress loop reuses one request slot per message in
flight (``Testsome`` sets it to ``REQUEST_NULL`` in place) and, when nothing moved, gives the
core away (:func:`optiq.mpi.waiting.give_way`): it yields, so that a rank with a core of its own
turns as soon as a message or a pacing moment comes and oversubscribed ranks leave the cores to
the ranks with work, and after many fruitless turns sleeps with a growing back-off.

Why runs of chunks and not one message per chunk, what the copies cost and which other
designs were tried and dropped: ``benchmarks/executor.py`` against ``MPI_Alltoallv`` and
``benchmarks/message_floor.py``, with the figures in ``benchmarks/RESULTS.md``. MPI's
cost per message, not Python, sets the pace when ranks share cores.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple

import numpy as np

from ..errors import TransferError
from ..mpi.waiting import MAX_IDLE_SLEEP_S, give_way, sleep_until
from .schedule import RankSchedule, Stream
from .slots import PACED_MESSAGE_S, forwarding_slots, paced_message_chunks, path_slots, segment_chunks

__all__ = ["TransferResult", "Transfer", "transfer"]

#: Paced: link time an idle link may make up for (seconds), so that ranks which wake late
#: (oversubscribed cores) do not stretch the emulated link's schedule.
PACED_BURST_S = 0.02
#: Longest pause of a rank that has received everything and handed all its chunks to MPI,
#: and so only waits for its own sends to complete (seconds): the receivers take the bytes
#: within moments, and the last forwarder to notice sets the transfer's time.
SEND_COMPLETION_POLL_S = 1e-4
#: A transfer that timed out waits at most this long for its cancelled receives to end (seconds).
ABANDON_WAIT_S = 0.5
#: Requests of transfers that timed out which could not be cancelled: kept, with their buffers.
_ABANDONED: list[Any] = []


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


class _Kind(IntEnum):
    """What a request in flight does: send chunks on, receive them to forward, receive them for good."""

    SEND = 0
    FORWARD_RECV = 1
    FINAL_RECV = 2


class _StreamState:
    """Where one of this rank's streams (its hop of one path) stands.

    Attributes
    ----------
    stream : Stream
    chunks : int
        Chunks of the path.
    forwards : bool
        Whether this rank forwards the path (it neither starts nor ends here).
    ready : int
        Chunks this rank holds, in order (all of them at the source).
    sent : int
        Chunks handed to the outgoing link.
    held : list of int
        Forwarders: chunks received into each segment of the slots and not yet sent on.
    slots : ndarray
        Forwarders: the ``(slots, chunk size)`` memory the path's chunks pass through.
    receiving : bool
        A receive is posted (one at a time: message sizes vary).
    queued : bool
        The stream waits in its link's queue.
    rate : float or None
        Paced paths, at the source: the path's bytes per second.
    busy_until : float
        Paced paths: when the path's token bucket is next empty.
    message_bytes : int
        Paced paths: bytes one of its messages carries, ``message_s`` of its rate in whole
        chunks (at least one).
    free_at : float
        When the path's schedule reaches its next message: ``message_bytes`` of its rate
        after ``busy_until``, or what is left of the path (0 for a path not paced). Kept up
        to date as it changes, since every turn of the progress loop reads it.
    """

    __slots__ = ("stream", "chunks", "forwards", "ready", "sent", "held", "slots", "receiving", "queued", "rate",
                 "busy_until", "message_bytes", "free_at")

    def __init__(self, stream: Stream, chunk_size: int, segments: int, slots: np.ndarray,
                 rate: float | None, message_s: float) -> None:
        self.stream = stream
        self.chunks = stream.num_chunks(chunk_size)
        self.forwards = stream.prev >= 0 and stream.next >= 0
        self.ready = self.chunks if stream.prev < 0 else 0
        self.sent = 0
        self.held = [0] * segments if self.forwards else []
        self.slots = slots
        self.receiving = self.queued = False
        self.rate = rate
        self.busy_until = self.free_at = 0.0
        self.message_bytes = 0 if rate is None else max(chunk_size, int(message_s * rate / chunk_size) * chunk_size)

    def schedule_at(self, busy_until: float, chunk_size: int) -> None:
        """A paced path's bucket is next empty at ``busy_until``: when its next message is due follows."""
        self.busy_until = busy_until
        if self.rate is not None:
            self.free_at = busy_until + min(self.message_bytes, self.stream.nbytes - self.sent * chunk_size) / self.rate


class _Message(NamedTuple):
    """Chunks ``first .. first + chunks - 1`` of one stream, moved by one MPI request."""

    kind: _Kind
    state: _StreamState
    first: int
    chunks: int


class _Requests:
    """The requests in flight, one reusable slot each.

    ``Testsome`` sets a completed request to ``REQUEST_NULL`` in place, so a slot is reused
    by the next request and nothing is rebuilt per completion.
    """

    __slots__ = ("requests", "statuses", "messages", "free", "_status", "_testsome", "_byte")

    def __init__(self) -> None:
        from mpi4py import MPI

        self._status, self._testsome, self._byte = MPI.Status, MPI.Request.Testsome, MPI.BYTE  # bound once: hot loop
        self.requests: list[Any] = []
        self.statuses: list[Any] = []
        self.messages: list[_Message | None] = []
        self.free: list[int] = []

    def add(self, request: Any, message: _Message) -> None:
        if self.free:
            j = self.free.pop()
            self.requests[j], self.messages[j] = request, message
        else:
            self.requests.append(request)
            self.statuses.append(self._status())
            self.messages.append(message)

    def completed(self) -> list[tuple[_Message, int]]:
        """The messages whose requests completed since the last call, with the bytes each received."""
        done = self._testsome(self.requests, self.statuses) if self.requests else None
        if not done:
            return []
        out = []
        for j, d in enumerate(done):  # Testsome fills the statuses in the order of ``done``
            message = self.messages[d]
            assert message is not None
            self.messages[d] = None
            self.free.append(d)
            out.append((message, 0 if message.kind == _Kind.SEND else self.statuses[j].Get_count(self._byte)))
        return out

    def in_flight(self) -> list[_Message]:
        return [m for m in self.messages if m is not None]

    def abandon(self) -> None:
        """Give up the requests in flight (a transfer that timed out): receives are cancelled,
        so that no later message lands in a buffer that is no longer this transfer's; what
        cannot be cancelled at once (sends, a receive already under way) is kept, with its
        buffer, for as long as the process lives."""
        from mpi4py import MPI

        pending = [(r, m) for r, m in zip(self.requests, self.messages) if m is not None and r != MPI.REQUEST_NULL]
        for request, message in pending:
            if message.kind != _Kind.SEND:
                request.Cancel()
        until = time.perf_counter() + ABANDON_WAIT_S
        for request, message in pending:
            if message.kind == _Kind.SEND or not _ended_by(request, until):
                _ABANDONED.append(request)
        self.requests, self.statuses, self.messages, self.free = [], [], [], []


def _ended_by(request: Any, until: float) -> bool:
    """Whether ``request`` (cancelled) completes before the moment ``until``."""
    while not request.Test():
        if time.perf_counter() > until:
            return False
        time.sleep(0.001)
    return True


class _Link:
    """An outgoing link of this rank: streams with a chunk ready, source chunks in flight, pacing.

    The link serves the ready stream that is least far along (fraction of its chunks
    sent), so paths sharing a link advance in proportion to their sizes and all finish
    together, as the flow-level plan assumes, instead of small paths finishing first.
    """

    __slots__ = ("queue", "inflight", "pending", "leaves", "busy_until", "changed", "wake")

    def __init__(self) -> None:
        self.queue: list[_StreamState] = []
        self.inflight = 0  # source chunks in flight
        self.pending: _Message | None = None  # the next message, once its time comes
        self.leaves = 0.0  # ... which is this
        self.busy_until = 0.0
        #: a stream joined the queue or the window opened since the link was last served; until
        #: then nothing can start on it before ``wake`` (a message's or a paced path's time)
        self.changed = True
        self.wake = 0.0


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
        (rounded down to whole segments, :func:`~optiq.runtime.slots.path_slots`); a message
        carries at most :func:`~optiq.runtime.slots.segment_chunks` chunks.
    link_bw : float, optional
        Emulated bandwidth of every outgoing link in bytes/s: a message leaves only once
        the link has earned the time to carry it (see the module docstring).
    timeout : float
        Seconds before :meth:`run` gives up with :class:`TransferError`.
    slots : list of ndarray, optional
        :func:`~optiq.runtime.slots.forwarding_slots` of the same schedule, chunk size and
        window, to reuse memory across transfers; allocated here when not given.
    burst_s : float
        Paced: link time an idle link may make up for later (its token bucket's depth).
    message_s : float
        Paced: link time one message carries at most, unless its chunks are overdue.
    path_rate : dict, optional
        Paced paths: path id -> bytes/s of its schedule (module docstring), for the paths
        this rank is the source of.
    describe_path : callable, optional
        A path id's route in words, for the timeout's message (the nodes it crosses name the
        cables: a dead one among them is where its bytes stop).
    """

    def __init__(self, comm: Any, schedule: RankSchedule, chunk_size: int, send: dict[int, np.ndarray],
                 recv: dict[int, np.ndarray], *, window: int = 4, link_bw: float | None = None,
                 timeout: float = 60.0, slots: list[np.ndarray] | None = None, burst_s: float = PACED_BURST_S,
                 message_s: float = PACED_MESSAGE_S, path_rate: dict[int, float] | None = None,
                 describe_path: Callable[[int], str] | None = None) -> None:
        from mpi4py import MPI

        self._byte = MPI.BYTE
        self.comm, self.window, self.link_bw, self.timeout = comm, window, link_bw, timeout
        self.describe_path = describe_path
        self.burst_s = burst_s
        self.chunk, self.send, self.recv = chunk_size, send, recv
        self.seg = segment_chunks(window)
        self.paced_chunks = 1 if link_bw is None else paced_message_chunks(chunk_size, link_bw, message_s)
        self.nseg = path_slots(window) // self.seg  # segments of slots per forwarded path
        self.streams = schedule.streams
        #: forwarding slots of every stream this rank forwards (none for the others)
        self.slots = forwarding_slots(schedule, chunk_size, window) if slots is None else slots
        self.states = [_StreamState(s, chunk_size, self.nseg, buf,
                                    path_rate.get(s.path) if path_rate and s.prev < 0 and s.next >= 0 else None,
                                    message_s)
                       for s, buf in zip(self.streams, self.slots)]
        self.links: dict[int, _Link] = {s.link: _Link() for s in self.streams if s.next >= 0}
        self.requests = _Requests()
        # every chunk is sent once where the stream has a next rank and received once where it has a previous one
        self.remaining = sum(st.chunks * ((s.next >= 0) + (s.prev >= 0)) for s, st in zip(self.streams, self.states))
        self.unsent = sum(st.chunks for s, st in zip(self.streams, self.states) if s.next >= 0)  # not handed to MPI
        self.chunks_sent = self.chunks_forwarded = self.messages = 0
        self.receiving = 0  # streams with a receive posted

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
            On timeout, naming the paths and ranks still waited for. Its receives are
            cancelled then and its sends left outstanding (:meth:`_Requests.abandon`): the
            communicator is broken, for this plan's transfers and any other.
        """
        start = sleep_until(start_at)
        for st in self.states:
            # a paced path's schedule starts one message ahead, and a chunk more for every stop
            # on its way, each of which stores a whole chunk before it sends it on (module docstring)
            st.schedule_at(start if st.rate is None else
                           start - (st.message_bytes + st.stream.stops * self.chunk) / st.rate, self.chunk)
            if st.stream.prev >= 0:
                self._post_recv(st)
            else:
                self._enqueue(st)
        for link in self.links.values():
            link.busy_until = start
        idle = 0
        while self.remaining:
            now = time.perf_counter()
            done = self.requests.completed()
            for message, nbytes in done:
                self._completed(message, nbytes)
            moved, deadline = self._pump(now)
            if done or moved:
                idle = 0
                continue
            if now - start > self.timeout:
                in_flight = self.requests.in_flight()
                self.requests.abandon()
                raise TransferError(_timeout_message(self.comm.Get_rank(), self.timeout, in_flight,
                                                     self.describe_path))
            idle += 1
            # a rank left to see its own sends complete sleeps briefly: the receivers take the bytes within moments
            give_way(idle, until=deadline,
                     longest=MAX_IDLE_SLEEP_S if self.unsent or self.receiving else SEND_COMPLETION_POLL_S)
        return TransferResult(recv=self.recv, elapsed_s=time.perf_counter() - start, chunks_sent=self.chunks_sent,
                              chunks_forwarded=self.chunks_forwarded,
                              buffer_bytes=sum(b.nbytes for b in self.slots), messages=self.messages)

    def _completed(self, message: _Message, nbytes: int) -> None:
        """Act on what one completed request allows."""
        kind, st, i, m = message
        if kind == _Kind.SEND:
            self.remaining -= m
            if st.forwards:
                st.held[(i // self.seg) % self.nseg] -= m
                if not st.receiving:
                    self._post_recv(st)  # the slots may be free again
            else:
                link = self.links[st.stream.link]
                link.inflight -= m
                link.changed = True
            return
        m = -(-nbytes // self.chunk)  # whole chunks, the last may be short
        self.remaining -= m
        st.receiving = False
        self.receiving -= 1
        st.ready += m
        if kind == _Kind.FORWARD_RECV:
            st.held[(i // self.seg) % self.nseg] += m
            self._enqueue(st)
        self._post_recv(st)

    def _span(self, st: _StreamState, i: int, m: int) -> tuple[int, int]:
        """Byte range of chunks ``i .. i + m - 1`` of a stream, relative to the path's start."""
        return i * self.chunk, min((i + m) * self.chunk, st.stream.nbytes)

    def _slot_view(self, st: _StreamState, i: int, m: int) -> np.ndarray:
        """The slots of chunks ``i .. i + m - 1`` of a forwarded stream (one segment, so consecutive)."""
        first = i % (self.seg * self.nseg)  # slots cycle through the segments
        lo, hi = self._span(st, i, m)
        return st.slots[first:first + m].reshape(-1)[:hi - lo]

    def _post_recv(self, st: _StreamState) -> None:
        """Post the receive of the path's next message, if there is one and room for it.

        A message never crosses a segment boundary, so a forwarder receives up to the end
        of the current segment of its slots, once the chunks held in that segment before
        have been sent on; the destination receives up to the end of the path.
        """
        s, i = st.stream, st.ready
        if i >= st.chunks:
            return
        if st.forwards:
            if i % self.seg == 0 and st.held[(i // self.seg) % self.nseg]:
                return  # the segment's previous chunks are still on their way out
            m = min(self.seg - i % self.seg, st.chunks - i)
            buf, kind = self._slot_view(st, i, m), _Kind.FORWARD_RECV
        else:
            lo = s.offset + i * self.chunk
            buf, kind = self.recv[s.job][lo:s.offset + s.nbytes], _Kind.FINAL_RECV
            m = st.chunks - i
        self.requests.add(self.comm.Irecv([buf, self._byte], source=s.prev, tag=s.path), _Message(kind, st, i, m))
        st.receiving = True
        self.receiving += 1

    def _enqueue(self, st: _StreamState) -> None:
        if not st.queued and st.sent < st.ready:
            link = self.links[st.stream.link]
            link.queue.append(st)
            link.changed = st.queued = True

    def _start_send(self, message: _Message) -> None:
        _, st, i, m = message
        s = st.stream
        if st.forwards:
            buf = self._slot_view(st, i, m)
            self.chunks_forwarded += m
        else:
            lo, hi = self._span(st, i, m)
            buf = self.send[s.job][s.offset + lo:s.offset + hi]
            self.chunks_sent += m
            self.links[s.link].inflight += m
        self.messages += 1
        self.unsent -= m
        self.requests.add(self.comm.Isend([buf, self._byte], dest=s.next, tag=s.path), message)

    def _pump(self, now: float) -> tuple[bool, float]:
        """Start what the links allow; return whether anything started and the next pacing deadline.

        A link is served only if it changed (:attr:`_Link.changed`) or its wake-up time came:
        most turns of the progress loop find nothing new, and this is the hot loop.
        """
        moved, deadline = False, float("inf")
        for link in self.links.values():
            if not link.changed and link.wake > now:
                if link.wake < deadline:
                    deadline = link.wake
                continue
            wake = float("inf")
            while True:
                if link.pending is not None:
                    if link.leaves > now:
                        wake = link.leaves
                        break
                    self._start_send(link.pending)
                    self._enqueue(link.pending.state)
                    link.pending, moved = None, True
                queue = link.queue
                if not queue:
                    break
                full = link.inflight >= self.window  # the window holds source chunks only: forwarded ones always go
                st, due = None, float("inf")
                for q in queue:  # the least far along of the streams that may go, in one pass
                    if full and not q.forwards:
                        continue
                    if q.free_at > now:  # a paced path waits for its own bucket, not the link
                        if q.free_at < due:
                            due = q.free_at
                        continue
                    if st is None or q.sent * st.chunks < st.sent * q.chunks:
                        st = q
                if st is None:
                    wake = due
                    break
                queue.remove(st)
                st.queued = False
                link.pending, link.leaves = self._message(link, st, now)
            link.changed, link.wake = False, wake
            if wake < deadline:
                deadline = wake
        return moved, deadline

    def _message(self, link: _Link, st: _StreamState, now: float) -> tuple[_Message, float]:
        """The next message of a stream on ``link``, and the time it leaves.

        It takes the stream's next chunk and every further one that is ready, in the same
        segment (the receiver's slots) and within the window; paced, as long as the
        message lasts at most ``message_s`` on the link or its chunks were due by ``now``
        anyway. It leaves once the link has earned the time to carry all of it.
        """
        i = st.sent
        limit = st.ready - i
        if not st.forwards:
            limit = min(limit, self.window - link.inflight)
        if not st.stream.direct:
            limit = min(limit, self.seg - i % self.seg)
        rate = st.rate
        if rate is not None:  # a paced path: at most the chunks its schedule has reached
            limit = max(1, min(limit, int((now - st.busy_until) * rate / self.chunk)))
        if self.link_bw is None:
            m, leaves = limit, now
        else:
            begin = max(link.busy_until, now - self.burst_s)
            overdue = int((now - begin) * self.link_bw / self.chunk)  # chunks the link has earned the time for
            m = max(1, min(limit, max(self.paced_chunks, overdue)))
            lo, hi = self._span(st, i, m)
            leaves = link.busy_until = begin + (hi - lo) / self.link_bw
        st.sent = i + m
        if rate is not None:
            lo, hi = self._span(st, i, m)
            st.schedule_at(st.busy_until + (hi - lo) / rate, self.chunk)
            leaves = max(leaves, st.busy_until)
        return _Message(_Kind.SEND, st, i, m), leaves


def transfer(comm: Any, schedule: RankSchedule, chunk_size: int, send: dict[int, np.ndarray],
             recv: dict[int, np.ndarray], *, window: int = 4, link_bw: float | None = None,
             timeout: float = 60.0, slots: list[np.ndarray] | None = None,
             start_at: float | None = None, path_rate: dict[int, float] | None = None,
             describe_path: Callable[[int], str] | None = None) -> TransferResult:
    """Run this rank's part of a plan (:class:`Transfer`); every rank of ``comm`` calls it at once."""
    return Transfer(comm, schedule, chunk_size, send, recv, window=window, link_bw=link_bw, timeout=timeout,
                    slots=slots, path_rate=path_rate, describe_path=describe_path).run(start_at)


def _timeout_message(rank: int, timeout: float, in_flight: list[_Message],
                     describe_path: Callable[[int], str] | None = None) -> str:
    waiting = sorted({(m.state.stream.path, m.state.stream.prev) for m in in_flight if m.kind != _Kind.SEND})
    sending = sorted({(m.state.stream.path, m.state.stream.next) for m in in_flight if m.kind == _Kind.SEND})

    def path(p: int) -> str:
        return f"path {p}" + (f" ({describe_path(p)})" if describe_path is not None else "")

    parts = []
    if waiting:
        parts.append("waiting for " + ", ".join(f"{path(p)} from rank {r}" for p, r in waiting[:3])
                     + (" ..." if len(waiting) > 3 else ""))
    if sending:
        parts.append("unmatched sends " + ", ".join(f"{path(p)} to rank {r}" for p, r in sending[:3])
                     + (" ..." if len(sending) > 3 else ""))
    return f"rank {rank}: transfer timed out after {timeout:g} s ({'; '.join(parts) or 'nothing pending'})"
