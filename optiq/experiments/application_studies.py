"""The application experiments of the OPTIQ thesis (seed 003): HACC aggregation and CESM coupling."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..topology import from_spec
from ..workloads import cesm_coupling, hacc_aggregation
from ..workloads.applications import CESM_MODELS
from .figures import bytes_label, method_bars, methods_plot, set_title
from .registry import register
from .studies import PAPER_METHODS, method_rows

if TYPE_CHECKING:
    from collections.abc import Callable


@register("hacc", "HACC-like aggregation, 6 MB per node to 1 bridge node per 64: throughput by nodes",
          methods_plot("nodes", "throughput_GBps", PAPER_METHODS, log=True,
                       title=lambda rows: f"HACC-like aggregation, {rows[0]['node_bytes'] / 1e6:g} MB per node to one "
                                          f"bridge node per 64"))
def hacc_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    rows = []
    for nodes in ([128] if quick else [512, 1024, 2048]):
        say(f"{nodes} nodes")
        per_node = 10**6 if quick else 6 * 10**6
        demands = hacc_aggregation(nodes, nbytes=per_node)
        rows += method_rows(from_spec(f"bgq:{nodes}"), demands, "nodes", nodes, k=8 if quick else 16,
                            node_bytes=per_node)
    return rows


def _coupling_plot(rows, ax):
    method_bars(rows, ax, "coupling", "throughput_GBps", PAPER_METHODS)
    set_title(ax, f"CESM-like model-to-coupler exchanges on {rows[0]['topology']}, "
                  f"{bytes_label(rows[0]['node_bytes'])} per node: throughput by coupling")


@register("cesm", "CESM-like model-to-coupler exchanges on 512 nodes, 2 MiB per node: throughput by coupling",
          _coupling_plot)
def cesm_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    nodes, per_node = (32, 2**18) if quick else (512, 2 * 2**20)
    topo = from_spec(f"bgq:{nodes}")
    rows = []
    for model in CESM_MODELS:
        say(f"CPL-{model}")
        demands = cesm_coupling(nodes, model, nbytes=per_node)
        for row in method_rows(topo, demands, "coupling", f"CPL-{model}", k=8 if quick else 16):
            rows.append({**row, "jobs": demands.num_jobs, "node_bytes": per_node})
    return rows
