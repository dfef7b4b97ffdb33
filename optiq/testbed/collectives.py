"""The allreduce cost model where incast is real: fitted and checked on an emulated switch.

``N`` hosts on one switch (a star, ``fattree:k=N,n=1``), every link direction rate limited
with a tail-drop queue (:class:`optiq.testbed.network.Testbed`), one MPI rank per host over
TCP. On it, as in the seed's evaluation:

1. ``optiq collectives fit`` runs the micro-benchmarks (pairs, full meshes of fan-in
   ``1 .. N-1``, reductions and copies) and fits both models: the one with contention and
   memory terms and alpha-beta-gamma; it is given the testbed's network (``--network``), so
   that on a network of more than one switch the contention model counts each step's
   busiest link on the network's routes (on the star this changes nothing);
2. ``optiq collectives bench`` measures every algorithm for ``N`` ranks, one MPI job per
   algorithm, so that the switch's queue drops are counted per algorithm (where incast
   overflows it); with ``jobs`` above 1, that many jobs per algorithm, the measured time
   the median of all their timed runs: over MPI on TCP a full mesh's messages leave each
   host in an order of the MPI library's own, which changes from job to job and moves
   hierarchical CPS's time by up to 15% (``benchmarks/testbed_transport.py``), while the
   runs within one job agree;
3. each algorithm's measured time is set beside both models' predictions; the model's
   choice (its fastest) beside the fastest measured.

The CPU's idle share during the runs is measured too: where it is near zero the cores, not
the network, set the time, and the rate should come down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..collectives.cost import CHOICE_TIE, choose, tied
from ..errors import TestbedError
from ..utils.resources import cpu_times
from .launch import MPI_ENVIRONMENT, find_mpiexec, mpiexec_argv, write_launcher
from .network import DEFAULT_MTU, DEFAULT_QUEUE, Testbed, terminated_as_interrupt
from .system import check_privileges, kill_namespace_processes

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["CollectivesRow", "CollectivesRun", "run_collectives", "attribute_drops", "fit_sizes_for", "FIT_SIZES", "COLLECTIVES_SIZE"]

#: The allreduce's bytes per rank, by default.
COLLECTIVES_SIZE = 262144
#: The micro-benchmarks' message sizes, as fractions of the allreduce's bytes (:func:`fit_sizes_for`).
FIT_FRACTIONS = (16, 8, 4)


def fit_sizes_for(size: int) -> tuple[int, ...]:
    """The micro-benchmarks' message sizes for an allreduce of ``size`` bytes per rank: ``size``
    over 16, 8 and 4 (multiples of 8 bytes, at least 8), the blocks the algorithms send (``S/N``
    for ring and CPS, ``S/a`` and ``S/2`` for hierarchical CPS and RHD's halving). On the
    emulated network a step's time is not linear in its bytes over a wide range (TCP's windows,
    the cores' scheduling), so the model is fitted where it is used.

    Examples
    --------
    >>> fit_sizes_for(262144)
    (16384, 32768, 65536)
    """
    return tuple(sorted({max(8, size // f // 8 * 8) for f in FIT_FRACTIONS}))


#: The micro-benchmarks' sizes for the default allreduce.
FIT_SIZES = fit_sizes_for(COLLECTIVES_SIZE)


@dataclass(frozen=True)
class CollectivesRow:
    """One algorithm: measured seconds, both models' predictions, packets the queues dropped."""

    algorithm: str
    measured_s: float
    model_s: float
    abg_s: float
    drops: int
    correct: bool
    #: The reductions and copies alone, timed apart (the measured calculation).
    compute_s: float = float("nan")
    #: The machine's idle share of its CPU over the timed runs.
    cpu_idle: float | None = None
    #: Each model's terms (latency, bandwidth, reduction, memory, contention), seconds.
    terms: dict[str, dict[str, float]] = field(default_factory=dict)
    #: Packets the queues dropped in each phase of one traced run (:data:`PHASES` order).
    step_drops: dict[str, int] = field(default_factory=dict)
    #: Every timed run's seconds (``measured_s`` is their median), in the order they ran.
    runs_s: tuple[float, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "measured_s": self.measured_s, "model_s": self.model_s,
                "abg_s": self.abg_s, "drops": self.drops, "correct": self.correct, "compute_s": self.compute_s,
                "cpu_idle": self.cpu_idle, "terms": self.terms, "step_drops": self.step_drops,
                "runs_s": list(self.runs_s)}


@dataclass
class CollectivesRun:
    """What :func:`run_collectives` measured (module docstring)."""

    ranks: int
    size_bytes: int
    rate: float  # bytes per second of every link direction
    queue_bytes: int
    congestion: str
    rows: list[CollectivesRow]
    mpi_s: float
    fit_error: dict[str, Any]
    fit_drops: int
    cpu_idle: float
    seconds: float
    params: dict[str, Any] = field(repr=False, default_factory=dict)
    network: str = "a star"
    fit_s: float = 0.0
    #: MPI jobs per algorithm (its measured time is the median of all their timed runs).
    jobs: int = 1

    @staticmethod
    def _errors(pairs: list[tuple[float, float]]) -> tuple[float, float]:
        errors = [abs(p - m) / m for m, p in pairs if m > 0]
        return (float(np.mean(errors)), float(np.max(errors))) if errors else (float("nan"), float("nan"))

    @property
    def model_error(self) -> tuple[float, float]:
        """Mean and largest relative error of the contention model against the measurements."""
        return self._errors([(r.measured_s, r.model_s) for r in self.rows])

    @property
    def abg_error(self) -> tuple[float, float]:
        """The same for alpha-beta-gamma."""
        return self._errors([(r.measured_s, r.abg_s) for r in self.rows])

    @property
    def timed_idle(self) -> float:
        """The least idle share of the machine's CPU over any algorithm's timed runs (nan: unknown)."""
        shares = [r.cpu_idle for r in self.rows if r.cpu_idle is not None]
        return min(shares) if shares else float("nan")

    @property
    def model_choice(self) -> str:
        """What the model would run (:func:`optiq.collectives.cost.choose`)."""
        return choose({r.algorithm: r.model_s for r in self.rows}, self.ranks)

    @property
    def abg_choice(self) -> str:
        return choose({r.algorithm: r.abg_s for r in self.rows}, self.ranks)

    @property
    def choice_tied(self) -> list[str]:
        """The other algorithms whose predictions tied with the model's choice's (within
        :data:`optiq.collectives.cost.CHOICE_TIE` of the fastest prediction)."""
        return [name for name in tied({r.algorithm: r.model_s for r in self.rows}) if name != self.model_choice]

    @property
    def measured_best(self) -> str:
        return min(self.rows, key=lambda r: r.measured_s).algorithm

    @property
    def choice_shortfall(self) -> float:
        """How much longer the model's choice measured than the fastest (0: it is the fastest).

        Examples
        --------
        >>> run = CollectivesRun(2, 8, 1.0, 8, "reno", [CollectivesRow("ring", 0.20, 0.23, 0.2, 0, True),
        ...                      CollectivesRow("cps", 0.24, 0.22, 0.2, 0, True)], 0.3, {}, 0, 0.5, 1.0)
        >>> run.model_choice, round(run.choice_shortfall, 3), round(run.choice_margin, 3)
        ('cps', 0.2, 0.045)
        """
        measured = {r.algorithm: r.measured_s for r in self.rows}
        return measured[self.model_choice] / measured[self.measured_best] - 1

    @property
    def choice_margin(self) -> float:
        """How far the model's best prediction is ahead of its second best, relative: a margin
        under the model's error leaves the choice to the measurements' noise."""
        predicted = sorted(r.model_s for r in self.rows)
        return predicted[1] / predicted[0] - 1 if len(predicted) > 1 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: ``rows``, both models' errors, their choices, the fastest, the drops."""
        return {"ranks": self.ranks, "network": self.network, "size_bytes": self.size_bytes, "rate_bps": self.rate * 8,
                "queue_bytes": self.queue_bytes, "congestion_control": self.congestion,
                "rows": [r.as_dict() for r in self.rows], "mpi_allreduce_s": self.mpi_s,
                "model_error_mean": self.model_error[0], "model_error_max": self.model_error[1],
                "abg_error_mean": self.abg_error[0], "abg_error_max": self.abg_error[1],
                "model_choice": self.model_choice, "abg_choice": self.abg_choice,
                "model_choice_shortfall": self.choice_shortfall, "model_choice_margin": self.choice_margin,
                "model_choice_tied": self.choice_tied,
                "measured_best": self.measured_best, "drops": int(sum(r.drops for r in self.rows)),
                "fit_drops": self.fit_drops, "fit_s": self.fit_s, "fit_error": self.fit_error, "cpu_idle": self.cpu_idle,
                "cpu_idle_timed": self.timed_idle, "jobs": self.jobs,
                "seconds": self.seconds, "params": self.params}

    def __str__(self) -> str:
        lines = [f"allreduce of {self.size_bytes:,} B on {self.ranks} ranks, one per host of {self.network}: links at "
                 f"{self.rate * 8 / 1e6:g} Mbit/s, queues of {self.queue_bytes:,} B, TCP {self.congestion}; "
                 f"MPI_Allreduce {self.mpi_s * 1e3:.2f} ms"
                 + (f"; each algorithm the median over {self.jobs} MPI jobs" if self.jobs > 1 else ""),
                 f"{'algorithm':12} {'measured ms':>11} {'model ms':>9} {'error':>7} {'abg ms':>9} {'error':>7} "
                 f"{'drops':>7} {'calc ms':>8} {'model calc':>10} {'idle':>5}"]
        for r in sorted(self.rows, key=lambda r: r.measured_s):
            calc = r.terms.get("contention", {})
            model_calc = calc.get("reduction", float("nan")) + calc.get("memory", float("nan"))
            idle = "-" if r.cpu_idle is None else f"{r.cpu_idle:.0%}"
            lines.append(f"{r.algorithm:12} {r.measured_s * 1e3:11.2f} {r.model_s * 1e3:9.2f} "
                         f"{(r.model_s - r.measured_s) / r.measured_s:+7.1%} {r.abg_s * 1e3:9.2f} "
                         f"{(r.abg_s - r.measured_s) / r.measured_s:+7.1%} {r.drops:7,} {r.compute_s * 1e3:8.2f} "
                         f"{model_calc * 1e3:10.2f} {idle:>5}" + ("" if r.correct else "  WRONG"))
        (mm, mx), (am, ax) = self.model_error, self.abg_error
        lines.append(f"model error: mean {mm:.1%}, max {mx:.1%}; alpha-beta-gamma: mean {am:.1%}, max {ax:.1%}")
        took = f"measured {self.choice_shortfall:.1%} longer" if self.choice_shortfall > 0 else "the fastest"
        tied = self.choice_tied
        why = (f"predicted within {CHOICE_TIE:.0%} of {', '.join(tied)}: the smallest fan-in of them" if tied else
               f"predicted {self.choice_margin:.1%} ahead of the next")
        lines.append(f"fastest measured: {self.measured_best}; the model picks {self.model_choice} ({took}; {why}), "
                     f"alpha-beta-gamma {self.abg_choice}")
        traced = [r for r in self.rows if any(r.step_drops.values())]
        if traced:
            lines.append("drops per phase of one traced run (exchanges apart in time): " + "; ".join(
                f"{r.algorithm} " + ", ".join(f"{phase} {n:,}" for phase, n in r.step_drops.items() if n)
                for r in traced))
        elif self.rows and all(r.step_drops for r in self.rows):
            lines.append("drops per phase of one traced run: none in any phase")
        lines.append(f"the fit: {len(self.params.get('samples', [])):,} timings in {self.fit_s:.0f} s, {self.fit_drops:,} "
                     f"packets dropped; CPU idle {self.cpu_idle:.0%} over the whole run (MPI jobs' starts "
                     f"included), {self.timed_idle:.0%} at least over any algorithm's timed runs"
                     f" (calc: the reductions alone, timed apart; idle: the machine's over the timed runs); "
                     f"{self.seconds:.0f} s in all")
        return "\n".join(lines)


def run_collectives(ranks: int, *, rate: float, size: int, queue: int = DEFAULT_QUEUE, congestion: str = "reno",
                    fit_sizes: tuple[int, ...] | None = None, repeat: int = 5, name: str | None = None,
                    offloads: bool = False, mtu: int = DEFAULT_MTU, topology: Topology | None = None, jobs: int = 1,
                    progress: Callable[[str], None] | None = None) -> CollectivesRun:
    """Fit both allreduce models on an emulated star of ``ranks`` hosts and check them (module
    docstring); with ``topology``, on its network instead, ranks on its first ``ranks`` hosts
    (e.g. a two-level tree, where a step's messages also share the links between switches).

    Raises
    ------
    TestbedError
        Where namespaces or MPI are not to be had, for fewer than 2 ranks or a size that is
        not a positive multiple of 8, or when a benchmark fails.
    """
    from ..collectives.cost import algorithms
    from ..topology import from_spec

    if ranks < 2:
        raise TestbedError(f"the allreduce needs at least 2 ranks, got {ranks}")
    if jobs < 1:
        raise TestbedError(f"each algorithm needs at least 1 MPI job, got jobs={jobs}")
    if topology is not None and ranks > topology.num_endpoints:
        raise TestbedError(f"{topology.name} has {topology.num_endpoints} hosts, fewer than {ranks} ranks")
    fit_sizes = fit_sizes_for(size) if fit_sizes is None else tuple(fit_sizes)
    for s in (size, *fit_sizes):
        if s < 8 or s % 8:
            raise TestbedError(f"size {s} B must be a positive multiple of 8 bytes (float64 elements)")
    check_privileges()
    find_mpiexec()
    say = progress or (lambda message: None)
    start = time.perf_counter()
    star = topology is None
    topology = from_spec(f"fattree:k={ranks},n=1") if topology is None else topology
    bed = Testbed(topology, rate=rate, queue=queue, name=name, congestion=congestion, offloads=offloads,
                  mtu=mtu, progress=say)
    with terminated_as_interrupt(), bed, tempfile.TemporaryDirectory(prefix="optiq-coll-") as tmp:
        work = Path(tmp)
        launcher = write_launcher(bed.layout, bed.state)
        params = work / "params.json"
        idle0, total0 = cpu_times()
        say(f"fit: micro-benchmarks at {', '.join(f'{s:,}' for s in fit_sizes)} B on {ranks} ranks")
        fit_start = time.perf_counter()
        fit_drops = _run(bed, launcher, ranks, ["collectives", "fit", "-o", str(params), "--sizes",
                                                ",".join(f"{s}B" for s in fit_sizes), "--repeat", str(repeat),
                                                "--network", topology.spec or topology.name, "-q"])
        fit_s = time.perf_counter() - fit_start
        rows, mpi_s = [], float("nan")
        for algorithm in algorithms(ranks):
            out = work / f"{algorithm.replace(':', '-')}.json"
            drops, timings = 0, []
            for _ in range(jobs):
                drops += _run(bed, launcher, ranks, ["collectives", "bench", "--size", f"{size}B", "--params",
                                                     str(params), "--algorithms", algorithm, "--repeat", str(repeat),
                                                     "--json", str(out), "-q"])
                report = json.loads(out.read_text())
                timings.append(report["algorithms"][algorithm])
                mpi_s = float(report["mpi_allreduce_s"])
            timing = timings[0]
            runs = tuple(float(t) for one in timings for t in one.get("times_s", (one["time_s"],)))
            idle = [float(one["cpu_idle"]) for one in timings if one.get("cpu_idle") is not None]
            step_drops = _drops_by_phase(bed, launcher, ranks, algorithm, size, work)
            rows.append(CollectivesRow(algorithm, float(np.median(runs)), float(timing["predicted_s"]["contention"]),
                                       float(timing["predicted_s"]["abg"]), drops,
                                       all(bool(one["correct"]) for one in timings),
                                       float(np.median([one["compute_s"] for one in timings])),
                                       float(np.mean(idle)) if idle else None,
                                       timing.get("predicted_terms", {}), step_drops, runs))
            say(f"{algorithm}: {rows[-1].measured_s * 1e3:.2f} ms (model {rows[-1].model_s * 1e3:.2f}, abg "
                f"{rows[-1].abg_s * 1e3:.2f}), {drops:,} drops"
                + (f"; traced: {', '.join(f'{k} {v:,}' for k, v in step_drops.items())}" if step_drops else ""))
        idle1, total1 = cpu_times()
        saved = json.loads(params.read_text())
    return CollectivesRun(ranks, size, rate, queue, congestion, rows, mpi_s, saved.get("fit_error", {}), fit_drops,
                          (idle1 - idle0) / max(total1 - total0, 1e-9), time.perf_counter() - start, saved,
                          "a star" if star else topology.name, fit_s, jobs)


def _drops_by_phase(bed: Testbed, launcher: Path, ranks: int, algorithm: str, size: int, work: Path) -> dict[str, int]:
    """One traced run of ``algorithm`` (its exchanges apart in time) while the queues' drop
    counters are read over and over: the drops of each phase (``reduce-scatter``, ...), by when
    they happened; ``between`` for drops outside every exchange."""
    trace = work / "trace.json"
    samples: list[tuple[float, int]] = []
    stop = threading.Event()
    failed: list[Exception] = []

    def sample() -> None:
        try:
            while not stop.is_set():
                begin = time.monotonic()
                drops = int(bed.counters().drops.sum())
                samples.append(((begin + time.monotonic()) / 2, drops))
        except Exception as exc:  # raised below; not at all when the run itself failed (Ctrl-C ends tc too)
            failed.append(exc)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        _run(bed, launcher, ranks, ["collectives", "bench", "--size", f"{size}B", "--algorithms", algorithm,
                                    "--trace", str(trace), "-q"])
    finally:
        stop.set()
        sampler.join()
    if failed:
        raise failed[0]
    windows = json.loads(trace.read_text()).get(algorithm, [])
    return attribute_drops(samples, windows)


def attribute_drops(samples: list[tuple[float, int]], windows: list[dict[str, Any]], *,
                    grace_s: float = 0.05) -> dict[str, int]:
    """The drops between consecutive ``(time, total drops)`` samples, each interval's given to
    the phase whose exchanges (``start`` .. ``end`` + ``grace_s``, any rank) overlap it most;
    drops before the first exchange are not the traced run's and are left out.

    Examples
    --------
    >>> windows = [{"phase": "reduce-scatter", "start": 1.0, "end": 1.1}, {"phase": "allgather", "start": 1.4, "end": 1.5}]
    >>> attribute_drops([(0.5, 0), (0.95, 4), (1.12, 11), (1.3, 11), (1.52, 13), (1.6, 13), (1.9, 14)], windows)
    {'reduce-scatter': 7, 'allgather': 2, 'between': 1}
    """
    found: dict[str, int] = {w["phase"]: 0 for w in sorted(windows, key=lambda w: w["start"])}
    first = min((w["start"] for w in windows), default=float("inf"))
    for (a, before), (b, after) in zip(samples, samples[1:]):
        if after <= before or b <= first:  # before the traced run (the job's start, its untraced warm-up run)
            continue
        overlap: dict[str, float] = {}
        for w in windows:
            span = min(b, w["end"] + grace_s) - max(a, w["start"])
            if span > 0:
                overlap[w["phase"]] = overlap.get(w["phase"], 0.0) + span
        phase = max(overlap, key=lambda k: overlap[k]) if overlap else "between"
        found[phase] = found.get(phase, 0) + after - before
    return found


def _run(bed: Testbed, launcher: Path, ranks: int, argv: list[str]) -> int:
    """``optiq ARGV`` under mpiexec, one rank per host; the packets the queues dropped meanwhile."""
    command = [sys.executable, "-m", "optiq", *argv]
    full = mpiexec_argv(bed.layout, launcher, range(ranks), command)
    before = bed.counters()
    process = subprocess.Popen(full, env=dict(os.environ, **MPI_ENVIRONMENT), start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = process.communicate()
    except BaseException:
        kill_namespace_processes(bed.layout.namespaces[:ranks] + [bed.layout.control])
        process.wait()
        raise
    if process.returncode != 0:
        raise TestbedError(f"optiq {' '.join(argv[:2])} failed on the testbed (exit code {process.returncode}): "
                           f"{(err or out).strip()[-800:]}")
    return int((bed.counters() - before).drops.sum())
