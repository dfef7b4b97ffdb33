"""Demand files: CSV or JSON with ``src, dst, bytes`` (sizes may carry units, ``8MiB``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from ..errors import OptiqError, WorkloadError
from ..units import parse_size
from .demands import Demands

__all__ = ["read_demands", "write_demands"]


def _row(row: dict, where: str) -> tuple[int, int, int]:
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
        raise WorkloadError(f"demand file {str(path)!r} does not exist")
    rows = []
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text())
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
            with path.open(newline="") as fh:
                reader = csv.DictReader(fh)
                if reader.fieldnames is None or not {"src", "dst", "bytes"} <= {f.strip() for f in reader.fieldnames}:
                    raise WorkloadError(f"demand file {str(path)!r} needs a header line with src,dst,bytes")
                for line, item in enumerate(reader, start=2):
                    item = {(k or "").strip(): v for k, v in item.items()}
                    rows.append(_row(item, f"{path}: line {line}"))
        except UnicodeDecodeError:
            raise WorkloadError(f"demand file {str(path)!r} is not text") from None
    if not rows:
        raise WorkloadError(f"demand file {str(path)!r} has no demands")
    src, dst, size = zip(*rows)
    return Demands(src, dst, size, name=path.name)


def write_demands(demands: Demands, path: str | Path) -> None:
    """Write demands as CSV with the header ``src,dst,bytes``."""
    with Path(path).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["src", "dst", "bytes"])
        w.writerows(demands.to_rows())
