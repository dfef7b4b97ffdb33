"""The run report: what ``optiq run --json`` writes (the runtime) and ``fit-chunk`` reads (the simulator).

One schema for both sides: :data:`REPORT_KEYS` are the top-level keys of every report, and
:func:`read_run_record` reads the part a fit needs, checking types, from a report file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from ..errors import PlanError

__all__ = ["REPORT_KEYS", "TIMING_KEYS", "RunRecord", "read_run_record"]

#: Keys of one timing (the plan's at the top level, the baseline's under ``baseline``).
TIMING_KEYS = ("bytes_total", "elapsed_s", "elapsed_min_s", "elapsed_median_s", "throughput_Bps", "times_s",
               "verified", "mismatches")
#: Top-level keys of a run report, in the order they are written.
REPORT_KEYS = ("method", "topology", "plan_fingerprint", "ranks", "jobs", "paths", "chunk_size", "window",
               "link_bw_Bps", "repeats", "warmup", *TIMING_KEYS, "predicted_time_s", "predicted_at",
               "measured_over_predicted", "chunks_forwarded", "messages", "buffer_bytes_max", "baseline")


@dataclass(frozen=True)
class RunRecord:
    """One measured run as a chunk-model fit needs it: chunk size, emulated link rate (None:
    unpaced), median time, and which plan it replayed (its fingerprint, if known).

    Raises
    ------
    PlanError
        For a chunk size below 1 or a time that is not positive.
    """

    chunk_size: int
    link_bw_Bps: float | None
    elapsed_s: float
    plan_fingerprint: str | None = None

    def __post_init__(self) -> None:
        if self.chunk_size < 1 or not self.elapsed_s > 0:
            raise PlanError(f"a run needs a positive chunk size and time, got {self}")


def read_run_record(path: str | Path) -> RunRecord:
    """Read a run report written by ``optiq run --json``.

    Raises
    ------
    PlanError
        If the file cannot be read, is not JSON, or lacks a key of the schema or has one of
        the wrong type, naming the file and the key.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "r.json"
    >>> _ = f.write_text('{"plan_fingerprint": "ab", "chunk_size": 4096, "link_bw_Bps": null, "elapsed_s": 0.5}')
    >>> read_run_record(f)
    RunRecord(chunk_size=4096, link_bw_Bps=None, elapsed_s=0.5, plan_fingerprint='ab')
    """
    name = str(path)
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise PlanError(f"{name!r} is not an optiq run report (optiq run --json): {exc}") from None
    if not isinstance(data, dict):
        raise PlanError(f"{name!r} is not an optiq run report (optiq run --json): not a JSON object")

    def number(key: str) -> float:
        if key not in data:
            raise PlanError(f"{name!r} is not an optiq run report (optiq run --json): no {key!r}")
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise PlanError(f"run report {name!r}: {key!r} is {value!r}, not a positive number")
        return float(value)

    chunk = number("chunk_size")
    if chunk != int(chunk):
        raise PlanError(f"run report {name!r}: 'chunk_size' is {data['chunk_size']!r}, not a whole number of bytes")
    fingerprint = data.get("plan_fingerprint")
    return RunRecord(plan_fingerprint=fingerprint if isinstance(fingerprint, str) else None, chunk_size=int(chunk),
                     link_bw_Bps=None if data.get("link_bw_Bps", 0) is None else number("link_bw_Bps"),
                     elapsed_s=number("elapsed_s"))
