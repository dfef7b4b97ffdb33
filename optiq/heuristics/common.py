"""Helpers shared by the heuristics."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PlanError
from ..paths.pathset import csr_positions

if TYPE_CHECKING:
    from ..paths import PathSet
    from ..workloads import Demands


def even_split(paths: PathSet, demands: Demands, chosen: np.ndarray) -> np.ndarray:
    """Bytes per candidate path: each job's demand split evenly over its chosen paths.

    The remainder bytes go one each to the job's first chosen paths.
    """
    job = paths.job
    count = np.bincount(job, weights=chosen, minlength=paths.num_jobs).astype(np.int64)
    if (count == 0).any():
        j = int(np.flatnonzero(count == 0)[0])
        raise PlanError(f"job {j} got no path")
    base = demands.nbytes // count
    extra = demands.nbytes - base * count
    rank = np.cumsum(chosen) - np.repeat(np.concatenate(([0], np.cumsum(count)[:-1])), paths.paths_per_job) - 1
    return np.where(chosen, base[job] + (rank < extra[job]), 0).astype(np.int64)


def job_candidates(paths: PathSet, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Path ids, flat link ids, local offsets and hop counts of job ``j``'s candidates."""
    jo = paths.job_offsets
    ids = np.arange(jo[j], jo[j + 1])
    start, stop = paths.offsets[jo[j]], paths.offsets[jo[j + 1]]
    return ids, paths.links[start:stop], paths.offsets[jo[j]:jo[j + 1]] - start, paths.hops[ids]


#: Candidate paths to scan (a set's, or Heuristic 2's over all its passes) from which the
#: choice runs compiled once numba is loaded: from any number, as the kernels are then faster
#: than numpy's calls at every size measured (``benchmarks/planner_scale.py``).
COMPILED_FROM = 0
#: The same where numba is not loaded yet, counting the scans the process made in numpy before:
#: its import and the kernel's first call (cached code loaded, numba's typing registries built)
#: cost about what numpy's slower scans of this many cost, so a process loads the kernels once
#: it has spent about that in numpy (one large plan, or many small ones of an application
#: planning again), and never pays more than twice what it would have had it known its future.
COMPILED_COLD_FROM = 1_500_000

#: What one step of a loop in numpy (a batch of Heuristic 2, a move of rebalance) costs beyond
#: its scans, counted as that many scans: its dozen numpy calls cost some tens of microseconds,
#: a scan a fifth of one.
NUMPY_STEP_SCANS = 200

#: The scans this process made in numpy while numba was not loaded.
_numpy_scans = 0


def compiled_pays(scans: int) -> bool:
    """Whether choosing among ``scans`` candidate paths (all told) runs compiled: once numba
    is loaded, or once these and the scans made in numpy before reach
    :data:`COMPILED_COLD_FROM`; else they are counted as made in numpy. Either way the same
    paths are picked (``tests/test_kernels.py``): only the time depends on it. A count of
    work, not of seconds, so the same plans load the kernels at the same point on every
    machine. (Work that cannot tell its scans beforehand asks with 0 and counts them after,
    :func:`scanned_in_numpy`.)"""
    if "numba" in sys.modules:
        return scans >= COMPILED_FROM
    if scans + _numpy_scans >= COMPILED_COLD_FROM:
        return True
    scanned_in_numpy(scans)
    return False


def scanned_in_numpy(scans: int) -> None:
    """Count ``scans`` candidate paths scanned in numpy towards :func:`compiled_pays`'s threshold."""
    global _numpy_scans
    _numpy_scans += int(scans)


def least_loaded(candidates: PathSet, jobs: np.ndarray, amount: np.ndarray, load: np.ndarray,
                 cap: np.ndarray, *, compiled: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``jobs``, its candidate whose busiest link would be least loaded in time
    with ``amount`` more bytes on every link it crosses (ties: fewer hops, then the earlier
    path), and that link's time. ``compiled`` runs the kernel (True) or numpy (False); by
    default :func:`compiled_pays` decides by the candidates scanned.

    Raises
    ------
    PlanError
        If a job has no candidate path.
    """
    scans = int(candidate_counts(candidates, jobs).sum())
    if compiled is None:
        compiled = compiled_pays(scans)   # (counted there where it runs in numpy)
    elif not compiled:
        scanned_in_numpy(scans)
    if not compiled:
        best, worst, _, _ = CandidateLayout(candidates, jobs, amount, cap).least_loaded(0, jobs.size, load)
        return best, worst
    from .least_loaded_kernel import least_loaded_paths

    return least_loaded_paths(candidates.job_offsets, candidates.offsets, candidates.links, jobs,
                              np.broadcast_to(np.asarray(amount, dtype=float), jobs.shape), load, cap)


def candidate_counts(candidates: PathSet, jobs: np.ndarray) -> np.ndarray:
    """How many candidates each of ``jobs`` has; :class:`PlanError` naming a job that has none."""
    count = candidates.job_offsets[jobs + 1] - candidates.job_offsets[jobs]
    if (count == 0).any():
        raise PlanError(f"job {int(jobs[np.flatnonzero(count == 0)[0]])} has no candidate path")
    return count


class CandidateLayout:
    """The candidates of ``jobs`` laid out job by job in that order, so that any run of the jobs
    is a slice of every array: Heuristic 2 lays a pass out once and chooses for its batches
    with a few numpy operations on slices; :func:`least_loaded` chooses for all at once."""

    def __init__(self, candidates: PathSet, jobs: np.ndarray, amount: np.ndarray, cap: np.ndarray) -> None:
        count = candidate_counts(candidates, jobs)
        self.paths = csr_positions(candidates.job_offsets[jobs], count)      # candidate ids, job by job
        self.path_at = np.concatenate(([0], np.cumsum(count)))               # a job's first path here
        self.owner = np.repeat(np.arange(jobs.size), count)
        self.hops = candidates.hops[self.paths]
        self.entry_at = np.concatenate(([0], np.cumsum(self.hops)))          # a path's first link entry here
        # per link entry only the link itself (int32 where ids fit: the largest array, written once
        # per pass); a batch repeats its paths' amounts and ids over their entries itself
        narrow = np.int32 if cap.size < 2**31 else np.int64
        self.links = candidates.links[csr_positions(candidates.offsets[self.paths], self.hops)].astype(narrow)
        self.path_amount = np.broadcast_to(np.asarray(amount, dtype=float), jobs.shape)[self.owner]
        self.inv_cap = 1.0 / cap

    def least_loaded(self, lo: int, hi: int, load: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For jobs ``lo:hi``: each one's candidate whose busiest link would be least loaded in
        time with its amount more on every link it crosses (ties: fewer hops, then the earlier
        path), that link's time, and the chosen paths' links with the bytes on each."""
        p0, p1 = self.path_at[lo], self.path_at[hi]
        e0, e1 = self.entry_at[p0], self.entry_at[p1]
        links, hops = self.links[e0:e1], self.hops[p0:p1]
        amount = np.repeat(self.path_amount[p0:p1], hops)
        after = (load[links] + amount) * self.inv_cap[links]
        worst = np.maximum.reduceat(after, self.entry_at[p0:p1] - e0)
        # each job's paths are a run: its least busiest link, then the fewest hops among those,
        # then the first of them (reductions over the runs, not a sort)
        runs = self.path_at[lo:hi] - p0
        owner = self.owner[p0:p1] - lo
        best = worst == np.minimum.reduceat(worst, runs)[owner]
        best &= hops == np.minimum.reduceat(np.where(best, hops, np.iinfo(hops.dtype).max), runs)[owner]
        at = np.flatnonzero(best)
        first = at[np.concatenate(([True], owner[at[1:]] != owner[at[:-1]]))]
        keep = np.zeros(p1 - p0, dtype=bool)
        keep[first] = True
        on = np.repeat(keep, hops)
        return self.paths[p0 + first], worst[first], links[on], amount[on]
