"""A job on the tables of OpenSM's own routing engines: the baselines an operator really runs
(``optiq tables --against ftree,updn,dfsssp``), each engine's tables made by the real subnet
manager on the fabric simulated (:func:`optiq.paths.opensm.opensm_tables`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import TopologyError
from ..paths import forwarding_routes
from ..paths.opensm import OPENSM_ENGINES, opensm_tables
from ..topology import Topology
from ..topology.lft import ForwardingTables, read_forwarding_tables
from ..workloads import Demands
from .tables import JobTables, job_tables, with_tables

__all__ = ["EngineTimes", "engine_times", "check_engines", "tables_against_engines"]


@dataclass(frozen=True)
class EngineTimes:
    """The job's busiest link (seconds) on the tables of every engine named, and the best of them."""

    times_s: dict[str, float]

    @property
    def best(self) -> str:
        return min(self.times_s, key=lambda e: self.times_s[e])

    @property
    def best_s(self) -> float:
        return self.times_s[self.best]

    def __repr__(self) -> str:
        shown = ", ".join(f"{e} {t * 1e3:.4g} ms" for e, t in self.times_s.items())
        return f"EngineTimes({shown}; best {self.best})"

    def line(self, time_s: float, what: str = "the job tables") -> str:
        """One line: ``what`` against the best engine, then every engine's busiest link."""
        others = ", ".join(f"{e} {t * 1e3:.4f} ms" for e, t in self.times_s.items())
        return (f"{what}: {self.best_s / time_s:.2f}x over OpenSM's best engine for the job, {self.best} "
                f"({self.best_s * 1e3:.4f} ms; {others})")


def check_engines(engines: Sequence[str]) -> list[str]:
    """The engine names, each checked before any work starts.

    Examples
    --------
    >>> check_engines(["ftree", "updn"])
    ['ftree', 'updn']
    """
    names = [e.strip() for e in engines if e.strip()]
    for name in names:
        if name not in OPENSM_ENGINES:
            raise TopologyError(f"unknown OpenSM routing engine {name!r}; choose from {', '.join(OPENSM_ENGINES)}")
    if not names:
        raise TopologyError("name at least one OpenSM routing engine, e.g. ftree,updn,dfsssp")
    return names


def engine_times(topology: Topology, demands: Demands, engines: Sequence[str], *,
                 progress: Callable[[str], None] | None = None) -> EngineTimes:
    """The busiest link of ``demands`` on the tables each of ``engines`` gives ``topology``'s fabric.

    Raises
    ------
    TopologyError
        As :func:`optiq.paths.opensm.opensm_tables` does.
    """
    return _engine_runs(topology, demands, engines, progress)[0]


def _engine_runs(topology: Topology, demands: Demands, engines: Sequence[str],
                 progress: Callable[[str], None] | None) -> tuple[EngineTimes, dict[str, ForwardingTables]]:
    """:func:`engine_times`, and every engine's tables."""
    times, tables = {}, {}
    for engine in check_engines(engines):
        tables[engine] = read_forwarding_tables(opensm_tables(topology, engine, progress=progress), topology)
        routes = forwarding_routes(topology, demands, tables[engine])
        times[engine] = routes.busiest_link_time(demands.nbytes.astype(float), topology.capacity)
        if progress:
            progress(f"OpenSM {engine}: the job's busiest link {times[engine] * 1e3:.4f} ms")
    return EngineTimes({e: float(t) for e, t in times.items() if np.isfinite(t)} or times), tables


def tables_against_engines(topology: Topology, demands: Demands, engines: Sequence[str], *,
                           progress: Callable[[str], None] | None = None,
                           **options: object) -> tuple[JobTables, EngineTimes]:
    """Job tables (:func:`~optiq.planner.tables.job_tables`, ``options`` passed on) never worse
    than the best of ``engines``: where that engine's tables carry the job faster than the job
    tables made from the given ones, the job tables are made again from the engine's, which
    they keep where they cannot do better (and where those pass the checks); and every engine's
    busiest link for the job.

    Raises
    ------
    TopologyError
        As :func:`engine_times` does.
    """
    against, tables = _engine_runs(topology, demands, engines, progress)
    made = job_tables(topology, demands, progress=progress, **options)  # type: ignore[arg-type]
    if against.best_s < made.time_s * (1 - 1e-9):
        if progress:
            progress(f"OpenSM {against.best} carries the job in {against.best_s * 1e3:.4f} ms, the job tables in "
                     f"{made.time_s * 1e3:.4f} ms: job tables again, from {against.best}'s")
        best = with_tables(topology, tables[against.best])
        again = job_tables(best, demands, progress=progress, **options)  # type: ignore[arg-type]
        if again.time_s < made.time_s:
            made = again
    return made, against
