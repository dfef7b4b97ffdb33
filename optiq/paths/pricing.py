"""Least-cost paths under one set of link costs, for many jobs at once (the pricing step).

Column generation asks, for every job, for the cheapest path under the LP's dual link
weights, no longer than the job's hop limit. One Dijkstra per distinct source, stopped once
its jobs' targets are settled (:mod:`optiq.paths.dijkstra`), answers it for all jobs; a
small cost per hop breaks ties towards fewer hops. Jobs whose answer is too long are
re-solved by the hop-limited layered Bellman-Ford of :mod:`optiq.paths.shortest`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import PathError
from ..mpi.workers import Workers, block
from ..utils.progress import Progress, Ticker
from .pathset import PathSet, csr_positions
from .shortest import hop_limited_shortest_records

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..topology import Topology

__all__ = ["least_cost_paths", "min_hops", "replace_paths"]


def min_hops(topology: Topology, sources: ArrayLike, targets: ArrayLike) -> np.ndarray:
    """Hop distance of every (source, target) pair (:meth:`optiq.Topology.pair_hops`).

    Examples
    --------
    >>> from optiq.topology import torus
    >>> min_hops(torus((4, 4)), [0, 0, 5], [5, 10, 5]).tolist()
    [2, 4, 0]
    """
    return topology.pair_hops(sources, targets)


#: The ways :func:`least_cost_paths` handles a cheapest path over its hop limit.
TOO_LONG = ("exact", "penalty", "drop", "penalised")


def least_cost_paths(topology: Topology, sources: ArrayLike, targets: ArrayLike, link_cost: np.ndarray, hop_limit: np.ndarray, *,
                     too_long: str = "exact", progress: Progress | None = None, what: str = "least-cost paths",
                     workers: Workers | None = None, regions: bool = False,
                     threads: int = 1) -> tuple[PathSet, np.ndarray, np.ndarray]:
    """The cheapest path of every job under ``link_cost``, at most ``hop_limit[j]`` links long.

    Parameters
    ----------
    topology : Topology
    sources, targets : array of int, shape (J,)
    link_cost : array of float, shape (num_links,)
        Non-negative cost of every link.
    hop_limit : array of int, shape (J,)
        Longest path allowed per job (at least the job's hop distance).
    too_long : {"exact", "penalty", "drop", "penalised"}
        What happens to jobs whose cheapest path is longer than their limit: ``exact``
        re-solves them with the hop-limited search (exact, slow when many are);
        ``penalty`` re-runs Dijkstra once for their sources with a cost per hop of half
        the mean positive link cost and keeps the paths within the limit, which is cheap
        but not always the cheapest; ``drop`` gives them an empty path. Jobs still too
        long after ``penalty`` get an empty path. ``penalised`` searches every job once
        with that cost per hop, for weights under which most cheapest paths are too long
        (every link weighs): half the work of ``penalty`` there, but ``unlimited`` is NaN.
    progress : callable, optional
        Receives ``what: sources done/total`` every couple of seconds.
    what : str
        How progress names this search.
    workers : Workers, optional
        Spread the sources over MPI ranks (:class:`optiq.mpi.workers.Workers`); the
        answer is the same for any number of ranks.
    regions : bool
        On tori and meshes, search every source's Dijkstra only over the nodes its jobs'
        hop-limited paths can reach (:mod:`optiq.paths.regions`): the same paths, a small
        part of the work on a large torus, but ``unlimited`` is then NaN (no bound).
    threads : int
        Without ``workers`` of more than one rank, search this many blocks of the sources in
        as many threads (the compiled search releases the GIL); the answer is the same for
        any number.

    Returns
    -------
    paths : PathSet
        Path ``j`` is job ``j``'s (no links where none was found within the limit).
    cost : ndarray
        Its cost under ``link_cost`` (no hop term).
    unlimited : ndarray
        A lower bound on the cheapest cost of any length (the hop-limited cost where the
        limit did not bind): what a Lagrangian bound over all paths needs.

    Raises
    ------
    PathError
        If a target cannot be reached from its source, or ``too_long`` is unknown.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> t = torus((6,))
    >>> cost = np.zeros(t.num_links); cost[t.links_between(0, 1)] = 1.0   # the short way costs
    >>> paths, c, _ = least_cost_paths(t, [0], [2], cost, np.array([4]))
    >>> t.link_dst[paths.path(0)].tolist(), c.tolist()                 # so go round the long way
    ([5, 4, 3, 2], [0.0])
    >>> paths, c, free = least_cost_paths(t, [0], [2], cost, np.array([2]))   # unless it is too long
    >>> t.link_dst[paths.path(0)].tolist(), c.tolist(), free.tolist()
    ([1, 2], [1.0], [0.0])
    """
    if too_long not in TOO_LONG:
        raise PathError(f"too_long must be one of {', '.join(TOO_LONG)}, not {too_long!r}")
    sources, targets = np.asarray(sources, dtype=np.int64), np.asarray(targets, dtype=np.int64)
    hop_limit = np.asarray(hop_limit, dtype=np.int64)
    cost = np.asarray(link_cost, dtype=float)
    workers = workers or Workers()
    args = (topology, sources, targets, cost, hop_limit, too_long, regions and topology.is_torus)
    if workers.size == 1 and threads > 1 and np.unique(sources).size > 1:
        parts = _threaded(_least_cost_part, int(threads), args, progress, what)
    else:
        parts = workers.map(_least_cost_part, *args, here={"progress": progress, "what": what})
    J = sources.size
    links, offsets = np.zeros(0, np.int64), np.zeros(J + 1, np.int64)
    path_cost, unlimited = np.zeros(J), np.zeros(J)
    for jobs, part_links, part_offsets, part_cost, part_free in parts:
        links, offsets = replace_paths(links, offsets, jobs, part_links, part_offsets)
        path_cost[jobs], unlimited[jobs] = part_cost, part_free
    return PathSet(np.arange(J), offsets, links, J), path_cost, unlimited


def replace_paths(links: np.ndarray, offsets: np.ndarray, jobs: np.ndarray, new_links: np.ndarray,
                  new_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One path per job in CSR (``links``, ``offsets``) with job ``jobs[i]``'s path replaced
    by path ``i`` of (``new_links``, ``new_offsets``).

    Examples
    --------
    >>> links, offsets = replace_paths(np.array([1, 2, 3]), np.array([0, 2, 3]), np.array([0]),
    ...                                np.array([7]), np.array([0, 1]))
    >>> links.tolist(), offsets.tolist()
    ([7, 3], [0, 1, 2])
    """
    hops = np.diff(offsets)
    new_hops = np.diff(new_offsets)
    source = np.zeros(hops.size, np.int64)          # 0: the old path, 1: the new one
    source[jobs] = 1
    start = offsets[:-1].copy()
    start[jobs] = new_offsets[:-1]
    hops = hops.copy()
    hops[jobs] = new_hops
    out = np.concatenate(([0], np.cumsum(hops)))
    merged = np.empty(int(out[-1]), np.int64)
    entry_from_new = np.repeat(source, hops).astype(bool)
    positions = csr_positions(start, hops)
    merged[~entry_from_new] = links[positions[~entry_from_new]]
    merged[entry_from_new] = new_links[positions[entry_from_new]]
    return merged, out


def _threaded(fn: Any, threads: int, args: tuple, progress: Progress | None, what: str) -> list[Any]:
    """``[fn(part, threads, *args) for part in range(threads)]``, each part in a thread of its
    own; the first part reports the progress (its share of the sources). An error (Ctrl-C
    too) stops the other parts at their next block of sources."""
    from concurrent.futures import ThreadPoolExecutor

    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=threads)
    try:
        futures = [pool.submit(fn, part, threads, *args, stop=stop,
                               **({"progress": progress, "what": what} if part == 0 else {}))
                   for part in range(threads)]
        return [future.result() for future in futures]
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class _Stopped(Exception):
    """Another part of a threaded search failed: this one stops."""


def _least_cost_part(part: int, parts: int, topology, sources, targets, cost, hop_limit, too_long, regions,
                     progress: Progress | None = None, what: str = "", stop: threading.Event | None = None) -> tuple:
    """:func:`least_cost_paths` for the jobs whose source is in block ``part`` of the distinct
    sources (``stop``: raise at the next block of sources once it is set)."""
    uniq = np.unique(sources)
    first, last = block(uniq.size, part, parts)
    jobs = np.flatnonzero((sources >= uniq[first]) & (sources <= uniq[last - 1])) if last > first else \
        np.zeros(0, np.int64)
    ticker = Ticker(progress, f"{what} (sources)", last - first)

    def tick(done: int) -> None:
        if stop is not None and stop.is_set():
            raise _Stopped
        ticker(done)

    links, offsets, path_cost, unlimited = _least_cost(topology, sources[jobs], targets[jobs], cost, hop_limit[jobs],
                                                       too_long, tick, regions)
    return jobs, links, offsets, path_cost, unlimited


def _hop_step(cost: np.ndarray) -> float:
    """The cost per hop that keeps paths short: half the mean positive link cost."""
    positive = cost[cost > 0]
    return 0.5 * float(positive.mean()) if positive.size else 1.0


def _least_cost(topology, sources, targets, cost, hop_limit, too_long, tick,
                regions: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from .dijkstra import source_paths  # numba: imported when a search runs, not with optiq

    n = topology.num_nodes
    hop_cost = 1e-9 * max(float(cost.max()), 1e-300)
    slack = hop_limit - topology.pair_hops(sources, targets) if regions else None
    links, offsets, path_cost, hops = source_paths(topology, sources, targets,
                                                   cost + hop_cost + (_hop_step(cost) if too_long == "penalised" else 0.0),
                                                   cost, hop_limit, slack, tick)
    # the tie-breaking hop cost can make a path look cheaper than one with more hops by at most
    # hop_cost * (nodes - 1): subtract that so the unlimited cost stays a lower bound
    unlimited = np.full(path_cost.size, np.nan) if regions or too_long == "penalised" else \
        np.maximum(path_cost - hop_cost * n, 0.0)
    over = np.flatnonzero(hops > hop_limit)
    if too_long == "penalty" and over.size:
        found_links, found_offsets, found_cost, found_hops = source_paths(
            topology, sources[over], targets[over], cost + hop_cost + _hop_step(cost), cost, hop_limit[over],
            None if slack is None else slack[over])
        links, offsets = replace_paths(links, offsets, over, found_links, found_offsets)
        fits = found_hops <= hop_limit[over]
        path_cost[over[fits]] = found_cost[fits]
        over = over[~fits]
    if too_long in ("penalty", "drop", "penalised"):
        path_cost[over] = 0.0  # their paths are empty
        return links, offsets, path_cost, unlimited
    for limit in np.unique(hop_limit[over]):
        jobs = over[hop_limit[over] == limit]
        record, _ = hop_limited_shortest_records(topology, sources[jobs], targets[jobs],
                                                 np.broadcast_to(cost + hop_cost, (jobs.size, cost.size)), int(limit))
        found = record >= 0  # each row's links in order
        hops = found.sum(axis=1)
        links, offsets = replace_paths(links, offsets, jobs, record[found], np.concatenate(([0], np.cumsum(hops))))
        path_cost[jobs] = np.bincount(np.repeat(np.arange(jobs.size), hops), weights=cost[record[found]],
                                      minlength=jobs.size)
    return links, offsets, path_cost, unlimited
