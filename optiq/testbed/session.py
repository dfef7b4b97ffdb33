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
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import TestbedError
from ..utils.resources import cpu_times
from .conditions import fault_bound
from .forwarding import Forwarding, all_pairs
from .launch import describe, mpiexec_argv, start, write_launcher
from .network import Counters

if TYPE_CHECKING:
    import subprocess

    from .methods import Method
    from .network import Testbed

__all__ = ["StepResult", "Goodput", "Faults", "measure_goodput", "measure_methods", "STEP_GRACE_S", "COMPLETED",
           "FAILED"]

#: A step's outcome.
COMPLETED, FAILED = "completed", "failed"
#: Seconds the measuring process waits beyond a round's own bound (the ranks' abort and their last words).
ABORT_WAIT_S = 15.0

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
    #: ``completed``, or ``failed`` (the round did not end within its bound, or a rank gave up)
    outcome: str = COMPLETED
    #: why it failed, in one line
    error: str = ""


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

    def wait_for(self, name: str, seconds: float, what: str,
                 events: Sequence[tuple[float, Callable[[], None]]] = (), origin: str = "") -> Path:
        """Wait for the worker's file ``name``, doing each of ``events`` (seconds after the moment
        the worker writes to the file ``origin``, what) when it is due; raise if the job ends or
        ``seconds`` pass first."""
        path = self.directory / name
        deadline = time.monotonic() + seconds
        due = sorted(events, key=lambda event: event[0])
        began: float | None = None
        pause = 1e-3
        while not path.exists():
            if due and origin and began is None and (self.directory / origin).exists():
                began = float((self.directory / origin).read_text())  # perf_counter: one clock for all namespaces
            while due and began is not None and time.perf_counter() - began >= due[0][0]:
                due.pop(0)[1]()
            if self.process.poll() is not None and not path.exists():
                raise TestbedError(f"the MPI job ended during {what}: {self.error()}")
            if time.monotonic() > deadline:
                said = self.error() if "optiq: error:" in self.stderr() else ""
                raise TestbedError(f"{what} did not end within {seconds:.0f} s (the MPI job is stopped"
                                   + (f"; a rank said: {said}" if said else
                                      f"; its command is in {self.directory / 'command'}") + ")")
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
        return path

    def go(self, k: int) -> None:
        (self.directory / f"go.{k}").touch()

    def stderr(self) -> str:
        path = self.directory / "stderr"
        return path.read_text(errors="replace") if path.exists() else ""

    def error(self) -> str:
        """The worker's error line, or the last lines of what it printed."""
        text = self.stderr()
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
                    chunk_size: int | None = None, faults: Faults | None = None,
                    say: Callable[[str], None] | None = None,
                    connected: Callable[[], None] | None = None) -> list[StepResult]:
    """Run ``warmup`` unmeasured rounds and ``repeat`` measured rounds of every method in turn.

    Where cables fail (``bed.conditions.fail``), every measured round fails them and reroutes
    the network (:class:`Faults`). A round that does not end within its bound
    (:func:`~optiq.testbed.conditions.fault_bound`, or on a healthy network ten times its
    predicted time and a minute) or whose ranks give up is a failed step; the MPI job is
    stopped, the network mended, and a new job runs a warm-up of every method and then the
    rounds after it.

    Parameters
    ----------
    bed : Testbed
    methods : sequence of Method
    predicted_s : sequence of float
        Every method's predicted time on the testbed: the executor runs a plan on its network
        with the capacities scaled so that the plan's time is this (its paced rates, and its
        default window, follow the testbed's links); its bound follows from it.
    pace_paths, window, chunk_size
        The executor's options (:class:`~optiq.runtime.Executor`).
    connected : callable, optional
        Called after each method's first step in the first job, while its connections are open
        (an ECMP network's paths are read back then).
    faults : Faults, optional
        The failures of ``bed.conditions`` worked out for ``methods`` (default: worked out here).

    Returns
    -------
    list of StepResult
        Every step of the order, warm-ups included (a restarted job's own warm-ups are not).

    Raises
    ------
    TestbedError
        If the MPI job fails to start or fails outside a measured round (the job is stopped).
    """
    say = say or (lambda m: None)
    conditions = bed.conditions
    runners: dict[str, dict[str, Any]] = {}
    runner_of: dict[str, str] = {}
    staging: dict[str, Any] = {}
    for m, predicted in zip(methods, predicted_s):
        timeout = fault_bound(predicted, conditions.rerouted_at_s) if conditions.fail else \
            STEP_GRACE_S + 10 * predicted
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
    if faults is None and conditions.fail:
        faults = Faults(bed, methods)
    order: list[tuple[Method, bool]] = [(m, False) for _ in range(warmup) for m in methods] + \
                                       [(m, True) for _ in range(repeat) for m in methods]
    t = bed.topology
    say(f"MPI job: {t.num_endpoints} ranks, {len(methods)} methods, {warmup} warm-up and {repeat} measured rounds")
    results: list[StepResult] = []
    jobs = 0
    while len(results) < len(order):
        rest = order[len(results):]
        lead = [(m, False) for m in methods] if jobs else []  # a new job warms up first: new connections
        steps = [{"runner": runner_of[m.name]} for m, _ in lead + rest]
        job = _Job(bed, bed.state / f"run.{jobs}", {"runners": runners, "steps": steps, "seed": seed},
                   range(t.num_endpoints), say, {runners[key]["plan"]: plan for key, plan in staging.items()})
        jobs += 1
        try:
            waits = [STARTUP_S] + [runners[runner_of[m.name]]["timeout_s"] + ABORT_WAIT_S for m, _ in (lead + rest)[1:]]
            done = _run_steps(bed, job, lead + rest, [measured for _, measured in lead + rest], waits, say=say,
                              faults=faults, connected=connected if jobs == 1 else None)
            results += done[len(lead):]
            if done[-1].outcome == COMPLETED and len(done) == len(lead + rest):
                job.finish()
                break
            failed = done[-1]
            if len(done) <= len(lead) or not failed.measured:
                raise TestbedError(f"step {len(results)} ({failed.method}) failed outside a measured round: "
                                   f"{failed.error}")
            job.stop()
            say(f"{failed.method} failed: {failed.error}; a new MPI job runs the rounds after it")
        except BaseException:
            job.stop()
            raise
        finally:
            bed.mend()
    return results


def network_after(bed: Testbed, dead: np.ndarray) -> Forwarding:
    """The network's own forwarding once it has routed around the ``dead`` links
    (:func:`~optiq.paths.failover.routes_after_failure` for every pair of hosts)."""
    from ..paths.failover import routes_after_failure

    src, dst = all_pairs(bed.topology.num_endpoints)
    return Forwarding.of_routes(bed.layout, routes_after_failure(bed.topology, src, dst, dead).routes)


def failure_events(bed: Testbed) -> list[tuple[float, str, Callable[[], None]]]:
    """What happens to the network of ``bed`` (built with its own routes) under its conditions'
    failures, in order: at each failure time its cables die, and a sweep later the network's
    own routes without every cable dead by then are installed (``(seconds, what, do)``)."""
    c, t = bed.conditions, bed.topology
    out: list[tuple[float, str, Callable[[], None]]] = []
    for at in sorted({at for _, at, _ in c.fail}):
        names = ", ".join(name for _, when, name in c.fail if when == at)
        dead = c.dead_links(t, at)
        out.append((at, f"cable {names} failed", partial(bed.fail, dead)))
        out.append((at + c.sweep_s, "the network's routes around the dead cables installed",
                    partial(bed.install, network_after(bed, dead))))
    return sorted(out, key=lambda event: event[0])


class Faults:
    """The cables that fail in every measured round, and what the network does about them.

    For every failure time, the network's own routes without the cables dead by then
    (:func:`~optiq.paths.failover.routes_after_failure`) and every method's forwarding once
    they are installed (:func:`~optiq.testbed.methods.rerouted`); and, per method, the host
    pairs it sends between whose route crossed a dead cable (``crossed``) and those whose
    route still does once the network has rerouted (``stranded``: their bytes cannot arrive).
    """

    def __init__(self, bed: Testbed, methods: Sequence[Method]) -> None:
        from ..paths.failover import crossing
        from .methods import rerouted

        self.bed = bed
        c, t = bed.conditions, bed.topology
        src, dst = all_pairs(t.num_endpoints)
        self.times = sorted({at for _, at, _ in c.fail})
        self.dead = {at: c.dead_links(t, at) for at in self.times}
        self.after: dict[tuple[str, float], Forwarding | None] = {}
        for at in self.times:
            network = network_after(bed, self.dead[at])
            for m in methods:
                self.after[m.name, at] = rerouted(m, network)
        every = c.dead_links(t)
        self.crossed: dict[str, list[str]] = {}
        self.stranded: dict[str, list[str]] = {}
        for m in methods:
            a, b, _ = m.flows()
            last = self.after[m.name, self.times[-1]] or m.forwarding
            for fwd, out in ((m.forwarding, self.crossed), (last, self.stranded)):
                pairs = np.unique(fwd.pair_index(a, b))
                hit = pairs[crossing(fwd.routes, every)[pairs]]
                out[m.name] = [f"{t.label(int(src[p]))} -> {t.label(int(dst[p]))}" for p in hit.tolist()]

    def arm(self) -> None:
        """Before a measured round: make every cable that fails in it ready to (:meth:`Testbed.arm`)."""
        self.bed.arm(self.bed.conditions.dead_links(self.bed.topology))

    def events(self, method: Method) -> list[tuple[float, Callable[[], None]]]:
        """What happens during one measured round of ``method``: each failure, and each sweep."""
        c = self.bed.conditions
        out: list[tuple[float, Callable[[], None]]] = []
        for at in self.times:
            out.append((at, partial(self.bed.fail, self.dead[at])))
            after = self.after[method.name, at]
            if after is not None:
                out.append((at + c.sweep_s, partial(self.bed.install, after)))
        return out

    def error(self, method: Method, line: str) -> str:
        """``line`` (why a round of ``method`` failed) with the pairs that route into a dead cable."""
        stranded = self.stranded[method.name]
        cables = ", ".join(name for _, _, name in self.bed.conditions.fail)
        if not stranded:
            return f"{line} (no pair's route crosses the dead cable {cables} after the sweep)"
        return (f"{line}; {len(stranded)} of its pairs still route into the dead cable {cables}: "
                f"{', '.join(stranded[:3])}" + (" ..." if len(stranded) > 3 else ""))


def _demands_plan(m: Method) -> Any:
    """A plan whose demands are ``m``'s, on the testbed's network (``MPI_Alltoallv`` reads only the demands)."""
    from ..planner import make_plan

    return make_plan(m.forwarding.layout.topology, m.plan.demands, "default", chunk_size=m.plan.chunk_size)


def _run_steps(bed: Testbed, job: _Job, order: Sequence[Any], measured: Sequence[bool], waits: Sequence[float], *,
               say: Callable[[str], None] | None, faults: Faults | None = None,
               connected: Callable[[], None] | None = None) -> list[StepResult]:
    """The steps of ``job`` in order; under ``faults`` every measured round fails its cables and
    reroutes, and the list ends early with the first failed round (the job is then broken)."""
    results = []
    for k, (item, counted) in enumerate(zip(order, measured)):
        method = item[0] if isinstance(item, tuple) else None
        name = method.name if method is not None else "goodput"
        job.wait_for(f"ready.{k}", waits[0] if k == 0 else STEP_GRACE_S, f"step {k} ({name}) getting ready")
        bed.mend()
        if method is not None and bed.installed is not method.forwarding:
            bed.install(method.forwarding)
        events = faults.events(method) if faults is not None and method is not None and counted else []
        if events and faults is not None:
            faults.arm()
        before, idle0 = bed.counters(), cpu_times()
        began = time.perf_counter()
        job.go(k)
        try:
            done = job.wait_for(f"done.{k}", waits[k], f"step {k} ({name})", events, origin=f"start.{k}")
        except TestbedError as exc:
            if method is None or (faults is None and not counted):  # a healthy network's warm-up: an error
                raise
            elapsed = time.perf_counter() - began
            after, idle1 = bed.counters(), cpu_times()
            total = idle1[1] - idle0[1]
            line = faults.error(method, str(exc)) if faults is not None else str(exc)
            results.append(StepResult(name, counted, elapsed, False, [], after - before,
                                      (idle1[0] - idle0[0]) / total if total > 0 else float("nan"), FAILED, line))
            if say is not None:
                say(f"step {k + 1}/{len(order)}: {name} FAILED after {elapsed:.3f} s")
            return results
        after, idle1 = bed.counters(), cpu_times()
        out = json.loads(done.read_text())
        total = idle1[1] - idle0[1]
        results.append(StepResult(name, counted, float(out["elapsed_s"]), bool(out["verified"]),
                                  list(out.get("problems", [])), after - before,
                                  (idle1[0] - idle0[0]) / total if total > 0 else float("nan")))
        if say is not None:
            say(f"step {k + 1}/{len(order)}: {name} {out['elapsed_s']:.3f} s"
                + ("" if counted else " (warm-up)") + ("" if out["verified"] else ", NOT VERIFIED"))
        if connected is not None and k < len({m.name for m, _ in order if m is not None}):
            connected()  # each method's first round opens the connections it needs (MPI opens them lazily)
    return results
