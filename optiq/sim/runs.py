"""The run report: what ``optiq run --json`` writes (the runtime) and ``fit-chunk`` reads (the simulator).

One type for both sides. :class:`RunReport` is what :func:`optiq.runtime.measure` returns;
:meth:`RunReport.to_dict` writes it with the top-level keys :data:`REPORT_KEYS`, and
:func:`read_run_report` reads such a file back into the same type, checking every key.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PlanError

__all__ = ["REPORT_KEYS", "TIMING_KEYS", "Timing", "RunReport", "read_run_report"]

#: Keys of one timing (the plan's at the top level, the baseline's under ``baseline``).
TIMING_KEYS = ("bytes_total", "elapsed_s", "elapsed_min_s", "elapsed_median_s", "throughput_Bps", "times_s",
               "verified", "mismatches")
#: Top-level keys of a run report, in the order they are written.
REPORT_KEYS = ("method", "topology", "plan_fingerprint", "ranks", "jobs", "paths", "chunk_size", "window",
               "link_bw_Bps", "repeats", "warmup", *TIMING_KEYS, "predicted_time_s", "predicted_at",
               "measured_over_predicted", "chunks_forwarded", "messages", "buffer_bytes_max", "baseline")


@dataclass(frozen=True)
class Timing:
    """Completion times of repeated runs (each the slowest rank's) and their check.

    Attributes
    ----------
    name : str
    times_s : tuple of float
        One per measured repeat (warm-up excluded).
    bytes_total : int
    verified : bool or None
        Whether every byte matched on every rank in every repeat; ``None`` if not checked.
    mismatches : tuple of str
        Messages naming job and offset of wrong bytes (rank-prefixed), if any.

    Raises
    ------
    PlanError
        Without a time, or with a negative one.
    """

    name: str
    times_s: tuple[float, ...]
    bytes_total: int
    verified: bool | None
    mismatches: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "times_s", tuple(float(t) for t in self.times_s))
        object.__setattr__(self, "mismatches", tuple(self.mismatches))
        if not self.times_s or not all(t >= 0 for t in self.times_s):
            raise PlanError(f"timing {self.name!r} needs times of 0 s or more, got {list(self.times_s)}")

    @property
    def min_s(self) -> float:
        return float(np.min(self.times_s))

    @property
    def median_s(self) -> float:
        return float(np.median(self.times_s))

    @property
    def throughput_Bps(self) -> float:
        """Bytes over the median time."""
        return self.bytes_total / self.median_s if self.median_s > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {"bytes_total": self.bytes_total, "elapsed_s": self.median_s, "elapsed_min_s": self.min_s,
                "elapsed_median_s": self.median_s, "throughput_Bps": self.throughput_Bps,
                "times_s": list(self.times_s), "verified": self.verified, "mismatches": list(self.mismatches)}


@dataclass(frozen=True)
class RunReport:
    """Everything ``optiq run`` measured; :meth:`to_dict` is the ``--json`` contract and
    ``str()`` the table it prints.

    The top-level ``bytes_total``, ``elapsed_s`` (median), ``elapsed_min_s``,
    ``elapsed_median_s``, ``throughput_Bps`` and ``verified`` are the plan's; the baseline,
    when run, has the same keys under ``baseline``.

    Raises
    ------
    PlanError
        For a chunk size below 1.
    """

    method: str
    topology: str
    plan_fingerprint: str
    ranks: int
    jobs: int
    paths: int
    chunk_size: int
    window: int
    link_bw_Bps: float | None
    predicted_time_s: float
    predicted_at: str
    repeats: int
    warmup: int
    plan: Timing = field(repr=False)
    baseline: Timing | None = field(repr=False)
    chunks_forwarded: int
    buffer_bytes_max: int
    messages: int

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise PlanError(f"a run needs a chunk size of at least 1 byte, got {self.chunk_size}")

    @property
    def elapsed_s(self) -> float:
        """The plan's median time."""
        return self.plan.median_s

    @property
    def measured_over_predicted(self) -> float:
        return self.plan.median_s / self.predicted_time_s if self.predicted_time_s > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        """The report with the keys :data:`REPORT_KEYS`, in that order."""
        out: dict[str, Any] = {"method": self.method, "topology": self.topology,
                               "plan_fingerprint": self.plan_fingerprint, "ranks": self.ranks, "jobs": self.jobs,
                               "paths": self.paths, "chunk_size": self.chunk_size, "window": self.window,
                               "link_bw_Bps": self.link_bw_Bps, "repeats": self.repeats, "warmup": self.warmup}
        out.update(self.plan.to_dict())
        out.update({"predicted_time_s": self.predicted_time_s, "predicted_at": self.predicted_at,
                    "measured_over_predicted": self.measured_over_predicted,
                    "chunks_forwarded": self.chunks_forwarded, "messages": self.messages,
                    "buffer_bytes_max": self.buffer_bytes_max,
                    "baseline": None if self.baseline is None else {"name": self.baseline.name,
                                                                    **self.baseline.to_dict()}})
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str = "run report") -> RunReport:
        """The report :meth:`to_dict` wrote, every key checked.

        Raises
        ------
        PlanError
            Naming ``source`` and the key that is missing or of the wrong type, or whose
            summary (``elapsed_s``) disagrees with the times it summarises.
        """
        where = f"{source} (optiq run --json)"
        if not isinstance(data, dict):
            raise PlanError(f"{where} is not a JSON object")
        reader = _Keys(data, where)
        plan = reader.timing(f"optiq {reader.text('method')}")
        raw_baseline = reader.get("baseline")
        if raw_baseline is not None and not isinstance(raw_baseline, dict):
            raise PlanError(f"{where}: 'baseline' is {raw_baseline!r}, not an object or null")
        baseline = None
        if raw_baseline is not None:
            inner = _Keys(raw_baseline, f"{where}, baseline")
            baseline = inner.timing(inner.text("name"))
        return cls(method=reader.text("method"), topology=reader.text("topology"),
                   plan_fingerprint=reader.text("plan_fingerprint"), ranks=reader.whole("ranks", 1),
                   jobs=reader.whole("jobs", 0), paths=reader.whole("paths", 0),
                   chunk_size=reader.whole("chunk_size", 1), window=reader.whole("window", 1),
                   link_bw_Bps=reader.positive("link_bw_Bps", optional=True),
                   predicted_time_s=reader.number("predicted_time_s"), predicted_at=reader.text("predicted_at"),
                   repeats=reader.whole("repeats", 1), warmup=reader.whole("warmup", 0), plan=plan,
                   baseline=baseline, chunks_forwarded=reader.whole("chunks_forwarded", 0),
                   buffer_bytes_max=reader.whole("buffer_bytes_max", 0), messages=reader.whole("messages", 0))

    def __str__(self) -> str:
        paced = f", links paced at {self.link_bw_Bps / 1e6:g} MB/s" if self.link_bw_Bps else ""
        lines = [f"{self.method} plan on {self.topology}: {self.ranks} ranks, {self.jobs} jobs, {self.paths} paths, "
                 f"{self.plan.bytes_total / 2**20:,.1f} MiB, chunk {self.chunk_size / 1024:g} KiB, "
                 f"window {self.window}{paced}; {self.repeats} repeat(s) after {self.warmup} warm-up",
                 f"{'':16} {'min s':>10} {'median s':>10} {'GB/s':>8}  verified"]
        timings = [t for t in (self.plan, self.baseline) if t is not None]
        for t in timings:
            check = {None: "not checked", True: "yes", False: "NO"}[t.verified]
            lines.append(f"{t.name:16} {t.min_s:10.4f} {t.median_s:10.4f} {t.throughput_Bps / 1e9:8.3f}  {check}")
        lines.append(f"{self.messages:,} MPI messages per transfer (chunks ready together on a path travel "
                     f"together), {self.chunks_forwarded:,} chunks forwarded")
        lines.append(f"predicted (flow level, {self.predicted_at}): {self.predicted_time_s:.4f} s; "
                     f"measured median / predicted = {self.measured_over_predicted:.2f}")
        if self.baseline is not None:
            unpaced = " (Alltoallv is not paced)" if self.link_bw_Bps else ""
            lines.append(f"Alltoallv median / plan median = {self.baseline.median_s / self.plan.median_s:.2f}"
                         f"{unpaced}")
        lines.extend(f"mismatch ({t.name}): {m}" for t in timings for m in t.mismatches)
        return "\n".join(lines)


class _Keys:
    """Typed access to the keys of one JSON object, each mistake named with its key."""

    def __init__(self, data: dict[str, Any], where: str) -> None:
        self.data, self.where = data, where

    def get(self, key: str) -> Any:
        if key not in self.data:
            raise PlanError(f"{self.where} has no {key!r}")
        return self.data[key]

    def _wrong(self, key: str, what: str) -> PlanError:
        return PlanError(f"{self.where}: {key!r} is {self.data[key]!r}, not {what}")

    def text(self, key: str) -> str:
        value = self.get(key)
        if not isinstance(value, str):
            raise self._wrong(key, "a string")
        return value

    def number(self, key: str) -> float:
        value = self.get(key)
        if not _finite(value):
            raise self._wrong(key, "a number")
        return float(value)

    def positive(self, key: str, optional: bool = False) -> float | None:
        if optional and self.get(key) is None:
            return None
        value = self.number(key)
        if value <= 0:
            raise self._wrong(key, "a positive number" + (" or null" if optional else ""))
        return value

    def whole(self, key: str, least: int) -> int:
        value = self.number(key)
        if value != int(value) or value < least:
            raise self._wrong(key, f"a whole number of at least {least}")
        return int(value)

    def timing(self, name: str) -> Timing:
        times = self.get("times_s")
        if not isinstance(times, list) or not times or not all(_finite(t) and t >= 0 for t in times):
            raise self._wrong("times_s", "a list of times of 0 s or more")
        verified = self.get("verified")
        if verified is not None and not isinstance(verified, bool):
            raise self._wrong("verified", "true, false or null")
        mismatches = self.get("mismatches")
        if not isinstance(mismatches, list) or not all(isinstance(m, str) for m in mismatches):
            raise self._wrong("mismatches", "a list of strings")
        timing = Timing(name, tuple(times), self.whole("bytes_total", 0), verified, tuple(mismatches))
        elapsed = self.number("elapsed_s")
        if not math.isclose(elapsed, timing.median_s, rel_tol=1e-9, abs_tol=1e-12):
            raise PlanError(f"{self.where}: 'elapsed_s' is {elapsed!r}, but the median of 'times_s' is "
                            f"{timing.median_s!r}")
        return timing


def _finite(value: Any) -> bool:
    """Whether a JSON value is a finite number (JSON integers may be too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) if isinstance(value, float) else abs(value) < 2**63


def read_run_report(path: str | Path) -> RunReport:
    """Read a run report written by ``optiq run --json``.

    Raises
    ------
    PlanError
        If the file cannot be read, is not JSON, or lacks a key of the schema or has one of
        the wrong type, naming the file and the key.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> report = RunReport(method="opt", topology="torus 2x2", plan_fingerprint="ab", ranks=4, jobs=2, paths=3,
    ...                    chunk_size=4096, window=4, link_bw_Bps=None, predicted_time_s=0.4, predicted_at="x",
    ...                    repeats=3, warmup=1, plan=Timing("optiq opt", (0.5, 0.25, 0.75), 1000, True),
    ...                    baseline=None, chunks_forwarded=0, buffer_bytes_max=0, messages=6)
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "r.json"
    >>> _ = f.write_text(json.dumps(report.to_dict()))
    >>> read_run_report(f) == report, read_run_report(f).elapsed_s
    (True, 0.5)
    """
    name = str(path)
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise PlanError(f"{name!r} is not an optiq run report (optiq run --json): {exc}") from None
    return RunReport.from_dict(data, source=f"run report {name!r}")
