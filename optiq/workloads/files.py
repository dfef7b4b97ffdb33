"""Demand files: CSV or JSON with ``src, dst, bytes`` (sizes may carry units, ``8MiB``)."""

from __future__ import annotations

import csv
import io
import json
import warnings
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from numpy.typing import ArrayLike

from ..errors import OptiqError, WorkloadError
from ..utils.units import parse_size
from .demands import Demands

__all__ = ["read_demands", "write_demands"]


def _row(row: dict[str, Any], where: str) -> tuple[int, int, int]:
    try:
        src, dst, size = row["src"], row["dst"], row["bytes"]
    except KeyError as exc:
        raise WorkloadError(f"{where}: missing column {exc.args[0]!r} (need src, dst, bytes)") from None
    try:
        s, d = int(str(src).strip()), int(str(dst).strip())
    except ValueError:
        raise WorkloadError(f"{where}: src {src!r} / dst {dst!r} are not integer node ids") from None
    try:
        return s, d, parse_size(size, what="bytes")
    except OptiqError as exc:
        raise WorkloadError(f"{where}: {exc}") from None


def _read_csv(fh: TextIO, path: Path) -> Demands | list[tuple[int, int, int]]:
    """The jobs of a CSV file: at once when every field is a plain integer, else row by row."""
    header = next(csv.reader([fh.readline()]), [])
    names = [name.strip().lower() for name in header]
    if not {"src", "dst", "bytes"} <= set(names):
        raise WorkloadError(f"demand file {str(path)!r} needs a header line naming the columns src,dst,bytes "
                            f"(found {', '.join(map(repr, header)) or 'an empty line'})")
    at = [names.index(name) for name in ("src", "dst", "bytes")]
    body = fh.read()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an empty body: reported below as "no demands"
            table = np.loadtxt(io.StringIO(body), delimiter=",", dtype=np.int64, usecols=at, ndmin=2)
    except (ValueError, OverflowError):  # units, decimals or a malformed line: parse each row to name it
        rows = []
        for n, row in enumerate(csv.reader(io.StringIO(body)), start=2):
            if not any(field.strip() for field in row):
                continue
            if len(row) <= max(at):
                raise WorkloadError(f"{path}: line {n} has {len(row)} fields, the header {len(header)}") from None
            rows.append(_row(dict(zip(("src", "dst", "bytes"), (row[i] for i in at))), f"{path}: line {n}"))
        return rows
    if table.shape[0] == 0:
        return []
    return _demands(table[:, 0], table[:, 1], table[:, 2], path)


def _demands(src: ArrayLike, dst: ArrayLike, size: ArrayLike, path: Path) -> Demands:
    try:
        return Demands(np.asarray(src), np.asarray(dst), np.asarray(size), name=path.name)
    except WorkloadError as exc:
        raise WorkloadError(f"demand file {str(path)!r}: {exc}") from None


def read_demands(path: str | Path) -> Demands:
    """Read demands from a ``.csv`` (header ``src,dst,bytes``) or ``.json`` file.

    A JSON file holds a list of ``{"src": .., "dst": .., "bytes": ..}`` objects, or an object
    with such a list under ``"demands"``.

    Raises
    ------
    WorkloadError
        If the file is missing, unreadable, or a row is malformed (the message names the line).
    """
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"demand file {str(path)!r} " + ("is a directory" if path.is_dir() else "does not exist"))
    try:
        return _read(path)
    except OSError as exc:
        raise WorkloadError(f"cannot read demand file {str(path)!r}: {exc.strerror or exc}") from None


def _read(path: Path) -> Demands:
    rows = []
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise WorkloadError(f"demand file {str(path)!r} is not valid JSON: {exc}") from None
        if isinstance(data, dict):
            data = data.get("demands")
        if not isinstance(data, list):
            raise WorkloadError(f"demand file {str(path)!r}: expected a list of {{src, dst, bytes}} objects")
        for i, item in enumerate(data):
            if not isinstance(item, dict):
                raise WorkloadError(f"{path}: entry {i} is not an object")
            rows.append(_row(item, f"{path}: entry {i}"))
    else:
        try:
            with path.open(newline="", encoding="utf-8-sig") as fh:  # a byte-order mark, as Excel writes
                fast = _read_csv(fh, path)
        except UnicodeDecodeError:
            raise WorkloadError(f"demand file {str(path)!r} is not UTF-8 text") from None
        if isinstance(fast, Demands):
            return fast
        rows = fast
    if not rows:
        raise WorkloadError(f"demand file {str(path)!r} has no demands")
    src, dst, size = zip(*rows)
    return _demands(src, dst, size, path)


def write_demands(demands: Demands, path: str | Path) -> None:
    """Write demands as CSV with the header ``src,dst,bytes``."""
    with Path(path).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["src", "dst", "bytes"])
        w.writerows(demands.to_rows())
