"""Measure methods on a built testbed: one MPI job runs them all in turn, in step with the counters.

First one flow between two hosts measures what the network really delivers (its goodput
over TCP with MPI, and the bytes of headers and acknowledgements each payload byte costs
on the links). Then one ``mpiexec`` with a rank in every host namespace
(:mod:`optiq.testbed.worker`) runs a warm-up of every method and ``repeat`` rounds of all of
them in turn. Before each step the kernel gets the method's routes (and reads them back);
the links' counters are read before and after it.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import TestbedError
from ..utils.resources import cpu_times
from .launch import describe, mpiexec_argv, start, write_launcher
from .network import Counters

if TYPE_CHECKING:
    import subprocess

    from .methods import Method
    from .network import Testbed

__all__ = ["StepResult", "Goodput", "measure_goodput", "measure_methods", "STEP_GRACE_S"]

#: Seconds a step may take beyond ten times its predicted time before it is called hung.
STEP_GRACE_S = 60.0
#: Seconds the MPI job may take to start (every rank imports numpy, mpi4py and optiq) and set up.
STARTUP_S = 300.0
#: The one flow that measures goodput lasts about this long.
GOODPUT_S = 1.5


@dataclass
class StepResult:
    """One timed step: which method, its slowest rank's time, the links' counters over it."""

    method: str
    measured: bool
    elapsed_s: float
    verified: bool
    problems: list[str]
    counters: Counters
    cpu_idle: float


@dataclass
class Goodput:
    """What one flow measured: payload bytes/s, and link bytes per payload byte on its route and back."""

    bytes_per_s: float
    header: float
    ack: float
    src: int
    dst: int
    samples_s: list[float] = field(default_factory=list)


class _Job:
    """One ``mpiexec`` of the worker in the testbed, stepped through its ``ready``/``go``/``done`` files."""

    def __init__(self, bed: Testbed, directory: Path, job: dict[str, Any], ranks: Sequence[int],
                 say: Callable[[str], None], plans: dict[str, Any] | None = None) -> None:
        self.bed, self.directory, self.say = bed, directory, say
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        for file, plan in (plans or {}).items():
            plan.save(directory / file)
        (directory / "job.json").write_text(json.dumps(job))
        launcher = write_launcher(bed.layout, bed.state)
        import sys

        self.argv = mpiexec_argv(bed.layout, launcher, ranks,
                                 [sys.executable, "-m", "optiq.testbed.worker", str(directory)])
        (directory / "command").write_text(describe(self.argv) + "\n")
        self.process: subprocess.Popen[bytes] = start(self.argv, stdout=directory / "stdout",
                                                      stderr=directory / "stderr")

    def wait_for(self, name: str, seconds: float, what: str) -> Path:
        """Wait for the worker's file ``name``; raise if the job ends or ``seconds`` pass first."""
        path = self.directory / name
        deadline = time.monotonic() + seconds
        pause = 1e-3
        while not path.exists():
            if self.process.poll() is not None and not path.exists():
                raise TestbedError(f"the MPI job ended during {what}: {self.error()}")
            if time.monotonic() > deadline:
                raise TestbedError(f"{what} did not end within {seconds:.0f} s (the MPI job is stopped; its command "
                                   f"is in {self.directory / 'command'})")
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
        return path

    def go(self, k: int) -> None:
        (self.directory / f"go.{k}").touch()

    def error(self) -> str:
        """The worker's error line, or the last lines of what it printed."""
        text = (self.directory / "stderr").read_text(errors="replace") if (self.directory / "stderr").exists() else ""
        errors = [line.removeprefix("optiq: error: ") for line in text.splitlines() if line.startswith("optiq: error:")]
        if errors:
            return errors[0]
        lines = [line for line in text.splitlines() if line.strip()]
        return " | ".join(lines[-3:]) or f"exit code {self.process.returncode}"

    def finish(self, seconds: float = 60.0) -> None:
        try:
            code = self.process.wait(timeout=seconds)
        except Exception:
            self.stop()
            raise TestbedError(f"the MPI job did not end within {seconds:.0f} s after its last step") from None
        if code:
            raise TestbedError(f"the MPI job ended with exit code {code}: {self.error()}")

    def stop(self) -> None:
        """End the job: mpiexec, its proxies and ranks are all inside the testbed's namespaces."""
        from .system import kill_namespace_processes

        kill_namespace_processes([*self.bed.layout.namespaces[: self.bed.topology.num_endpoints],
                                  self.bed.layout.control])
        try:
            self.process.wait(timeout=10)
        except Exception:
            self.process.kill()


def _route_pair(bed: Testbed) -> tuple[int, int]:
    """Two hosts whose route crosses only the fastest links, fewest hops first (the goodput flow's)."""
    t = bed.topology
    fwd = bed.installed
    assert fwd is not None
    routes = fwd.routes
    top = t.capacity.max()
    slowest = np.minimum.reduceat(t.capacity[routes.links], routes.offsets[:-1])
    fastest = np.flatnonzero(slowest >= top)
    candidates = fastest if fastest.size else np.arange(routes.num_paths)
    best = int(candidates[np.argmin(routes.hops[candidates])])
    from .forwarding import all_pairs

    src, dst = all_pairs(t.num_endpoints)
    return int(src[best]), int(dst[best])


def measure_goodput(bed: Testbed, *, rounds: int = 2, say: Callable[[str], None] | None = None) -> Goodput:
    """One MPI flow over TCP between two hosts whose route runs at the full rate: its goodput and
    the link bytes per payload byte forward (``1 + header``) and back (``ack``)."""
    say = say or (lambda m: None)
    src, dst = _route_pair(bed)
    nbytes = int(min(256 * 2**20, max(2**20, bed.rate * GOODPUT_S)))
    steps = [{"kind": "goodput", "src": 0, "dst": 1, "bytes": 65536}] + \
            [{"kind": "goodput", "src": 0, "dst": 1, "bytes": nbytes}] * rounds
    say(f"goodput: {rounds} x {nbytes / 2**20:.1f} MiB from {bed.topology.label(src)} to {bed.topology.label(dst)}")
    job = _Job(bed, bed.state / "goodput", {"runners": {}, "steps": steps, "seed": 0}, [src, dst], say)
    try:
        results = _run_steps(bed, job, [None] * len(steps), [False] + [True] * rounds,
                             [STARTUP_S] + [STEP_GRACE_S + 10 * GOODPUT_S] * rounds, say=None)
        job.finish()
    except BaseException:
        job.stop()
        raise
    fwd = bed.installed
    assert fwd is not None
    there, back = fwd.pair_route(src, dst), fwd.pair_route(dst, src)
    measured = [r for r in results if r.measured]
    sent = sum(float(r.counters.bytes[there].mean()) for r in measured)
    acked = sum(float(r.counters.bytes[back].mean()) for r in measured)
    samples = [r.elapsed_s for r in measured]
    total = nbytes * len(measured)
    return Goodput(nbytes / statistics.median(samples), sent / total - 1.0, acked / total, src, dst, samples)


def measure_methods(bed: Testbed, methods: Sequence[Method], predicted_s: Sequence[float], *, repeat: int = 5,
                    warmup: int = 1, seed: int = 0, pace_paths: bool = True, window: int | None = None,
                    chunk_size: int | None = None, say: Callable[[str], None] | None = None) -> list[StepResult]:
    """Run ``warmup`` unmeasured rounds and ``repeat`` measured rounds of every method in turn.

    Parameters
    ----------
    bed : Testbed
    methods : sequence of Method
    predicted_s : sequence of float
        Every method's predicted time on the testbed: the executor runs a plan on its network
        with the capacities scaled so that the plan's time is this (its paced rates, and its
        default window, follow the testbed's links), and a step that takes ten times as long
        (and a minute) is called hung.
    pace_paths, window, chunk_size
        The executor's options (:class:`~optiq.runtime.Executor`).

    Returns
    -------
    list of StepResult
        Every step, in the order run.

    Raises
    ------
    TestbedError
        If the MPI job fails or a step does not end in time (the job is stopped).
    """
    say = say or (lambda m: None)
    directory = bed.state / "run"
    runners: dict[str, dict[str, Any]] = {}
    runner_of: dict[str, str] = {}
    staging: dict[str, Any] = {}
    for m, predicted in zip(methods, predicted_s):
        timeout = STEP_GRACE_S + 10 * predicted
        if m.runner == "alltoallv":
            key = "alltoallv"  # every method's demands are the same: one set of buffers
            if key not in runners:
                runners[key] = {"kind": "alltoallv", "plan": "alltoallv.plan.json", "scale": 1.0, "timeout_s": 0.0}
                staging[key] = m.plan if m.routing == "network routes" else _demands_plan(m)
        else:
            key = f"executor-{len(runners)}"
            runners[key] = {"kind": "executor", "plan": f"{key}.plan.json", "timeout_s": 0.0,
                            "scale": m.plan.predicted_time_s / predicted, "pace_paths": pace_paths,
                            "routes_as_planned": m.plan.routing == "free", "window": window,
                            "chunk_size": chunk_size}
            staging[key] = m.plan
        runners[key]["timeout_s"] = max(runners[key]["timeout_s"], timeout)
        runner_of[m.name] = key
    order: list[tuple[Method, bool]] = [(m, False) for _ in range(warmup) for m in methods] + \
                                       [(m, True) for _ in range(repeat) for m in methods]
    steps = [{"runner": runner_of[m.name]} for m, _ in order]
    t = bed.topology
    say(f"MPI job: {t.num_endpoints} ranks, {len(methods)} methods, {warmup} warm-up and {repeat} measured rounds")
    job = _Job(bed, directory, {"runners": runners, "steps": steps, "seed": seed}, range(t.num_endpoints), say,
               {runners[key]["plan"]: plan for key, plan in staging.items()})
    try:
        waits = [STARTUP_S] + [runners[runner_of[m.name]]["timeout_s"] for m, _ in order[1:]]
        results = _run_steps(bed, job, order, [measured for _, measured in order], waits, say=say)
        job.finish()
    except BaseException:
        job.stop()
        raise
    return results


def _demands_plan(m: Method) -> Any:
    """A plan whose demands are ``m``'s, on the testbed's network (``MPI_Alltoallv`` reads only the demands)."""
    from ..planner import make_plan

    return make_plan(m.forwarding.layout.topology, m.plan.demands, "default", chunk_size=m.plan.chunk_size)


def _run_steps(bed: Testbed, job: _Job, order: Sequence[Any], measured: Sequence[bool], waits: Sequence[float], *,
               say: Callable[[str], None] | None) -> list[StepResult]:
    results = []
    for k, (item, counted) in enumerate(zip(order, measured)):
        method = item[0] if isinstance(item, tuple) else None
        name = method.name if method is not None else "goodput"
        job.wait_for(f"ready.{k}", waits[0] if k == 0 else STEP_GRACE_S, f"step {k} ({name}) getting ready")
        if method is not None and bed.installed is not method.forwarding:
            bed.install(method.forwarding)
        before, idle0 = bed.counters(), cpu_times()
        job.go(k)
        done = job.wait_for(f"done.{k}", waits[k], f"step {k} ({name})")
        after, idle1 = bed.counters(), cpu_times()
        out = json.loads(done.read_text())
        total = idle1[1] - idle0[1]
        results.append(StepResult(name, counted, float(out["elapsed_s"]), bool(out["verified"]),
                                  list(out.get("problems", [])), after - before,
                                  (idle1[0] - idle0[0]) / total if total > 0 else float("nan")))
        if say is not None:
            say(f"step {k + 1}/{len(order)}: {name} {out['elapsed_s']:.3f} s"
                + ("" if counted else " (warm-up)") + ("" if out["verified"] else ", NOT VERIFIED"))
    return results
