"""Helpers shared by the heuristics."""

from __future__ import annotations

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


#: Candidate paths (of the whole set) from which :func:`least_loaded` runs compiled: below, a
#: plan's calls in numpy cost less than the kernel's first call in a process (numba's import and
#: cached code, about a second).
COMPILED_FROM = 500_000


def least_loaded(candidates: PathSet, jobs: np.ndarray, amount: np.ndarray, load: np.ndarray,
                 cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``jobs``, its candidate whose busiest link would be least loaded in time
    with ``amount`` more bytes on every link it crosses (ties: fewer hops, then the earlier
    path), and that link's time.

    Raises
    ------
    PlanError
        If a job has no candidate path.
    """
    job_offsets = candidates.job_offsets
    count = job_offsets[jobs + 1] - job_offsets[jobs]
    if (count == 0).any():
        raise PlanError(f"job {int(jobs[np.flatnonzero(count == 0)[0]])} has no candidate path")
    if candidates.num_paths >= COMPILED_FROM:
        from .least_loaded_kernel import least_loaded_paths

        return least_loaded_paths(job_offsets, candidates.offsets, candidates.links, jobs,
                                  np.broadcast_to(np.asarray(amount, dtype=float), jobs.shape), load, cap)
    paths = csr_positions(job_offsets[jobs], count)        # the candidates, job by job
    owner = np.repeat(np.arange(jobs.size), count)
    h = candidates.hops[paths]
    entries = csr_positions(candidates.offsets[paths], h)
    links = candidates.links[entries]
    after = (load[links] + np.repeat(np.asarray(amount, dtype=float)[owner], h)) / cap[links]
    worst = np.maximum.reduceat(after, np.concatenate(([0], np.cumsum(h)[:-1])))
    order = np.lexsort((paths, h, worst, owner))
    first = order[np.concatenate(([0], np.flatnonzero(np.diff(owner[order])) + 1))]
    return paths[first], worst[first]
