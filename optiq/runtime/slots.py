"""Where a rank keeps the chunks it forwards, and how many chunks one message carries.

A forwarder's slots of a path are whole *segments* of :func:`segment_chunks` chunks
(:func:`path_slots` per path) and no message crosses a segment boundary, so a message
always lands in consecutive slots and is sent on from them without a copy
(:mod:`optiq.runtime.transport`).
"""

from __future__ import annotations

import numpy as np

from .memory import job_buffers
from .schedule import RankSchedule

__all__ = ["segment_chunks", "paced_message_chunks", "path_slots", "forwarding_slots", "PACED_MESSAGE_S"]

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
