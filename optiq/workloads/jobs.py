"""A cluster's running jobs: each job's name, its hosts and its traffic, from a jobs file.

One line per job, ``NAME HOSTLIST TRAFFIC``: a name, a Slurm host list (as ``squeue -o
"%j %N"`` prints it; :func:`optiq.workloads.named_hosts`) and the job's traffic, one of

* a demand file (:func:`optiq.workloads.read_demands`: a ``.json`` file, or a ``.csv`` file
  with the header ``src,dst,bytes``) whose ``src`` and ``dst`` are positions in the host list;
* rank traffic (:func:`optiq.workloads.read_traffic`: a PFProf trace directory or
  ``.tar.gz``, a ``src_rank,dst_rank,bytes`` CSV or a matrix), one rank per host in the
  list's order;
* ``pattern:NAME[:SIZE]``: ``permutation`` (seeded) or an OPTIQ pattern (``disjoint``,
  ``overlap``, ``subset``) over the list's hosts, ``SIZE`` bytes per pair (default 8 MiB).

A relative path is found beside the jobs file. ``#`` starts a comment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import OptiqError, WorkloadError
from .demands import Demands
from .files import read_demands
from .hosts import named_hosts, on_hosts

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["ClusterJob", "read_jobs", "merge_jobs"]


@dataclass(frozen=True)
class ClusterJob:
    """One job of a cluster.

    Attributes
    ----------
    name : str
    hosts : ndarray of int
        Its endpoints, in the order of its host list.
    demands : Demands
        Its traffic between endpoints of the topology.
    """

    name: str
    hosts: np.ndarray = field(repr=False)
    demands: Demands = field(repr=False)

    def __repr__(self) -> str:
        return f"ClusterJob({self.name!r}, {self.hosts.size} hosts, {self.demands.num_jobs:,} pairs)"


def read_jobs(path: str | Path, topology: Topology, *, seed: int = 0) -> list[ClusterJob]:
    """The jobs of a jobs file (module docstring), on ``topology``'s hosts; ``seed`` seeds
    every ``pattern:permutation``.

    Raises
    ------
    WorkloadError
        For an unreadable file, a line without three fields, a name used twice, traffic
        that cannot be read, names a position or rank beyond its host list, or an unknown
        pattern (naming the line).
    TopologyError
        For a host the topology does not have (naming the line and the host).

    Examples
    --------
    >>> import tempfile, os
    >>> from optiq.topology import torus
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "a.csv"), "w").write("src,dst,bytes\\n0,1,100\\n1,0,100\\n")
    >>> _ = open(os.path.join(d, "jobs.txt"), "w").write("alpha H[4-5] a.csv\\nbeta H[0,2] a.csv\\n")
    >>> [(j.name, j.demands.to_rows()) for j in read_jobs(os.path.join(d, "jobs.txt"), torus((4, 4)))]
    [('alpha', [(4, 5, 100), (5, 4, 100)]), ('beta', [(0, 2, 100), (2, 0, 100)])]
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"cannot read jobs file {str(path)!r}: {exc}") from None
    jobs: list[ClusterJob] = []
    for number, line in enumerate(lines, 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        where = f"jobs file {str(path)!r} line {number}"
        if len(fields) != 3:
            raise WorkloadError(f"{where}: expected NAME HOSTLIST TRAFFIC, got {len(fields)} field(s)")
        name, hostlist, traffic = fields
        if any(job.name == name for job in jobs):
            raise WorkloadError(f"{where}: job {name!r} is named twice")
        try:
            hosts = named_hosts(topology, hostlist)
            demands = _traffic(traffic, path.parent, hosts, topology, seed + len(jobs))
        except OptiqError as exc:
            raise type(exc)(f"{where} (job {name!r}): {exc}") from None
        jobs.append(ClusterJob(name, hosts, Demands(demands.src, demands.dst, demands.nbytes, name=name)))
    if not jobs:
        raise WorkloadError(f"jobs file {str(path)!r} names no job")
    return jobs


def _traffic(field: str, here: Path, hosts: np.ndarray, topology: Topology, seed: int) -> Demands:
    """A job's demands on the topology's endpoints, from its TRAFFIC field (module docstring)."""
    from ..utils.units import parse_size
    from .patterns import PATTERNS, constant_ratio, permutation
    from .placement import host_demands
    from .traffic import read_traffic

    if field.startswith("pattern:"):
        name, _, size = field[len("pattern:"):].partition(":")
        nbytes = parse_size(size) if size else 8 * 2**20
        if name == "permutation":
            return on_hosts(permutation(hosts.size, nbytes=nbytes, seed=seed), hosts)
        if name in PATTERNS:
            return on_hosts(constant_ratio(hosts.size, name, nbytes=nbytes), hosts)
        raise WorkloadError(f"unknown pattern {name!r}; choose permutation or {', '.join(PATTERNS)}")
    path = Path(field) if Path(field).is_absolute() else here / field
    if path.suffix.lower() == ".json" or (path.suffix.lower() == ".csv" and _demand_header(path)):
        return on_hosts(read_demands(path), hosts)
    matrix = read_traffic(path)
    if matrix.shape[0] > hosts.size:
        raise WorkloadError(f"traffic {str(path)!r} has {matrix.shape[0]} ranks and the host list {hosts.size} hosts")
    return host_demands(matrix, topology.num_endpoints, hosts=hosts).demands


def _demand_header(path: Path) -> bool:
    """Whether a CSV file starts with a demand file's header (``src,dst,bytes``)."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            first = fh.readline()
    except OSError:
        return True  # read_demands names the problem
    return [c.strip().lower() for c in first.split(",")][:2] == ["src", "dst"]


def merge_jobs(jobs: list[ClusterJob]) -> tuple[Demands, list[np.ndarray]]:
    """Every job's pairs as one demand set (a pair two jobs share carries both their bytes),
    and for each job the positions of its pairs in it."""
    src = np.concatenate([j.demands.src for j in jobs])
    dst = np.concatenate([j.demands.dst for j in jobs])
    nbytes = np.concatenate([j.demands.nbytes for j in jobs])
    width = int(max(src.max(initial=0), dst.max(initial=0))) + 1
    keys, inverse = np.unique(src.astype(np.int64) * width + dst, return_inverse=True)
    merged = Demands(keys // width, keys % width, np.bincount(inverse, weights=nbytes).astype(np.int64),
                     name=", ".join(j.name for j in jobs))
    bounds = np.cumsum([0] + [j.demands.num_jobs for j in jobs])
    return merged, [inverse[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
