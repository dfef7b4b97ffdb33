"""The columns of column generation's restricted LP: each (job, path) once, idle ones dropped."""

from __future__ import annotations

import numpy as np

from ..paths import PathSet
from ..paths.pathset import csr_positions, path_key
from .restricted import RestrictedLP

__all__ = ["ColumnPool", "IDLE_SHARE"]

#: Columns carrying less than this share of their job after a solve leave the restricted LP.
IDLE_SHARE = 1e-3


class ColumnPool:
    """The columns of the restricted LP, each (job, path) once, and which may be dropped.

    A column that carries less than :data:`IDLE_SHARE` of its job after a solve leaves the
    LP (interior point pays for every column; on an 8,192-node torus two thirds of them
    are idle and dropping them makes the next solve three times faster). If pricing asks
    for it again it comes back for good, so no column cycles.

    With ``keep_stops`` the pool remembers every column's stops (chains, whose stops are
    their own choice); otherwise the paths it gives back stop only at their ends, and the
    caller gives them the stops their routing rule says.
    """

    def __init__(self, lp: RestrictedLP, idle_share: float, *, keep_stops: bool = False) -> None:
        self.lp, self.idle_share, self.keep_stops = lp, idle_share, keep_stops
        self.keys: list[tuple[int, bytes]] = []   # one per LP column, in column order
        self.state: dict[tuple[int, bytes], str] = {}  # "in", "kept" (back once: never dropped) or "out"
        self.stops: dict[tuple[int, bytes], np.ndarray] = {}
        self.age = np.zeros(0, dtype=np.int64)

    def add(self, paths: PathSet) -> int:
        """Add the paths not in the LP (an idle one dropped before comes back for good); how many."""
        keep, keys = [], []
        for p, j in enumerate(paths.job.tolist()):
            links = paths.path(p)
            key = path_key(j, links)
            state = self.state.get(key)
            if links.size and state != "in" and state != "kept":
                self.state[key] = "in" if state is None else "kept"
                keep.append(p)
                keys.append(key)
                if self.keep_stops:
                    self.stops[key] = paths.stops[paths.offsets[p]:paths.offsets[p + 1]]
        if keep:
            mask = np.zeros(paths.num_paths, dtype=bool)
            mask[keep] = True
            chosen = paths.select(mask)
            self.lp.add_columns(chosen.links, chosen.hops, chosen.job)
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
        stops = None
        if self.keep_stops:
            stops = np.concatenate([self.stops[self.keys[c]] for c in keep]) if keep.size else np.zeros(0, bool)
        return PathSet.from_csr(links[csr_positions(offsets[keep], hops)], np.concatenate(([0], np.cumsum(hops))),
                                jobs[keep], self.lp.demands.num_jobs, stops)
