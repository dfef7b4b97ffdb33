"""Fit and bench on every rank of a communicator: what ``optiq collectives fit`` and ``bench`` run.

Every rank calls :func:`fit_on_ranks` or :func:`bench_on_ranks`. The arguments are checked on
every rank before any timing, and a mistake raises on every rank alike
(:func:`optiq.mpi.launch.together`); a failure during the timings ends every rank
(:func:`optiq.mpi.launch.abort_on_failure`). The work runs on a ``Dup()`` of the
communicator; the results are complete on rank 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import OptiqError
from ..mpi.launch import abort_on_failure, together
from .bench import bench_algorithms, run_microbenchmarks, trace_exchanges
from .cost import Routes, algorithms, load_params, load_routes, save_params
from .fit import FitResult, Sample, fit_allreduce_model
from .report import BenchReport, bench_report

__all__ = ["FitRun", "fit_on_ranks", "bench_on_ranks", "trace_on_ranks", "check_sizes", "check_algorithms"]


@dataclass(frozen=True)
class FitRun:
    """Both models fitted from the micro-benchmarks of ``ranks`` ranks, with the samples."""

    fit: FitResult
    samples: list[Sample] = field(repr=False)
    ranks: int
    #: the network the ranks ran on (its spec), when the fit counted its routes
    network: str | None = None

    def __str__(self) -> str:
        fit = self.fit
        return (f"contention model: {fit.contention}\n  mean / max relative error on the micro-benchmarks "
                f"{fit.contention_error[0]:.1%} / {fit.contention_error[1]:.1%}\n"
                f"alpha-beta-gamma: {fit.abg}\n  mean / max relative error {fit.abg_error[0]:.1%} / "
                f"{fit.abg_error[1]:.1%}")

    def save(self, path: str | Path) -> None:
        """The parameters file ``optiq collectives predict`` and ``bench --params`` read."""
        fit = self.fit
        save_params({"contention": fit.contention, "abg": fit.abg}, path, ranks=self.ranks, network=self.network,
                    samples=[asdict(s) for s in self.samples],
                    fit_error={"contention": fit.contention_error, "abg": fit.abg_error})


def check_sizes(sizes: Sequence[int]) -> None:
    """Raise :class:`OptiqError` naming the first size that is not a positive multiple of 8 bytes."""
    bad = [s for s in sizes if s < 8 or s % 8]
    if bad:
        raise OptiqError(f"size {bad[0]} B must be a positive multiple of 8 bytes (float64 elements)")


def check_algorithms(names: Sequence[str], ranks: int) -> None:
    """Raise :class:`OptiqError` naming the algorithms that do not exist for ``ranks`` ranks."""
    unknown = [n for n in names if n not in algorithms(ranks)]
    if unknown:
        raise OptiqError(f"unknown algorithm(s) {', '.join(unknown)} for {ranks} ranks; choose from "
                         f"{', '.join(algorithms(ranks))}")


def _checked(comm: Any, what: str, sizes: Sequence[int], check: Callable[[], Any] | None,
             names: Sequence[str] | None = None) -> None:
    N = comm.Get_size()
    if N < 2:
        raise OptiqError(f"optiq collectives {what} runs under mpiexec -n N with N >= 2 (got {N} rank)")
    if check is not None:
        check()
    check_sizes(sizes)
    if names:
        check_algorithms(names, N)


def fit_on_ranks(comm: Any, sizes: Sequence[int], *, repeat: int = 5, check: Callable[[], Any] | None = None,
                 say: Callable[[str], None] | None = None, network: str | None = None) -> FitRun | None:
    """Run the micro-benchmarks at every size on every rank of ``comm`` and fit both models.

    Collective. ``check`` runs first on every rank (a caller's own checks, such as whether
    an output can be written), then the sizes are checked. With ``network`` (a topology spec;
    rank ``i`` on its host ``i``), the contention model counts every step's busiest link on
    the network's own routes (:class:`~optiq.collectives.cost.Routes`), in the fit and in
    every prediction from the file it writes.

    Returns
    -------
    FitRun or None
        On rank 0; None on the other ranks.

    Raises
    ------
    OptiqError
        On every rank: fewer than 2 ranks, a size that is not a positive multiple of 8, or
        ``check``'s error.
    """
    def checks() -> Routes | None:
        _checked(comm, "fit", sizes, check)
        return None if network is None else Routes.of(network, comm.Get_size())

    routes = together(comm, checks)
    work = comm.Dup()
    try:
        with abort_on_failure(work):
            samples = run_microbenchmarks(work, sizes, repeat=repeat, say=say or (lambda m: None))
        if work.Get_rank() != 0:
            return None
        return FitRun(fit_allreduce_model(samples, routes), samples, work.Get_size(),
                      None if routes is None else routes.network)
    finally:
        work.Free()


def trace_on_ranks(comm: Any, size: int, *, names: Sequence[str] | None = None, check: Callable[[], Any] | None = None,
                   say: Callable[[str], None] | None = None) -> dict[str, list[dict[str, Any]]] | None:
    """Each algorithm (or ``names``) run once with its exchanges apart in time, and when each
    exchange ran on each rank (:func:`optiq.collectives.bench.trace_exchanges`): what
    ``optiq testbed collectives`` needs to count the network's drops per step.

    Collective; ``check`` as in :func:`fit_on_ranks`.

    Returns
    -------
    dict or None
        On rank 0, algorithm -> exchanges; None on the other ranks.
    """
    N = comm.Get_size()

    together(comm, lambda: _checked(comm, "bench", [size], check, names))
    traced: dict[str, list[dict[str, Any]]] = {}
    work = comm.Dup()
    try:
        with abort_on_failure(work):
            for name in names or algorithms(N):
                if say:
                    say(f"{name}: traced, {size} B")
                windows = trace_exchanges(work, size, name)
                if windows is not None:
                    traced[name] = windows
    finally:
        work.Free()
    return traced if comm.Get_rank() == 0 else None


def bench_on_ranks(comm: Any, sizes: Sequence[int], *, names: Sequence[str] | None = None, repeat: int = 5,
                   params: str | Path | None = None, check: Callable[[], Any] | None = None,
                   say: Callable[[str], None] | None = None) -> list[BenchReport]:
    """Time every algorithm (or ``names``) at every size on every rank of ``comm``, beside
    ``MPI_Allreduce``, with both models' predictions when a ``params`` file is given.

    Collective; ``check`` as in :func:`fit_on_ranks`.

    Returns
    -------
    list of BenchReport
        One per size, on every rank (complete on rank 0).

    Raises
    ------
    OptiqError
        On every rank: fewer than 2 ranks, a bad size, an algorithm unknown for this many
        ranks, a ``params`` file that cannot be read, or ``check``'s error.
    """
    N = comm.Get_size()

    def checks() -> tuple[dict | None, Routes | None]:
        _checked(comm, "bench", sizes, check, names)
        return (load_params(params), load_routes(params, N)) if params else (None, None)

    models, routes = together(comm, checks)
    reports = []
    work = comm.Dup()
    try:
        with abort_on_failure(work):
            for size in sizes:
                timings, mpi_time = bench_algorithms(work, size, names=names, repeat=repeat,
                                                     say=say or (lambda m: None))
                reports.append(bench_report(timings, mpi_time, N, size, repeat, models, routes))
    finally:
        work.Free()
    return reports
