"""Moving one call's bytes as its pattern says: by MPI with the caller's own arguments, or on the plan's paths.

A pattern handed to MPI makes the caller's own call (``Alltoallv`` or ``Alltoallw``) on the
duplicate of the call's communicator. A planned one reads every part this rank sends
through its :class:`~optiq.runtime.messages.Message` (a view in place, or packed by its
datatype), gives the executor a view or a staging array for every part it receives, and
unpacks the staged ones once the transfer has ended.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..errors import TransferError
from ..mpi.comms import mpi_module
from ..mpi.waiting import allreduce_asleep, start_together
from .patterns import Pattern
from .watch import bound

if TYPE_CHECKING:
    from .agreement import Call
    from .context import SpreadMessage
    from .messages import Message

__all__ = ["move", "trial", "run_plan"]


def move(call: Call, pattern: Pattern, timeout: float) -> None:
    """One transfer of the call's bytes as ``pattern`` says: MPI with the caller's own arguments
    (on the call's own communicator, as the application's own call; a relay has none), or the
    plan (``send`` None: ``MPI.IN_PLACE``, the parts are read from ``recv`` before any is
    overwritten)."""
    if pattern.method == "mpi":
        if call.group.caller is not None and call.group.members.size:
            call.kind.mpi(call.group.caller, call.sendbuf, call.recvbuf)
        return
    run_plan(call.comm.Get_rank(), pattern, call.send, call.received, timeout)


def run_plan(rank: int, pattern: Pattern, send: Message | SpreadMessage | None, recv: Message | SpreadMessage,
             timeout: float) -> None:
    """The plan's transfer of one call's messages (indexed by the context's ranks; ``send`` None:
    ``MPI.IN_PLACE``), this rank ``rank`` of the plan's communicator."""
    source = recv if send is None else send
    read = source.read if send is not None else source.copy  # in place: keep what is sent
    if send is not None:  # in place, a rank's own part is where it belongs already
        recv.write(rank, source.read(rank))
    if pattern.executor is None:
        return
    jobs, peers = pattern.send_jobs
    sends = {int(j): read(int(p)) for j, p in zip(jobs, peers)}
    jobs, peers = pattern.recv_jobs
    recvs, finish = {}, []
    for j, p in zip(jobs.tolist(), peers.tolist()):
        recvs[j], step = recv.target(p)
        if step is not None:
            finish.append(step)
    try:
        pattern.executor.run(sends, recvs, timeout=bound(pattern, timeout))
    except TransferError as exc:
        raise TransferError(str(exc) if str(exc).startswith("rank ") else f"rank {rank}: {exc}") from None
    for step in finish:
        step()


#: Runs of each way when a plan is measured against MPI, in turn, the faster of each way's
#: compared: one run of each would let a single late rank decide, and so would the mean of
#: two, where one run of a plan (16 ranks sharing 2 cores) took several times its usual
#: (``benchmarks/application.py``).
TRIAL_ROUNDS = 2


def trial(call: Call, pattern: Pattern, timeout: float, mpi_s: float | None = None) -> Pattern:
    """The measured crossover: the plan's first call against MPI, each from an agreed start
    (over the whole context: every group exchanges at once), and the faster kept for the
    pattern. With ``mpi_s``, the mean time of the pattern's shape's calls by MPI so far (the
    same on every rank), the plan alone moves the bytes and its ranks' mean time is compared
    with it; else MPI moves them too, :data:`TRIAL_ROUNDS` times each in turn (MPI, the plan,
    the plan, MPI, ...), and the faster run of each way (the slowest rank's time) is compared."""
    MPI = mpi_module()

    size = call.comm.Get_size()
    if mpi_s is not None:
        start = start_together(call.comm)
        move(call, pattern, timeout)
        t_plan = allreduce_asleep(call.comm, time.perf_counter() - start, MPI.SUM) / size
        t_mpi, against = mpi_s, f"the mean of its calls by MPI before {mpi_s:.4g} s"
    else:
        ways = (Pattern("mpi", ""), pattern)
        runs: tuple[list[float], list[float]] = ([], [])  # MPI's seconds, the plan's
        for k in range(TRIAL_ROUNDS):
            for i in (0, 1) if k % 2 == 0 else (1, 0):
                start = start_together(call.comm)
                move(call, ways[i], timeout)
                runs[i].append(allreduce_asleep(call.comm, time.perf_counter() - start, MPI.MAX))
        t_mpi, t_plan = min(runs[0]), min(runs[1])
        against = f"comm.{call.kind.mpi_name} {t_mpi:.4g} s (the faster of {TRIAL_ROUNDS} runs each)"
    measured = f"measured {'again' if pattern.drifted else 'on the first call'}: the plan {t_plan:.4g} s, {against}"
    if t_plan >= t_mpi:
        pattern.close()
        return Pattern("mpi", f"{pattern.reason}, but {measured}", predicted_s=pattern.predicted_s,
                       default_s=pattern.default_s)
    pattern.reason, pattern.trial = f"{pattern.reason}; {measured}", False
    return pattern
