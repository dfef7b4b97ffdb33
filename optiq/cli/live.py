"""One progress line that updates in place on a terminal, cleared before anything else is printed."""

from __future__ import annotations

import shutil
import sys
import time
from typing import Any, TextIO

__all__ = ["LiveLine"]


class LiveLine:
    """Progress as one line of the terminal (standard error), rewritten by every message.

    Whatever the command then prints to standard output first clears the line, so the table
    starts on a clean line (:meth:`start` puts a thin wrapper around ``sys.stdout`` that does
    so once per message); warnings on standard error clear it the same way.
    """

    def __init__(self, began: float) -> None:
        self.began, self.shown = began, False

    @classmethod
    def start(cls, began: float) -> LiveLine:
        """A live line, and both standard streams clearing it before they print."""
        line = cls(began)
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if isinstance(stream, _Clearing):
                stream.line = line
            else:
                setattr(sys, name, _Clearing(stream, line))
        return line

    def __call__(self, message: str) -> None:
        width = max(20, shutil.get_terminal_size((100, 20)).columns - 1)
        text = f"[{time.perf_counter() - self.began:7.2f}s] {message}"
        out = _raw(sys.stderr)
        out.write("\r\033[K" + (text if len(text) <= width else text[: width - 3] + "..."))
        out.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            out = _raw(sys.stderr)
            out.write("\r\033[K")
            out.flush()
            self.shown = False


class _Clearing:
    """A stream that clears the live line before its first write after a message."""

    def __init__(self, stream: TextIO, line: LiveLine) -> None:
        self.stream, self.line = stream, line

    def write(self, text: str) -> int:
        if text:
            self.line.clear()
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _raw(stream: Any) -> TextIO:
    return stream.stream if isinstance(stream, _Clearing) else stream
