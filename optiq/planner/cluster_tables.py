"""Forwarding tables for every running job of a cluster at once, as a subnet manager writes them.

The subnet manager writes one set of tables for the whole fabric. Two candidates are
made: the jobs' traffic routed together (:func:`optiq.planner.job_tables` on all their
pairs: a busy link of one job is a cost to every job that would share it; on a
full-bisection fat-tree, jobs whose pairs together form a permutation share no link at
all), and every job's destinations routed as in tables made for that job alone (each job
then as fast as alone). The tables kept have the least busy busiest link over all jobs,
then the least slowdown of any job against its tables alone, then the fewest links shared
between jobs. Each job's busiest link is reported three ways:
under tables made for it alone, under the cluster's tables, and under the given tables.
A job whose busiest link under the tables made together is already at its own lower bound
(:func:`optiq.planner.tables.tables_bound`) is not routed again
alone: no tables carry it faster, so those are its tables alone too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..heuristics.tables import REROUTE_ROUNDS
from ..paths import forwarding_routes
from ..paths.tablecheck import check_tables
from .tables import JobTables, job_tables, tables_bound

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..topology import Topology
    from ..topology.lft import ForwardingTables
    from ..workloads import Demands
    from ..workloads.jobs import ClusterJob

__all__ = ["ClusterTables", "JobUnderTables", "cluster_tables"]


@dataclass(frozen=True)
class JobUnderTables:
    """One job's busiest link (seconds) under tables made for it alone, under the cluster's
    tables and under the given ones."""

    name: str
    alone_s: float
    together_s: float
    given_s: float

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "alone_s": self.alone_s, "together_s": self.together_s, "given_s": self.given_s}


@dataclass
class ClusterTables:
    """Tables for several jobs (module docstring).

    Attributes
    ----------
    made : JobTables
        The tables for every job's pairs together (``write`` them for OpenSM).
    jobs : list of JobUnderTables
    shared_links : int
        Links between switches that carry bytes of more than one job under the cluster's tables.
    given_shared_links : int
        The same under the given tables.
    """

    made: JobTables
    jobs: list[JobUnderTables]
    shared_links: int
    given_shared_links: int
    job_names: list[str] = field(default_factory=list, repr=False)

    def write(self, path: str) -> None:
        self.made.write(path)

    def as_dict(self) -> dict[str, object]:
        return {"jobs": [j.as_dict() for j in self.jobs], "shared_links": self.shared_links,
                "given_shared_links": self.given_shared_links, "time_s": self.made.time_s,
                "given_s": self.made.given_time_s, "bound_s": self.made.bound_s}

    def __str__(self) -> str:
        width = max(len("job"), *(len(j.name) for j in self.jobs))
        lines = [f"{'job':{width}} {'alone ms':>10} {'together ms':>11} {'given ms':>10} {'given/together':>14}"]
        for j in self.jobs:
            ratio = j.given_s / j.together_s if j.together_s > 0 else 1.0
            lines.append(f"{j.name:{width}} {j.alone_s * 1e3:10.4f} {j.together_s * 1e3:11.4f} {j.given_s * 1e3:10.4f} "
                         f"{ratio:13.2f}x")
        lines.append(f"links between switches that carry more than one job: {self.shared_links:,} under these "
                     f"tables, {self.given_shared_links:,} under the given ones")
        return "\n".join(lines)


def cluster_tables(topology: Topology, jobs: list[ClusterJob], *, rounds: int = REROUTE_ROUNDS,
                   progress: Callable[[str], None] | None = None) -> ClusterTables:
    """Tables that carry every job together, and each job's busiest link alone and together.

    Parameters
    ----------
    topology : Topology
        An InfiniBand fabric (``ibnet:``).
    jobs : list of ClusterJob
        From :func:`optiq.workloads.read_jobs`.
    rounds : int
        Rounds of rip-up and reroute (:func:`optiq.planner.job_tables`).
    progress : callable, optional

    Returns
    -------
    ClusterTables

    Raises
    ------
    TopologyError, OptiqError
        As :func:`optiq.planner.job_tables`.
    """
    from ..workloads.jobs import merge_jobs

    say = progress or (lambda message: None)
    merged, _ = merge_jobs(jobs)
    say(f"cluster tables: {len(jobs)} jobs, {merged.num_jobs:,} pairs together")
    together = job_tables(topology, merged, rounds=rounds, progress=progress)
    alone: list[float] = []
    own_tables: list[JobTables | None] = []
    for job in jobs:
        time_s = _busiest(topology, job, together.tables)
        if time_s <= tables_bound(topology, job.demands) * (1 + 1e-9):
            say(f"cluster tables: job {job.name} is at its bound under the tables made together")
            alone.append(time_s)
            own_tables.append(None)
        else:
            own = job_tables(topology, job.demands, rounds=rounds)
            alone.append(own.time_s)
            own_tables.append(own)
    # the other candidate: each job's destinations routed as in its own tables
    fabric = together.topology.fabric
    assert fabric is not None
    table = together.tables.table.copy()
    for job, made_alone in zip(jobs, own_tables):
        if made_alone is not None:
            columns = fabric.lid_space.columns(fabric.endpoint_lid[np.unique(job.demands.dst)])
            table[:, columns] = made_alone.tables.table[:, columns]
    candidates = [together]
    changed_any = any(made_alone is not None for made_alone in own_tables)
    report = check_tables(topology, together.tables.with_table(table, "job tables")) if changed_any else None
    if report is not None and report.ok and report.deadlock_free:
        tables = together.tables.with_table(table, "job tables")
        time_s = _busiest_of(topology, merged, tables)
        candidates.append(replace(together, tables=tables, time_s=time_s, report=report, kept_given=False,
                                  changed=int((table != together.given.table).sum())))

    def score(made: JobTables) -> tuple[float, float, int]:
        worst = max(_busiest(topology, job, made.tables) / max(own_s, 1e-300) for job, own_s in zip(jobs, alone))
        return (round(made.time_s / together.time_s, 9), round(worst, 9), _shared(topology, jobs, made.tables))

    made = min(candidates, key=score)
    rows = []
    for job, own_s in zip(jobs, alone):
        rows.append(JobUnderTables(job.name, own_s, _busiest(topology, job, made.tables),
                                   _busiest(topology, job, made.given)))
        say(f"cluster tables: job {job.name}: alone {own_s * 1e3:.4f} ms, together {rows[-1].together_s * 1e3:.4f} "
            f"ms, given tables {rows[-1].given_s * 1e3:.4f} ms")
    return ClusterTables(made, rows, _shared(topology, jobs, made.tables), _shared(topology, jobs, made.given),
                         [j.name for j in jobs])


def _busiest_of(topology: Topology, demands: Demands, tables: ForwardingTables) -> float:
    routes = forwarding_routes(topology, demands, tables)
    return routes.busiest_link_time(demands.nbytes.astype(float), topology.capacity)


def _busiest(topology: Topology, job: ClusterJob, tables: ForwardingTables) -> float:
    return _busiest_of(topology, job.demands, tables)


def _shared(topology: Topology, jobs: list[ClusterJob], tables: ForwardingTables) -> int:
    """Links between switches crossed by more than one job's routes."""
    E = topology.num_endpoints
    users = np.zeros(topology.num_links, dtype=np.int64)
    for job in jobs:
        routes = forwarding_routes(topology, job.demands, tables)
        users[np.unique(routes.links)] += 1
    between = (topology.link_src >= E) & (topology.link_dst >= E)
    return int(((users > 1) & between).sum())
