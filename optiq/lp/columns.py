"""The columns of column generation's restricted LP: each (job, path) once, idle ones dropped."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..paths import PathSet
from ..paths.pathset import csr_positions, path_key
from .restricted import RestrictedLP

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["ColumnPool", "IDLE_SHARE"]

#: Columns carrying less than this share of their job after a solve leave the restricted LP.
IDLE_SHARE = 1e-3


class ColumnPool:
    """The columns of the restricted LP, each (job, path) once, and which may be dropped.

    A column that carries less than :data:`IDLE_SHARE` of its job after a solve leaves the
    LP (interior point pays for every column; on an 8,192-node torus two thirds of them
    are idle and dropping them makes the next solve three times faster). If pricing asks
    for it again it comes back for good, so no column cycles.
    """

    def __init__(self, lp: RestrictedLP, idle_share: float) -> None:
        self.lp, self.idle_share = lp, idle_share
        self.keys: list[tuple[int, bytes]] = []   # one per LP column, in column order
        self.state: dict[tuple[int, bytes], str] = {}  # "in", "kept" (back once: never dropped) or "out"
        self.age = np.zeros(0, dtype=np.int64)

    def add(self, links: np.ndarray, hops: np.ndarray, jobs: np.ndarray) -> int:
        offsets = np.concatenate(([0], np.cumsum(hops)))
        return self.add_lists([links[offsets[p]:offsets[p + 1]] for p in range(hops.size)], jobs)

    def add_lists(self, paths: list[np.ndarray], jobs: ArrayLike) -> int:
        keep, keys = [], []
        for i, (p, j) in enumerate(zip(paths, np.asarray(jobs).tolist())):
            key = path_key(j, p)
            state = self.state.get(key)
            if p.size and state != "in" and state != "kept":
                self.state[key] = "in" if state is None else "kept"
                keep.append(i)
                keys.append(key)
        if keep:
            hops = np.array([paths[i].size for i in keep], dtype=np.int64)
            self.lp.add_columns(np.concatenate([paths[i] for i in keep]), hops,
                                np.asarray(jobs, dtype=np.int64)[keep])
            self.keys += keys
            self.age = np.concatenate([self.age, np.zeros(len(keep), dtype=np.int64)])
        return len(keep)

    def drop_idle(self, share: np.ndarray) -> int:
        """Drop the columns below :data:`IDLE_SHARE` that were solved once and never came back."""
        self.age += 1
        drop = (share < self.idle_share) & (self.age > 0)
        drop &= np.array([self.state[k] == "in" for k in self.keys], dtype=bool)
        if not drop.any():
            return 0
        self.lp.drop_columns(drop)
        for i in np.flatnonzero(drop):
            self.state[self.keys[i]] = "out"
        self.keys = [k for k, d in zip(self.keys, drop) if not d]
        self.age = self.age[~drop]
        return int(drop.sum())

    def pathset(self, mask: np.ndarray) -> tuple[PathSet, np.ndarray]:
        """The columns where ``mask`` is true, grouped by job, and their order among those columns."""
        links, offsets, jobs = self.lp.columns
        keep = np.flatnonzero(mask)
        hops = np.diff(offsets)[keep]
        return PathSet.from_csr(links[csr_positions(offsets[keep], hops)], np.concatenate(([0], np.cumsum(hops))),
                                jobs[keep], self.lp.demands.num_jobs)
