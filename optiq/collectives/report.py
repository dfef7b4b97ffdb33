"""What ``optiq collectives predict`` and ``bench`` print and write (JSON contracts and tables)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from .cost import MODELS, AllreduceParams, predict, rank_algorithms

if TYPE_CHECKING:
    from typing import Any

__all__ = ["prediction_report", "format_prediction", "bench_report", "format_bench"]


def prediction_report(models: dict[str, AllreduceParams], ranks: int, nbytes: int) -> dict:
    """Every algorithm ranked by predicted time under each model.

    ``{"ranks", "size_bytes", "best": {model: name}, "models": {model: [{"algorithm",
    "time_s", "latency_s", "bandwidth_s", "reduction_s", "memory_s", "contention_s"}, ...]}}``,
    fastest first.

    Examples
    --------
    >>> p = {"abg": AllreduceParams(1e-5, 1e-9, 1e-9), "contention": AllreduceParams(1e-5, 1e-9, 1e-9, 0, 1e-8)}
    >>> r = prediction_report(p, 8, 2**20)
    >>> r["best"]
    {'contention': 'rhd', 'abg': 'cps'}
    """
    best: dict[str, str] = {}
    listed: dict[str, list[dict]] = {}
    out = {"ranks": ranks, "size_bytes": nbytes, "best": best, "models": listed}
    for model in MODELS:
        ranked = rank_algorithms(ranks, nbytes, models[model])
        best[model] = ranked[0][0]
        listed[model] = [{"algorithm": name, "time_s": terms.total,
                                 **{f"{k}_s": v for k, v in asdict(terms).items()}} for name, terms in ranked]
    return out


def format_prediction(report: dict) -> str:
    names = [row["algorithm"] for row in report["models"]["contention"]]
    times = {m: {row["algorithm"]: row["time_s"] for row in report["models"][m]} for m in MODELS}
    lines = [f"allreduce of {report['size_bytes']} B on {report['ranks']} ranks, predicted (fastest first by the "
             f"contention model)", f"{'algorithm':12}{'contention':>14}{'alpha-beta-gamma':>18}"]
    lines += [f"{n:12}{times['contention'][n] * 1e3:11.4f} ms{times['abg'][n] * 1e3:15.4f} ms" for n in names]
    lines.append(f"best: {report['best']['contention']} (contention model), {report['best']['abg']} "
                 f"(alpha-beta-gamma)")
    return "\n".join(lines)


def bench_report(timings: Any, mpi_time_s: float, ranks: int, nbytes: int, repeat: int,
                 models: dict[str, AllreduceParams] | None = None) -> dict:
    """``{"ranks", "size_bytes", "repeats", "mpi_allreduce_s", "fastest", "algorithms": {name: {"time_s",
    "times_s", "correct"[, "predicted_s": {model: s}]}}}`` (times are medians of the slowest rank)."""
    algs = {}
    for t in timings:
        entry = {"time_s": t.time_s, "times_s": list(t.times_s), "correct": t.correct}
        if models is not None:
            entry["predicted_s"] = {m: predict(t.algorithm, ranks, nbytes, models[m]).total for m in MODELS}
        algs[t.algorithm] = entry
    fastest = min(algs, key=lambda name: algs[name]["time_s"]) if algs else None
    return {"ranks": ranks, "size_bytes": nbytes, "repeats": repeat, "mpi_allreduce_s": mpi_time_s,
            "fastest": fastest, "algorithms": algs}


def format_bench(report: dict) -> str:
    lines = [f"allreduce of {report['size_bytes']} B on {report['ranks']} ranks, median of {report['repeats']} "
             f"(MPI_Allreduce {report['mpi_allreduce_s'] * 1e3:.4f} ms)"]
    with_pred = any("predicted_s" in e for e in report["algorithms"].values())
    lines.append(f"{'algorithm':12}{'measured':>12}" + (f"{'contention':>13}{'abg':>12}" if with_pred else "")
                 + "  correct")
    for name, e in report["algorithms"].items():
        row = f"{name:12}{e['time_s'] * 1e3:9.4f} ms"
        if with_pred:
            row += f"{e['predicted_s']['contention'] * 1e3:10.4f} ms{e['predicted_s']['abg'] * 1e3:9.4f} ms"
        lines.append(row + f"  {'yes' if e['correct'] else 'NO'}")
    lines.append(f"fastest: {report['fastest']}")
    return "\n".join(lines)
