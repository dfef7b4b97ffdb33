"""Plain-text tables of plan metrics, laid out like the OPTIQ evaluation table, and of a plan's
busiest links and jobs by host and switch names."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..utils.units import format_bytes, format_seconds, time_unit

if TYPE_CHECKING:
    from typing import Any

    from ..plan import Plan
    from .compute import Metrics

__all__ = ["metrics_table", "links_table", "jobs_table", "named_loads", "workload_line"]

_MB = 1e6
#: The columns of times (seconds in the cells).
_TIMES = ("time", "real", "fair")
#: (header, what it shows, cell, shown without ``wide``)
#: The cells of the time columns are seconds (or None), shown in one unit per table.
_COLUMNS: list[tuple[str, str, Callable[[Metrics], str | float | None], bool]] = [
    ("method", "method", lambda m: m.method, True),
    ("routing", "forwarded: legs of the network's routes; free: routed as planned", lambda m: routing_label(m), True),
    ("GB/s", "predicted throughput", lambda m: f"{m.throughput_Bps / 1e9:.2f}", True),
    ("time", "predicted completion time", lambda m: m.predicted_time_s, True),
    ("real", "completion time with every leg on the network's own route", lambda m: m.realized_time_s, True),
    ("fair", "completion time when links share max-min fairly", lambda m: m.fair_time_s, True),
    ("/cut", "time over the workload's cut bound", lambda m: f"{m.predicted_time_s / m.cut_bound_s:.3f}"
     if m.cut_bound_s > 0 else "-", True),
    ("/default", "time over the default routes' time", lambda m: f"{m.predicted_time_s / m.default_time_s:.3f}"
     if m.default_time_s > 0 else "-", True),
    ("paths", "total paths", lambda m: f"{m.total_paths:,}", True),
    ("p/job max", "", lambda m: f"{m.paths_per_job_max}", False),
    ("p/job avg", "", lambda m: f"{m.paths_per_job_avg:.2f}", True),
    ("hopMB max", "hop-bytes per path, MB", lambda m: f"{m.hopbytes_per_path_max / _MB:.2f}", False),
    ("hopMB avg", "", lambda m: f"{m.hopbytes_per_path_avg / _MB:.2f}", False),
    ("copies max", "chunk copies per path", lambda m: f"{m.copies_per_path_max}", False),
    ("copies avg", "", lambda m: f"{m.copies_per_path_avg:.2f}", False),
    ("p/link max", "paths per link", lambda m: f"{m.paths_per_link_max}", False),
    ("p/link avg", "", lambda m: f"{m.paths_per_link_avg:.2f}", False),
    ("MB/link max", "data per link, MB", lambda m: f"{m.bytes_per_link_max / _MB:.2f}", False),
    ("MB/link avg", "", lambda m: f"{m.bytes_per_link_avg / _MB:.2f}", False),
]


def metrics_table(rows: list[Metrics], extra: dict[str, list[str]] | None = None, *, wide: bool = False) -> str:
    """Format metrics side by side, one row per plan (MB = 10**6 bytes, as in the paper).

    The columns most read (times, the bound, the default routes, paths) fit a terminal of
    100 characters; ``wide`` adds those of the OPTIQ evaluation table (hop-bytes, copies,
    paths and bytes per link). ``extra`` adds columns (header -> one cell per row), e.g.
    planning time. Times are in one unit per table, the slowest plan's
    (:func:`optiq.utils.units.time_unit`). ``/cut`` divides by the workload's cut bound, one bound for every row and
    in every command; a footer gives it, and the tighter bounds proven for some rows' kind
    of plan (``Metrics.lower_bound_time_s``), naming the rows.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> from optiq.planner import make_plan
    >>> from optiq.metrics import plan_metrics
    >>> m = plan_metrics(make_plan(torus((4, 4), bandwidth=1e9), Demands([0], [5], [2**20]), "default"))
    >>> print(metrics_table([m]))
    method   routing         GB/s  time ms  real ms  fair ms   /cut  /default  paths  p/job avg
    -------  --------------  ----  -------  -------  -------  -----  --------  -----  ---------
    default  network routes  1.00    1.049    1.049    1.049  4.000     1.000      1       1.00
    cut bound on the completion time: 0.262 ms (throughput at most 4.00 GB/s)
    real: every leg on its network route; fair: links shared max-min fairly; /cut: over the cut bound
    /default: over the default row; network routes: the network's own
    forwarded: chains of them between the ranks a path stops at; free: routed as planned
    """
    columns = [c for c in _COLUMNS if wide or c[3]]
    unit, scale = time_unit(max((m.predicted_time_s for m in rows), default=0.0))

    def cell(value: str | float | None) -> str:
        if value is None:
            return "-"
        return value if isinstance(value, str) else f"{value / scale:.3f}"

    headers = [f"{h} {unit}" if h in _TIMES else h for h, _, _, _ in columns] + list(extra or {})
    cells = [[cell(f(m)) for _, _, f, _ in columns] + [col[i] for col in (extra or {}).values()]
             for i, m in enumerate(rows)]
    widths = [max(len(h), *(len(r[c]) for r in cells)) for c, h in enumerate(headers)]

    def line(vals: list[str]) -> str:
        return "  ".join(v.ljust(w) if c < 2 else v.rjust(w) for c, (v, w) in enumerate(zip(vals, widths)))

    out = [line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells]
    out.extend(_bound_lines(rows))
    out.extend(_legend_lines(rows, [h for h, _, _, _ in columns]))
    return "\n".join(out)


def routing_label(m: Metrics) -> str:
    """The routing cell of a row: ``network routes`` (``ecmp`` where the network hashes) for the
    default row, else the plan's routing.

    Examples
    --------
    >>> from types import SimpleNamespace as row
    >>> [routing_label(row(method=m, routing=r, predicted_p05_s=None)) for m, r in (("default", "forwarded"),
    ...                                                                              ("opt", "free"))]
    ['network routes', 'free']
    """
    if m.method == "default" and m.routing == "forwarded":
        return "ecmp" if m.predicted_p05_s is not None else "network routes"
    return m.routing


def _legend_lines(rows: list[Metrics], headers: list[str]) -> list[str]:
    """What the columns mean, in one line, and on an ECMP network what its rows are."""
    words = {"real": "every leg on its network route", "fair": "links shared max-min fairly",
             "/cut": "over the cut bound", "/default": "over the default row"}
    parts = [f"{h}: {w}" for h, w in words.items() if h in headers]
    parts += ["network routes: the network's own", "forwarded: chains of them between the ranks a path stops at",
              "free: routed as planned"]
    spread = next((m for m in rows if m.predicted_p05_s is not None), None)
    if spread is not None:
        parts += [f"ECMP: the default row is the mean over hash draws (5%: {format_seconds(spread.predicted_p05_s or 0)}"
                  f", 95%: {format_seconds(spread.predicted_p95_s or 0)})", "real with every leg hashed, the mean"]
    lines = [""]
    for part in parts:  # as many as fit in 100 columns a line
        if lines[-1] and len(lines[-1]) + 2 + len(part) > 100:
            lines.append("")
        lines[-1] += ("; " if lines[-1] else "") + part
    return lines


#: What a tighter bound bounds, by the routing of the rows it was proven for.
_BOUND_KINDS = {"forwarded": "forwarded plans", "free": "every plan", "tables": "tables of one LID per port"}


def workload_line(topology_name: str, demands: Any) -> str:
    """The one line every command prints above a workload's table: network, workload, pairs, bytes.

    Examples
    --------
    >>> from optiq.workloads import constant_ratio
    >>> workload_line("torus 4x4", constant_ratio(16, nbytes=2**40, num_sources=2, ratio=4))
    'torus 4x4, disjoint 2x4 on 16: 8 pairs, 8 TiB in all'
    """
    return (f"{topology_name}, {demands.name}: {demands.num_jobs:,} pair{'s' if demands.num_jobs != 1 else ''}, "
            f"{format_bytes(demands.total_bytes)} in all")


def _bound_lines(rows: list[Metrics]) -> list[str]:
    """The cut bound, then each tighter bound proven for some rows, with the rows it bounds."""
    cuts = sorted({m.cut_bound_s for m in rows if m.cut_bound_s > 0})
    if not cuts:
        return []
    cut = cuts[-1]
    lines = [f"cut bound on the completion time: {format_seconds(cut)} (throughput at most "
             f"{rows[0].total_bytes / cut / 1e9:.2f} GB/s)"]
    tighter: dict[tuple[str, float], list[Metrics]] = {}
    for m in rows:
        if m.lower_bound_time_s > cut * (1 + 1e-9):
            tighter.setdefault((m.routing, m.lower_bound_time_s), []).append(m)
    for (routing, bound), bounded in sorted(tighter.items(), key=lambda kv: kv[0][1]):
        ratios = ", ".join(f"{m.method} {m.predicted_time_s / bound:.3f}" for m in bounded)
        lines.append(f"proven for {_BOUND_KINDS.get(routing, routing + ' plans')}: {format_seconds(bound)} "
                     f"(time over it: {ratios})")
    return lines


def _table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """Columns of text, the first ``left`` aligned left, the others right."""
    widths = [max(len(h), *(len(r[c]) for r in rows)) if rows else len(h) for c, h in enumerate(headers)]

    def line(vals: list[str]) -> str:
        return "  ".join(v.ljust(w) if c < left else v.rjust(w) for c, (v, w) in enumerate(zip(vals, widths)))

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def links_table(plan: Plan, count: int) -> str:
    """The ``count`` busiest links of a plan (by time: bytes over capacity), named.

    Examples
    --------
    >>> from optiq import from_spec, make_plan, Demands
    >>> plan = make_plan(from_spec("cluster:hosts=4,edges=2,cores=1"), Demands([0], [3], [10**6]), "default")
    >>> print(links_table(plan, 1))
    link        MB  paths  time ms
    --------  ----  -----  -------
    H0 -> S0  1.00      1    0.800
    """
    topo = plan.topology
    loads = plan.link_bytes
    paths = np.bincount(plan.paths.links, minlength=topo.num_links)
    busiest = np.argsort(-(loads / topo.capacity), kind="stable")[:count]
    rows = [[topo.link_label(e), f"{loads[e] / 1e6:.2f}", f"{paths[e]:,}", f"{loads[e] / topo.capacity[e] * 1e3:.3f}"]
            for e in busiest if loads[e] > 0]
    return _table(["link", "MB", "paths", "time ms"], rows)


def jobs_table(plan: Plan, count: int) -> str:
    """The ``count`` largest jobs of a plan by host name: bytes, paths and their hops.

    Examples
    --------
    >>> from optiq import from_spec, make_plan, Demands
    >>> plan = make_plan(from_spec("torus:4x4"), Demands([0], [5], [2**20]), "default")
    >>> print(jobs_table(plan, 5))
    source  destination    MB  paths  hops
    ------  -----------  ----  -----  ----
    H0      H5           1.05      1     2
    """
    topo, dem, ps = plan.topology, plan.demands, plan.paths
    per_job = ps.paths_per_job
    hops = ps.hops
    lo = np.full(dem.num_jobs, np.iinfo(np.int64).max)
    hi = np.zeros(dem.num_jobs, dtype=np.int64)
    np.minimum.at(lo, ps.job, hops)
    np.maximum.at(hi, ps.job, hops)
    order = np.argsort(-dem.nbytes, kind="stable")[:count]
    names = topo.endpoint_names
    rows = [[names[dem.src[j]], names[dem.dst[j]], f"{dem.nbytes[j] / 1e6:.2f}", f"{per_job[j]}",
             f"{lo[j]}" if lo[j] == hi[j] else f"{lo[j]}-{hi[j]}"] for j in order]
    return _table(["source", "destination", "MB", "paths", "hops"], rows, left=2)


def named_loads(plan: Plan, links: int, jobs: int) -> dict[str, list[dict[str, Any]]]:
    """The ``links`` busiest links and ``jobs`` largest jobs of a plan by name, as JSON-ready
    dicts (``optiq eval --json --links N --jobs N``).

    Examples
    --------
    >>> from optiq import from_spec, make_plan, Demands
    >>> plan = make_plan(from_spec("cluster:hosts=4,edges=2,cores=1"), Demands([0], [3], [10**6]), "default")
    >>> named_loads(plan, 1, 1)["largest_jobs"]
    [{'job': 0, 'src': 'H0', 'dst': 'H3', 'bytes': 1000000}]
    """
    topo, dem = plan.topology, plan.demands
    loads = plan.link_bytes
    busiest = np.argsort(-(loads / topo.capacity), kind="stable")[:links]
    largest = np.argsort(-dem.nbytes, kind="stable")[:jobs]
    names = topo.endpoint_names
    return {"busiest_links": [{"link": int(e), "name": topo.link_label(e), "bytes": float(loads[e]),
                               "time_s": float(loads[e] / topo.capacity[e])} for e in busiest if loads[e] > 0],
            "largest_jobs": [{"job": int(j), "src": names[dem.src[j]], "dst": names[dem.dst[j]],
                              "bytes": int(dem.nbytes[j])} for j in largest]}
