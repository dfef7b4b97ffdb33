"""The :class:`PathSet`: paths as one flat array of link ids plus offsets (CSR style), and
where each path stops (the ranks that receive and copy its chunks)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
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

    ``stops[i]`` says whether the path *stops* at the head of link entry ``i``: a rank
    there receives the path's chunks and sends them on (a copy), or, at the last link, the
    destination takes them. Between two stops a path is one *leg*, which the network
    carries by itself (:mod:`optiq.paths.routing`). The last link of every path is a stop;
    without ``stops`` it is the only one (every path one leg).

    Examples
    --------
    >>> ps = PathSet.from_lists([[0, 1], [2]], [0, 0], num_jobs=1)
    >>> ps.num_paths, ps.hops.tolist(), ps.path(0).tolist(), ps.legs.tolist()
    (2, [2, 1], [0, 1], [1, 1])
    >>> PathSet.from_lists([[0, 1]], [0], 1, stops=[[True, True]]).copies.tolist()   # a copy halfway
    [1]
    """

    job: np.ndarray
    offsets: np.ndarray
    links: np.ndarray
    num_jobs: int
    stops: np.ndarray = None  # type: ignore[assignment]  # None: the last link of every path (set in __post_init__)

    def __post_init__(self) -> None:
        object.__setattr__(self, "job", np.asarray(self.job, dtype=np.int64))
        object.__setattr__(self, "offsets", np.asarray(self.offsets, dtype=np.int64))
        object.__setattr__(self, "links", np.asarray(self.links, dtype=np.int64))
        if self.offsets.size != self.job.size + 1 or self.offsets[-1] != self.links.size:
            raise PathError("path offsets do not match the number of paths and links")
        if self.job.size and np.any(np.diff(self.job) < 0):
            raise PathError("paths must be grouped by job (job ids non-decreasing)")
        last = self.offsets[1:][self.offsets[1:] > self.offsets[:-1]] - 1
        if self.stops is None:
            stops = end_stops(self.offsets)
        else:
            stops = np.asarray(self.stops, dtype=bool)
            if stops.shape != self.links.shape:
                raise PathError(f"{stops.size} stop flags for {self.links.size} link entries")
            if not stops[last].all():
                p = int(np.searchsorted(self.offsets, last[~stops[last]][0], side="right") - 1)
                raise PathError(f"path {p} of job {self.job[p]} does not stop at its destination (its last link)")
        object.__setattr__(self, "stops", stops)

    @classmethod
    def from_lists(cls, paths: list, jobs: ArrayLike, num_jobs: int, stops: list | None = None) -> PathSet:
        """Build from a list of link-id lists and the job of each path (reordered by job, stably);
        ``stops``, if given, holds one list of stop flags per path (default: each path one leg)."""
        jobs = np.asarray(jobs, dtype=np.int64)
        order = np.argsort(jobs, kind="stable")
        lengths = np.array([len(paths[i]) for i in order], dtype=np.int64)
        flat = np.concatenate([np.asarray(paths[i], dtype=np.int64) for i in order]) if len(paths) else np.zeros(0, np.int64)
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        if stops is None:
            flags = end_stops(offsets)
        else:
            flags = (np.concatenate([np.asarray(stops[i], dtype=bool) for i in order]) if len(paths)
                     else np.zeros(0, bool))
        return cls(jobs[order], offsets, flat, num_jobs, flags)

    @classmethod
    def from_csr(cls, links: ArrayLike, offsets: ArrayLike, jobs: ArrayLike, num_jobs: int,
                 stops: ArrayLike | None = None) -> tuple[PathSet, np.ndarray]:
        """Build from paths in any job order (path ``p`` is ``links[offsets[p]:offsets[p+1]]``,
        with stop flags ``stops[offsets[p]:offsets[p+1]]`` if given).

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
        where = csr_positions(offsets[:-1][order], hops)
        new_offsets = np.concatenate(([0], np.cumsum(hops)))
        flags = end_stops(new_offsets) if stops is None else np.asarray(stops, dtype=bool)[where]
        return cls(jobs[order], new_offsets, links[where], num_jobs, flags), order

    @classmethod
    def concat(cls, parts: list[PathSet]) -> tuple[PathSet, np.ndarray]:
        """The paths of several path sets of the same jobs, grouped by job (stably: within a
        job, the first set's paths first), and ``order`` as :meth:`from_csr` gives it."""
        # every part is grouped by job already: each path's place is its job's start, the paths
        # of the job in the earlier parts, and its rank within its job in its own part (no sort)
        num_jobs = parts[0].num_jobs
        counts = np.stack([np.bincount(p.job, minlength=num_jobs) for p in parts])      # (parts, jobs)
        before = (np.cumsum(counts.T.ravel()) - counts.T.ravel()).reshape(num_jobs, len(parts)).T
        dest = np.concatenate([before[i][p.job] + np.arange(p.num_paths) - p.job_offsets[p.job]
                               for i, p in enumerate(parts)])
        total = dest.size
        hops = np.empty(total, dtype=np.int64)
        hops[dest] = np.concatenate([p.hops for p in parts])
        offsets = np.concatenate(([0], np.cumsum(hops)))
        where = csr_positions(offsets[:-1][dest], hops[dest])
        links = np.empty(int(offsets[-1]), dtype=np.int64)
        stops = np.empty(links.size, dtype=bool)
        links[where] = np.concatenate([p.links for p in parts])
        stops[where] = np.concatenate([p.stops for p in parts])
        job = np.repeat(np.arange(num_jobs), counts.sum(axis=0))
        order = np.empty(total, dtype=np.int64)
        order[dest] = np.arange(total)
        return cls(job, offsets, links, num_jobs, stops), order

    def __repr__(self) -> str:
        return (f"PathSet(jobs={self.num_jobs}, paths={self.num_paths}, hops_max={int(self.hops.max(initial=0))}, "
                f"copies_max={int(self.copies.max(initial=0))})")

    def with_stops(self, stops: ArrayLike) -> PathSet:
        """The same paths with other stop flags (one per link entry)."""
        return PathSet(self.job, self.offsets, self.links, self.num_jobs, np.asarray(stops, dtype=bool))

    @cached_property
    def legs(self) -> np.ndarray:
        """Legs of every path: its stops (the destination included)."""
        return np.bincount(self.path_of_link_entry, weights=self.stops, minlength=self.num_paths).astype(np.int64)

    @property
    def copies(self) -> np.ndarray:
        """Intermediate stops of every path: how many times each of its chunks is copied."""
        return self.legs - 1

    def leg_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every leg of every path, in path order: ``(path, first, last)``, the positions in
        ``links`` of the leg's first and last link.

        Examples
        --------
        >>> ps = PathSet.from_lists([[0, 2, 4], [7]], [0, 0], 1, stops=[[False, True, True], [True]])
        >>> [a.tolist() for a in ps.leg_entries()]
        [[0, 0, 1], [0, 2, 3], [1, 2, 3]]
        """
        last = np.flatnonzero(self.stops)
        path = self.path_of_link_entry[last]
        first = np.empty_like(last)
        new = np.ones(path.size, dtype=bool)
        new[1:] = path[1:] != path[:-1]
        first[new] = self.offsets[path[new]]
        first[~new] = last[np.flatnonzero(~new) - 1] + 1
        return path, first, last

    def leg_ends(self, topology: Topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every leg of every path, in path order: ``(path, tail, head)``, the nodes the leg
        starts and ends at (the path's source or a stop, and the next stop).

        Examples
        --------
        >>> from optiq.topology import mesh
        >>> t = mesh((4,))
        >>> ps = PathSet.from_lists([[0, 1, 3]], [0], 1, stops=[[False, True, True]])   # 0 -> 1 -> 2 -> 3
        >>> [a.tolist() for a in ps.leg_ends(t)]
        [[0, 0], [0, 2], [2, 3]]
        """
        path, first, last = self.leg_entries()
        return path, topology.link_src[self.links[first]], topology.link_dst[self.links[last]]

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
        """Bytes on every link when path ``p`` carries ``path_bytes[p]``. Where most paths
        carry nothing (a plan's candidates), only those that carry are summed: adding zero
        changes no sum, so the loads are the same to the bit."""
        path_bytes = np.asarray(path_bytes, float)
        carrying = np.flatnonzero(path_bytes)
        if 2 * carrying.size >= path_bytes.size:
            return np.bincount(self.links, weights=np.repeat(path_bytes, self.hops), minlength=num_links)
        hops = self.hops[carrying]
        return np.bincount(self.links[csr_positions(self.offsets[carrying], hops)],
                           weights=np.repeat(path_bytes[carrying], hops), minlength=num_links)

    def busiest_link_time(self, path_bytes: ArrayLike, capacity: np.ndarray) -> float:
        """Completion time when links share in proportion to the bytes: the busiest link's
        bytes over its capacity (bytes/s), with ``path_bytes[p]`` on path ``p``.

        Examples
        --------
        >>> PathSet.from_lists([[0, 1], [1]], [0, 1], num_jobs=2).busiest_link_time([4, 2], np.array([1.0, 2.0]))
        4.0
        """
        return float((self.link_loads(path_bytes, capacity.size) / capacity).max())

    def select(self, mask: ArrayLike, *, stops: np.ndarray | None = None) -> PathSet:
        """The paths where ``mask`` is true (a boolean array over paths), keeping job ids; with
        ``stops`` (flags over this set's link entries), those in place of the set's own."""
        keep = np.flatnonzero(mask)
        hops = self.hops[keep]
        where = csr_positions(self.offsets[keep], hops)
        return PathSet(self.job[keep], np.concatenate(([0], np.cumsum(hops))), self.links[where], self.num_jobs,
                       (self.stops if stops is None else stops)[where])

    def unique(self) -> PathSet:
        """The same paths without repeats of a path within its job (the first one stays).

        Examples
        --------
        >>> PathSet.from_lists([[0, 1], [2], [0, 1]], [0, 0, 0], num_jobs=1).unique().num_paths
        2
        """
        repeat = self.repeats()
        return self if not repeat.any() else self.select(~repeat)

    def repeats(self) -> np.ndarray:
        """Which paths have the same links as an earlier path of their job.

        Paths are grouped by a 64-bit hash of their links and compared link by link with
        the one before them in the group, in numpy: no loop over paths. (Two different paths
        of a job with the same hash could hide a third path's repeat between them; it is
        then kept, never wrongly dropped.)

        Examples
        --------
        >>> PathSet.from_lists([[0, 1], [2], [0, 1], []], [0, 0, 0, 1], num_jobs=2).repeats().tolist()
        [False, False, True, False]
        """
        P, hops = self.num_paths, self.hops
        if P < 2:
            return np.zeros(P, bool)
        digest = self.digests()
        order = np.lexsort((digest, hops, self.job))
        a, b = order[:-1], order[1:]
        same = (self.job[a] == self.job[b]) & (hops[a] == hops[b]) & (digest[a] == digest[b])
        a, b = a[same], b[same]
        repeat = np.zeros(P, bool)
        repeat[b[self.same_paths(a, self, b)]] = True
        return repeat

    def digests(self) -> np.ndarray:
        """A 64-bit hash of every path's links, in order (equal paths have equal digests).

        Examples
        --------
        >>> d = PathSet.from_lists([[0, 1], [1, 0], [0, 1]], [0, 0, 0], num_jobs=1).digests()
        >>> bool(d[0] == d[2]), bool(d[0] == d[1])
        (True, False)
        """
        hops = self.hops
        if self.links.size == 0:
            return np.zeros(self.num_paths, np.uint64)
        position = np.arange(self.links.size) - np.repeat(self.offsets[:-1], hops)
        with np.errstate(over="ignore"):
            terms = (self.links.astype(np.uint64) + np.uint64(1)) * _multipliers(int(hops.max()))[position]
            total = np.concatenate(([np.uint64(0)], np.cumsum(terms, dtype=np.uint64)))
            return total[self.offsets[1:]] - total[self.offsets[:-1]]

    def same_paths(self, mine: np.ndarray, other: PathSet, theirs: np.ndarray) -> np.ndarray:
        """Whether path ``mine[i]`` of this set has the same links as path ``theirs[i]`` of
        ``other``, for every ``i`` (jobs not compared).

        Examples
        --------
        >>> a = PathSet.from_lists([[0, 1], [2]], [0, 0], num_jobs=1)
        >>> a.same_paths(np.array([0, 0, 1]), a, np.array([0, 1, 1])).tolist()
        [True, False, True]
        """
        mine, theirs = np.asarray(mine, np.int64), np.asarray(theirs, np.int64)
        hops = self.hops[mine]
        same = hops == other.hops[theirs]
        hops = np.where(same, hops, 0)
        differ = (self.links[csr_positions(self.offsets[mine], hops)]
                  != other.links[csr_positions(other.offsets[theirs], hops)])
        return same & (np.bincount(np.repeat(np.arange(mine.size), hops), weights=differ, minlength=mine.size) == 0)

    def nodes(self, p: int, topology: Topology) -> list[int]:
        """Node sequence of path ``p`` (source first)."""
        ls = self.path(p)
        return [int(topology.link_src[ls[0]])] + topology.link_dst[ls].tolist()

    def stop_nodes(self, p: int, topology: Topology) -> list[int]:
        """Path ``p``'s source, the nodes it stops at and its destination, in order."""
        ls = self.path(p)
        return [int(topology.link_src[ls[0]])] + topology.link_dst[ls[self.stops[self.offsets[p]:self.offsets[p + 1]]]].tolist()


@lru_cache(maxsize=4)
def _multipliers_of(length: int) -> np.ndarray:
    return np.random.default_rng(0x9E3779B97F4A7C15).integers(1, 2**63, size=length, dtype=np.uint64) | np.uint64(1)


def _multipliers(length: int) -> np.ndarray:
    """Odd 64-bit multipliers, one per position in a path (a fixed seed: the same hash in every run)."""
    return _multipliers_of(max(64, 1 << (max(length, 1) - 1).bit_length()))


def path_key(job: int, links: np.ndarray) -> tuple[int, bytes]:
    """A hashable identity of a path within its job: equal keys, the same path (the one
    dedup key of every candidate generator and of column generation).

    Examples
    --------
    >>> path_key(3, np.array([1, 2])) == path_key(3, np.array([1, 2], dtype=np.int64))
    True
    """
    return int(job), np.asarray(links, dtype=np.int64).tobytes()


def end_stops(offsets: np.ndarray) -> np.ndarray:
    """Stop flags of paths that stop only at their ends (one leg each), for CSR ``offsets``."""
    offsets = np.asarray(offsets, dtype=np.int64)
    flags = np.zeros(int(offsets[-1]), dtype=bool)
    flags[offsets[1:][offsets[1:] > offsets[:-1]] - 1] = True
    return flags


def csr_positions(starts: np.ndarray, hops: np.ndarray) -> np.ndarray:
    """Positions ``starts[i] .. starts[i] + hops[i] - 1`` for every ``i``, concatenated."""
    hops = np.asarray(hops, dtype=np.int64)
    shift = np.asarray(starts, dtype=np.int64) - (np.cumsum(hops) - hops)  # start less where the run begins
    return np.repeat(shift, hops) + np.arange(int(hops.sum()), dtype=np.int64)


def stable_order(keys: np.ndarray, size: int) -> np.ndarray:
    """The stable sort order of integer ``keys`` in ``0 .. size - 1`` (link ids, node ids).

    numpy sorts keys of 16 bits or fewer by radix, several times faster than 64-bit ones, so
    keys that fit are sorted as such; the order is the same either way.

    Examples
    --------
    >>> stable_order(np.array([3, 1, 3, 0]), 4).tolist()
    [3, 1, 0, 2]
    """
    keys = np.asarray(keys)
    if size <= 1 << 16:
        keys = keys.astype(np.uint16)
    return np.argsort(keys, kind="stable")
