"""Heuristic 1 (OPTIQ): spread paths so that no link carries more than ``maxload`` of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import PlanError
from ..paths.pathset import csr_positions
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
    its paths. Needs no demand sizes to choose the paths. A round's paths are decided a block
    of :data:`ROUND_BLOCK` at a time in numpy, with the same outcome as one by one.

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
        offered = jo[np.flatnonzero(counts > r)] + r  # the round's paths, in job order
        if r == 0:  # every job's first candidate is taken
            chosen[offered] = True
            hops = candidates.hops[offered]
            links = candidates.links[csr_positions(candidates.offsets[offered], hops)]
            owner = np.repeat(np.arange(offered.size), hops)
            load += np.bincount(links[_first_crossings(links, owner)[0]], minlength=load.size)
            continue
        for start in range(0, offered.size, ROUND_BLOCK):
            _take(candidates, offered[start:start + ROUND_BLOCK], load, chosen, maxload)
    return even_split(candidates, demands, chosen)


#: Paths of one round decided together (in job order, exactly as one by one).
ROUND_BLOCK = 4096


def _take(candidates: PathSet, paths: np.ndarray, load: np.ndarray, chosen: np.ndarray, maxload: int) -> None:
    """Take, in order, each of ``paths`` that puts at most ``maxload`` paths on every link.

    A path over the limit before any of the block is taken is refused (loads only grow); one
    that fits even if every earlier candidate of the block is taken is taken; the few left
    are decided one by one, as the sequential heuristic decides them."""
    hops = candidates.hops[paths]
    entries = csr_positions(candidates.offsets[paths], hops)
    links = candidates.links[entries]
    owner = np.repeat(np.arange(paths.size), hops)
    starts = np.concatenate(([0], np.cumsum(hops)[:-1]))
    fits = np.maximum.reduceat(load[links], starts) < maxload
    # how many earlier fitting paths of the block share each link entry's link (a path that
    # crosses a link twice is one path on it; counting its second crossing too only makes
    # the path unsure, and unsure paths are decided exactly)
    first, order = _first_crossings(links, owner)
    on = fits[owner] & first
    link_sorted, on_sorted = links[order], on[order].astype(np.int64)
    before = np.cumsum(on_sorted) - on_sorted
    first_of_link = np.concatenate(([0], np.flatnonzero(np.diff(link_sorted)) + 1))
    run = np.repeat(first_of_link, np.diff(np.append(first_of_link, link_sorted.size)))
    earlier = np.empty_like(before)
    earlier[order] = before - before[run]
    safe = fits & (np.maximum.reduceat(load[links] + earlier, starts) < maxload)
    unsure = fits & ~safe
    take = safe.copy()
    if unsure.any():  # decided in order against what the block has taken before them
        taken_load = load.copy()
        first_unsure = int(np.flatnonzero(unsure)[0])
        done = (owner < first_unsure) & first
        taken_load += np.bincount(links[done & take[owner]], minlength=load.size)
        for i in range(first_unsure, paths.size):
            mine = links[starts[i]:starts[i] + hops[i]]
            if safe[i] or (unsure[i] and taken_load[mine].max() < maxload):
                take[i] = True
                taken_load[mine] += 1
    chosen[paths[take]] = True
    load += np.bincount(links[take[owner] & first], minlength=load.size)


def _first_crossings(links: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which link entries are their path's first crossing of that link, and the entries'
    order by link, then path."""
    order = np.lexsort((owner, links))
    repeat = np.zeros(links.size, dtype=bool)
    repeat[order[1:]] = (links[order[1:]] == links[order[:-1]]) & (owner[order[1:]] == owner[order[:-1]])
    return ~repeat, order
