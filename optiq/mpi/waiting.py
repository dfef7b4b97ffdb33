"""Waiting for MPI without taking a core from the ranks that still work.

MPI's blocking calls poll without pause. With more ranks than cores (or a solver thread
beside a waiting rank), a rank that only waits would take the CPU from the ones that
compute, so every wait here tests non-blocking requests and gives the CPU away between
tests: first by yielding (a short wait, such as a small collective, ends at once when the
peer runs), then, after :data:`YIELDS` fruitless tests, by sleeping with a back-off
growing from 20 µs to :data:`MAX_IDLE_SLEEP_S` (:func:`give_way`). The executor's progress
loop gives the core away the same way between its turns.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["MAX_IDLE_SLEEP_S", "YIELDS", "START_LEAD_S", "idle_pause", "give_way", "wait_politely", "wait_all",
           "start_together", "sleep_until", "allreduce_asleep"]

#: The longest pause between two tests of a request (seconds): short, because ranks that wait on
#: one another at every step (the agreement, a forwarded chunk) each add up to this much to the
#: step (``benchmarks/application.py``; the figures in ``benchmarks/RESULTS.md``).
MAX_IDLE_SLEEP_S = 5e-4
#: Fruitless tests answered by yielding the CPU before a wait starts sleeping.
YIELDS = 1000
#: Seconds from the last rank's arrival to the moment :func:`start_together` agrees on.
START_LEAD_S = 5e-4


def idle_pause(idle: int) -> float:
    """The pause after ``idle`` fruitless tests in a row.

    Examples
    --------
    >>> idle_pause(1), idle_pause(100) == MAX_IDLE_SLEEP_S
    (2e-05, True)
    """
    return float(min(MAX_IDLE_SLEEP_S, 1e-5 * 2 ** min(idle, 10)))


def give_way(idle: int, yields: int = YIELDS, *, until: float | None = None,
             longest: float = MAX_IDLE_SLEEP_S) -> None:
    """Give the CPU away after ``idle`` fruitless tests in a row: yield for the first
    ``yields``, then sleep the back-off (:func:`idle_pause`, at most ``longest`` seconds),
    never past ``until`` (a :func:`time.perf_counter` moment).

    A yield returns within a microsecond when no other task wants the core, where a sleep lasts
    the kernel's timer slack and a wake-up beyond what it asked (``benchmarks/call_cost.py
    --ranks 2``): a rank with a core of its own so learns of a message, or reaches a moment,
    as soon as MPI's own polling wait would, and on a crowded node any rank that can run gets
    the core. A wait that outlasts the yields is a long one, and sleeps.

    Examples
    --------
    >>> give_way(1)                                       # yields
    >>> start = time.perf_counter()
    >>> give_way(1, yields=0, until=start + 1e-6)         # sleeps the back-off, to ``until`` only
    >>> time.perf_counter() - start < 0.01
    True
    """
    if idle <= yields:
        os.sched_yield()
        return
    pause = min(longest, idle_pause(idle - yields))
    if until is not None:
        pause = min(pause, max(0.0, until - time.perf_counter()))
    time.sleep(pause)


def wait_all(requests: Sequence[Any], yields: int = YIELDS, timeout: float | None = None) -> bool:
    """Complete non-blocking MPI ``requests``, giving the CPU away between tests; whether they
    completed within ``timeout`` seconds (default: wait for ever, and return True).

    Parameters
    ----------
    requests : sequence of mpi4py.MPI.Request
    yields : int
        Fruitless tests answered by yielding before the back-off sleeps start. A yielding
        rank stays runnable, so a wait that can overlap other ranks' work (one that
        finished a transfer first) should pass 0 and only sleep.
    """
    from mpi4py import MPI

    tests = 0
    deadline = None if timeout is None else time.perf_counter() + timeout
    while not MPI.Request.Testall(requests):
        if deadline is not None and time.perf_counter() > deadline:
            return False
        tests += 1
        give_way(tests, yields)
    return True


def wait_politely(request: Any, yields: int = YIELDS) -> None:
    """Wait for one non-blocking MPI request (:func:`wait_all`)."""
    wait_all([request], yields)


def start_together(comm: Any, lead_s: float = START_LEAD_S, host: Any = None) -> float:
    """A barrier after which the ranks of ``comm`` start a timed step at one agreed moment.

    Once every rank has arrived (a polite barrier, :func:`wait_politely`), the ranks of
    each host agree on the moment ``lead_s`` after the last of them came out of it, on
    :func:`time.perf_counter` (one clock per host), and each sleeps until then. Returns
    that moment: time the step from it, and a rank that gets its core late is late
    against the same clock as the others (the executor's links earn their bytes from it).
    The agreement is waited for by yielding, not sleeping, so that every rank is awake
    and learns the moment within a few scheduler switches.

    Leaving a barrier is no common start when ranks share cores: the first ranks out start
    working and the others queue for a core, milliseconds apart with 16 ranks on 2 cores.
    Timed from the agreed moment, a late rank's links have earned their bytes from it, so
    a paced replay keeps closer to its predicted time (``benchmarks/executor.py``).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    lead_s : float
        Seconds from the last rank's arrival to the agreed moment.
    host : mpi4py.MPI.Comm, optional
        The ranks of ``comm`` on this rank's host (``comm.Split_type(MPI.COMM_TYPE_SHARED)``),
        for a caller that starts many steps; split (and freed) here when not given.

    Returns
    -------
    float
        The agreed moment, a :func:`time.perf_counter` value this rank has reached.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> start = start_together(MPI.COMM_SELF)
    >>> time.perf_counter() >= start
    True
    """
    from mpi4py import MPI

    wait_politely(comm.Ibarrier())
    own = host is None
    if own:
        host = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        # yielding only: every rank stays awake, so all learn the start within a few switches
        start = _allreduce(host, time.perf_counter(), MPI.MAX, yields=sys.maxsize) + lead_s
    finally:
        if own:
            host.Free()
    sleep_until(start)
    return start


def sleep_until(moment: float | None) -> float:
    """Sleep until ``moment`` (a :func:`time.perf_counter` value) and return it; ``None`` means now.

    Examples
    --------
    >>> later = time.perf_counter() + 0.01
    >>> sleep_until(later) == later <= time.perf_counter()
    True
    """
    if moment is None:
        return time.perf_counter()
    while (ahead := moment - time.perf_counter()) > 0:
        time.sleep(ahead)
    return moment


def allreduce_asleep(comm: Any, value: float, op: Any, timeout: float | None = None) -> float:
    """Reduce one number over ``comm`` with ``op`` (an ``MPI.Op``), only sleeping while waiting.

    For the end of a timed step: the ranks that finish first wait here while the others
    still work, and a waiter that yielded would stay runnable and take their cores (the
    paced replays of ``benchmarks/executor.py`` are slower when this wait yields first).
    ``timeout``: seconds after which the wait gives up with
    :class:`~optiq.errors.TransferError` (the reduction is left in flight: abort).
    """
    return _allreduce(comm, value, op, yields=0, timeout=timeout)


def _allreduce(comm: Any, value: float, op: Any, yields: int, timeout: float | None = None) -> float:
    buf, out = np.array([value], dtype=np.float64), np.empty(1, dtype=np.float64)
    if not wait_all([comm.Iallreduce(buf, out, op=op)], yields, timeout):
        from ..errors import TransferError

        raise TransferError(f"rank {comm.Get_rank()}: the ranks did not all end the step within {timeout:g} s more "
                            f"(a message between two of them is lost)")
    return float(out[0])
