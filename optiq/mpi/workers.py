"""Per-source work spread over the ranks of an MPI communicator, or done here.

The heavy part of planning a large machine is one shortest-path tree per source, for
every round of candidates and every pricing step of column generation. :class:`Workers`
gives each rank a contiguous block of the distinct sources of a search: rank 0 (the
leader) runs the planner and hands every search to the others, which answer until the
leader closes them. Waiting ranks sleep between tests of a request instead of spinning
(:mod:`optiq.mpi.waiting`), so they leave the cores to the leader's LP solver. Each block is computed exactly as a serial run computes it, so the
plan does not depend on the number of ranks.

How the time splits with N ranks (S sources, one Dijkstra costs d, one restricted LP l,
I iterations of column generation): pricing costs about ``2 I S d / N`` plus gathering the
paths on rank 0 (a few MB per step), the LP solves ``I l`` stay on rank 0, and the
candidates and heuristics before them stay serial too, so beyond a few ranks the LP
dominates (``benchmarks/whole_machine.py --ranks N``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .waiting import wait_politely

__all__ = ["Workers", "block"]


def block(count: int, part: int, parts: int) -> tuple[int, int]:
    """The ``part``-th of ``parts`` contiguous blocks of ``range(count)``, as ``(start, stop)``.

    Examples
    --------
    >>> [block(10, p, 3) for p in range(3)]
    [(0, 4), (4, 7), (7, 10)]
    """
    base, extra = divmod(count, parts)
    start = part * base + min(part, extra)
    return start, start + base + (part < extra)


class Workers:
    """The ranks that share per-source work: one (this process) without a communicator.

    Parameters
    ----------
    comm : mpi4py communicator, optional
        Every rank of it must create its ``Workers`` at the same point; the work runs on a
        duplicate of it, so its messages never meet the caller's.

    Examples
    --------
    >>> w = Workers()
    >>> w.size, w.leader, w.map(lambda part, parts, x: x * 10, 4)
    (1, True, [40])
    """

    def __init__(self, comm: Any | None = None) -> None:
        self.comm = comm.Dup() if comm is not None and comm.Get_size() > 1 else None
        self.rank = 0 if self.comm is None else self.comm.Get_rank()
        self.size = 1 if self.comm is None else self.comm.Get_size()

    @property
    def leader(self) -> bool:
        return self.rank == 0

    @property
    def search_threads(self) -> int:
        """Threads a search of this process may take: a thread per core where no other rank
        shares the work (the ranks share the cores otherwise)."""
        from ..utils.resources import usable_cores

        return usable_cores() if self.size == 1 else 1

    def map(self, fn: Callable[..., Any], *args: Any, here: dict[str, Any] | None = None) -> list[Any]:
        """``[fn(part, size, *args) for part in range(size)]``, part ``p`` computed on rank ``p``.

        Called on the leader only; the other ranks must be in :meth:`serve`. ``fn`` must be
        a module-level function (it travels by name); ``here`` are keyword arguments for the
        leader's own part only (a progress callback). An error on any rank is raised here.
        """
        if self.comm is None:
            return [fn(0, 1, *args, **(here or {}))]
        self._command("map", fn, args)
        mine = _attempt(fn, 0, self.size, args, here)
        wait_politely(self.comm.Ibarrier())  # the others finish their parts
        return _unwrap(self.comm.gather(mine, root=0))

    def serve(self) -> Any:
        """On the other ranks: answer the leader's :meth:`map` calls until it closes; returns
        what it closed with, or raises the error it closed with."""
        comm = self.comm
        assert comm is not None, "serve() after close()"
        while True:
            wait_politely(comm.Ibarrier())  # the leader may plan (solve an LP) for minutes
            kind, fn, args = comm.bcast(None, root=0)
            if kind == "close":
                comm.Free()
                if isinstance(fn, BaseException):
                    raise fn
                return fn
            mine = _attempt(fn, self.rank, self.size, args)
            wait_politely(comm.Ibarrier())
            comm.gather(mine, root=0)

    def close(self, result: Any = None) -> Any:
        """On the leader: release the other ranks, handing them ``result`` (or an error to raise)."""
        if self.comm is not None:
            self._command("close", result, ())
            self.comm.Free()
            self.comm = None
        return result


    def _command(self, kind: str, fn: Any, args: tuple[Any, ...]) -> None:
        comm = self.comm
        assert comm is not None, "a command after close()"
        wait_politely(comm.Ibarrier())
        comm.bcast((kind, fn, args), root=0)


def _attempt(fn: Callable[..., Any], part: int, parts: int, args: tuple[Any, ...],
             here: dict[str, Any] | None = None) -> tuple[bool, Any]:
    try:
        return True, fn(part, parts, *args, **(here or {}))
    except Exception as exc:  # travels to the leader, which raises it
        return False, exc


def _unwrap(results: list[tuple[bool, Any]]) -> list[Any]:
    for ok, value in results:
        if not ok:
            raise value
    return [value for _, value in results]
