"""The allreduce cost model where incast is real: fitted and checked on an emulated switch.

``N`` hosts on one switch (a star, ``fattree:k=N,n=1``), every link direction rate limited
with a tail-drop queue (:class:`optiq.testbed.network.Testbed`), one MPI rank per host over
TCP. On it, as in the seed's evaluation:

1. ``optiq collectives fit`` runs the micro-benchmarks (pairs, full meshes of fan-in
   ``1 .. N-1``, reductions and copies) and fits both models: the one with contention and
   memory terms and alpha-beta-gamma;
2. ``optiq collectives bench`` measures every algorithm for ``N`` ranks, one MPI job per
   algorithm, so that the switch's queue drops are counted per algorithm (where incast
   overflows it);
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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import TestbedError
from .launch import MPI_ENVIRONMENT, find_mpiexec, mpiexec_argv, write_launcher
from .network import DEFAULT_QUEUE, Testbed, terminated_as_interrupt
from .session import cpu_times
from .system import check_privileges, kill_namespace_processes

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["CollectivesRow", "CollectivesRun", "run_collectives", "FIT_SIZES", "COLLECTIVES_SIZE"]

#: Message sizes of the micro-benchmarks on the emulated network (bytes)...
FIT_SIZES = (16384, 65536, 262144)
#: ... and the allreduce's bytes per rank, by default.
COLLECTIVES_SIZE = 262144


@dataclass(frozen=True)
class CollectivesRow:
    """One algorithm: measured seconds, both models' predictions, packets the queues dropped."""

    algorithm: str
    measured_s: float
    model_s: float
    abg_s: float
    drops: int
    correct: bool

    def as_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "measured_s": self.measured_s, "model_s": self.model_s,
                "abg_s": self.abg_s, "drops": self.drops, "correct": self.correct}


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
    def model_choice(self) -> str:
        return min(self.rows, key=lambda r: r.model_s).algorithm

    @property
    def abg_choice(self) -> str:
        return min(self.rows, key=lambda r: r.abg_s).algorithm

    @property
    def measured_best(self) -> str:
        return min(self.rows, key=lambda r: r.measured_s).algorithm

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: ``rows``, both models' errors, their choices, the fastest, the drops."""
        return {"ranks": self.ranks, "network": self.network, "size_bytes": self.size_bytes, "rate_bps": self.rate * 8,
                "queue_bytes": self.queue_bytes, "congestion_control": self.congestion,
                "rows": [r.as_dict() for r in self.rows], "mpi_allreduce_s": self.mpi_s,
                "model_error_mean": self.model_error[0], "model_error_max": self.model_error[1],
                "abg_error_mean": self.abg_error[0], "abg_error_max": self.abg_error[1],
                "model_choice": self.model_choice, "abg_choice": self.abg_choice,
                "measured_best": self.measured_best, "drops": int(sum(r.drops for r in self.rows)),
                "fit_drops": self.fit_drops, "fit_s": self.fit_s, "fit_error": self.fit_error, "cpu_idle": self.cpu_idle,
                "seconds": self.seconds, "params": self.params}

    def __str__(self) -> str:
        lines = [f"allreduce of {self.size_bytes:,} B on {self.ranks} ranks, one per host of {self.network}: links at "
                 f"{self.rate * 8 / 1e6:g} Mbit/s, queues of {self.queue_bytes:,} B, TCP {self.congestion}; "
                 f"MPI_Allreduce {self.mpi_s * 1e3:.2f} ms",
                 f"{'algorithm':12} {'measured ms':>11} {'model ms':>9} {'error':>7} {'abg ms':>9} {'error':>7} "
                 f"{'drops':>7}"]
        for r in sorted(self.rows, key=lambda r: r.measured_s):
            lines.append(f"{r.algorithm:12} {r.measured_s * 1e3:11.2f} {r.model_s * 1e3:9.2f} "
                         f"{(r.model_s - r.measured_s) / r.measured_s:+7.1%} {r.abg_s * 1e3:9.2f} "
                         f"{(r.abg_s - r.measured_s) / r.measured_s:+7.1%} {r.drops:7,}"
                         + ("" if r.correct else "  WRONG"))
        (mm, mx), (am, ax) = self.model_error, self.abg_error
        lines.append(f"model error: mean {mm:.1%}, max {mx:.1%}; alpha-beta-gamma: mean {am:.1%}, max {ax:.1%}")
        lines.append(f"fastest measured: {self.measured_best}; the model picks {self.model_choice}, "
                     f"alpha-beta-gamma {self.abg_choice}")
        lines.append(f"the fit: {len(self.params.get('samples', [])):,} timings in {self.fit_s:.0f} s, {self.fit_drops:,} "
                     f"packets dropped; CPU idle {self.cpu_idle:.0%} "
                     f"over the run (every MPI job's start included); {self.seconds:.0f} s in all")
        return "\n".join(lines)


def run_collectives(ranks: int, *, rate: float, size: int, queue: int = DEFAULT_QUEUE, congestion: str = "reno",
                    fit_sizes: tuple[int, ...] = FIT_SIZES, repeat: int = 5, name: str | None = None,
                    offloads: bool = False, topology: Topology | None = None,
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
    if topology is not None and ranks > topology.num_endpoints:
        raise TestbedError(f"{topology.name} has {topology.num_endpoints} hosts, fewer than {ranks} ranks")
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
                  progress=say)
    with terminated_as_interrupt(), bed, tempfile.TemporaryDirectory(prefix="optiq-coll-") as tmp:
        work = Path(tmp)
        launcher = write_launcher(bed.layout, bed.state)
        params = work / "params.json"
        idle0, total0 = cpu_times()
        say(f"fit: micro-benchmarks at {', '.join(f'{s:,}' for s in fit_sizes)} B on {ranks} ranks")
        fit_start = time.perf_counter()
        fit_drops = _run(bed, launcher, ranks, ["collectives", "fit", "-o", str(params), "--sizes",
                                                ",".join(str(s) for s in fit_sizes), "--repeat", str(repeat), "-q"])
        fit_s = time.perf_counter() - fit_start
        rows, mpi_s = [], float("nan")
        for algorithm in algorithms(ranks):
            out = work / f"{algorithm.replace(':', '-')}.json"
            drops = _run(bed, launcher, ranks, ["collectives", "bench", "--size", str(size), "--params", str(params),
                                                "--algorithms", algorithm, "--repeat", str(repeat), "--json", str(out),
                                                "-q"])
            report = json.loads(out.read_text())
            timing = report["algorithms"][algorithm]
            mpi_s = float(report["mpi_allreduce_s"])
            rows.append(CollectivesRow(algorithm, float(timing["time_s"]), float(timing["predicted_s"]["contention"]),
                                       float(timing["predicted_s"]["abg"]), drops, bool(timing["correct"])))
            say(f"{algorithm}: {rows[-1].measured_s * 1e3:.2f} ms (model {rows[-1].model_s * 1e3:.2f}, abg "
                f"{rows[-1].abg_s * 1e3:.2f}), {drops:,} drops")
        idle1, total1 = cpu_times()
        saved = json.loads(params.read_text())
    return CollectivesRun(ranks, size, rate, queue, congestion, rows, mpi_s, saved.get("fit_error", {}), fit_drops,
                          (idle1 - idle0) / max(total1 - total0, 1e-9), time.perf_counter() - start, saved,
                          "a star" if star else topology.name, fit_s)


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
