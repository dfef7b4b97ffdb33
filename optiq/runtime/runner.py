"""Timed, repeated, verified runs of a plan and of the Alltoallv baseline, reported as a
:class:`~optiq.sim.runs.RunReport`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import ParameterError
from ..mpi.waiting import allreduce_asleep, start_together
from ..plan import Plan
from ..sim.runs import RunReport, Timing
from ..utils.checks import check_count
from .baseline import AlltoallvBaseline
from .executor import Executor, predicted_time
from .verify import fill_send_buffers, find_mismatches

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["measure", "predicted_time", "BASELINES"]

BASELINES = ("none", "alltoallv")


def measure(comm: Any, plan: Plan, *, repeat: int = 3, warmup: int = 1, verify: bool = False, seed: int = 0,
            window: int | None = None, link_bw: float | str | None = None, chunk_size: int | None = None,
            baseline: str = "none", timeout: float = 60.0, pace_paths: bool = False,
            routes_as_planned: bool = False) -> RunReport:
    """Run the plan ``warmup + repeat`` times (and the baseline likewise); all ranks call it.

    Every repeat starts at a moment the ranks agree on after a barrier
    (:func:`~optiq.mpi.waiting.start_together`); its time runs from that moment to the end of the
    slowest rank. The report is the same on every rank.

    Raises
    ------
    PlanError
        If the communicator does not fit the plan, an option is out of range, or it is a free
        plan the network's own routes would carry more slowly than predicted, unless
        ``routes_as_planned`` (:func:`~optiq.runtime.executor.check_routes`).
    TransferError
        If a transfer times out or a buffer is wrong.
    """

    check_count("repeat", repeat, 1)
    check_count("warmup", warmup, 0)
    if baseline not in BASELINES:
        raise ParameterError(f"unknown baseline {baseline!r}; choose from {', '.join(BASELINES)}")
    from mpi4py import MPI

    with Executor(comm, plan, window=window, link_bw=link_bw, chunk_size=chunk_size,
                  pace_paths=pace_paths, routes_as_planned=routes_as_planned) as executor:
        host = comm.Split_type(MPI.COMM_TYPE_SHARED)  # the ranks that share a clock (start_together)
        try:
            return _measure(comm, plan, executor, host, repeat=repeat, warmup=warmup, verify=verify, seed=seed,
                            baseline=baseline, timeout=timeout)
        finally:
            host.Free()


def _measure(comm, plan, executor, host, *, repeat, warmup, verify, seed, baseline, timeout) -> RunReport:
    from mpi4py import MPI

    sched = executor.schedule
    send = fill_send_buffers(sched.send_jobs, seed if verify else None)
    recv = executor.empty_recv_buffers()
    bytes_total = int(plan.demands.nbytes.sum())

    def repeated(name: str, run_once: Callable[[float], float],
                 received: Callable[[], dict[int, np.ndarray]]) -> Timing:
        times: list[float] = []
        problems: list[str] = []
        for it in range(warmup + repeat):
            for buf in received().values():
                buf.fill(0)
            local = run_once(start_together(comm, host=host))
            elapsed = allreduce_asleep(comm, local, MPI.MAX)
            if it >= warmup:
                times.append(elapsed)
            if verify and not problems:
                problems = [f"rank {comm.Get_rank()}, repeat {it}: {m}" for m in find_mismatches(received(), seed)]
        verified = None
        if verify:
            verified = bool(allreduce_asleep(comm, not problems, MPI.MIN))
            problems = [m for ms in comm.allgather(problems[:3]) for m in ms]
        return Timing(name, tuple(times), bytes_total, verified, tuple(problems))

    stats = {}

    def run_plan_once(start: float) -> float:
        result = executor.run(send, recv, timeout=timeout, start_at=start)
        stats["forwarded"], stats["buffer"], stats["messages"] = \
            result.chunks_forwarded, result.buffer_bytes, result.messages
        return result.elapsed_s

    plan_timing = repeated(f"optiq {plan.method}", run_plan_once, lambda: recv)
    base_timing = None
    if baseline == "alltoallv":
        a2a = AlltoallvBaseline(comm, plan)
        a2a.pack(send)
        base_timing = repeated("MPI_Alltoallv", a2a.run, a2a.unpack)
    predicted, at = predicted_time(plan, executor.link_bw)
    return RunReport(method=plan.method, topology=plan.topology.name, plan_fingerprint=plan.fingerprint,
                     ranks=comm.Get_size(),
                     jobs=plan.demands.num_jobs, paths=int((plan.path_bytes > 0).sum()),
                     chunk_size=executor.chunk_size, window=executor.window, link_bw_Bps=executor.link_bw,
                     predicted_time_s=predicted,
                     predicted_at=at, repeats=repeat, warmup=warmup, plan=plan_timing, baseline=base_timing,
                     chunks_forwarded=int(comm.allreduce(stats["forwarded"], op=MPI.SUM)),
                     buffer_bytes_max=int(comm.allreduce(stats["buffer"], op=MPI.MAX)),
                     messages=int(comm.allreduce(stats["messages"], op=MPI.SUM)))
