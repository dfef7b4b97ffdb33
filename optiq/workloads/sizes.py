"""Message sizes: fixed, or random per pair in a range."""

from __future__ import annotations

import numpy as np

from ..errors import WorkloadError
from .demands import Demands

__all__ = ["random_sizes"]


def random_sizes(demands: Demands, low: int, high: int, *, seed: int = 0) -> Demands:
    """Give every job a size drawn uniformly from ``[low, high]`` bytes (integers), seeded.

    The OPTIQ random-size experiment uses 64 KB .. 8 MB.

    Raises
    ------
    WorkloadError
        If ``low`` is not positive or exceeds ``high``.

    Examples
    --------
    >>> from optiq.workloads import constant_ratio
    >>> d = random_sizes(constant_ratio(64), 65536, 8 * 2**20, seed=3)
    >>> bool((d.nbytes >= 65536).all() and (d.nbytes <= 8 * 2**20).all())
    True
    """
    if not 0 < low <= high:
        raise WorkloadError(f"random size range [{low}, {high}] must satisfy 0 < low <= high")
    sizes = np.random.default_rng(seed).integers(low, high, size=demands.num_jobs, endpoint=True)
    return Demands(demands.src, demands.dst, sizes, name=f"{demands.name}, sizes {low}..{high} seed {seed}")
