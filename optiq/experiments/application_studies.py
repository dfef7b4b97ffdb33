"""The application experiments of the OPTIQ thesis (seed 003): HACC aggregation and CESM coupling."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..topology import from_spec
from ..workloads import cesm_coupling, hacc_aggregation
from ..workloads.applications import CESM_MODELS
from .registry import register
from .studies import PAPER_METHODS, method_rows, methods_plot

if TYPE_CHECKING:
    from collections.abc import Callable


@register("hacc", "HACC-like aggregation, 6 MB per node to 1 bridge node per 64: throughput by nodes",
          methods_plot("nodes", "throughput_GBps", log=True))
def hacc_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    rows = []
    for nodes in ([128] if quick else [512, 1024, 2048]):
        say(f"{nodes} nodes")
        demands = hacc_aggregation(nodes, nbytes=6 * 10**6 if not quick else 10**6)
        rows += method_rows(from_spec(f"bgq:{nodes}"), demands, "nodes", nodes, k=8 if quick else 16)
    return rows


def _coupling_plot(rows, ax):
    couplings = list(dict.fromkeys(r["coupling"] for r in rows))
    x = np.arange(len(couplings))
    width = 0.8 / len(PAPER_METHODS)
    for i, method in enumerate(PAPER_METHODS):
        vals = [next(r["throughput_GBps"] for r in rows if r["coupling"] == c and r["method"] == method)
                for c in couplings]
        ax.bar(x + (i - (len(PAPER_METHODS) - 1) / 2) * width, vals, width=width, label=method)
    ax.set_xticks(x, couplings)
    ax.set_ylabel("throughput_GBps")
    ax.legend()


@register("cesm", "CESM-like model-to-coupler exchanges on 512 nodes, 2 MiB per node: throughput by coupling",
          _coupling_plot)
def cesm_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    nodes = 32 if quick else 512
    topo = from_spec(f"bgq:{nodes}")
    rows = []
    for model in CESM_MODELS:
        say(f"CPL-{model}")
        demands = cesm_coupling(nodes, model, nbytes=2**18 if quick else 2 * 2**20)
        for row in method_rows(topo, demands, "coupling", f"CPL-{model}", k=8 if quick else 16):
            rows.append({**row, "jobs": demands.num_jobs})
    return rows
