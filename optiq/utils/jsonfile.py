"""JSON out: always standard JSON (no NaN or Infinity), files tagged with their format.

Non-finite numbers become ``null``; numpy scalars and arrays become numbers and lists.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OptiqError, OutputError

__all__ = ["dumps", "write_json", "write_results", "check_writable", "check_directory", "write_tagged", "read_tagged"]


def standard(obj: Any) -> Any:
    """``obj`` with non-finite floats as ``None`` and numpy values as Python ones.

    Examples
    --------
    >>> standard({"a": float("nan"), "b": [np.int64(3), np.float64(0.5)]})
    {'a': None, 'b': [3, 0.5]}
    """
    if isinstance(obj, dict):
        return {str(k): standard(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [standard(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return standard(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(obj: Any, *, compact: bool = False, indent: int | None = None) -> str:
    """Standard JSON text of ``obj`` (see :func:`standard`)."""
    return json.dumps(standard(obj), allow_nan=False, indent=indent,
                      separators=(",", ":") if compact else None)


def check_writable(path: str | Path, what: str) -> None:
    """Refuse an output file that cannot be written, before any work starts.

    Raises
    ------
    OutputError
        If ``path`` is a directory, its directory does not exist, or it may not be written.
    """
    path = str(path)
    where = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OutputError(f"cannot write {what} {path!r}: it is a directory")
    if not os.path.isdir(where):
        raise OutputError(f"cannot write {what} {path!r}: directory {where!r} does not exist")
    if not os.access(where, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise OutputError(f"cannot write {what} {path!r}: permission denied")


def check_directory(path: str | Path, what: str) -> None:
    """Refuse an output directory that neither exists writable nor can be made.

    Raises
    ------
    OutputError
        If ``path`` is a file, or the nearest existing directory above it may not be written.
    """
    path = os.path.abspath(str(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise OutputError(f"cannot write into {what} {path!r}: it is a file, not a directory")
    existing = path
    while not os.path.isdir(existing):
        existing = os.path.dirname(existing)
    if not os.access(existing, os.W_OK):
        raise OutputError(f"cannot write into {what} {path!r}: {existing!r} is not writable")


def write_json(path: str | Path, obj: Any, *, what: str = "file", compact: bool = False) -> None:
    """Write ``obj`` as standard JSON.

    Raises
    ------
    OutputError
        If the file cannot be written, naming it and why.
    """
    try:
        Path(path).write_text(dumps(obj, compact=compact, indent=None if compact else 1) + "\n")
    except OSError as exc:
        raise OutputError(f"cannot write {what} {str(path)!r}: {exc.strerror or exc}") from None


def write_results(path: str | Path, results: Any, what: str) -> None:
    """Write measured results as JSON; if that fails after all, print them on stdout and raise.

    Raises
    ------
    OutputError
        If the file cannot be written (the results were printed first).
    """
    try:
        write_json(path, results, what=what)
    except OutputError:
        print(dumps(results), flush=True)
        raise


def write_tagged(path: str | Path, fmt: str, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON with ``"format": fmt`` first.

    Raises
    ------
    OutputError
        If the file cannot be written, naming it.
    """
    write_json(path, {"format": fmt, **data})


def read_tagged(path: str | Path, fmt: str, what: str, error: type[OptiqError] = OptiqError,
                hint: str = "") -> dict[str, Any]:
    """Read a file written by :func:`write_tagged`; ``data`` without its ``format`` key.

    Raises
    ------
    OptiqError (or ``error``)
        For a missing or corrupt file, or one of another format, naming the file as ``what``.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise error(f"cannot read {what} {str(path)!r}: {exc}") from None
    if not isinstance(data, dict) or data.pop("format", None) != fmt:
        raise error(f"{str(path)!r} is not an optiq {what} file{hint}")
    return data
