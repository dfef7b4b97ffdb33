"""Shared scaling of the LP: the same numbers for the Pyomo and the direct route."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import PlanError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..paths import PathSet
    from ..topology import Topology
    from ..workloads import Demands


def lp_coefficients(topology: Topology, demands: Demands, paths: PathSet, sizes: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Scaled link-by-path coefficients of the capacity rows.

    The LP is solved in the unit ``T0 = max demand / min capacity``: variable ``x[p]`` is the
    fraction of job ``job[p]``'s demand on path ``p`` and ``tau = t / T0``. Link ``e``'s row is
    ``sum_p a[e, p] x[p] <= tau`` with ``a[e, p] = D_job(p) / (c_e * T0)``, all in (0, 1].

    ``sizes`` replaces the jobs' bytes ``D_j`` (QoS effective sizes, :mod:`optiq.workloads.qos`).

    Returns
    -------
    rows, cols, vals : ndarray
        COO entries of the coefficient matrix (link, path, coefficient).
    used_links : ndarray
        Links crossed by at least one path (the only capacity rows needed).
    t0 : float
        The time unit in seconds.
    """
    if paths.num_jobs != demands.num_jobs:
        raise PlanError(f"paths are for {paths.num_jobs} jobs but there are {demands.num_jobs} demands")
    missing = np.flatnonzero(paths.paths_per_job == 0)
    if missing.size:
        j = missing[0]
        raise PlanError(f"job {j} ({demands.src[j]} -> {demands.dst[j]}) has no candidate path")
    size = demands.nbytes if sizes is None else np.asarray(sizes, dtype=float)
    t0 = float(size.max() / topology.capacity.min())
    path_of_entry = paths.path_of_link_entry
    vals = size[paths.job[path_of_entry]] / (topology.capacity[paths.links] * t0)
    used_links = np.unique(paths.links)
    return paths.links, path_of_entry, vals, used_links, t0
