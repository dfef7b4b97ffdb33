"""Seed 000/002 experiments on Blue Gene/Q-like tori: predicted and simulated times per method."""

from __future__ import annotations

from ..planner import make_candidates, make_plan
from ..sim import simulate_chunks, simulate_flows
from ..topology import from_spec
from ..workloads import Demands, constant_ratio
from .registry import register

METHODS = ("default", "heu1", "heu2", "opt")


def _methods_plot(x: str, y: str, log: bool = False):
    def plot(rows, ax):
        for m in METHODS:
            pts = [(r[x], r[y]) for r in rows if r["method"] == m]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=m)
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        if log:
            ax.set_xscale("log", base=2)
        ax.legend()
    return plot


@register("constant-ratio", "Disjoint 1:8, 8 MiB per pair: throughput by machine size and method",
          _methods_plot("nodes", "throughput_GBps", log=True))
def constant_ratio_study(quick: bool, say) -> list[dict]:
    sizes = [512] if quick else [512, 1024, 2048, 4096, 8192]
    rows = []
    for nodes in sizes:
        topo = from_spec(f"bgq:{nodes}")
        demands = constant_ratio(nodes, "disjoint", nbytes=2**20 if quick else 8 * 2**20)
        cands = make_candidates(topo, demands, 8 if quick else 16)
        for method in METHODS:
            say(f"{nodes} nodes, {method}")
            plan = make_plan(topo, demands, method, candidates=cands, time_limit=120)
            flow = simulate_flows(plan).completion_time_s
            rows.append({"nodes": nodes, "method": method, "predicted_s": plan.predicted_time_s,
                         "flow_equal_s": flow, "throughput_GBps": demands.total_bytes / flow / 1e9,
                         "paths": plan.paths.num_paths, "bound_s": plan.lower_bound_time_s})
    return rows


@register("maxload", "Heuristic 1: completion time over the lower bound as maxload grows",
          _methods_plot("maxload", "time_over_bound", log=True))
def maxload_study(quick: bool, say) -> list[dict]:
    topo = from_spec("torus:4x4x4x2" if quick else "bgq:1024")
    demands = constant_ratio(topo.num_endpoints, "disjoint")
    cands = make_candidates(topo, demands, 16)
    rows = []
    for maxload in ([1, 2, 4, 8, 16] if quick else [1, 2, 4, 8, 12, 16, 24, 32]):
        say(f"maxload {maxload}")
        plan = make_plan(topo, demands, "heu1", candidates=cands, maxload=maxload)
        rows.append({"maxload": maxload, "method": "heu1", "time_over_bound": plan.predicted_time_s /
                     plan.lower_bound_time_s, "paths": plan.paths.num_paths})
    return rows


def _chunk_plot(rows, ax):
    for size in sorted({r["message_bytes"] for r in rows}):
        pts = [(r["chunk_bytes"], r["efficiency"]) for r in rows if r["message_bytes"] == size]
        ax.plot(*zip(*pts), marker="o", label=f"message {size} B")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("chunk_bytes")
    ax.set_ylabel("link-rate efficiency")
    ax.legend()


@register("chunk-size", "One 4-hop path, chunk-level model: time by chunk size for several message sizes",
          _chunk_plot)
def chunk_size_study(quick: bool, say) -> list[dict]:
    topo = from_spec("mesh:5,bw=1.8GB/s")
    chunks = [4096, 65536, 1 << 20] if quick else [4096, 16384, 65536, 262144, 1 << 20]
    sizes = [8192, 1 << 20] if quick else [8192, 65536, 1 << 20, 8 << 20]
    rows = []
    for size in sizes:
        plan = make_plan(topo, Demands([0], [4], [size]), "default")
        for chunk in chunks:
            t = simulate_chunks(plan, chunk_size=chunk).completion_time_s
            rows.append({"message_bytes": size, "chunk_bytes": chunk, "method": f"{size} B",
                         "time_s": t, "efficiency": size / 1.8e9 / t})
    return rows


@register("crossover", "Disjoint 1:8 by message size: optimised multipath (chunk model) vs default routing",
          _methods_plot("message_bytes", "throughput_GBps", log=True))
def crossover_study(quick: bool, say) -> list[dict]:
    topo = from_spec("torus:4x4x4x2" if quick else "bgq:512")
    rows = []
    sizes = [4096, 65536, 1 << 20] if quick else [4096, 16384, 65536, 262144, 1 << 20, 8 << 20]
    for size in sizes:
        demands = constant_ratio(topo.num_endpoints, "disjoint", nbytes=size)
        for method in ("default", "opt"):
            say(f"{size} B, {method}")
            plan = make_plan(topo, demands, method, chunk_size=max(4096, min(65536, size // 8)))
            # default routing is cut-through hardware: flow model plus per-hop latency, no copies
            if method == "default":
                t = simulate_flows(plan).completion_time_s + 45e-9 * float(plan.paths.hops.max())
            else:
                t = simulate_chunks(plan).completion_time_s
            rows.append({"message_bytes": size, "method": method, "time_s": t,
                         "throughput_GBps": demands.total_bytes / t / 1e9})
    return rows

