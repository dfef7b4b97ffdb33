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
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from ..errors import OptiqError

if TYPE_CHECKING:
    from typing import Any

__all__ = ["world", "world_rank", "together", "abort_on_failure", "need_mpi", "command_main"]

T = TypeVar("T")
A = TypeVar("A")

#: Seconds between printing a rank's error and aborting every rank.
ABORT_GRACE_S = 0.5

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
    result, failure = None, None
    try:
        result = step()
    except OptiqError as exc:
        failure = (type(exc), str(exc))
    except Exception as exc:  # a bug, not a user mistake: keep its traceback
        traceback.print_exc()
        failure = (OptiqError, f"rank {comm.Get_rank()}: {type(exc).__name__}: {exc}")
    for found in comm.allgather(failure):
        if found is not None:
            kind, message = found
            raise kind(message)
    return result  # type: ignore[return-value]


@contextmanager
def abort_on_failure(comm: Any) -> Iterator[None]:
    """Run the collective work; a rank failing inside prints its error and aborts every rank.

    The other ranks may be waiting for this one inside MPI, where no message can reach
    them, so ``MPI_Abort`` is the only prompt way to end them all (exit code 1).
    """
    try:
        yield
    except Exception as exc:
        if comm is None or comm.Get_size() == 1:
            raise
        if not isinstance(exc, OptiqError):
            traceback.print_exc()
        rank = comm.Get_rank()
        message = str(exc) if str(exc).startswith(f"rank {rank}:") else f"rank {rank}: {exc}"
        print(f"optiq: error: {message}", file=sys.stderr, flush=True)
        time.sleep(ABORT_GRACE_S)  # let the launcher forward the line before the abort kills its pipes
        comm.Abort(1)
        raise  # not reached


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
        if world_rank() == 0:  # mpiexec passes Ctrl-C to every rank: say it once
            print("optiq: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (optiq eval ... | head): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second complaint at exit
        return 141
