"""Seed 000/002 experiments on Blue Gene/Q-like tori: predicted and simulated times per method.

The time a study reports (``time_s``, and ``throughput_GBps`` from it) is the flow-level
simulation that matches how each plan is carried: default routing is the hardware's, whose
links serve packets of the competing flows fairly (max-min fair, ``sharing="equal"``);
an optiq plan is carried by the executor, whose links serve the path that is least far
along, so its paths share links in proportion to their bytes and end together, which is
the plan's prediction (``sharing="proportional"``). Every plan is forwarded (legs of the
network's own routes), so its realized time (``realized_s``, every leg routed by the
machine's dimension order) is its prediction; the rows say so (``routing``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..planner import compare_methods, make_candidates, make_plan, planner_named
from ..sim import simulate_chunks, simulate_direct, simulate_flows
from ..topology import from_spec
from ..workloads import Demands, constant_ratio, destination_sweep, distance_sweep, random_pairing, random_sizes
from .figures import LABELS, bytes_label, methods_plot, set_title
from .registry import register

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from ..topology import Topology

PAPER_METHODS = ("default", "heu1", "heu2", "opt")


def _on(rows: list[dict]) -> str:
    """The machines the rows ran on, for a title."""
    return ", ".join(dict.fromkeys(r["topology"] for r in rows))


def _count(rows: list[dict], column: str, noun: str) -> str:
    n = len({r[column] for r in rows})
    return f"{n} {noun}" + ("" if n == 1 else "s")


@register("constant-ratio", "Disjoint 1:8, 8 MiB per pair: throughput by machine size and method",
          methods_plot("nodes", "throughput_GBps", PAPER_METHODS, log=True,
                       title=lambda rows: f"Disjoint 1:8, {bytes_label(rows[0]['pair_bytes'])} per pair"))
def constant_ratio_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    sizes = [512] if quick else [512, 1024, 2048, 4096, 8192]
    rows = []
    for nodes in sizes:
        topo = from_spec(f"bgq:{nodes}")
        demands = constant_ratio(nodes, "disjoint", nbytes=2**20 if quick else 8 * 2**20)
        cands = make_candidates(topo, demands, 8 if quick else 16)
        for method in PAPER_METHODS:
            say(f"{nodes} nodes, {method}")
            plan = make_plan(topo, demands, planner_named(method, time_limit=120)[0], candidates=cands)
            rows.append({"nodes": nodes, "pair_bytes": int(demands.nbytes[0]), **_times(plan)})
    return rows


def _times(plan) -> dict:
    """Method, predicted and simulated time, throughput, paths and bound of ``plan`` (see the module docstring)."""
    t = simulate_flows(plan).completion_time_s if plan.method == "default" else plan.predicted_time_s
    return {"method": plan.method, "topology": plan.topology.name, "routing": plan.routing, "predicted_s": plan.predicted_time_s,
            "realized_s": plan.realized_time_s, "time_s": t, "throughput_GBps": plan.demands.total_bytes / t / 1e9,
            "paths": plan.paths.num_paths, "bound_s": plan.lower_bound_time_s}


@register("maxload", "Heuristic 1: completion time over the lower bound as maxload grows",
          methods_plot("maxload", "time_over_bound", ("heu1",), log=True,
                       title=lambda rows: f"Heuristic 1 on {_on(rows)}, disjoint 1:8"))
def maxload_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    topo = from_spec("torus:4x4x4x2" if quick else "bgq:1024")
    demands = constant_ratio(topo.num_endpoints, "disjoint")
    cands = make_candidates(topo, demands, 16)
    rows = []
    for maxload in ([1, 2, 4, 8, 16] if quick else [1, 2, 4, 8, 12, 16, 24, 32]):
        say(f"maxload {maxload}")
        plan = make_plan(topo, demands, "heu1", candidates=cands, maxload=maxload)
        rows.append({"maxload": maxload, "method": "heu1", "topology": topo.name, "time_over_bound": plan.predicted_time_s /
                     plan.lower_bound_time_s, "paths": plan.paths.num_paths})
    return rows


def _chunk_plot(rows, ax):
    for size in sorted({r["message_bytes"] for r in rows}):
        pts = [(r["chunk_bytes"], r["efficiency"]) for r in rows if r["message_bytes"] == size]
        ax.plot(*zip(*pts), marker="o", label=f"message {bytes_label(size)}")
    ax.set_xscale("log", base=2)
    chunks = sorted({r["chunk_bytes"] for r in rows})
    ax.set_xticks(chunks, [bytes_label(c) for c in chunks])
    ax.minorticks_off()
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(LABELS["chunk_bytes"])
    ax.set_ylabel(LABELS["efficiency"])
    set_title(ax, "One 4-hop path, chunk-level model: fraction of the link rate (time at the link rate over "
                  "the simulated time) by chunk size")
    ax.legend(fontsize=8)


@register("chunk-size", "One 4-hop path, chunk-level model: link-rate efficiency by chunk size and message size",
          _chunk_plot)
def chunk_size_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    topo = from_spec("mesh:5,bw=1.8GB/s")
    chunks = [4096, 65536, 1 << 20] if quick else [4096, 16384, 65536, 262144, 1 << 20]
    sizes = [8192, 1 << 20] if quick else [8192, 65536, 1 << 20, 8 << 20]
    rows = []
    for size in sizes:
        plan = make_plan(topo, Demands(np.array([0]), np.array([4]), np.array([size])), "default")
        for chunk in chunks:
            t = simulate_chunks(plan, chunk_size=chunk).completion_time_s
            rows.append({"message_bytes": size, "chunk_bytes": chunk, "method": f"{size} B",
                         "time_s": t, "efficiency": size / 1.8e9 / t})
    return rows


@register("crossover", "Disjoint 1:8 by message size: optimised multipath (chunk model) vs default routing",
          methods_plot("message_bytes", "throughput_GBps", ("default", "opt"), log=True,
                       title=lambda rows: f"Disjoint 1:8 on {_on(rows)}, opt by the chunk model"))
def crossover_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    topo = from_spec("torus:4x4x4x2" if quick else "bgq:512")
    rows = []
    sizes = [4096, 65536, 1 << 20] if quick else [4096, 16384, 65536, 262144, 1 << 20, 8 << 20]
    for size in sizes:
        demands = constant_ratio(topo.num_endpoints, "disjoint", nbytes=size)
        for method in ("default", "opt"):
            say(f"{size} B, {method}")
            plan = make_plan(topo, demands, method, chunk_size=max(4096, min(65536, size // 8)))
            if method == "default":  # MPI's direct transfer: cut-through packets, no copies
                t = simulate_direct(plan)
            else:
                t = simulate_chunks(plan).completion_time_s
            rows.append({"message_bytes": size, "method": method, "topology": topo.name, "time_s": t,
                         "throughput_GBps": demands.total_bytes / t / 1e9})
    return rows



def method_rows(topo: Topology, demands: Demands, x_name: str, x: Any, *, k: int = 16,
                methods: Sequence[str] = PAPER_METHODS, **extra: Any) -> list[dict]:
    """One row of times per method at study point ``x_name = x`` (:func:`optiq.planner.compare_methods`),
    with the ``extra`` columns."""
    return [{x_name: x, **extra, **_times(run.plan)}
            for run in compare_methods(topo, demands, methods, dict(k=k, time_limit=120))]


def _small_or_bgq(quick: bool):
    return from_spec("torus:4x4x4x2" if quick else "bgq:1024")


@register("distance", "Sources fixed, destination block moved away: throughput by position",
          methods_plot("position", "throughput_GBps", PAPER_METHODS,
                       title=lambda rows: f"{_on(rows)}, destination block moved away"))
def distance_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    topo = from_spec("torus:4x4x4x2" if quick else "bgq:2048")  # the paper: 2,048 nodes, positions 1-4
    P = topo.num_endpoints
    rows = []
    for position in range(1, 4 if quick else 5):
        say(f"position {position}")
        rows += method_rows(topo, distance_sweep(P, position, nbytes=2**20 if quick else 8 * 2**20),
                                 "position", position, k=8 if quick else 16)
    return rows


@register("destination-size", "64 sources, more destinations per source: throughput by destinations",
          methods_plot("per_source", "throughput_GBps", PAPER_METHODS, log=True,
                       title=lambda rows: f"{_on(rows)}, {rows[0]['sources']} sources"))
def destination_size_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    topo = _small_or_bgq(quick)
    sources = 8 if quick else 64
    rows = []
    for per_source in ([1, 2, 4] if quick else [1, 2, 4, 8]):
        say(f"{per_source} destinations per source")
        rows += method_rows(topo, destination_sweep(topo.num_endpoints, per_source, num_sources=sources,
                                                         nbytes=2**20 if quick else 8 * 2**20),
                                 "per_source", per_source, k=8 if quick else 16, sources=sources)
    return rows


@register("random-pairing", "Disjoint 1:8 with random pairings: throughput by seed",
          methods_plot("seed", "throughput_GBps", PAPER_METHODS,
                       title=lambda rows: f"{_on(rows)}, disjoint 1:8 randomly paired "
                                          f"({_count(rows, 'seed', 'seed')})"))
def random_pairing_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    topo = from_spec("torus:4x4x4x2" if quick else "bgq:512")  # the paper: 512 nodes, 32 sources to 256
    base = constant_ratio(topo.num_endpoints, "disjoint", nbytes=2**20 if quick else 8 * 2**20)
    rows = []
    for seed in range(2 if quick else 5):
        say(f"pairing seed {seed}")
        rows += method_rows(topo, random_pairing(base, seed=seed), "seed", seed, k=8 if quick else 16)
    return rows


@register("num-paths", "Fixed candidate paths per pair: LP and Heuristic 2 over the lower bound",
          methods_plot("k", "time_over_bound", ("lp", "heu2"), log=True,
                       title=lambda rows: f"{_on(rows)}, disjoint 1:8"))
def num_paths_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    topo = _small_or_bgq(quick)
    demands = constant_ratio(topo.num_endpoints, "disjoint")
    rows = []
    for k in ([2, 4, 8] if quick else [4, 8, 16, 32, 50]):
        say(f"k = {k}")
        cands = make_candidates(topo, demands, k)
        for method in ("lp", "heu2"):
            plan = make_plan(topo, demands, method, candidates=cands)
            rows.append({"k": k, "method": method, "topology": topo.name, "time_over_bound": plan.predicted_time_s /
                         plan.lower_bound_time_s, "paths": plan.paths.num_paths})
    return rows


@register("random-sizes", "Disjoint 1:8 with sizes drawn from 64 KB to 8 MB (seed 002): throughput by seed",
          methods_plot("seed", "throughput_GBps", PAPER_METHODS,
                       title=lambda rows: f"{_on(rows)}, disjoint 1:8, sizes from 64 KiB to 8 MiB "
                                          f"({_count(rows, 'seed', 'seed')})"))
def random_sizes_study(quick: bool, say: Callable[[str], None]) -> list[dict]:
    topo = _small_or_bgq(quick)
    base = constant_ratio(topo.num_endpoints, "disjoint")
    rows = []
    for seed in range(1 if quick else 3):
        say(f"sizes seed {seed}")
        rows += method_rows(topo, random_sizes(base, 64 * 1024, 8 * 2**20, seed=seed), "seed", seed,
                                 k=8 if quick else 16)
    return rows
