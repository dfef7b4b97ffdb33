"""The :class:`PathSet`: paths as one flat array of link ids plus offsets (CSR style)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PathError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..topology import Topology

__all__ = ["PathSet"]


@dataclass(frozen=True, eq=False)
class PathSet:
    """Candidate or chosen paths of a set of jobs.

    Path ``p`` belongs to job ``job[p]`` and crosses links ``links[offsets[p]:offsets[p+1]]``
    in order. Paths are grouped by job (``job`` is non-decreasing).

    Examples
    --------
    >>> ps = PathSet.from_lists([[0, 1], [2]], [0, 0], num_jobs=1)
    >>> ps.num_paths, ps.hops.tolist(), ps.path(0).tolist()
    (2, [2, 1], [0, 1])
    """

    job: np.ndarray
    offsets: np.ndarray
    links: np.ndarray
    num_jobs: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "job", np.asarray(self.job, dtype=np.int64))
        object.__setattr__(self, "offsets", np.asarray(self.offsets, dtype=np.int64))
        object.__setattr__(self, "links", np.asarray(self.links, dtype=np.int64))
        if self.offsets.size != self.job.size + 1 or self.offsets[-1] != self.links.size:
            raise PathError("path offsets do not match the number of paths and links")
        if self.job.size and np.any(np.diff(self.job) < 0):
            raise PathError("paths must be grouped by job (job ids non-decreasing)")

    @classmethod
    def from_lists(cls, paths: list, jobs: ArrayLike, num_jobs: int) -> PathSet:
        """Build from a list of link-id lists and the job of each path (reordered by job, stably)."""
        jobs = np.asarray(jobs, dtype=np.int64)
        order = np.argsort(jobs, kind="stable")
        lengths = np.array([len(paths[i]) for i in order], dtype=np.int64)
        flat = np.concatenate([np.asarray(paths[i], dtype=np.int64) for i in order]) if len(paths) else np.zeros(0, np.int64)
        return cls(jobs[order], np.concatenate(([0], np.cumsum(lengths))), flat, num_jobs)

    @classmethod
    def from_csr(cls, links: ArrayLike, offsets: ArrayLike, jobs: ArrayLike, num_jobs: int) -> tuple[PathSet, np.ndarray]:
        """Build from paths in any job order (path ``p`` is ``links[offsets[p]:offsets[p+1]]``).

        Returns the path set, grouped by job (stably), and ``order``: its path ``i`` is input
        path ``order[i]``.

        Examples
        --------
        >>> ps, order = PathSet.from_csr([5, 6, 7], [0, 1, 3], [1, 0], num_jobs=2)
        >>> ps.job.tolist(), ps.links.tolist(), order.tolist()
        ([0, 1], [6, 7, 5], [1, 0])
        """
        links, offsets, jobs = (np.asarray(a, dtype=np.int64) for a in (links, offsets, jobs))
        order = np.argsort(jobs, kind="stable")
        hops = np.diff(offsets)[order]
        return cls(jobs[order], np.concatenate(([0], np.cumsum(hops))), links[csr_positions(offsets[:-1][order], hops)],
                   num_jobs), order

    def __repr__(self) -> str:
        return f"PathSet(jobs={self.num_jobs}, paths={self.num_paths}, hops_max={int(self.hops.max(initial=0))})"

    @property
    def num_paths(self) -> int:
        return int(self.job.size)

    @cached_property
    def hops(self) -> np.ndarray:
        return np.diff(self.offsets)

    @cached_property
    def job_offsets(self) -> np.ndarray:
        """Paths of job ``j`` are ``job_offsets[j]:job_offsets[j+1]``."""
        return np.searchsorted(self.job, np.arange(self.num_jobs + 1), side="left")

    @property
    def paths_per_job(self) -> np.ndarray:
        return np.bincount(self.job, minlength=self.num_jobs)

    @property
    def path_of_link_entry(self) -> np.ndarray:
        """For every entry of ``links``, the path it belongs to."""
        return np.repeat(np.arange(self.num_paths), self.hops)

    def path(self, p: int) -> np.ndarray:
        return self.links[self.offsets[p]:self.offsets[p + 1]]

    def link_loads(self, path_bytes: ArrayLike, num_links: int) -> np.ndarray:
        """Bytes on every link when path ``p`` carries ``path_bytes[p]``."""
        return np.bincount(self.links, weights=np.repeat(np.asarray(path_bytes, float), self.hops),
                           minlength=num_links)

    def busiest_link_time(self, path_bytes: ArrayLike, capacity: np.ndarray) -> float:
        """Completion time when links share in proportion to the bytes: the busiest link's
        bytes over its capacity (bytes/s), with ``path_bytes[p]`` on path ``p``.

        Examples
        --------
        >>> PathSet.from_lists([[0, 1], [1]], [0, 1], num_jobs=2).busiest_link_time([4, 2], np.array([1.0, 2.0]))
        4.0
        """
        return float((self.link_loads(path_bytes, capacity.size) / capacity).max())

    def select(self, mask: ArrayLike) -> PathSet:
        """The paths where ``mask`` is true (a boolean array over paths), keeping job ids."""
        keep = np.flatnonzero(mask)
        hops = self.hops[keep]
        return PathSet(self.job[keep], np.concatenate(([0], np.cumsum(hops))),
                       self.links[csr_positions(self.offsets[keep], hops)], self.num_jobs)

    def unique(self) -> PathSet:
        """The same paths without repeats of a path within its job (the first one stays).

        Examples
        --------
        >>> PathSet.from_lists([[0, 1], [2], [0, 1]], [0, 0, 0], num_jobs=1).unique().num_paths
        2
        """
        seen: set[tuple[int, bytes]] = set()
        keep = np.zeros(self.num_paths, bool)
        for p, j in enumerate(self.job.tolist()):
            key = path_key(j, self.path(p))
            if key not in seen:
                seen.add(key)
                keep[p] = True
        return self if keep.all() else self.select(keep)

    def nodes(self, p: int, topology: Topology) -> list[int]:
        """Node sequence of path ``p`` (source first)."""
        ls = self.path(p)
        return [int(topology.link_src[ls[0]])] + topology.link_dst[ls].tolist()


def path_key(job: int, links: np.ndarray) -> tuple[int, bytes]:
    """A hashable identity of a path within its job: equal keys, the same path (the one
    dedup key of every candidate generator and of column generation).

    Examples
    --------
    >>> path_key(3, np.array([1, 2])) == path_key(3, np.array([1, 2], dtype=np.int64))
    True
    """
    return int(job), np.asarray(links, dtype=np.int64).tobytes()


def csr_positions(starts: np.ndarray, hops: np.ndarray) -> np.ndarray:
    """Positions ``starts[i] .. starts[i] + hops[i] - 1`` for every ``i``, concatenated."""
    return np.repeat(starts, hops) + (np.arange(hops.sum()) - np.repeat(np.cumsum(hops) - hops, hops))
