"""Progress messages for long steps: rate-limited counters and a heartbeat during blocking calls.

Every long-running function takes ``progress``, a callable that receives one-line
messages (the CLI prints them on stderr with the elapsed time; ``--quiet`` passes none).
:class:`Ticker` reports a loop's advance at most every couple of seconds;
:func:`heartbeat` reports from a background thread while a call that releases the GIL
(a HiGHS solve) runs, so no step stays silent for long.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Progress", "Ticker", "heartbeat", "silent"]

#: A progress callback: receives one-line messages.
Progress = Callable[[str], None]


def silent(message: str) -> None:
    """The callback that says nothing."""


class Ticker:
    """Reports ``what: done/total`` at most every ``every`` seconds (and never when silent).

    Examples
    --------
    >>> lines = []
    >>> tick = Ticker(lines.append, "placing units", 3, every=0.0)
    >>> for done in range(1, 4):
    ...     tick(done)
    >>> lines
    ['placing units: 1/3', 'placing units: 2/3', 'placing units: 3/3']
    """

    def __init__(self, progress: Progress | None, what: str, total: int, *, every: float = 2.0) -> None:
        self.say, self.what, self.total, self.every = progress, what, total, every
        self.last = time.perf_counter()
        self.reported = -1

    def __call__(self, done: int, detail: str = "") -> None:
        if self.say is None or done == self.reported:
            return
        now = time.perf_counter()
        if now - self.last >= self.every or done >= self.total:
            self.last, self.reported = now, done
            self.say(f"{self.what}: {done:,}/{self.total:,}{detail}")


@contextmanager
def heartbeat(progress: Progress | None, what: str, *, every: float = 10.0) -> Iterator[None]:
    """While the body runs, say ``what: still running (N s)`` every ``every`` seconds.

    The messages come from a background thread, so the body must release the GIL
    (HiGHS does); the thread stops when the body ends.

    Examples
    --------
    >>> lines = []
    >>> with heartbeat(lines.append, "solving", every=0.01):
    ...     time.sleep(0.05)
    >>> len(lines) >= 1 and lines[0].startswith("solving: still running")
    True
    """
    if progress is None:
        yield
        return
    done = threading.Event()
    start = time.perf_counter()

    def beat() -> None:
        while not done.wait(every):
            progress(f"{what}: still running ({time.perf_counter() - start:.0f} s)")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
