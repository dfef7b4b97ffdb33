"""The MPI program of a testbed run: ``python -m optiq.testbed.worker JOBDIR``, one rank per host namespace.

The job directory holds ``job.json`` (what to run, :class:`~optiq.testbed.session.Session`
writes it) and the plan files. Every *runner* is set up once: the executor of a plan
(:class:`~optiq.runtime.Executor`), or ``MPI_Alltoallv`` of a plan's demands
(:class:`~optiq.runtime.baseline.AlltoallvBaseline`); its buffers are filled with seeded
patterns. Then the steps run in order, each in step with the process that measures the
network: rank 0 writes ``ready.K`` and waits for ``go.K`` (the routes for the step are
installed and the counters read by then), every rank starts at one agreed moment, and rank
0 writes ``start.K`` (the agreed moment, on :func:`time.perf_counter`) and ``done.K``: the
slowest rank's time and whether every byte arrived as sent.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import OptiqError, TestbedError
from ..mpi.launch import abort_on_failure, together
from ..mpi.waiting import allreduce_asleep, start_together, wait_politely

if TYPE_CHECKING:
    from ..plan import Plan

__all__ = ["run_job", "main", "POLL_S"]

#: Seconds between rank 0's looks for the go-ahead of a step.
POLL_S = 0.002


def scaled(plan: Plan, factor: float) -> Plan:
    """``plan`` on its network with every link's capacity times ``factor`` (the testbed's rates)."""
    topology = replace(plan.topology, capacity=plan.topology.capacity * factor)
    return replace(plan, topology=topology, check_legs=False)


def write_atomically(path: Path, text: str) -> None:
    """Write ``path`` so that a reader sees all of it or nothing."""
    partial = path.with_name(path.name + ".part")
    partial.write_text(text)
    os.replace(partial, path)


class _Runner:
    """One way of moving one plan's bytes, set up once and run at every step that names it."""

    def __init__(self, comm: Any, spec: dict[str, Any], plan: Plan, seed: int) -> None:
        from ..runtime import Executor, fill_send_buffers
        from ..runtime.baseline import AlltoallvBaseline

        self.kind = spec["kind"]
        self.timeout = float(spec["timeout_s"])
        self.seed = seed
        self.executor = None
        self.baseline = None
        if self.kind == "executor":
            self.executor = Executor(comm, plan, window=spec.get("window"), chunk_size=spec.get("chunk_size"),
                                     pace_paths=bool(spec.get("pace_paths")),
                                     routes_as_planned=bool(spec.get("routes_as_planned")))
            self.send = fill_send_buffers(self.executor.schedule.send_jobs, seed)
            self.recv = self.executor.empty_recv_buffers()
        elif self.kind == "alltoallv":
            self.baseline = AlltoallvBaseline(comm, plan)
            rank = comm.Get_rank()
            dem = plan.demands
            mine = {int(j): int(dem.nbytes[j]) for j in np.flatnonzero(plan.ranks[dem.src] == rank)}
            self.baseline.pack(fill_send_buffers(mine, seed))
        else:
            raise TestbedError(f"unknown runner kind {self.kind!r}")

    def run(self, start: float) -> float:
        if self.executor is not None:
            for buf in self.recv.values():
                buf.fill(0)
            return self.executor.run(self.send, self.recv, timeout=self.timeout, start_at=start).elapsed_s
        assert self.baseline is not None
        self.baseline.recv_buf.fill(0)
        return self.baseline.run(start, polite=True, timeout=self.timeout)

    def problems(self) -> list[str]:
        from ..runtime import find_mismatches

        received = self.recv if self.executor is not None else self.baseline.unpack()  # type: ignore[union-attr]
        return find_mismatches(received, self.seed)

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()


def _goodput(comm: Any, step: dict[str, Any], start: float) -> float:
    """One flow: ``bytes`` from rank ``src`` to rank ``dst``; the receiver's time."""
    from mpi4py import MPI

    rank = comm.Get_rank()
    n = int(step["bytes"])
    if rank == step["src"]:
        buf = np.ones(n, dtype=np.uint8)
        wait_politely(comm.Isend([buf, MPI.BYTE], dest=step["dst"], tag=7), yields=0)
    elif rank == step["dst"]:
        buf = np.empty(n, dtype=np.uint8)
        wait_politely(comm.Irecv([buf, MPI.BYTE], source=step["src"], tag=7), yields=0)
        return time.perf_counter() - start
    return 0.0


def run_job(comm: Any, directory: Path) -> None:
    """Set up every runner of ``directory/job.json`` and run its steps in step with the measuring
    process (module docstring). Collective over ``comm``, which must have a rank per host.

    Raises
    ------
    TestbedError
        If the job cannot be read or a runner set up (on every rank); a transfer that fails
        raises on the rank it failed on.
    """
    from mpi4py import MPI

    from ..plan import load_plan

    comm = comm.Dup()
    rank = comm.Get_rank()
    try:
        def read() -> dict[str, Any]:
            job = json.loads((directory / "job.json").read_text()) if rank == 0 else None
            return comm.bcast(job)

        job = together(comm, read)
        plans: dict[str, Plan] = {}
        for name, spec in job["runners"].items():
            def load(spec: dict[str, Any] = spec) -> Plan:
                plan = scaled(load_plan(directory / spec["plan"]), float(spec["scale"])) if rank == 0 else None
                return comm.bcast(plan)

            plans[name] = together(comm, load)
        runners = {}
        for name, spec in job["runners"].items():
            def setup(name: str = name, spec: dict[str, Any] = spec) -> _Runner:
                return _Runner(comm, spec, plans[name], job["seed"])

            runners[name] = together(comm, setup)
        host = comm.Split_type(MPI.COMM_TYPE_SHARED)
        with abort_on_failure(comm):  # a rank failing alone cannot tell the others: they end together
            _steps(comm, host, directory, job["steps"], runners)
        host.Free()
        for runner in runners.values():
            runner.close()
    finally:
        comm.Free()


def _steps(comm: Any, host: Any, directory: Path, steps: list[dict[str, Any]], runners: dict[str, _Runner]) -> None:
    from mpi4py import MPI

    rank = comm.Get_rank()
    for k, step in enumerate(steps):
        if rank == 0:
            (directory / f"ready.{k}").touch()
            go = directory / f"go.{k}"
            while not go.exists():
                time.sleep(POLL_S)
        wait_politely(comm.Ibarrier(), yields=0)
        start = start_together(comm, host=host)
        if rank == 0:  # the moment the step starts, on the clock every namespace shares (faults are timed from it)
            write_atomically(directory / f"start.{k}", repr(start))
        if step.get("kind") == "goodput":
            local = _goodput(comm, step, start)
            problems: list[str] = []
        else:
            runner = runners[step["runner"]]
            local = runner.run(start)
            problems = runner.problems()
        bound = None if step.get("kind") == "goodput" else max(1.0, runner.timeout - (time.perf_counter() - start))
        elapsed = allreduce_asleep(comm, local, MPI.MAX, timeout=bound)
        verified = bool(allreduce_asleep(comm, float(not problems), MPI.MIN))
        said = [m for ms in comm.gather(problems[:2]) or [] for m in ms] if not verified else []
        if rank == 0:
            write_atomically(directory / f"done.{k}", json.dumps(
                {"elapsed_s": elapsed, "verified": verified, "problems": said[:5]}))


def main(argv: list[str] | None = None) -> int:
    """``python -m optiq.testbed.worker JOBDIR`` under ``mpiexec``: :func:`run_job` on the world."""
    from mpi4py import MPI

    args = sys.argv[1:] if argv is None else argv
    comm = MPI.COMM_WORLD
    if len(args) != 1:
        if comm.Get_rank() == 0:
            print("optiq: error: usage: python -m optiq.testbed.worker JOBDIR", file=sys.stderr)
        return 2
    try:
        run_job(comm, Path(args[0]))
    except OptiqError as exc:
        if comm.Get_rank() == 0:
            print(f"optiq: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
