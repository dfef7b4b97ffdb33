"""Waiting for MPI without taking a core from the ranks that still work.

MPI's blocking calls poll without pause. With more ranks than cores (or a solver thread
beside a waiting rank), a rank that only waits would take the CPU from the ones that
compute, so every wait here tests a non-blocking request and sleeps between tests, with
a back-off growing from 10 µs to :data:`MAX_IDLE_SLEEP_S`.
"""

from __future__ import annotations

import time

__all__ = ["MAX_IDLE_SLEEP_S", "idle_pause", "wait_politely"]

#: The longest pause between two tests of a request (seconds).
MAX_IDLE_SLEEP_S = 2e-3


def idle_pause(idle: int) -> float:
    """The pause after ``idle`` fruitless tests in a row.

    Examples
    --------
    >>> idle_pause(1), idle_pause(100) == MAX_IDLE_SLEEP_S
    (2e-05, True)
    """
    return min(MAX_IDLE_SLEEP_S, 1e-5 * 2 ** min(idle, 10))


def wait_politely(request) -> None:
    """Wait for a non-blocking MPI request, sleeping between tests."""
    idle = 0
    while not request.Test():
        idle += 1
        time.sleep(idle_pause(idle))
