"""Compiled kernels (numba): compiling with a disk cache where one can be written, and Ctrl-C
while a kernel compiles or runs.

Only modules that hold kernels import this one, and they are imported when a kernel first
runs: numba's import is not paid by ``import optiq``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from numba import njit

__all__ = ["compiled", "interrupts_held"]


def compiled(function: Callable[..., Any]) -> Any:
    """``function`` compiled, its machine code kept on disk for the next process where numba
    can write a cache (beside the kernel's module or in its cache directory), else compiled anew."""
    try:
        return njit(cache=True, nogil=True)(function)
    except RuntimeError:  # "no locator available": an unprivileged user of a shared install
        return njit(nogil=True)(function)


@contextmanager
def interrupts_held(kernel: Any = None) -> Iterator[None]:
    """Hold Ctrl-C until the compiled call returns, then deliver it to the usual handler.

    numba compiles on the first call and writes its cache from ctypes callbacks; a
    ``KeyboardInterrupt`` raised inside one is printed as a traceback and swallowed. (A
    compiled kernel does not look at signals either way, so holding them loses nothing.)

    Parameters
    ----------
    kernel : numba dispatcher, optional
        The kernel about to be called, always with arguments of the same types: once it has
        machine code it compiles nothing more, and nothing is held. (Swapping the handler twice
        costs far more than a small kernel's call: Heuristic 2 calls its kernel once per batch.)
    """
    if threading.current_thread() is not threading.main_thread() or (kernel is not None and kernel.overloads):
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
        if held:
            signal.raise_signal(signal.SIGINT)
