"""What ``optiq collectives predict`` and ``bench`` print and write: small typed reports whose
:meth:`to_dict` is the JSON contract and whose ``str`` is the table."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

from .cost import CHOICE_TIE, MODELS, AllreduceParams, Routes, choose, model_routes, predict, rank_algorithms

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

__all__ = ["PredictionReport", "BenchReport", "AlgorithmTiming", "prediction_report", "bench_report"]


@dataclass(frozen=True)
class PredictionReport:
    """Every algorithm ranked by predicted time under each model, fastest first.

    ``models[model]`` lists one dict per algorithm: ``algorithm``, ``time_s`` and every term
    of the cost (``latency_s``, ``bandwidth_s``, ``reduction_s``, ``memory_s``,
    ``contention_s``); ``best[model]`` is the one to run (:func:`~optiq.collectives.cost.choose`:
    the first, unless a later one tied with it has a smaller fan-in).
    """

    ranks: int
    size_bytes: int
    best: dict[str, str]
    models: dict[str, list[dict[str, Any]]]

    def to_dict(self) -> dict[str, Any]:
        return {"ranks": self.ranks, "size_bytes": self.size_bytes, "best": dict(self.best),
                "models": {m: [dict(row) for row in rows] for m, rows in self.models.items()}}

    def __str__(self) -> str:
        names = [row["algorithm"] for row in self.models["contention"]]
        times = {m: {row["algorithm"]: row["time_s"] for row in self.models[m]} for m in MODELS}
        lines = [f"allreduce of {self.size_bytes} B on {self.ranks} ranks, predicted (fastest first by the "
                 f"contention model)", f"{'algorithm':12}{'contention':>14}{'alpha-beta-gamma':>18}"]
        lines += [f"{n:12}{times['contention'][n] * 1e3:11.4f} ms{times['abg'][n] * 1e3:15.4f} ms" for n in names]
        lines.append(f"best: {self.best['contention']} (contention model), {self.best['abg']} (alpha-beta-gamma)")
        if any(self.best[m] != self.models[m][0]["algorithm"] for m in MODELS):
            lines.append(f"(predictions within {CHOICE_TIE:.0%} of the fastest are a tie, which the smaller fan-in wins)")
        return "\n".join(lines)


def prediction_report(models: dict[str, AllreduceParams], ranks: int, nbytes: int,
                      routes: Routes | None = None) -> PredictionReport:
    """Rank every algorithm for ``ranks`` ranks and ``nbytes`` bytes under each model (the
    contention model over ``routes``, when given: :func:`~optiq.collectives.cost.routed_steps`).

    Examples
    --------
    >>> p = {"abg": AllreduceParams(1e-5, 1e-9, 1e-9), "contention": AllreduceParams(1e-5, 1e-9, 1e-9, 0, 1e-8)}
    >>> r = prediction_report(p, 8, 2**20)
    >>> r.best
    {'contention': 'rhd', 'abg': 'hcps:2x4'}

    Alpha-beta-gamma predicts CPS fastest by two rounds' latency, too little to count: a tie,
    which hierarchical CPS 2 x 4 wins with a fan-in of 3 against CPS's 7.

    >>> [row["algorithm"] for row in r.to_dict()["models"]["abg"][:2]]
    ['cps', 'hcps:2x4']
    >>> print(str(r).splitlines()[-1])
    (predictions within 1% of the fastest are a tie, which the smaller fan-in wins)
    """
    best: dict[str, str] = {}
    listed: dict[str, list[dict[str, Any]]] = {}
    for model in MODELS:
        ranked = rank_algorithms(ranks, nbytes, models[model], model_routes(model, routes))
        best[model] = choose({name: terms.total for name, terms in ranked}, ranks)
        listed[model] = [{"algorithm": name, "time_s": terms.total, **{f"{k}_s": v for k, v in asdict(terms).items()}}
                         for name, terms in ranked]
    return PredictionReport(ranks, nbytes, best, listed)


@dataclass(frozen=True)
class AlgorithmTiming:
    """One algorithm measured: median time of the slowest rank, every repeat's, whether it
    matched MPI's Allreduce bit for bit, and what each model predicted (if given)."""

    algorithm: str
    time_s: float
    times_s: tuple[float, ...] = field(repr=False)
    correct: bool
    predicted_s: dict[str, float] | None = None
    #: The same algorithm's reductions and copies alone, every exchange left out (median).
    compute_s: float | None = None
    #: The machine's idle share of its CPU over the timed runs: near 0, the cores set the time.
    cpu_idle: float | None = None
    #: Each model's prediction split into its terms (seconds): latency, bandwidth, reduction,
    #: memory, contention.
    predicted_terms: dict[str, dict[str, float]] | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"time_s": self.time_s, "times_s": list(self.times_s), "correct": self.correct,
                               "compute_s": self.compute_s, "cpu_idle": self.cpu_idle}
        if self.predicted_s is not None:
            out["predicted_s"] = dict(self.predicted_s)
        if self.predicted_terms is not None:
            out["predicted_terms"] = {m: dict(terms) for m, terms in self.predicted_terms.items()}
        return out


@dataclass(frozen=True)
class BenchReport:
    """The algorithms measured at one size beside ``MPI_Allreduce``."""

    ranks: int
    size_bytes: int
    repeats: int
    mpi_allreduce_s: float
    algorithms: dict[str, AlgorithmTiming]

    @property
    def fastest(self) -> str | None:
        return min(self.algorithms, key=lambda name: self.algorithms[name].time_s) if self.algorithms else None

    @property
    def wrong(self) -> list[str]:
        """The algorithms whose result differed from ``MPI_Allreduce``'s."""
        return [name for name, t in self.algorithms.items() if not t.correct]

    def to_dict(self) -> dict[str, Any]:
        return {"ranks": self.ranks, "size_bytes": self.size_bytes, "repeats": self.repeats,
                "mpi_allreduce_s": self.mpi_allreduce_s, "fastest": self.fastest,
                "algorithms": {name: t.to_dict() for name, t in self.algorithms.items()}}

    def __str__(self) -> str:
        lines = [f"allreduce of {self.size_bytes} B on {self.ranks} ranks, median of {self.repeats} "
                 f"(MPI_Allreduce {self.mpi_allreduce_s * 1e3:.4f} ms)"]
        with_pred = any(t.predicted_s is not None for t in self.algorithms.values())
        lines.append(f"{'algorithm':12}{'measured':>12}" + (f"{'contention':>13}{'abg':>12}" if with_pred else "")
                     + "  correct")
        for name, t in self.algorithms.items():
            row = f"{name:12}{t.time_s * 1e3:9.4f} ms"
            if t.predicted_s is not None:
                row += f"{t.predicted_s['contention'] * 1e3:10.4f} ms{t.predicted_s['abg'] * 1e3:9.4f} ms"
            lines.append(row + f"  {'yes' if t.correct else 'NO'}")
        lines.append(f"fastest: {self.fastest}")
        return "\n".join(lines)


def bench_report(timings: Iterable[AlgorithmTiming], mpi_time_s: float, ranks: int, nbytes: int, repeat: int,
                 models: dict[str, AllreduceParams] | None = None, routes: Routes | None = None) -> BenchReport:
    """The report of :func:`optiq.collectives.bench.bench_algorithms`'s timings (medians of
    the slowest rank), with each model's prediction when ``models`` is given (the contention
    model's over ``routes``, when given)."""
    def predicted(t: AlgorithmTiming) -> AlgorithmTiming:
        if models is None:
            return t
        terms = {m: predict(t.algorithm, ranks, nbytes, models[m], model_routes(m, routes)) for m in MODELS}
        return replace(t, predicted_s={m: v.total for m, v in terms.items()},
                       predicted_terms={m: asdict(v) for m, v in terms.items()})

    algs = {t.algorithm: predicted(t) for t in timings}
    return BenchReport(ranks, nbytes, repeat, mpi_time_s, algs)
