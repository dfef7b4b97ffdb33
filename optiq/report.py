"""Plain-text tables of plan metrics, laid out like the OPTIQ evaluation table."""

from __future__ import annotations

from .metrics import Metrics

__all__ = ["metrics_table"]

_MB = 1e6
_COLUMNS = [
    ("method", "method", lambda m: m.method),
    ("BW GB/s", "predicted throughput", lambda m: f"{m.throughput_Bps / 1e9:.2f}"),
    ("time ms", "predicted completion time", lambda m: f"{m.predicted_time_s * 1e3:.3f}"),
    ("/bound", "time over the lower bound", lambda m: f"{m.predicted_time_s / m.lower_bound_time_s:.3f}"
     if m.lower_bound_time_s > 0 else "-"),
    ("paths", "total paths", lambda m: f"{m.total_paths:,}"),
    ("p/job max", "", lambda m: f"{m.paths_per_job_max}"),
    ("p/job avg", "", lambda m: f"{m.paths_per_job_avg:.2f}"),
    ("hopMB max", "hop-bytes per path, MB", lambda m: f"{m.hopbytes_per_path_max / _MB:.2f}"),
    ("hopMB avg", "", lambda m: f"{m.hopbytes_per_path_avg / _MB:.2f}"),
    ("copies max", "chunk copies per path", lambda m: f"{m.copies_per_path_max}"),
    ("copies avg", "", lambda m: f"{m.copies_per_path_avg:.2f}"),
    ("p/link max", "paths per link", lambda m: f"{m.paths_per_link_max}"),
    ("p/link avg", "", lambda m: f"{m.paths_per_link_avg:.2f}"),
    ("MB/link max", "data per link, MB", lambda m: f"{m.bytes_per_link_max / _MB:.2f}"),
    ("MB/link avg", "", lambda m: f"{m.bytes_per_link_avg / _MB:.2f}"),
]


def metrics_table(rows: list[Metrics], extra: dict[str, list[str]] | None = None) -> str:
    """Format metrics side by side, one row per plan (MB = 10**6 bytes, as in the paper).

    ``extra`` adds columns (header -> one cell per row), e.g. planning time.
    """
    headers = [h for h, _, _ in _COLUMNS] + list(extra or {})
    cells = [[str(f(m)) for _, _, f in _COLUMNS] + [col[i] for col in (extra or {}).values()]
             for i, m in enumerate(rows)]
    widths = [max(len(h), *(len(r[c]) for r in cells)) for c, h in enumerate(headers)]
    line = lambda vals: "  ".join(v.rjust(w) if c else v.ljust(w) for c, (v, w) in enumerate(zip(vals, widths)))  # noqa: E731
    out = [line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells]
    lb = rows[0].lower_bound_time_s if rows else 0
    if lb:
        out.append(f"lower bound on the completion time: {lb * 1e3:.3f} ms "
                   f"(throughput at most {rows[0].total_bytes / lb / 1e9:.2f} GB/s)")
    return "\n".join(out)
