"""Heuristic 1 (OPTIQ): spread paths so that no link carries more than ``maxload`` of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import PlanError
from ..utils.progress import Progress, Ticker
from .common import even_split

if TYPE_CHECKING:
    from ..paths import PathSet
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["maxload_heuristic"]


def maxload_heuristic(topology: Topology, demands: Demands, candidates: PathSet, maxload: int = 16, *,
                      progress: Progress | None = None) -> np.ndarray:
    """Bytes per candidate path chosen by Heuristic 1.

    Jobs are visited round-robin; in round ``r`` every job offers its next untried
    candidate, which is taken unless it would put more than ``maxload`` paths on some link
    (then it is skipped for good). A job's first candidate is always taken, so every job
    has a path even when that link is already full. Each job's data is split evenly over
    its paths. Needs no demand sizes to choose the paths.

    Parameters
    ----------
    candidates : PathSet
        Candidate paths per job, most preferred first.
    maxload : int
        Most paths allowed per link (default 16, as in the OPTIQ runs).
    progress : callable, optional
        Receives the rounds done every couple of seconds.

    Returns
    -------
    ndarray of int
        Bytes on every candidate path (zero where not chosen).

    Raises
    ------
    PlanError
        If ``maxload < 1``.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> from optiq.paths import diverse_paths
    >>> t = torus((4, 4)); d = Demands([0], [5], [1000])
    >>> maxload_heuristic(t, d, diverse_paths(t, d, k=4)).tolist()
    [250, 250, 250, 250]
    """
    if maxload < 1:
        raise PlanError(f"maxload must be at least 1, got {maxload}")
    load = np.zeros(topology.num_links, dtype=np.int64)
    chosen = np.zeros(candidates.num_paths, dtype=bool)
    jo = candidates.job_offsets
    counts = np.diff(jo)
    tick = Ticker(progress, "Heuristic 1: rounds", int(counts.max(initial=0)))
    for r in range(int(counts.max(initial=0))):
        tick(r)
        for j in np.flatnonzero(counts > r):
            p = jo[j] + r
            links = candidates.path(p)
            if r == 0 or load[links].max() < maxload:
                load[links] += 1
                chosen[p] = True
    return even_split(candidates, demands, chosen)
