"""Small JSON files tagged with their format (fitted model parameters)."""

from __future__ import annotations

import json
from pathlib import Path

from .errors import OptiqError

__all__ = ["write_tagged", "read_tagged"]


def write_tagged(path: str | Path, fmt: str, data: dict) -> None:
    """Write ``data`` as JSON with ``"format": fmt`` first.

    Raises
    ------
    OptiqError
        If the file cannot be written, naming it.
    """
    try:
        Path(path).write_text(json.dumps({"format": fmt, **data}, indent=1) + "\n")
    except OSError as exc:
        raise OptiqError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None


def read_tagged(path: str | Path, fmt: str, what: str, error: type[OptiqError] = OptiqError,
                hint: str = "") -> dict:
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
