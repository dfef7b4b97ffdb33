"""Where a planner's paths may go, by how the plan will be realized (:mod:`optiq.paths.routing`).

A :class:`PathSpace` is what the planners search in:

* ``free`` (``routing="free"``): any path over the links; a path stops at every rank on it.
* ``links`` (forwarded, on a network whose every node is a rank: tori, meshes): any path
  over the links the network's routes between neighbours take (:func:`route_twins`: not a
  Blue Gene/Q ``E-`` link); a path stops where it leaves the network's route.
* ``chains`` (forwarded, elsewhere): a job's direct route, or a chain of the network's routes
  through intermediate ranks (:class:`optiq.paths.chains.ChainSpace`).

Every search answers with a :class:`PathSet` (one path per job, with its stops where the
space knows them) so that pricing, candidates and the lean step work alike in all three.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import ParameterError, PlanError
from .checks import check_paths
from .kept import FORWARDED_STOPS, derived_from
from .pathset import PathSet, csr_positions
from .pricing import least_cost_paths
from .routing import (
    FORWARDED,
    FREE,
    ROUTINGS,
    every_node_a_rank,
    every_rank_stops,
    forwarded_stops,
    links_are_routes,
    route_twins,
)

if TYPE_CHECKING:
    from ..mpi.workers import Workers
    from ..topology import Topology
    from ..utils.progress import Progress
    from ..workloads import Demands
    from .chains import ChainSpace

__all__ = ["PathSpace", "SPACES"]

#: The kinds of path space (module docstring).
SPACES = ("free", "links", "chains")

class PathSpace:
    """The paths a plan of ``routing`` may use on ``topology`` for ``demands`` (module docstring).

    Parameters
    ----------
    topology, demands : Topology, Demands
    routing : {"forwarded", "free"}
    max_intermediates : int
        Chains only: intermediate ranks a path may stop at (1 or 2).
    seed : int
        Chains only: seed of the sample of intermediate ranks, if one is needed.
    forwarders : array of int, optional
        Forwarded only: the endpoints that may stop a path (default every one). When some
        cannot (hosts without an MPI rank), even a torus takes chains through the others.

    Raises
    ------
    ParameterError
        For an unknown routing.

    Examples
    --------
    >>> from optiq.topology import torus, kary_ntree
    >>> from optiq.workloads import Demands
    >>> PathSpace(torus((4, 2)), Demands([0], [3], [1])).kind, PathSpace(kary_ntree(2, 2), Demands([0], [3], [1])).kind
    ('links', 'chains')
    """

    def __init__(self, topology: Topology, demands: Demands, routing: str = FORWARDED, *, max_intermediates: int = 1,
                 seed: int = 0, forwarders: np.ndarray | None = None, progress: Progress | None = None) -> None:
        if routing not in ROUTINGS:
            raise ParameterError(f"unknown routing {routing!r}; expected one of {', '.join(ROUTINGS)}")
        self.topology, self.demands, self.routing = topology, demands, routing
        self.max_intermediates, self.seed, self.progress = max_intermediates, seed, progress
        if forwarders is not None and np.unique(forwarders).size == topology.num_endpoints:
            forwarders = None
        self.forwarders = forwarders
        self.kind = "free" if routing == FREE else \
            "links" if every_node_a_rank(topology) and forwarders is None else "chains"
        self._chains: ChainSpace | None = None

    def __repr__(self) -> str:
        return f"PathSpace({self.topology.name!r}, {self.kind})"

    @property
    def chains(self) -> ChainSpace:
        """The chain space of the jobs (made on first use)."""
        if self._chains is None:
            from .chains import ChainSpace

            self._chains = ChainSpace(self.topology, self.demands, max_intermediates=self.max_intermediates,
                                      seed=self.seed, forwarders=self.forwarders, progress=self.progress)
        return self._chains

    @property
    def note(self) -> str:
        """What the space left out, if anything (a sample of intermediates), for the plan's warnings."""
        return self._chains.note if self._chains is not None else ""

    def check(self, paths: PathSet) -> None:
        """Refuse paths that are not of this space (candidates made for another routing).

        Raises
        ------
        ParameterError
            Naming the first path that does not fit and why.
        """
        from .routing import misrouted_legs

        topo = self.topology
        if self.kind == "chains":
            _, why = misrouted_legs(paths, topo)
            if why:
                raise ParameterError(f"candidates for forwarded plans must be chains of the network's routes, but {why}")
            return
        if self.kind == "links" and not links_are_routes(topo):
            twins = route_twins(topo)
            wrong = np.flatnonzero(twins[paths.links] != paths.links)
            if wrong.size:
                raise ParameterError(f"candidates for forwarded plans must follow the network's routes between "
                                     f"neighbours, but one takes {topo.link_label(int(paths.links[wrong[0]]))}, which the "
                                     f"network's route between its ends does not")
        n = topo.num_nodes  # link paths: each visits a node once
        tails = topo.link_src[paths.links]
        last = paths.offsets[1:][paths.hops > 0] - 1
        visits = np.concatenate([paths.path_of_link_entry * n + tails,
                                 np.flatnonzero(paths.hops > 0) * n + topo.link_dst[paths.links[last]]])
        uniq, counts = np.unique(visits, return_counts=True)
        if (counts > 1).any():
            p = int(uniq[counts > 1][0] // n)
            raise ParameterError(f"candidate {p} (job {paths.job[p]}) visits a node twice: it is a chain of forwarded "
                                 f"routes, not a {self.routing} link path; make the candidates with the plan's routing")

    def finish(self, paths: PathSet) -> PathSet:
        """``paths`` with the stops the routing gives them: every rank (free), where they leave the
        network's route (links); chains carry theirs already."""
        if self.kind == "free":
            return paths.with_stops(every_rank_stops(paths, self.topology))
        if self.kind == "links":
            told = derived_from(paths, self.topology).get(FORWARDED_STOPS)   # made with the paths
            return paths.with_stops(forwarded_stops(paths, self.topology) if told is None else told)
        return paths

    def finish_used(self, paths: PathSet, used: np.ndarray) -> tuple[PathSet, bool]:
        """:meth:`finish` of ``paths.select(used)``, and whether its structure is checked
        (:func:`optiq.paths.checks.check_paths` against this space's pairs; else the plan
        checks it). On ``links`` the stops made, and which paths were checked, are kept with
        the very same ``paths`` (on this topology), so a later plan over them (an
        application's same pairs with other bytes, over the candidates :mod:`optiq.paths.kept`
        kept) makes stops and checks only the paths no plan used before."""
        if self.kind != "links":
            return self.finish(paths.select(used)), False
        kept = derived_from(paths, self.topology)
        if "stops" not in kept:
            told = kept.get(FORWARDED_STOPS)   # made with the paths (coordinate-built torus routes)
            kept["stops"], kept["known"] = (paths.stops.copy(), np.zeros(paths.num_paths, dtype=bool)) \
                if told is None else (told, np.ones(paths.num_paths, dtype=bool))
        stops, known = kept["stops"], kept["known"]
        used = np.asarray(used, dtype=bool)
        new = used & ~known
        if new.any():
            where = csr_positions(paths.offsets[:-1][new], paths.hops[new])
            stops[where] = forwarded_stops(paths.select(new), self.topology)
            known |= new
        src, dst = self.demands.src, self.demands.dst
        pairs = kept.get("checked for")
        if pairs is None or not (np.array_equal(pairs[0], src) and np.array_equal(pairs[1], dst)):
            kept["checked for"], kept["checked"] = (src.copy(), dst.copy()), np.zeros(paths.num_paths, dtype=bool)
        checked = kept["checked"]
        unchecked = used & ~checked
        if unchecked.any():
            try:
                check_paths(paths.select(unchecked, stops=stops), self.topology, src, dst, self.routing)
            except PlanError:   # the plan's own checks name the path at fault, as the plan numbers it
                return paths.select(used, stops=stops), False
            checked |= unchecked
        return paths.select(used, stops=stops), True

    def from_links(self, paths: PathSet, *, distinct: bool = False) -> PathSet:
        """Link paths of a search of the whole graph as paths of this space, repeats within a job
        dropped: on ``links`` each link replaced by the one the network's route between its ends
        takes. ``distinct``: each job's paths are distinct already (coordinate-built ones), so
        repeats are looked for only where a link was replaced. The answer is kept with the very
        same ``paths`` while they live (candidates kept for pairs planned again,
        :mod:`optiq.paths.kept`). (Not for ``chains``, whose paths come from the chain space.)"""
        if self.kind == "chains":
            raise ParameterError("chains come from the chain space, not from link paths")
        kept = derived_from(paths, self.topology)
        if self.kind in kept:   # the same set as before (candidates kept for pairs planned again)
            return paths if kept[self.kind] is None else kept[self.kind]
        same = self.kind == "free" or links_are_routes(self.topology)
        links = paths.links if same else route_twins(self.topology)[paths.links]
        if distinct and (same or np.array_equal(links, paths.links)):
            kept[self.kind] = None   # ``paths`` itself, which a value must never hold (it would never be freed)
            return paths
        mapped = kept[self.kind] = PathSet(paths.job, paths.offsets, links, paths.num_jobs, paths.stops).unique()
        return mapped

    def cheapest(self, link_cost: np.ndarray, hop_limit: np.ndarray, *, too_long: str = "exact",
                 what: str = "least-cost paths", workers: Workers | None = None, regions: bool = False,
                 progress: Progress | None = None, threads: int = 1) -> tuple[PathSet, np.ndarray, np.ndarray]:
        """Every job's cheapest path of the space under ``link_cost`` (per link, non-negative).

        On ``free`` and ``links``, :func:`optiq.paths.least_cost_paths` within ``hop_limit``
        (on ``links`` every link costs what the link the network takes instead costs; its
        sources in ``threads`` threads); on ``chains``, :meth:`ChainSpace.cheapest` (no hop
        limit: the chain is the choice).

        Returns
        -------
        paths : PathSet
            One path per job (no links where none was found within the limit).
        cost : ndarray
            Its cost.
        unlimited : ndarray
            A lower bound on the least cost of any path of the job in the space, whatever
            its length (NaN where the search proved none: ``regions``).
        """
        if self.kind == "chains":
            return self.chains.cheapest(link_cost, progress=progress, what=what)
        cost = np.asarray(link_cost, dtype=float)
        twins = route_twins(self.topology) if self.kind == "links" else None
        if twins is not None:
            cost = cost[twins]
        found, path_cost, unlimited = least_cost_paths(self.topology, self.demands.src, self.demands.dst, cost,
                                                       hop_limit, too_long=too_long, progress=progress, what=what,
                                                       workers=workers, regions=regions, threads=threads)
        if twins is not None:
            found = PathSet(found.job, found.offsets, twins[found.links], found.num_jobs)
        return found, path_cost, unlimited
