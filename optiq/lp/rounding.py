"""Turning LP shares into whole bytes that sum exactly to every job's demand."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..paths import PathSet
    from ..workloads import Demands

__all__ = ["round_to_bytes"]

#: Shares below this fraction of a job's demand are treated as zero (solver noise).
MIN_SHARE = 1e-6


def round_to_bytes(paths: PathSet, demands: Demands, share: ArrayLike) -> np.ndarray:
    """Whole bytes per path from fractional shares, summing exactly to each job's demand.

    Negative and tiny shares (below :data:`MIN_SHARE`, interior-point noise) become zero, the
    rest are renormalised per job, floored, and the leftover bytes of each job go one by one
    to its paths with the largest fractional parts (largest remainder), so no path is off by
    more than one byte from its share. A job whose shares are all zero is split evenly.

    Examples
    --------
    >>> from optiq.paths import PathSet
    >>> from optiq.workloads import Demands
    >>> ps = PathSet.from_lists([[0], [1], [2]], [0, 0, 0], num_jobs=1)
    >>> round_to_bytes(ps, Demands([0], [1], [10]), [1/3, 1/3, 1/3]).tolist()
    [4, 3, 3]
    """
    fraction = np.clip(np.asarray(share, dtype=float), 0.0, None)
    fraction[fraction < MIN_SHARE] = 0.0
    job = paths.job
    total = np.bincount(job, weights=fraction, minlength=paths.num_jobs)
    empty = total[job] <= 0
    fraction = np.where(empty, 1.0, fraction)
    total = np.bincount(job, weights=fraction, minlength=paths.num_jobs)
    raw = fraction / total[job] * demands.nbytes[job]
    base = np.floor(raw).astype(np.int64)
    left = demands.nbytes - np.bincount(job, weights=base, minlength=paths.num_jobs).astype(np.int64)
    frac = raw - base
    order = np.lexsort((np.arange(job.size), -frac, job))  # by job, then largest fraction first
    starts = paths.job_offsets[:-1]
    rank = np.empty(job.size, dtype=np.int64)
    rank[order] = np.arange(job.size) - np.repeat(starts, paths.paths_per_job)
    return base + (rank < left[job])
