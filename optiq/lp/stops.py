"""Fewest stops: among the plans as fast as a given one and with no more hop-bytes, the one
whose bytes stop at the fewest ranks.

Every stop of a path is a rank that receives a chunk, stores it and sends it on: CPU and
memory traffic at a rank that has its own exchange to do. A plan of fewest hop-bytes
(:mod:`optiq.lp.lean`) is still one vertex of many: on a torus routed in dimension order, the
same link loads come from paths that leave the route once or three times. Over the plan's
paths and others of few stops (:func:`optiq.paths.one_stop.one_stop_paths`), this step solves

    minimise    sum_p D_j * stops(p) * s_p
    subject to  sum_{p of j} s_p = 1                          for every job j
                sum_{p through e} D_j * s_p <= c_e * T         for every link e
                sum_p D_j * hops(p) * s_p <= H

with ``T`` the plan's time and ``H`` its hop-bytes, by interior point and crossover (a
vertex: few paths). A path's stops are its copies (:attr:`optiq.paths.PathSet.copies`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .solution import LPStatus, highs_status, silent_highs

if TYPE_CHECKING:
    from ..paths import PathSet
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["StopsResult", "fewest_stops"]

#: Slack on the time and the hop-bytes the step keeps, for the solver's tolerance.
KEEP_SLACK = 1e-7
#: A plan saving less than this share of the stop-bytes is not worth the change: the given plan stays.
MIN_SAVING = 1e-3


@dataclass(frozen=True)
class StopsResult:
    """What the fewest-stops step found.

    Attributes
    ----------
    paths : PathSet
        The paths that carry data, with their stops.
    share : ndarray
        Every path's fraction of its job.
    time_s : float
        The busiest link's time (at most the given time, to :data:`KEEP_SLACK`).
    stop_bytes_before, stop_bytes : float
        Bytes times stops of the given plan and of the new one.
    seconds : float
    status : str
        ``"optimal"``, or why the given plan stays.
    """

    paths: PathSet = field(repr=False)
    share: np.ndarray = field(repr=False)
    time_s: float
    stop_bytes_before: float
    stop_bytes: float
    seconds: float
    status: str

    @property
    def saved(self) -> float:
        """The share of the given plan's stop-bytes the new one does without."""
        return 1 - self.stop_bytes / self.stop_bytes_before if self.stop_bytes_before > 0 else 0.0


def fewest_stops(topology: Topology, demands: Demands, paths: PathSet, share: np.ndarray, more: PathSet, *,
                 sizes: np.ndarray | None = None, time_limit: float | None = None) -> StopsResult:
    """The plan of fewest stop-bytes no slower and of no more hop-bytes than ``paths`` with
    ``share`` (module docstring), over those paths and ``more``.

    Parameters
    ----------
    topology, demands : Topology, Demands
    paths, share : PathSet, ndarray
        A plan: its paths, with their stops, and every path's fraction of its job.
    more : PathSet
        Other paths of the same jobs, with their stops, that the plan may use.
    sizes : ndarray, optional
        Bytes per job instead of the demands' (QoS effective sizes).
    time_limit : float, optional
        Seconds for the solve; when they end first, the given plan stays.

    Returns
    -------
    StopsResult
        The given plan itself where no plan of fewer stop-bytes is found.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> from optiq.paths import PathSet
    >>> t = torus((4,), bandwidth=1.0)
    >>> d = Demands([0], [2], [8])
    >>> go = lambda *nodes: [t.links_between(a, b)[0] for a, b in zip(nodes, nodes[1:])]
    >>> plan = PathSet.from_lists([go(0, 3, 2)], [0], 1, stops=[[True, True]])   # the other way, with a stop
    >>> route = PathSet.from_lists([go(0, 1, 2)], [0], 1)                      # the route: no stop
    >>> r = fewest_stops(t, d, plan, np.array([1.0]), route)
    >>> r.stop_bytes_before, r.stop_bytes, r.share.tolist()
    (8.0, 0.0, [1.0])
    """
    import highspy
    from scipy.sparse import coo_matrix

    from ..paths import PathSet

    start = time.perf_counter()
    size = demands.nbytes.astype(float) if sizes is None else np.asarray(sizes, dtype=float)
    cap = topology.capacity
    share = np.asarray(share, dtype=float)
    per_path = share * size[paths.job]
    time_s = paths.busiest_link_time(per_path, cap)
    hop_bytes = float(per_path @ paths.hops)
    before = float(per_path @ paths.copies)
    given = StopsResult(paths, share, time_s, before, before, 0.0, "no stops")
    if before <= 0 or not time_s > 0:
        return given
    every, _ = PathSet.concat([paths, more])
    every = every.unique()
    P, J = every.num_paths, demands.num_jobs
    entry_path = np.repeat(np.arange(P), every.hops)
    used, link_row = np.unique(every.links, return_inverse=True)
    unit = float(size.max())
    rows = np.concatenate([every.job, J + link_row, np.full(P, J + used.size)])
    cols = np.concatenate([np.arange(P), entry_path, np.arange(P)])
    vals = np.concatenate([np.ones(P), size[every.job[entry_path]] / (cap[every.links] * time_s),
                           size[every.job] * every.hops / hop_bytes])
    a = coo_matrix((vals, (rows, cols)), shape=(J + used.size + 1, P)).tocsc()   # repeats summed
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = P, J + used.size + 1
    lp.col_cost_ = size[every.job] * every.copies / unit
    lp.col_lower_, lp.col_upper_ = np.zeros(P), np.ones(P)
    lp.row_lower_ = np.concatenate([np.ones(J), np.full(used.size + 1, -highspy.kHighsInf)])
    lp.row_upper_ = np.concatenate([np.ones(J), np.full(used.size + 1, 1.0)])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = a.indptr, a.indices, a.data
    highs = silent_highs()
    # interior point, then crossover to a vertex (few paths): several times faster than
    # simplex on a machine's link rows (benchmarks/RESULTS.md)
    highs.setOptionValue("solver", "ipm")
    if time_limit is not None:
        highs.setOptionValue("time_limit", float(time_limit))
    highs.passModel(lp)
    highs.run()
    seconds = time.perf_counter() - start
    status = highs_status(highs.getModelStatus())
    x = np.asarray(highs.getSolution().col_value)
    if status != LPStatus.OPTIMAL or x.size != P:
        return StopsResult(paths, share, time_s, before, before, seconds, f"not used: {status.value}")
    x = np.maximum(x, 0.0)
    total = np.bincount(every.job, weights=x, minlength=J)
    x = np.where(total[every.job] > 0, x / np.where(total > 0, total, 1.0)[every.job], 0.0)
    kept = x > 0
    new = every.select(kept)
    new_bytes = x[kept] * size[new.job]
    new_time = new.busiest_link_time(new_bytes, cap)
    new_stops = float(new_bytes @ new.copies)
    if new_time > time_s * (1 + KEEP_SLACK) or float(new_bytes @ new.hops) > hop_bytes * (1 + KEEP_SLACK) \
            or new_stops > before * (1 - MIN_SAVING):
        return StopsResult(paths, share, time_s, before, before, seconds, "not used: no fewer stops")
    return StopsResult(new, x[kept], new_time, before, new_stops, seconds, "optimal")
