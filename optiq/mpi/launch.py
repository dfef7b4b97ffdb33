"""Commands under ``mpiexec``: the world communicator, and failing together.

Only the command line reaches for ``COMM_WORLD``; the library takes communicators as
arguments. A process counts as launched by ``mpiexec`` when the launcher's environment
says so (MPICH, Open MPI, PMIx) and the world has more than one rank; otherwise mpi4py
is not even imported, so a serial run needs no MPI library.

The protocol of every MPI command: every rank parses the same arguments (so a usage
mistake fails on all of them alike, and rank 0 alone says so); the checks before the work
run through :func:`together`, which raises on every rank when any rank fails, so no rank
waits for one that has left; during the work, a rank failing alone cannot tell the others
in time, so :func:`abort_on_failure` prints its message and aborts the whole job.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from ..errors import OptiqError
from .waiting import idle_pause, wait_politely

if TYPE_CHECKING:
    from typing import Any

__all__ = ["world", "world_rank", "together", "from_leader", "from_leader_beside", "abort_on_failure", "need_mpi",
           "command_main"]

T = TypeVar("T")
A = TypeVar("A")

#: Seconds a failing rank listens for other ranks' failures, and then waits between printing
#: its error and aborting every rank.
ABORT_GRACE_S = 0.5
#: Seconds a failing rank that let a lower one speak waits for that rank's abort before its own.
SILENT_ABORT_S = 5.0
#: Seconds ``MPI_Abort`` may take before the rank ends by itself.
ABORT_WAIT_S = 5.0

_LAUNCHER_VARIABLES = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")


def world() -> Any:
    """``MPI.COMM_WORLD`` when launched by ``mpiexec`` with more than one rank, else ``None``."""
    if not any(name in os.environ for name in _LAUNCHER_VARIABLES):
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI.COMM_WORLD if MPI.COMM_WORLD.Get_size() > 1 else None


def world_rank() -> int:
    """This process's rank in :func:`world` (0 when serial)."""
    comm = world()
    return 0 if comm is None else comm.Get_rank()


def need_mpi(what: str) -> Any:
    """The ``mpi4py.MPI`` module, or an error saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise OptiqError(f"{what} needs mpi4py and an MPI library: pip install 'optiq[mpi]'") from None
    return MPI


def together(comm: Any, step: Callable[[], T]) -> T:
    """``step()`` on every rank of ``comm``; when it fails on any rank, every rank raises.

    Collective. An :class:`~optiq.errors.OptiqError` is raised again, with its type and
    message, on every rank (the first failing rank's, so all ranks say the same); any
    other exception is printed with its traceback where it happened and becomes an
    ``OptiqError`` naming that rank.
    """
    if comm is None or comm.Get_size() == 1:
        return step()
    result, failure = _attempt(comm, step)
    for found in comm.allgather(failure):
        if found is not None:
            kind, message = found
            raise kind(message)
    return result  # type: ignore[return-value]


def _attempt(comm: Any, step: Callable[[], T]) -> tuple[T | None, tuple[type[OptiqError], str] | None]:
    """``step()``'s result, or the failure to raise on every rank: an :class:`OptiqError`'s type
    and message, or any other exception (a bug: its traceback printed here) naming this rank."""
    try:
        return step(), None
    except OptiqError as exc:
        return None, (type(exc), str(exc))
    except Exception as exc:  # a bug, not a user mistake: keep its traceback
        traceback.print_exc()
        return None, (OptiqError, f"rank {comm.Get_rank()}: {type(exc).__name__}: {exc}")


def from_leader(comm: Any, step: Callable[[], T]) -> T:
    """``step()`` run on rank 0 of ``comm`` only, its result handed to every rank (collective).

    An error raises on every rank, as :func:`together` raises it; the other ranks wait
    without polling while the leader works.
    """
    if comm is None or comm.Get_size() == 1:
        return step()
    result, failure = _attempt(comm, step) if comm.Get_rank() == 0 else (None, None)
    wait_politely(comm.Ibarrier())  # the leader may work for seconds
    handed: tuple[T, Any] = comm.bcast((result, failure), root=0)
    result, failure = handed
    if failure is not None:
        kind, message = failure
        raise kind(message)
    return result


def from_leader_beside(comm: Any, step: Callable[[], T], requests: Sequence[Any]) -> T:
    """:func:`from_leader`, with MPI's requests ``requests`` (a transfer in flight) kept moving
    meanwhile: the leader runs ``step()`` in a thread of its own, which must make no MPI call,
    while its main thread tests the requests (MPI moves bytes only inside its calls), and the
    other ranks test them between the pauses of their wait. Collective; the requests are left
    to the caller to wait for.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> from_leader_beside(MPI.COMM_SELF, lambda: 6 * 7, [])
    42
    """
    if comm is None or comm.Get_size() == 1:
        return step()
    from mpi4py import MPI

    out: list[Any] = [(None, None)]
    if comm.Get_rank() == 0:
        worker = threading.Thread(target=lambda: out.__setitem__(0, _attempt(comm, step)), name="optiq-plan")
        worker.start()
        tests = 0
        while worker.is_alive():
            tests += 1
            if requests:
                MPI.Request.Testall(list(requests))
            worker.join(idle_pause(tests))
    _wait_beside(comm.Ibarrier(), requests)  # the leader may work for seconds
    handed: tuple[T, Any] = comm.bcast(out[0], root=0)
    result, failure = handed
    if failure is not None:
        kind, message = failure
        raise kind(message)
    return result


def _wait_beside(barrier: Any, requests: Sequence[Any]) -> None:
    """Wait for ``barrier``, testing ``requests`` too (without waiting for them)."""
    from mpi4py import MPI

    tests = 0
    while not barrier.Test():
        tests += 1
        if requests:
            MPI.Request.Testall(list(requests))
        time.sleep(idle_pause(tests))


@contextmanager
def abort_on_failure(comm: Any) -> Iterator[None]:
    """Run the collective work; a rank failing inside says so and aborts every rank.

    The other ranks may be waiting for this one inside MPI, where no message can reach
    them, so ``MPI_Abort`` is the only prompt way to end them all (exit code 1). Before it,
    the failing ranks agree on who speaks (:func:`_first_to_fail`): ranks that fail together
    (every rank of a transfer that times out) print one ``optiq: error:`` line, not one each.
    Collective on entry (the agreement has a communicator of its own).
    """
    alone = comm is None or comm.Get_size() == 1
    failures = None if alone else comm.Dup()
    try:
        yield
    except Exception as exc:
        if alone:
            raise
        if not isinstance(exc, OptiqError):
            traceback.print_exc()
        rank = comm.Get_rank()
        message = str(exc) if str(exc).startswith(f"rank {rank}:") else f"rank {rank}: {exc}"
        if _first_to_fail(failures):
            print(f"optiq: error: {message}", file=sys.stderr, flush=True)
            time.sleep(ABORT_GRACE_S)  # let the launcher forward the line before the abort kills its pipes
        else:  # the rank that spoke aborts them all (MPI says so once); in case it cannot, later alone
            time.sleep(SILENT_ABORT_S)
        _end_alone_after(ABORT_WAIT_S)
        comm.Abort(1)
        raise  # not reached
    else:
        if failures is not None:
            failures.Free()


def _end_alone_after(seconds: float) -> None:
    """End this process in ``seconds`` whatever it is doing then: ``MPI_Abort`` can hang where a
    connection is dead (a failed cable), holding the interpreter's lock, and the launcher ends
    the other ranks when one exits before ``MPI_Finalize``. An alarm's default action needs no
    Python code to run; off the main thread, a timer's thread has to."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(max(1, round(seconds)))
    else:
        threading.Timer(seconds, os._exit, (1,)).start()


#: The tag of a failure notice on the agreement's communicator.
_FAILED_TAG = 1


def _first_to_fail(failures: Any) -> bool:
    """Tell every other rank that this one failed, and listen for :data:`ABORT_GRACE_S` for the
    same news from a lower rank: whether none came (this rank then speaks for all)."""
    from mpi4py import MPI

    rank, size = failures.Get_rank(), failures.Get_size()
    notice = np.array([rank], dtype=np.int64)
    sent = [failures.Isend([notice, MPI.INT64_T], dest=r, tag=_FAILED_TAG) for r in range(size) if r != rank]
    deadline = time.monotonic() + ABORT_GRACE_S
    lower = False
    while time.monotonic() < deadline and not lower:
        status = MPI.Status()
        while failures.Iprobe(source=MPI.ANY_SOURCE, tag=_FAILED_TAG, status=status):
            got = np.empty(1, dtype=np.int64)
            failures.Recv([got, MPI.INT64_T], source=status.Get_source(), tag=_FAILED_TAG)
            lower = lower or int(got[0]) < rank
        time.sleep(0.005)
    del sent  # left outstanding: the abort ends them
    return not lower


def _interrupted() -> int:
    """Ctrl-C: exit code 130, said once. Under ``mpiexec`` (which passes Ctrl-C to every rank)
    some ranks may be waiting inside MPI for one that has left, so the first rank to see it
    speaks and aborts them all."""
    comm = world()
    if comm is None:
        print("optiq: interrupted", file=sys.stderr)
        return 130
    if _first_to_fail(comm):
        print("optiq: interrupted", file=sys.stderr, flush=True)
        time.sleep(ABORT_GRACE_S)
    else:
        time.sleep(SILENT_ABORT_S)
    comm.Abort(130)
    return 130  # not reached


def command_main(parse: Callable[[], A], run: Callable[[A], int], usage_error: type[Exception]) -> int:
    """Parse, run, and map what goes wrong to an exit code, said once under ``mpiexec``.

    0: done; 1: bad input or a failure (:class:`~optiq.errors.OptiqError`, one
    ``optiq: error:`` line); 2: a usage mistake (``usage_error``); 130: interrupted.
    ``--help`` and ``--version`` return argparse's code.
    """
    try:
        args = parse()
    except SystemExit as exc:  # --help, --version
        return int(exc.code or 0)
    except usage_error as exc:
        if world_rank() == 0:  # under mpiexec every rank parses the same line: say it once
            print(f"optiq: error: {exc}", file=sys.stderr)
        return 2
    try:
        return run(args)
    except OptiqError as exc:
        if world_rank() == 0:  # under mpiexec every rank fails alike: say it once
            print(f"optiq: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return _interrupted()
    except BrokenPipeError:  # the reader went away (optiq eval ... | head): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second complaint at exit
        return 141
