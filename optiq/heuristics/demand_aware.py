"""Heuristic 2 (OPTIQ): place demand unit by unit on the path whose busiest link is least loaded."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PlanError
from ..utils.progress import Progress, Ticker
from .common import job_candidates

if TYPE_CHECKING:
    from ..paths import PathSet
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["demand_aware_heuristic", "DEFAULT_UNIT"]

#: Default unit of Heuristic 2: 1 MiB (8 units for an 8 MiB message).
DEFAULT_UNIT = 2**20


def demand_aware_heuristic(topology: Topology, demands: Demands, candidates: PathSet, unit: int = DEFAULT_UNIT, *,
                           progress: Progress | None = None) -> np.ndarray:
    """Bytes per candidate path chosen by Heuristic 2.

    Repeatedly take the job with the most demand left, put one ``unit`` of it (or what is
    left, if less) on its candidate path whose busiest link would be least loaded
    afterwards (in time: bytes over capacity; ties go to the shorter, then earlier path),
    and update the link loads, until every byte is placed.

    Parameters
    ----------
    topology : Topology
    demands : Demands
    candidates : PathSet
    unit : int
        Bytes placed per step.
    progress : callable, optional
        Receives the number of units placed every couple of seconds.

    Returns
    -------
    ndarray of int
        Bytes on every candidate path.

    Raises
    ------
    PlanError
        If ``unit < 1``.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> from optiq.paths import diverse_paths
    >>> t = torus((4, 4)); d = Demands([0], [5], [4000])
    >>> demand_aware_heuristic(t, d, diverse_paths(t, d, k=4), unit=1000).tolist()
    [1000, 1000, 1000, 1000]
    """
    if unit < 1:
        raise PlanError(f"the unit of Heuristic 2 must be at least 1 byte, got {unit}")
    load = np.zeros(topology.num_links)
    cap = topology.capacity
    out = np.zeros(candidates.num_paths, dtype=np.int64)
    left = demands.nbytes.copy()
    cache: dict[int, tuple] = {}
    heap = [(-int(b), j) for j, b in enumerate(left)]
    heapq.heapify(heap)
    units = int((-(-demands.nbytes // unit)).sum())
    tick, placed = Ticker(progress, "Heuristic 2: units placed", units), 0
    while heap:
        placed += 1
        if placed % 1024 == 0:
            tick(placed)
        _, j = heapq.heappop(heap)
        if j not in cache:
            cache[j] = job_candidates(candidates, j)
        ids, links, offs, hops = cache[j]
        amount = min(unit, int(left[j]))
        worst = np.maximum.reduceat((load[links] + amount) / cap[links], offs)
        best = np.lexsort((np.arange(ids.size), hops, worst))[0]
        load[links[offs[best]:offs[best] + hops[best]]] += amount
        out[ids[best]] += amount
        left[j] -= amount
        if left[j] > 0:
            heapq.heappush(heap, (-int(left[j]), j))
    tick(units)
    return out
