"""Measurements for the allreduce cost model: micro-benchmarks to fit it, algorithm timings to check it.

All ranks call these functions; results are complete on rank 0 (and identical elsewhere).
A timing is the slowest rank's, and the median over ``repeat`` runs after ``warmup``. Each
function first opens the MPI library's connections one partner at a time
(:func:`optiq.mpi.connect.connect_in_turn`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..errors import OptiqError
from ..mpi.connect import connect_in_turn
from ..mpi.waiting import allreduce_asleep, start_together
from ..utils.resources import cpu_times, idle_share
from .algorithms import PHASES, allreduce, exchange, exchanges_by, peer_order, send_and_receive
from .cost import algorithms
from .fit import Sample
from .report import AlgorithmTiming

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["run_microbenchmarks", "bench_algorithms", "trace_exchanges", "TRACE_GAP_S"]


def _timed(comm, run: Callable[[], object], repeat: int, warmup: int, inner: int = 1, own_clock: bool = False
           ) -> tuple[float, list[float], float | None]:
    """Median (and all) of the slowest rank's time of ``run``, and the machine's idle share of
    its CPU over the timed runs (rank 0; None elsewhere).

    With ``inner > 1`` each timed run calls ``run`` that many times back to back and counts a
    call as the run's time over ``inner``: the steps of an algorithm follow one another
    without a common start, so a micro-benchmark of one step is timed the same way, and what
    a common start costs (ranks that share cores wake one after another, TCP restarts an idle
    connection's window) is not charged to every step. With ``own_clock`` each rank times
    ``run`` from the moment it starts it, not from the common start: for work on the rank's
    own core (reductions, copies), which no other rank waits for, so that the lag of a rank
    woken late is not counted as the work's.
    """
    from mpi4py import MPI

    times = []
    before = cpu_times()
    for i in range(warmup + repeat):
        t0 = start_together(comm)
        if i == warmup:
            before = cpu_times()
        if own_clock:
            t0 = time.perf_counter()
        for _ in range(inner):
            run()
        elapsed = allreduce_asleep(comm, time.perf_counter() - t0, MPI.MAX) / inner
        if i >= warmup:
            times.append(elapsed)
    idle = idle_share(before, cpu_times()) if comm.Get_rank() == 0 else None
    return float(np.median(times)), times, idle


def run_microbenchmarks(comm: Any, sizes: Sequence[int] = (16384, 131072, 1048576), *, repeat: int = 5, warmup: int = 1,
                        back_to_back: int = 3, say: Callable[[str], None] = lambda msg: None) -> list[Sample]:
    """Time the four micro-benchmarks of :mod:`optiq.collectives.fit` at every size.

    Every rank works at once, as inside the algorithms (on a machine with fewer cores than
    ranks this matters most): ``p2p`` exchanges ``m`` bytes both ways between ranks
    ``r`` and ``r xor 1``; ``fullmesh`` runs, for every fan-in ``f = 1 .. N-1``, all full
    groups of ``f + 1`` consecutive ranks at once, each rank sending ``m`` bytes to every
    other member; ``reduce`` (2, 4 and ``N`` operands) and ``copy`` run on every rank.
    Sizes are bytes (multiples of 8: float64 elements).

    The exchanges are timed ``back_to_back`` at a time (a timed run's time over that count),
    as an algorithm's steps follow one another; ``reduce`` and ``copy`` on each rank's own
    clock from the moment it starts them (see :func:`_timed`).

    Raises
    ------
    OptiqError
        With fewer than 2 ranks or a size that is not a positive multiple of 8.
    """
    N, rank = comm.Get_size(), comm.Get_rank()
    if N < 2:
        raise OptiqError("the micro-benchmarks need at least 2 ranks (run under mpiexec -n N)")
    for s in sizes:
        if s < 8 or s % 8:
            raise OptiqError(f"benchmark size {s} must be a positive multiple of 8 bytes (float64 elements)")
    connect_in_turn(comm)
    samples = []
    for nbytes in sizes:
        m = nbytes // 8
        out = np.ones(m)
        inbox = np.empty((N, m))
        target = np.empty(m)

        def p2p():  # every rank at once, in pairs (r, r xor 1), both ways: one step of a ring
            partner = rank ^ 1
            if partner < N:
                exchange(comm, [(out, partner)], [(inbox[0], partner)], 1)

        say(f"p2p {nbytes} B")
        samples.append(Sample("p2p", 1, nbytes, _timed(comm, p2p, repeat, warmup, back_to_back)[0]))
        for fan_in in range(1, N):
            size = fan_in + 1
            group = rank // size

            def mesh():  # every full group of fan_in + 1 consecutive ranks at once: all to all, then sum
                if (group + 1) * size <= N:
                    others = [group * size + j for j in peer_order(size, rank % size)]
                    inbox[rank % size] = out
                    exchange(comm, [(out, g) for g in others], [(inbox[g % size], g) for g in others], 3)
                    np.sum(inbox[:size], axis=0, out=target)

            say(f"full mesh fan-in {fan_in}, {nbytes} B")
            samples.append(Sample("fullmesh", fan_in, nbytes, _timed(comm, mesh, repeat, warmup, back_to_back)[0]))
        for k in sorted({2, 4, N}):
            operands = np.ones((k, m))
            say(f"reduce {k} x {nbytes} B")
            samples.append(Sample("reduce", k, nbytes,
                                  _timed(comm, lambda: np.sum(operands, axis=0, out=target), repeat, warmup,
                                         own_clock=True)[0]))
        say(f"copy {nbytes} B")
        samples.append(Sample("copy", 1, nbytes, _timed(comm, lambda: np.copyto(target, out), repeat, warmup, own_clock=True)[0]))
    return samples


def bench_algorithms(comm: Any, nbytes: int, *, names: Sequence[str] | None = None, repeat: int = 5, warmup: int = 1, seed: int = 0,
                     say: Callable[[str], None] = lambda msg: None) -> tuple[list[AlgorithmTiming], float]:
    """Time every algorithm (default: all for this rank count) and MPI's Allreduce on ``nbytes``.

    Inputs are seeded integers in float64, so any summation order gives identical bits
    and ``correct`` is an exact comparison with ``comm.Allreduce``.

    Returns
    -------
    timings : list of AlgorithmTiming
    mpi_time_s : float
        MPI's own Allreduce on the same data.

    Raises
    ------
    OptiqError
        With fewer than 2 ranks or ``nbytes`` not a positive multiple of 8.
    """
    from mpi4py import MPI

    N, rank = comm.Get_size(), comm.Get_rank()
    if N < 2:
        raise OptiqError("the allreduce benchmark needs at least 2 ranks (run under mpiexec -n N)")
    if nbytes < 8 or nbytes % 8:
        raise OptiqError(f"size {nbytes} must be a positive multiple of 8 bytes (float64 elements)")
    connect_in_turn(comm)
    data = np.random.default_rng([seed, rank]).integers(-2**20, 2**20, nbytes // 8).astype(np.float64)
    expected = np.empty_like(data)
    comm.Allreduce(data, expected, op=MPI.SUM)
    mpi_time = _timed(comm, lambda: comm.Allreduce(data, expected, op=MPI.SUM), repeat, warmup)[0]
    timings = []
    result = np.empty_like(data)
    for name in names or algorithms(N):
        say(f"{name}, {nbytes} B")
        result.fill(np.nan)
        correct = comm.allreduce(bool(np.array_equal(allreduce(comm, data, name, result), expected)), op=MPI.LAND)
        median, times, idle = _timed(comm, lambda: allreduce(comm, data, name, result), repeat, warmup)
        with exchanges_by(lambda *exchange: None):  # the reductions and copies alone: the calculation
            compute = _timed(comm, lambda: allreduce(comm, data, name, result), repeat, warmup,
                             own_clock=True)[0]
        timings.append(AlgorithmTiming(name, median, tuple(times), correct, compute_s=compute, cpu_idle=idle))
    return timings, mpi_time


#: Seconds every rank waits after each exchange of a traced run, so that the exchanges are
#: apart in time and what the network did (drops) can be told apart by when it happened.
TRACE_GAP_S = 0.25


def trace_exchanges(comm: Any, nbytes: int, name: str, *, gap_s: float = TRACE_GAP_S, seed: int = 0
                    ) -> list[dict[str, Any]] | None:
    """Run ``name`` once, every rank waiting ``gap_s`` after each of its exchanges, and say when
    each exchange ran on each rank (``time.monotonic()``, one clock for every process of the
    machine).

    Returns
    -------
    list of dict or None
        On rank 0: ``{"rank", "tag", "phase", "start", "end"}`` per exchange of every rank
        (phases: :data:`optiq.collectives.algorithms.PHASES`); None on the other ranks.
    """
    rank = comm.Get_rank()
    connect_in_turn(comm)
    data = np.random.default_rng([seed, rank]).integers(-2**20, 2**20, nbytes // 8).astype(np.float64)
    result = np.empty_like(data)
    windows: list[dict[str, Any]] = []

    def timed(c: Any, sends: Any, recvs: Any, tag: int) -> None:
        if not sends and not recvs:  # a group of one (CPS's second level): nothing moves
            return
        start = time.monotonic()
        send_and_receive(c, sends, recvs, tag)
        windows.append({"rank": rank, "tag": tag, "phase": PHASES.get(tag, str(tag)), "start": start,
                        "end": time.monotonic()})
        time.sleep(gap_s)

    allreduce(comm, data, name, result)  # connections made before the traced run
    start_together(comm)
    with exchanges_by(timed):
        allreduce(comm, data, name, result)
    gathered = comm.gather(windows, root=0)
    return None if gathered is None else [w for per_rank in gathered for w in per_rank]
