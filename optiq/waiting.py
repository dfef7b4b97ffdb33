"""Waiting for MPI without taking a core from the ranks that still work.

MPI's blocking calls poll without pause. With more ranks than cores (or a solver thread
beside a waiting rank), a rank that only waits would take the CPU from the ones that
compute, so every wait here tests non-blocking requests and gives the CPU away between
tests: first by yielding (a short wait, such as a small collective, ends at once when the
peer runs), then, after :data:`YIELDS` fruitless tests, by sleeping with a back-off
growing from 20 µs to :data:`MAX_IDLE_SLEEP_S`. The executor's progress loop uses the same
back-off (:func:`idle_pause`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import os
import time

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["MAX_IDLE_SLEEP_S", "YIELDS", "idle_pause", "wait_politely", "wait_all", "start_together",
           "allreduce_asleep"]

#: The longest pause between two tests of a request (seconds).
MAX_IDLE_SLEEP_S = 2e-3
#: Fruitless tests answered by yielding the CPU before a wait starts sleeping.
YIELDS = 1000


def idle_pause(idle: int) -> float:
    """The pause after ``idle`` fruitless tests in a row.

    Examples
    --------
    >>> idle_pause(1), idle_pause(100) == MAX_IDLE_SLEEP_S
    (2e-05, True)
    """
    return min(MAX_IDLE_SLEEP_S, 1e-5 * 2 ** min(idle, 10))


def wait_all(requests: Sequence[Any], yields: int = YIELDS) -> None:
    """Complete non-blocking MPI ``requests``, giving the CPU away between tests.

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
    while not MPI.Request.Testall(requests):
        tests += 1
        if tests <= yields:
            os.sched_yield()
        else:
            time.sleep(idle_pause(tests - yields))


def wait_politely(request: Any, yields: int = YIELDS) -> None:
    """Wait for one non-blocking MPI request (:func:`wait_all`)."""
    wait_all([request], yields)


def start_together(comm: Any) -> None:
    """A barrier that every rank of ``comm`` leaves at nearly the same moment, for timing.

    A polite barrier (:func:`wait_politely`) lets early ranks sleep, but each then leaves
    whenever its back-off ends, up to :data:`MAX_IDLE_SLEEP_S` after the last arrival. So a
    second barrier follows that only yields the CPU between tests: every rank is awake
    when it starts, and the last one to arrive releases them all within a few scheduler
    switches.
    """
    wait_politely(comm.Ibarrier())
    request = comm.Ibarrier()
    while not request.Test():
        os.sched_yield()


def allreduce_asleep(comm: Any, value: float, op: Any) -> float:
    """Reduce one number over ``comm`` with ``op`` (an ``MPI.Op``), only sleeping while waiting.

    For the end of a timed step: the ranks that finish first wait here while the others
    still work, and a waiter that yielded would stay runnable and take their cores. With 16
    ranks on 2 cores the 4x4 opt replay of ``benchmarks/executor.py`` at 200 MB/s per link
    took 0.070-0.075 s when this wait yielded 1000 times first, 0.066-0.067 s without.
    """
    import numpy as np

    buf, out = np.array([value], dtype=np.float64), np.empty(1, dtype=np.float64)
    wait_politely(comm.Iallreduce(buf, out, op=op), yields=0)
    return float(out[0])
