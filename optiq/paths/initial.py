"""The first columns of column generation: every job's default route and a few fast candidates."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..mpi.workers import Workers
from .candidates import spread_paths
from .pathset import PathSet
from .system import system_routes
from .torus import torus_paths

if TYPE_CHECKING:
    from ..topology import Topology
    from ..workloads import Demands
    from .space import PathSpace

__all__ = ["initial_columns", "INITIAL_PATHS"]

#: Candidates per job in the first restricted LP (besides the default route).
INITIAL_PATHS = 5


def initial_columns(topology: Topology, demands: Demands, *, k: int = INITIAL_PATHS, hop_slack: int = 2, seed: int = 0,
                    progress: Callable[[str], None] | None = None, workers: Workers | None = None,
                    space: PathSpace | None = None) -> PathSet:
    """Every job's default route, then ``k`` load-aware candidates, of the path ``space``
    (default: any path over the links).

    With chains (:mod:`optiq.paths.chains`) the candidates are chains through ``k``
    intermediate ranks chosen round by round as the load grows.

    Load-aware candidates steer later rounds away from the links earlier rounds loaded, so
    the first restricted LP starts near the optimum. On tori and meshes they are chosen from
    coordinate-built paths (:func:`optiq.paths.torus_paths`, seconds for a whole Blue
    Gene/Q); elsewhere they are :func:`optiq.paths.spread_paths` (one Dijkstra per source
    and round). On an 8,192-node torus, disjoint 1:8, the LP over them is within 18% of the
    bound, where 8 coordinate-built paths in recipe order are 37% off. Starting from the
    default routes means the first restricted LP, and so every plan column generation
    returns, is never slower than what the machine does on its own.

    Examples
    --------
    >>> from optiq.topology import cluster
    >>> from optiq.workloads import Demands
    >>> ps = initial_columns(cluster(), Demands([0], [6], [1]), k=2)
    >>> ps.nodes(0, cluster())      # the D-mod-K route comes first
    [0, 20, 24, 21, 6]
    """
    if space is not None and space.kind == "chains":
        return space.chains.spread(k + 1, seed=seed, progress=progress)
    default = system_routes(topology, demands)
    if topology.is_torus:
        spread = torus_paths(topology, demands, k, hop_slack=hop_slack, seed=seed, progress=progress)
    else:
        spread = spread_paths(topology, demands, k, hop_slack=hop_slack, seed=seed, progress=progress,
                              workers=workers)
    if progress:
        progress(f"initial columns: merging {default.num_paths + spread.num_paths:,} paths, dropping repeats")
    links = np.concatenate([default.links, spread.links])
    offsets = np.concatenate([default.offsets, default.offsets[-1] + spread.offsets[1:]])
    jobs = np.concatenate([default.job, spread.job])
    merged, _ = PathSet.from_csr(links, offsets, jobs, demands.num_jobs)
    return merged.unique() if space is None else space.from_links(merged)
