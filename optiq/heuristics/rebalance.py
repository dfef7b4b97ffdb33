"""Moving a plan's paths off its busiest link while that makes the plan faster, and merging a job's paths while that costs no time."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import PlanError
from ..paths.pathset import stable_order
from .common import NUMPY_STEP_SCANS, compiled_pays, least_loaded, scanned_in_numpy

if TYPE_CHECKING:
    from ..paths import PathSet
    from ..topology import Topology

__all__ = ["rebalance", "default_moves", "fewer_paths"]


def default_moves(jobs: int) -> int:
    """The most moves :func:`rebalance` makes by default: one per 64 jobs, at least 64, so that
    its work grows with the plan's.

    Examples
    --------
    >>> default_moves(10), default_moves(261_632)
    (64, 4088)
    """
    return max(64, jobs // 64)


#: :func:`rebalance` stops once the busiest link is within this fraction of a proven lower bound
#: on the plan's time: no move can then gain more.
BOUND_SLACK = 0.005


def rebalance(topology: Topology, candidates: PathSet, nbytes: np.ndarray, *, max_moves: int | None = None,
              bound_s: float | None = None, compiled: bool | None = None) -> np.ndarray:
    """Bytes per candidate path after moving whole paths' bytes off the busiest link.

    A greedy heuristic places each unit against the loads it sees, so it can leave a link
    busier than another routing of the same jobs would (Heuristic 2 placing whole jobs on a
    fat-tree, where the fabric's own routes meet the cut bound). While some path with bytes
    crosses the busiest link and one of its job's other candidates would take those bytes
    with every link it crosses staying below that link's time, the bytes move there: the
    largest path first, to the candidate whose busiest link is least loaded afterwards (ties:
    fewer hops, then the earlier path). So the plan's busiest link never gets busier, and
    the result is the same on every machine.

    Parameters
    ----------
    topology : Topology
    candidates : PathSet
        The candidate paths the bytes are on.
    nbytes : ndarray of int
        Bytes on every candidate path.
    max_moves : int, optional
        Most moves (default :func:`default_moves`).
    bound_s : float, optional
        A proven lower bound on the plan's time (seconds): no move is made once the busiest
        link's time is within :data:`BOUND_SLACK` of it.
    compiled : bool, optional
        Make the moves in the compiled kernel (True) or in numpy (False); by default
        :func:`~optiq.heuristics.common.compiled_pays` decides by the work done in numpy
        before (the moves' own scans are known only once made, and are counted then).
        Either way the same moves are made.

    Returns
    -------
    ndarray of int
        Bytes on every candidate path: each job's total unchanged.

    Raises
    ------
    PlanError
        If ``nbytes`` does not have one entry per candidate path, or ``max_moves`` is below 0.

    Examples
    --------
    Two jobs on one link of a ring, where each had another way round:

    >>> from optiq.topology import torus
    >>> from optiq.paths import PathSet
    >>> t = torus((4,))
    >>> a, b = t.links_between(0, 1)[0], t.links_between(1, 2)[0]
    >>> back = [t.links_between(u, v)[0] for u, v in ((0, 3), (3, 2))]
    >>> cands = PathSet.from_lists([[a, b], back, [b], [t.links_between(1, 0)[0], back[0], back[1]]],
    ...                            [0, 0, 1, 1], 2)
    >>> rebalance(t, cands, np.array([100, 0, 100, 0])).tolist()
    [0, 100, 100, 0]
    """
    nbytes = np.asarray(nbytes)
    if nbytes.shape != (candidates.num_paths,):
        raise PlanError(f"rebalance needs bytes for each of the {candidates.num_paths} candidate paths, "
                        f"got an array of shape {nbytes.shape}")
    limit = default_moves(candidates.num_jobs) if max_moves is None else int(max_moves)
    if limit < 0:
        raise PlanError(f"max_moves must be 0 or more, got {max_moves}")
    out = nbytes.astype(np.int64).copy()
    links, offsets, job, cap = candidates.links, candidates.offsets, candidates.job, topology.capacity
    enough = -np.inf if bound_s is None else bound_s * (1 + BOUND_SLACK)
    # its scans are known only once made: the kernels run where they are loaded or paid for already
    if compiled_pays(0) if compiled is None else compiled:
        from .least_loaded_kernel import rebalance_moves

        rebalance_moves(candidates.job_offsets, offsets, links, job, limit, enough, out, cap)
        return out
    used = np.flatnonzero(out > 0)
    carrying = candidates.select(out > 0)
    load = carrying.link_loads(out[used], topology.num_links)
    by_link = stable_order(carrying.links, topology.num_links)  # the used paths' crossings, link by link
    crossing = used[carrying.path_of_link_entry[by_link]]
    link_start = np.searchsorted(carrying.links[by_link], np.arange(load.size + 1))
    busy = load / cap
    new_links, new_owner = np.zeros(0, np.int64), np.zeros(0, np.int64)  # crossings of paths that got bytes here
    scans = used.size   # this loop's set-up and steps, counted towards loading the kernels
    for _ in range(limit):
        hot = int(np.argmax(busy))
        if busy[hot] <= enough:
            break
        on = np.unique(np.concatenate((crossing[link_start[hot]:link_start[hot + 1]], new_owner[new_links == hot])))
        on = on[out[on] > 0]
        if not on.size:  # no bytes at all
            break
        on = on[np.lexsort((on, -out[on]))]  # the largest first
        # a candidate that crosses the busiest link is never below it: a path is never moved to itself
        best, worst = least_loaded(candidates, job[on], out[on], load, cap, compiled=False)   # (counts its scans)
        scans += NUMPY_STEP_SCANS
        movable = np.flatnonzero(worst < busy[hot])
        if not movable.size:
            break
        p, q = int(on[movable[0]]), int(best[movable[0]])
        here, there = links[offsets[p]:offsets[p + 1]], links[offsets[q]:offsets[q + 1]]
        np.subtract.at(load, here, float(out[p]))
        np.add.at(load, there, float(out[p]))
        touched = np.concatenate((here, there))
        busy[touched] = load[touched] / cap[touched]
        if out[q] == 0:
            new_links = np.concatenate((new_links, there))
            new_owner = np.concatenate((new_owner, np.full(there.size, q)))
        out[q] += out[p]
        out[p] = 0
    scanned_in_numpy(scans)
    return out


def fewer_paths(topology: Topology, candidates: PathSet, nbytes: np.ndarray) -> np.ndarray:
    """Bytes per candidate path after merging paths of a job while the plan's busiest link gets
    no busier: job by job, the bytes of its smallest path with bytes move to the other path of
    the job that would be least loaded afterwards (ties: the earlier), as long as every link that
    path crosses stays within the plan's time. A plan placed in small units spreads a job over
    several of its candidates where one or two would do; each path is a stream of its own for
    the executor, with a message per chunk.

    Parameters
    ----------
    topology : Topology
    candidates : PathSet
    nbytes : ndarray of int
        Bytes on every candidate path.

    Returns
    -------
    ndarray of int
        Bytes on every candidate path: each job's total and the busiest link's time unchanged
        or less, no job on more paths than before.

    Raises
    ------
    PlanError
        If ``nbytes`` does not have one entry per candidate path.

    Examples
    --------
    On a ring, job 0 keeps link 0 -> 1 busiest; job 1, split over both ways from 1 to 2, fits
    on the short way within that link's time:

    >>> from optiq.topology import torus
    >>> from optiq.paths import PathSet
    >>> t = torus((4,))
    >>> link = lambda u, v: t.links_between(u, v)[0]
    >>> paths = PathSet.from_lists([[link(0, 1)], [link(1, 2)], [link(1, 0), link(0, 3), link(3, 2)]], [0, 1, 1], 2)
    >>> fewer_paths(t, paths, np.array([100, 30, 20])).tolist()
    [100, 50, 0]
    """
    nbytes = np.asarray(nbytes)
    if nbytes.shape != (candidates.num_paths,):
        raise PlanError(f"fewer_paths needs bytes for each of the {candidates.num_paths} candidate paths, "
                        f"got an array of shape {nbytes.shape}")
    out = nbytes.astype(np.int64).copy()
    cap, links, offsets, jo = topology.capacity, candidates.links, candidates.offsets, candidates.job_offsets
    load = candidates.link_loads(out, topology.num_links)
    limit = float((load / cap).max(initial=0.0)) * (1 + 1e-12)
    used_per_job = np.add.reduceat(out > 0, jo[:-1]) if out.size else np.zeros(0, np.int64)
    for j in np.flatnonzero(used_per_job[:candidates.num_jobs] > 1).tolist():
        used = jo[j] + np.flatnonzero(out[jo[j]:jo[j + 1]] > 0)
        while used.size > 1:
            p = int(used[np.lexsort((used, out[used]))[0]])  # the smallest, then the earlier
            moved = float(out[p])
            here = links[offsets[p]:offsets[p + 1]]
            np.subtract.at(load, here, moved)
            best, best_worst = -1, limit
            for q in used.tolist():
                if q == p:
                    continue
                there = links[offsets[q]:offsets[q + 1]]
                worst = float(((load[there] + moved) / cap[there]).max(initial=0.0))
                if worst <= best_worst and (best < 0 or worst < best_worst):
                    best, best_worst = q, worst
            if best < 0:
                np.add.at(load, here, moved)
                break
            np.add.at(load, links[offsets[best]:offsets[best + 1]], moved)
            out[best] += out[p]
            out[p] = 0
            used = used[used != p]
    return out
