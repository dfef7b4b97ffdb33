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

__all__ = ["MAX_IDLE_SLEEP_S", "YIELDS", "idle_pause", "wait_politely", "wait_all", "start_together"]

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


def wait_all(requests: Sequence[Any]) -> None:
    """Complete non-blocking MPI ``requests``, giving the CPU away between tests."""
    from mpi4py import MPI

    tests = 0
    while not MPI.Request.Testall(requests):
        tests += 1
        if tests <= YIELDS:
            os.sched_yield()
        else:
            time.sleep(idle_pause(tests - YIELDS))


def wait_politely(request: Any) -> None:
    """Wait for one non-blocking MPI request (:func:`wait_all`)."""
    wait_all([request])


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
