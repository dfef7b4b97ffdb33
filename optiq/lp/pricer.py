"""Pricing for column generation: every job's cheapest path under the LP's duals and under
smoothed utilisation weights, and the Lagrangian bound each weight set proves
(:mod:`optiq.lp.colgen`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..mpi.workers import Workers

if TYPE_CHECKING:
    from typing import Any

    from ..paths import PathSet
    from ..paths.space import PathSpace

__all__ = ["Pricer"]


class Pricer:
    """The two pricing steps: by the LP's duals (exact) and by smoothed utilisation weights,
    each a search of the plan's path space (:class:`optiq.paths.space.PathSpace`: free or
    forwarded link paths, or chains of the network's routes).

    (Pricing from a pool of coordinate-built paths instead of a graph search was tried and
    dropped: the paths the optimum needs are not in the pool; ``benchmarks/RESULTS.md``.)
    """

    def __init__(self, space: PathSpace, size: np.ndarray, hop_limit: np.ndarray, smoothing: float,
                 t0: float, progress: Callable[[str], None] | None, workers: Workers | None) -> None:
        self.space = space
        self.topology, self.demands, self.size, self.hop_limit = space.topology, space.demands, size, hop_limit
        self.smoothing, self.t0, self.progress, self.workers = smoothing, t0, progress, workers
        #: the threads of a search that runs alone (no LP solve beside it)
        self.cores = (workers or Workers()).search_threads
        #: search only where hop-limited paths go (tori and meshes, :mod:`optiq.paths.regions`);
        #: the whole graph when a bound is wanted
        self.regions = self.topology.is_torus and space.kind != "chains"
        self.searched_whole = False  # since the caller last reset it

    def _search(self, cost: np.ndarray, too_long: str, what: str, regions: bool,
                alone: bool = True) -> tuple[PathSet, np.ndarray, np.ndarray]:
        return self.space.cheapest(cost / self.topology.capacity, self.hop_limit, too_long=too_long, what=what,
                                   workers=self.workers, regions=regions, progress=self.progress,
                                   threads=self.cores if alone else 1)

    def duals(self, sol: Any, bound: bool = True, beat: float = 0.0) -> tuple[PathSet, float]:
        """Paths of negative reduced cost ``D_j / T0 * Z * cost_w(p) - pi_j`` (at most one per job),
        and the Lagrangian bound (0 when the search stayed in the jobs' regions: see
        :meth:`_whole_graph`).

        A per-hop penalty keeps paths within their hop limit cheaply; only when it finds
        nothing does the exact hop-limited search run, so "no improving path" is exact.
        """
        tolerance = -1e-9 * np.abs(sol.job_dual).max()
        regions = self.regions
        for mode in ("penalty", "exact"):
            found, path_cost, free_cost = self._search(sol.link_price, mode, "pricing by duals", regions)
            if mode == "penalty" and regions and bound and self._whole_graph(path_cost, beat):
                regions = False
                found, path_cost, free_cost = self._search(sol.link_price, mode, "pricing by duals", regions)
            reduced = self.size / self.t0 * sol.price_scale * path_cost - sol.job_dual
            improving = (reduced < tolerance) & (found.hops > 0)
            if improving.any():
                break
        return found.select(improving), 0.0 if regions else float(self.size @ free_cost)

    def utilisation(self, sol: Any, bound: bool = True, beat: float = 0.0, alone: bool = True) -> tuple[PathSet, float]:
        """Every job's cheapest path under ``exp(smoothing * (utilisation - 1))``, and that bound
        (0 when the search stayed in the jobs' regions: see :meth:`_whole_graph`). ``alone``:
        nothing else runs meanwhile (no LP solve beside it), so the search takes every core.

        Every link weighs here, so this bound can help where the LP's duals price only the few
        tight links and most jobs find a free way around them.
        """
        busiest = sol.optimum_s if sol.over else sol.time_s   # links left over count as full
        smooth = np.exp(self.smoothing * (np.minimum(sol.link_s / busiest, 1.0) - 1.0))
        weight = smooth / smooth.sum()
        regions = self.regions
        # every link weighs, so nearly every job's cheapest path is over its hop limit: within the
        # regions (no bound wanted) one search with a cost per hop, not a search and then another
        found, path_cost, free_cost = self._search(weight, "penalised" if regions else "penalty",
                                                   "pricing by utilisation", regions, alone)
        if regions and bound and self._whole_graph(path_cost, beat):
            regions = False
            found, _, free_cost = self._search(weight, "penalty", "pricing by utilisation", regions, alone)
        return found.select(found.hops > 0), 0.0 if regions else float(self.size @ free_cost)

    def _whole_graph(self, region_cost: np.ndarray, beat: float) -> bool:
        """Whether searching the whole graph under these weights could give a bound above ``beat``.

        The bound is ``sum_j D_j dist_w(j)`` over paths of any length, and a path found in a
        job's region is one of them: so ``sum_j D_j region_cost_j`` is at least that bound, and
        when it is no more than ``beat`` the whole search cannot raise the bound. (A job whose
        region path was dropped for its length counts 0, so the test may skip a search that
        would have helped, never accept a wrong bound. On a full Blue Gene/Q the cut bound is
        far above both Lagrangian bounds, and this saves two whole-graph searches per attempt.)
        """
        whole = float(self.size @ region_cost) > beat
        if whole:  # only ever set here (the two pricings may run in two threads)
            self.searched_whole = True
        return whole
