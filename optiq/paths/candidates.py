"""Candidate paths per job: diverse hop-limited paths, or plain Yen k-shortest paths."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PathError
from ..mpi.workers import Workers
from .pathset import PathSet
from .pricing import least_cost_paths, min_hops
from .shortest import hop_limited_shortest_records

if TYPE_CHECKING:
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["diverse_paths", "yen_paths", "spread_paths"]

#: Largest ``jobs x links`` weight matrix one batch of path searches may use.
_BATCH_ENTRIES = 3_000_000


def _hop_limit(topology, demands, hop_limit: int | None) -> int:
    limit = topology.diameter if hop_limit is None else int(hop_limit)
    if limit < 1:
        raise PathError(f"hop limit must be at least 1, got {limit}")
    return limit


def diverse_paths(topology: Topology, demands: Demands, k: int = 16, *, hop_limit: int | None = None,
                  penalty: float = 2.0, seed: int = 0,
                  progress: Callable[[str], None] | None = None) -> PathSet:
    """Up to ``k`` diverse paths per job, each of at most ``hop_limit`` links.

    Path ``i`` of a job is a least-weight path where every link weighs
    ``1 + penalty * (times the job's earlier paths used it) + jitter``: the first path is a
    shortest path, later ones avoid the links already used (link-disjoint when the hop limit
    allows) and take detours within the hop limit rather than share. The jitter (below
    ``0.5 / hop_limit`` per link, drawn from ``seed``) spreads equal-length choices so that
    different jobs do not all favour the same links. A job gets fewer than ``k`` paths when
    its next least-weight path repeats an earlier one.

    Parameters
    ----------
    topology : Topology
    demands : Demands
    k : int
        Paths per job at most.
    hop_limit : int, optional
        Longest path allowed, in links; default the network diameter.
    penalty : float
        Extra weight per earlier use of a link by the same job.
    seed : int
        Seed of the jitter.
    progress : callable, optional
        Called with a short message after each batch of jobs.

    Returns
    -------
    PathSet

    Raises
    ------
    PathError
        If ``k < 1`` or a job has no path within the hop limit.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> ps = diverse_paths(torus((4, 4)), Demands([0], [5], [1]), k=4)
    >>> ps.num_paths, int(ps.hops.min())
    (4, 2)
    """
    if k < 1:
        raise PathError(f"k (paths per job) must be at least 1, got {k}")
    demands.check_against(topology)
    limit = _hop_limit(topology, demands, hop_limit)
    rng = np.random.default_rng(seed)
    L = topology.num_links
    batch = max(1, _BATCH_ENTRIES // L)
    records: list[np.ndarray] = []  # every kept path as a row of links padded with -1
    owners: list[np.ndarray] = []
    for start in range(0, demands.num_jobs, batch):
        jobs = np.arange(start, min(start + batch, demands.num_jobs))
        weights = (1.0 + rng.random((jobs.size, L)) * (0.5 / limit)).astype(np.float32)
        kept = np.full((jobs.size, k, limit), -2, dtype=np.int64)  # this batch's paths so far (-2: none)
        count = np.zeros(jobs.size, dtype=np.int64)
        active = np.arange(jobs.size)
        for _round in range(k):
            record, cost = hop_limited_shortest_records(topology, demands.src[jobs[active]],
                                                        demands.dst[jobs[active]], weights[active], limit)
            missing = np.flatnonzero(~np.isfinite(cost))
            if missing.size:
                j = jobs[active[missing[0]]]
                raise PathError(f"job {j} ({demands.src[j]} -> {demands.dst[j]}) has no path of at most "
                                f"{limit} hops")
            # a job whose next path repeats one of its own stops there
            fresh = ~(kept[active] == record[:, None, :]).all(axis=2).any(axis=1)
            rows, record = active[fresh], record[fresh]
            kept[rows, count[rows]] = record
            count[rows] += 1
            used_row, used_at = np.nonzero(record >= 0)
            weights[rows[used_row], record[used_row, used_at]] += penalty
            records.append(record)
            owners.append(jobs[rows])
            active = rows
            if active.size == 0:
                break
        if progress:
            progress(f"candidate paths: {jobs[-1] + 1}/{demands.num_jobs} jobs")
    flat = np.concatenate(records) if records else np.zeros((0, limit), dtype=np.int64)
    hops = (flat >= 0).sum(axis=1)
    links = flat[flat >= 0]  # row by row, in path order (the -1 padding comes first)
    paths, _ = PathSet.from_csr(links, np.concatenate(([0], np.cumsum(hops))), np.concatenate(owners) if owners
                                else np.zeros(0, dtype=np.int64), demands.num_jobs)
    return paths


def yen_paths(topology: Topology, demands: Demands, k: int = 16, *, hop_limit: int | None = None) -> PathSet:
    """The ``k`` shortest simple paths per job (Yen's algorithm, networkx), within the hop limit.

    Included to show why diversity matters: these paths overlap heavily on tori. Where two
    parallel links join the same nodes, the lower-numbered one is used.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> yen_paths(torus((4, 4)), Demands([0], [5], [1]), k=3).num_paths
    3
    """
    import itertools

    import networkx as nx

    if k < 1:
        raise PathError(f"k (paths per job) must be at least 1, got {k}")
    demands.check_against(topology)
    limit = _hop_limit(topology, demands, hop_limit)
    g = nx.DiGraph()
    for e in range(topology.num_links - 1, -1, -1):  # lowest id wins for parallel links
        g.add_edge(int(topology.link_src[e]), int(topology.link_dst[e]), link=e)
    paths, jobs = [], []
    for j, (s, d) in enumerate(zip(demands.src.tolist(), demands.dst.tolist())):
        found = 0
        for nodes in itertools.islice(nx.shortest_simple_paths(g, s, d), k):
            if len(nodes) - 1 > limit:
                break
            paths.append([g.edges[u, v]["link"] for u, v in zip(nodes, nodes[1:])])
            jobs.append(j)
            found += 1
        if not found:
            raise PathError(f"job {j} ({s} -> {d}) has no path of at most {limit} hops")
    return PathSet.from_lists(paths, jobs, demands.num_jobs)


def spread_paths(topology: Topology, demands: Demands, k: int = 4, *, hop_slack: int = 2, penalty: float = 2.0,
                 seed: int = 0, progress: Callable[[str], None] | None = None,
                 workers: Workers | None = None) -> PathSet:
    """Up to ``k`` paths per job from ``k`` rounds of :func:`least_cost_paths` — fast at scale.

    Round ``r`` weighs every link ``1 + penalty * (its use by rounds 0..r-1, over the mean
    use) + jitter``, so later rounds steer all jobs away from the links earlier rounds
    loaded. Paths are at most ``hop_slack`` hops longer than the job's shortest route. One
    Dijkstra per distinct source and round: on an 8,192-node torus a round takes about a
    second, where :func:`optiq.paths.diverse_paths` (per-job weights) takes minutes. With
    ``workers`` every round's sources are spread over MPI ranks (same paths for any count).

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> ps = spread_paths(torus((4, 4)), Demands([0], [10], [1]), k=3)
    >>> ps.num_paths, int(ps.hops.max())
    (3, 4)
    """
    rng = np.random.default_rng(seed)
    hop_limit = min_hops(topology, demands.src, demands.dst) + hop_slack
    uses = np.zeros(topology.num_links)
    seen = _SeenPaths()
    for rnd in range(k):
        mean = uses[uses > 0].mean() if (uses > 0).any() else 1.0
        weight = 1.0 + penalty * uses / mean + rng.random(topology.num_links) * 0.5 / max(hop_limit.max(), 1)
        found, _, _ = least_cost_paths(topology, demands.src, demands.dst, weight, hop_limit,
                                       too_long="drop" if seen.num_paths else "exact", workers=workers)  # later: skip
        fresh = found.select((found.hops > 0) & ~seen.contains(found))   # path j is job j's: no repeat within
        uses += np.bincount(fresh.links, minlength=topology.num_links)
        seen.add(fresh)
        if progress:
            progress(f"spread candidates: round {rnd + 1}/{k}, {seen.num_paths:,} paths")
    return seen.paths(demands.num_jobs)


class _SeenPaths:
    """The paths of several rounds, each round's new to the rounds before it: a sorted
    index of (job, links) digests answers "seen before?" without merging the rounds."""

    def __init__(self) -> None:
        self.parts: list[PathSet] = []
        self.keys = np.zeros(0, np.uint64)
        self.part = np.zeros(0, np.int64)
        self.index = np.zeros(0, np.int64)

    @property
    def num_paths(self) -> int:
        return int(self.keys.size)

    @staticmethod
    def _keys(paths: PathSet) -> np.ndarray:
        with np.errstate(over="ignore"):
            return paths.digests() ^ ((paths.job.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15))

    def contains(self, paths: PathSet) -> np.ndarray:
        """Which of ``paths`` were added before (the same job and links). Keys equal by a
        hash collision are told apart link by link; a collision among the stored keys can
        only make a repeat look new, never a new path look seen."""
        seen = np.zeros(paths.num_paths, bool)
        if not self.keys.size:
            return seen
        key = self._keys(paths)
        at = np.minimum(np.searchsorted(self.keys, key), self.keys.size - 1)
        hit = np.flatnonzero(self.keys[at] == key)
        for part in np.unique(self.part[at[hit]]):
            mine = hit[self.part[at[hit]] == part]
            theirs = self.index[at[mine]]
            stored = self.parts[part]
            seen[mine] = (stored.job[theirs] == paths.job[mine]) & paths.same_paths(mine, stored, theirs)
        return seen

    def add(self, paths: PathSet) -> None:
        keys = np.concatenate((self.keys, self._keys(paths)))
        part = np.concatenate((self.part, np.full(paths.num_paths, len(self.parts))))
        index = np.concatenate((self.index, np.arange(paths.num_paths)))
        order = np.argsort(keys, kind="stable")
        self.keys, self.part, self.index = keys[order], part[order], index[order]
        self.parts.append(paths)

    def paths(self, num_jobs: int) -> PathSet:
        """Every path added, grouped by job, a job's paths in the order they were added."""
        if not self.parts:
            return PathSet(np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), num_jobs)
        return PathSet.concat(self.parts)[0]
