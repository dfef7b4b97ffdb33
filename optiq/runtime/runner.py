"""Timed, repeated, verified runs of a plan and of the Alltoallv baseline, and their report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..mpi.waiting import allreduce_asleep, start_together
from ..plan import Plan
from .baseline import AlltoallvBaseline
from .executor import Executor, predicted_time
from .verify import fill_send_buffers, find_mismatches

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["Timing", "RunReport", "measure", "predicted_time", "format_report", "BASELINES"]

BASELINES = ("none", "alltoallv")


@dataclass
class Timing:
    """Completion times of repeated runs (each the slowest rank's) and their check.

    Attributes
    ----------
    name : str
    times_s : list of float
        One per measured repeat (warm-up excluded).
    bytes_total : int
    verified : bool or None
        Whether every byte matched on every rank in every repeat; ``None`` if not checked.
    mismatches : list of str
        Messages naming job and offset of wrong bytes (rank-prefixed), if any.
    """

    name: str
    times_s: list[float]
    bytes_total: int
    verified: bool | None
    mismatches: list[str] = field(default_factory=list)

    @property
    def min_s(self) -> float:
        return float(np.min(self.times_s))

    @property
    def median_s(self) -> float:
        return float(np.median(self.times_s))

    @property
    def throughput_Bps(self) -> float:
        """Bytes over the median time."""
        return self.bytes_total / self.median_s if self.median_s > 0 else float("inf")

    def to_dict(self) -> dict:
        return {"bytes_total": self.bytes_total, "elapsed_s": self.median_s, "elapsed_min_s": self.min_s,
                "elapsed_median_s": self.median_s, "throughput_Bps": self.throughput_Bps,
                "times_s": list(self.times_s), "verified": self.verified, "mismatches": list(self.mismatches)}


@dataclass
class RunReport:
    """Everything ``optiq run`` measured; :meth:`to_dict` is the ``--json`` contract.

    The top-level ``bytes_total``, ``elapsed_s`` (median), ``elapsed_min_s``,
    ``elapsed_median_s``, ``throughput_Bps`` and ``verified`` are the plan's; the baseline,
    when run, has the same keys under ``baseline``.
    """

    method: str
    topology: str
    plan_fingerprint: str
    ranks: int
    jobs: int
    paths: int
    chunk_size: int
    window: int
    link_bw_Bps: float | None
    predicted_time_s: float
    predicted_at: str
    repeats: int
    warmup: int
    plan: Timing
    baseline: Timing | None
    chunks_forwarded: int
    buffer_bytes_max: int
    messages: int

    @property
    def measured_over_predicted(self) -> float:
        return self.plan.median_s / self.predicted_time_s if self.predicted_time_s > 0 else float("nan")

    def to_dict(self) -> dict:
        """The report as :data:`optiq.sim.runs.REPORT_KEYS` say."""
        out = {"method": self.method, "topology": self.topology, "plan_fingerprint": self.plan_fingerprint,
               "ranks": self.ranks, "jobs": self.jobs,
               "paths": self.paths, "chunk_size": self.chunk_size, "window": self.window,
               "link_bw_Bps": self.link_bw_Bps, "repeats": self.repeats, "warmup": self.warmup}
        out.update(self.plan.to_dict())
        out.update({"predicted_time_s": self.predicted_time_s, "predicted_at": self.predicted_at,
                    "measured_over_predicted": self.measured_over_predicted,
                    "chunks_forwarded": self.chunks_forwarded, "messages": self.messages,
                    "buffer_bytes_max": self.buffer_bytes_max,
                    "baseline": None if self.baseline is None else {"name": self.baseline.name,
                                                                    **self.baseline.to_dict()}})
        return out


def measure(comm: Any, plan: Plan, *, repeat: int = 3, warmup: int = 1, verify: bool = False, seed: int = 0,
            window: int | None = None, link_bw: float | None = None, chunk_size: int | None = None,
            baseline: str = "none", timeout: float = 60.0, pace_paths: bool = False) -> RunReport:
    """Run the plan ``warmup + repeat`` times (and the baseline likewise); all ranks call it.

    Every repeat starts at a moment the ranks agree on after a barrier
    (:func:`~optiq.mpi.waiting.start_together`); its time runs from that moment to the end of the
    slowest rank. The report is the same on every rank.

    Raises
    ------
    PlanError
        If the communicator does not fit the plan or an option is out of range.
    TransferError
        If a transfer times out or a buffer is wrong.
    """

    if repeat < 1 or warmup < 0:
        raise ValueError(f"need repeat >= 1 and warmup >= 0, got repeat={repeat}, warmup={warmup}")
    if baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; choose from {', '.join(BASELINES)}")
    from mpi4py import MPI

    with Executor(comm, plan, window=window, link_bw=link_bw, chunk_size=chunk_size,
                  pace_paths=pace_paths) as executor:
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
        return Timing(name, times, bytes_total, verified, problems)

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


def format_report(report: RunReport) -> str:
    """The table ``optiq run`` prints."""
    r = report
    paced = f", links paced at {r.link_bw_Bps / 1e6:g} MB/s" if r.link_bw_Bps else ""
    lines = [f"{r.method} plan on {r.topology}: {r.ranks} ranks, {r.jobs} jobs, {r.paths} paths, "
             f"{r.plan.bytes_total / 2**20:,.1f} MiB, chunk {r.chunk_size / 1024:g} KiB, window {r.window}{paced}; "
             f"{r.repeats} repeat(s) after {r.warmup} warm-up",
             f"{'':16} {'min s':>10} {'median s':>10} {'GB/s':>8}  verified"]
    for t in (r.plan, r.baseline):
        if t is not None:
            check = {None: "not checked", True: "yes", False: "NO"}[t.verified]
            lines.append(f"{t.name:16} {t.min_s:10.4f} {t.median_s:10.4f} {t.throughput_Bps / 1e9:8.3f}  {check}")
    lines.append(f"{r.messages:,} MPI messages per transfer (chunks ready together on a path travel together), "
                 f"{r.chunks_forwarded:,} chunks forwarded")
    lines.append(f"predicted (flow level, {r.predicted_at}): {r.predicted_time_s:.4f} s; "
                 f"measured median / predicted = {r.measured_over_predicted:.2f}")
    if r.baseline is not None:
        unpaced = " (Alltoallv is not paced)" if r.link_bw_Bps else ""
        lines.append(f"Alltoallv median / plan median = {r.baseline.median_s / r.plan.median_s:.2f}{unpaced}")
    for t in (r.plan, r.baseline):
        if t is not None:
            lines.extend(f"mismatch ({t.name}): {m}" for m in t.mismatches)
    return "\n".join(lines)
