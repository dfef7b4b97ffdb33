"""Heuristic 2 (OPTIQ): place demand unit by unit on the path whose busiest link is least loaded, in passes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import PlanError
from ..utils.progress import Progress, Ticker
from .common import NUMPY_STEP_SCANS, CandidateLayout, candidate_counts, compiled_pays

if TYPE_CHECKING:
    from ..paths import PathSet
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["demand_aware_heuristic", "default_unit", "finer_pass", "DEFAULT_UNIT", "MAX_UNITS_PER_JOB",
           "FINE_UNITS_PER_JOB", "FINE_UNITS_MAX", "FINE_SLACK"]

#: Default unit of Heuristic 2 (bytes), unless a job would then need more than
#: :data:`MAX_UNITS_PER_JOB` units.
DEFAULT_UNIT = 2**20
#: The most units the default unit gives any job: beyond it the unit grows with the largest job.
MAX_UNITS_PER_JOB = 64
#: :func:`finer_pass`: units of the largest job in the second pass, the most units it places in
#: all, and how far above the proven bound a plan must be for it to run.
FINE_UNITS_PER_JOB, FINE_UNITS_MAX, FINE_SLACK = 32, 2**17, 0.02


def default_unit(nbytes: np.ndarray) -> int:
    """Heuristic 2's unit for jobs of ``nbytes``: :data:`DEFAULT_UNIT`, or the largest job over
    :data:`MAX_UNITS_PER_JOB` where that is more, so that the work grows with the number of
    jobs, not with their bytes.

    Examples
    --------
    >>> default_unit(np.array([8 * 2**20])), default_unit(np.array([2**40, 1]))   # 1 MiB; 16 GiB
    (1048576, 17179869184)
    """
    largest = int(np.max(nbytes)) if np.size(nbytes) else 0
    return max(DEFAULT_UNIT, -(-largest // MAX_UNITS_PER_JOB))


def demand_aware_heuristic(topology: Topology, demands: Demands, candidates: PathSet, unit: int | None = None, *,
                           batch: int | None = None, progress: Progress | None = None) -> np.ndarray:
    """Bytes per candidate path chosen by Heuristic 2.

    In passes until every byte is placed: every job with bytes left, the most left first,
    puts one ``unit`` of it (or what is left, if less) on its candidate path whose busiest
    link would be least loaded afterwards (in time: bytes over capacity; ties go to the
    shorter, then earlier path), and the link loads grow by it. (The paper's statement lets
    the job with the most left go again at once; passes interleave the jobs' units.)

    The jobs take their turns a batch of :func:`batch_size` at a time: a batch chooses
    against the loads before it and its units are added together, so numpy does the work of
    a batch at once; with ``batch=1`` every unit sees the ones before it.

    Parameters
    ----------
    topology : Topology
    demands : Demands
    candidates : PathSet
    unit : int, optional
        Bytes placed per step (default :func:`default_unit`: 1 MiB, more for jobs over 64 MiB).
    batch : int, optional
        Jobs that choose together (default :func:`batch_size`; 1: the sequential heuristic).
    progress : callable, optional
        Receives the number of units placed every couple of seconds.

    Returns
    -------
    ndarray of int
        Bytes on every candidate path.

    Raises
    ------
    PlanError
        If ``unit < 1`` or ``batch < 1``, or a job has no candidate path.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> from optiq.paths import diverse_paths
    >>> t = torus((4, 4)); d = Demands([0], [5], [4000])
    >>> demand_aware_heuristic(t, d, diverse_paths(t, d, k=4), unit=1000).tolist()
    [1000, 1000, 1000, 1000]
    """
    if unit is None:
        unit = default_unit(demands.nbytes)
    if unit < 1:
        raise PlanError(f"the unit of Heuristic 2 must be at least 1 byte, got {unit}")
    if batch is not None and batch < 1:
        raise PlanError(f"Heuristic 2's batch must be at least 1 job, got {batch}")
    cap = topology.capacity
    load = np.zeros(topology.num_links)
    out = np.zeros(candidates.num_paths, dtype=np.int64)
    left = demands.nbytes.astype(np.int64).copy()
    J = demands.num_jobs
    block = batch_size(J) if batch is None else int(batch)
    per_job = -(-left // unit)
    units = int(per_job.sum())
    # the candidates every pass scans, and its batches' steps (one pass per unit of the largest job)
    waiting_per_pass = np.cumsum(np.bincount(per_job)[::-1])[::-1][1:]   # pass p: the jobs with more than p units
    steps = int((-(-waiting_per_pass // block)).sum())
    compiled = compiled_pays(int(per_job @ np.diff(candidates.job_offsets)) + NUMPY_STEP_SCANS * steps)
    tick, placed = Ticker(progress, "Heuristic 2: units placed", units), 0
    while True:
        # one pass: every job with bytes left places one unit, the most left first (ties: _pass_order)
        waiting = np.flatnonzero(left > 0)
        if not waiting.size:
            break
        waiting = waiting[_pass_order(waiting, left[waiting])]
        amounts = np.minimum(left[waiting], unit)
        if compiled:   # KERNEL_BATCHES batches a call: Python is left one step per call, for the progress
            from .least_loaded_kernel import place_batches

            candidate_counts(candidates, waiting)
            for start in range(0, waiting.size, block * KERNEL_BATCHES):
                stop = min(start + block * KERNEL_BATCHES, waiting.size)
                place_batches(candidates.job_offsets, candidates.offsets, candidates.links, waiting[start:stop],
                              amounts[start:stop], block, load, cap, out)
                placed += stop - start
                tick(placed)
            left[waiting] -= amounts
            continue
        layout = CandidateLayout(candidates, waiting, amounts, cap)
        for start in range(0, waiting.size, block):
            stop = min(start + block, waiting.size)
            best, _, links, per_link = layout.least_loaded(start, stop, load)
            load += np.bincount(links, weights=per_link, minlength=load.size)
            out[best] += amounts[start:stop]
            left[waiting[start:stop]] -= amounts[start:stop]
            placed += stop - start
            tick(placed)
    tick(units)
    return out


def batch_size(jobs: int) -> int:
    """Jobs that place a unit together, against the loads before any of them: small enough that
    they rarely pile onto the same link, large enough that numpy, not Python, does the work."""
    return int(min(BATCH_MAX, max(BATCH_MIN, jobs // 64)))


#: Bounds of :func:`batch_size`.
BATCH_MIN, BATCH_MAX = 16, 1024
#: Batches the compiled pass places per call.
KERNEL_BATCHES = 64


def _pass_order(jobs: np.ndarray, left: np.ndarray) -> np.ndarray:
    """The order in which ``jobs`` (ascending) with ``left`` bytes take a pass's turns: the most
    left first, then by :func:`_scatter`, then by id. The scatter key is a bijection of ids
    below 2^32, so the ids never decide; where every ``left`` is below 2^31 both keys fit one
    64-bit key, sorted once (several times faster than ``lexsort`` on three)."""
    scatter = _scatter(jobs)
    most = int(left.max(initial=0))
    if most >= 2**31 or jobs.size and int(jobs[-1]) >= 2**32:
        return np.lexsort((jobs, scatter, -left))
    return np.argsort((most - left) << 32 | scatter.astype(np.int64), kind="stable")


def _scatter(jobs: np.ndarray) -> np.ndarray:
    """A fixed pseudo-random key per job id (Knuth's multiplicative hash): among jobs with as
    many bytes left, a batch takes jobs from all over the list, not a run of one source's jobs
    that share their first links and would all choose alike."""
    return (jobs.astype(np.uint64) * np.uint64(2654435761)) % np.uint64(2**32)


def finer_pass(topology: Topology, demands: Demands, candidates: PathSet, nbytes: np.ndarray, bound_s: float,
               *, progress: Progress | None = None) -> tuple[np.ndarray, int | None]:
    """A second Heuristic 2 in finer units, kept where it places faster: for a plan more than
    :data:`FINE_SLACK` above the proven bound ``bound_s`` whose jobs fit in
    :data:`FINE_UNITS_MAX` units of a :data:`FINE_UNITS_PER_JOB`-th of the largest job.

    Jobs of one size that choose at once against the same loads choose alike: on a ring, every
    pair half the ring apart takes the same way round, and no move of a whole job off the busiest
    link then helps (it makes another link as busy). Placed in smaller units they split over
    both ways, and :func:`~optiq.heuristics.rebalance` and
    :func:`~optiq.heuristics.rebalance.fewer_paths` then merge what a whole path can carry.

    Parameters
    ----------
    topology, demands, candidates
        As for :func:`demand_aware_heuristic`.
    nbytes : ndarray of int
        The first pass's bytes per candidate path (rebalanced).
    bound_s : float
        A proven lower bound on the plan's time (seconds).
    progress : callable, optional

    Returns
    -------
    ndarray of int, int or None
        The faster plan's bytes per candidate path (the first's on a tie), and the unit of the
        second pass if it was kept (else None).

    Examples
    --------
    The rows of a 4 x 4 torus, every row an all-to-all: the pairs half a ring apart all take one
    way round in whole units, and split over both in finer ones.

    >>> from optiq.topology import torus
    >>> from optiq.workloads import grid_transpose
    >>> from optiq.planner.methods import make_candidates
    >>> from optiq.heuristics import rebalance
    >>> t, d = torus((4, 4)), grid_transpose((4, 4), 1, 2**16)
    >>> c = make_candidates(t, d, greedy=True)
    >>> first = rebalance(t, c, demand_aware_heuristic(t, d, c))
    >>> bound = 2 * 2**16 / t.capacity[0]    # the optimum: every link carries two pairs' bytes
    >>> plan, unit = finer_pass(t, d, c, first, bound)
    >>> [f"{c.busiest_link_time(x, t.capacity) / bound:.3f}" for x in (first, plan)], unit
    (['1.500', '1.016'], 2048)
    """
    from .rebalance import fewer_paths, rebalance

    cap = topology.capacity
    first_s = candidates.busiest_link_time(np.asarray(nbytes, dtype=float), cap)
    largest = int(demands.nbytes.max(initial=0))
    unit = max(1, largest // FINE_UNITS_PER_JOB)
    units = int((-(-demands.nbytes.astype(np.int64) // unit)).sum())
    if not first_s > bound_s * (1 + FINE_SLACK) or units > FINE_UNITS_MAX or unit >= default_unit(demands.nbytes):
        return nbytes, None
    placed = demand_aware_heuristic(topology, demands, candidates, unit, progress=progress)
    finer = fewer_paths(topology, candidates, rebalance(topology, candidates, placed, bound_s=bound_s))
    if candidates.busiest_link_time(finer.astype(float), cap) < first_s * (1 - 1e-9):
        return finer, unit
    return nbytes, None
