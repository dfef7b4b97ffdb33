"""How a plan's paths reach the wire: legs of the network's own routes between the ranks that forward.

The executor receives and re-sends chunks only at *ranks* (endpoints). Between two ranks
the network routes a message by its own rule (:func:`optiq.paths.system_routes`:
forwarding tables, D-mod-K, minimal routes, dimension order), whatever path a plan drew.
So a path is carried as planned only if it is a chain of *legs*, each the network's route
from one rank to the next, and the executor stops (copies) at the ranks between legs
(``PathSet.stops``). Two ways to realise a plan:

* ``"forwarded"``: every leg is the network's own route; the plan holds on any network
  and its realized time equals its predicted time. On networks where every node is a rank
  (tori, meshes) a path may turn at any node, but stops only where it leaves the
  network's route (:func:`forwarded_stops`); where the route between two neighbours takes
  one of several parallel links (Blue Gene/Q's length-2 E ring: always ``E+``), only that
  one is used (:func:`route_twins`). Elsewhere (fat-trees, fabrics, dragonflies) a path is
  the direct route or a chain through intermediate ranks (:mod:`optiq.paths.chains`).
* ``"free"``: the network is assumed to route every path as planned (per-flow rules on an
  SDN fabric, source routing, adaptive routing at its best): an upper bound on what such a
  network could do. The executor stops at every rank on a path (:func:`every_rank_stops`),
  and what a network that routes by its own rule would really do is
  :func:`realized_link_bytes`: every leg re-routed, bytes summed per link.

Examples
--------
>>> from optiq.topology import kary_ntree
>>> from optiq.workloads import Demands
>>> t = kary_ntree(2, 2)
>>> direct = network_routes(t, [0], [3])
>>> realized_time(direct, [8.0], t) == direct.busiest_link_time([8.0], t.capacity)
True
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PathError
from .pathset import PathSet, csr_positions
from .system import network_routes, route_rows

if TYPE_CHECKING:

    from numpy.typing import ArrayLike

    from ..topology import Topology

__all__ = ["ROUTINGS", "FORWARDED", "FREE", "every_rank_stops", "every_node_a_rank",
           "route_twins", "links_are_routes", "forwarded_stops", "forwarded_paths", "leg_routes",
           "realized_link_bytes", "realized_time", "misrouted_legs"]

FORWARDED = "forwarded"
FREE = "free"
#: How a plan's paths are carried (module docstring).
ROUTINGS = (FORWARDED, FREE)

_TWINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def every_node_a_rank(topology: Topology) -> bool:
    """Whether every node is a rank (tori, meshes, graphs without switches): a path may then
    stop at any node it crosses."""
    return topology.num_endpoints == topology.num_nodes


def every_rank_stops(paths: PathSet, topology: Topology) -> np.ndarray:
    """Stops at every rank a path crosses (the free plans' stops, and those of version-1 plan
    files): one flag per link entry, true where its head is an endpoint.

    Examples
    --------
    >>> from optiq.topology import kary_ntree, torus
    >>> from optiq.paths import system_routes
    >>> from optiq.workloads import Demands
    >>> t = kary_ntree(2, 2)
    >>> every_rank_stops(system_routes(t, Demands([0], [3], [8])), t).tolist()  # host, 3 switches, host
    [False, False, False, True]
    """
    return topology.link_dst[paths.links] < topology.num_endpoints


def route_twins(topology: Topology) -> np.ndarray:
    """For every link between two ranks, the link the network's route between its ends takes
    (itself, or a parallel link: Blue Gene/Q routes every hop of the E ring over ``E+``);
    ``-1`` where that route is not one link. Computed once per topology.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> t = torus((2,))                     # two parallel links 0 -> 1: 0 (+) and 1 (-)
    >>> route_twins(t).tolist()
    [0, 0, 2, 2]
    """
    cached = _TWINS.get(topology)
    if cached is not None:
        return cached
    twins = np.full(topology.num_links, -1, dtype=np.int64)
    ranks = np.flatnonzero((topology.link_src < topology.num_endpoints) & (topology.link_dst < topology.num_endpoints))
    if ranks.size:
        routes = network_routes(topology, topology.link_src[ranks], topology.link_dst[ranks])
        one = routes.hops == 1
        twins[ranks[one]] = routes.links[routes.offsets[:-1][one]]
    _TWINS[topology] = twins
    return twins


def links_are_routes(topology: Topology) -> bool:
    """Whether every link is the network's route between its ends (:func:`route_twins` is the
    identity, as on a torus without parallel links): link paths are then forwarded paths as they are.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> links_are_routes(torus((4, 4))), links_are_routes(torus((2,)))
    (True, False)
    """
    twins = route_twins(topology)
    return bool(np.array_equal(twins, np.arange(twins.size)))


def forwarded_paths(paths: PathSet, topology: Topology) -> PathSet:
    """Link paths on a network where every node is a rank, made forwarded: every link replaced
    by the one the network's route takes between its ends (:func:`route_twins`), repeats
    within a job dropped, and stops only where a path leaves the network's route
    (:func:`forwarded_stops`).

    Raises
    ------
    PathError
        If not every node is a rank, or a link is on no route between its ends.
    """
    if not every_node_a_rank(topology):
        raise PathError(f"{topology.name}: only networks whose every node is a rank take link paths as "
                        f"forwarded paths; elsewhere they are chains (optiq.paths.chains)")
    twins = route_twins(topology)
    mapped = twins[paths.links]
    if (mapped < 0).any():
        e = int(paths.links[np.flatnonzero(mapped < 0)[0]])
        raise PathError(f"link {topology.link_label(e)} is on no route of the network between its ends")
    out = PathSet(paths.job, paths.offsets, mapped, paths.num_jobs).unique()
    return out.with_stops(forwarded_stops(out, topology))


def forwarded_stops(paths: PathSet, topology: Topology) -> np.ndarray:
    """Stops of link paths whose every hop is a route between neighbours (:func:`route_twins`):
    each leg runs as far as the network's route from its first node follows the path.

    Greedy, all paths at once: a leg from node ``a`` grows by one hop while the network's route
    from ``a`` to the next node is exactly the path so far; under dimension-order routing,
    whose every part is a route of its own, this gives the fewest stops.

    Raises
    ------
    PathError
        If a hop of a path is not the network's route between its ends.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> t = torus((4, 4))
    >>> right, down = t.links_between(0, 1)[0], t.links_between(1, 5)[0]
    >>> ps = PathSet.from_lists([[right, down]], [0], 1)
    >>> forwarded_stops(ps, t).tolist()              # dimension order goes 0 -> 4 -> 5: stop at 1
    [True, True]
    >>> back = PathSet.from_lists([[t.links_between(0, 4)[0], t.links_between(4, 5)[0]]], [0], 1)
    >>> forwarded_stops(back, t).tolist()            # the route itself: one leg
    [False, True]
    """
    twins = route_twins(topology)
    if not links_are_routes(topology) and (twins[paths.links] != paths.links).any():
        e = int(paths.links[np.flatnonzero(twins[paths.links] != paths.links)[0]])
        raise PathError(f"link {topology.link_label(e)} is not the network's route between its ends")
    hops, first = paths.hops, paths.offsets[:-1]
    stops = np.zeros(paths.links.size, dtype=bool)
    heads = topology.link_dst[paths.links]
    tails = topology.link_src[paths.links]
    start = np.zeros(paths.num_paths, dtype=np.int64)  # the leg's first hop, within its path
    end = np.ones(paths.num_paths, dtype=np.int64)     # hops in the leg so far (each a route)
    live = hops > 0
    # dimension order: every part of a route is the route between its ends. So a path that is the
    # route between its own ends grows hop by hop into one leg: it is that leg at once. And a leg
    # that is a route grows by a hop where the route to the hop's head is one hop longer and ends
    # with it (its part up to the leg's end is then the route there: the leg itself)
    prefix_closed = topology.fabric is None and topology.is_torus
    if prefix_closed:
        whole = np.flatnonzero(live)
        whole = whole[_is_route(paths, topology, first[whole], hops[whole], tails, heads)]
        end[whole] = hops[whole]
    while live.any():
        done = live & (start + end >= hops)
        stops[first[done] + hops[done] - 1] = True
        live &= ~done
        trying = np.flatnonzero(live)
        if not trying.size:
            break
        grows = _is_route(paths, topology, first[trying] + start[trying], end[trying] + 1, tails, heads,
                          last_only=prefix_closed)
        end[trying[grows]] += 1
        cut = trying[~grows]  # the leg ends at its last hop; the next starts there
        stops[first[cut] + start[cut] + end[cut] - 1] = True
        start[cut] += end[cut]
        end[cut] = 1
    return stops


def _is_route(paths: PathSet, topology: Topology, leg_start: np.ndarray, length: np.ndarray, tails: np.ndarray,
              heads: np.ndarray, *, last_only: bool = False) -> np.ndarray:
    """Whether each run of ``length`` link entries of ``paths`` from ``leg_start`` is the
    network's route between its ends (``tails``, ``heads``: of every entry); ``last_only``: as
    many hops, ending with the same link (where all but the last are known to be the route to
    the last's tail, and every part of a route is a route)."""
    route_at, route_links, rows = route_rows(topology, tails[leg_start], heads[leg_start + length - 1])
    same = route_at[rows + 1] - route_at[rows] == length   # the links compared only where the hops agree
    if last_only:
        return same & (route_links[np.maximum(route_at[rows + 1] - 1, 0)] == paths.links[leg_start + length - 1])
    where = csr_positions(leg_start[same], length[same])
    mismatch = np.bincount(np.repeat(np.arange(int(same.sum())), length[same]),
                           weights=route_links[csr_positions(route_at[rows[same]], length[same])]
                           != paths.links[where], minlength=int(same.sum()))
    found = np.zeros(same.size, dtype=bool)
    found[np.flatnonzero(same)[mismatch == 0]] = True
    return found


def leg_routes(paths: PathSet, topology: Topology, mask: ArrayLike | None = None) -> tuple[np.ndarray, PathSet]:
    """The network's route of every leg (of the paths where ``mask`` is true): the leg's path
    and the routes, one per leg in path order."""
    path, tail, head = paths.leg_ends(topology)
    if mask is not None:
        keep = np.asarray(mask, dtype=bool)[path]
        path, tail, head = path[keep], tail[keep], head[keep]
    return path, network_routes(topology, tail, head)


def realized_link_bytes(paths: PathSet, path_bytes: ArrayLike, topology: Topology) -> np.ndarray:
    """Bytes on every link when each leg of every path is routed by the network (module docstring).

    For forwarded paths, whose legs are the network's routes, this is ``paths.link_loads``.
    """
    nbytes = np.asarray(path_bytes, dtype=float)
    path, routes = leg_routes(paths, topology, nbytes > 0)
    return routes.link_loads(nbytes[path], topology.num_links)


def realized_time(paths: PathSet, path_bytes: ArrayLike, topology: Topology) -> float:
    """The busiest link's time (bytes over capacity) when every leg is routed by the network."""
    return float((realized_link_bytes(paths, path_bytes, topology) / topology.capacity).max(initial=0.0))


def misrouted_legs(paths: PathSet, topology: Topology) -> tuple[np.ndarray, str]:
    """Which paths have a leg that is not the network's route between its ends, and a line
    naming the first such leg ('' when none).

    Examples
    --------
    >>> from optiq.topology import torus
    >>> t = torus((4, 4))
    >>> ps = PathSet.from_lists([[t.links_between(0, 1)[0], t.links_between(1, 5)[0]]], [0], 1)
    >>> bad, why = misrouted_legs(ps, t)
    >>> bad.tolist(), why
    ([True], 'path 0 of job 0: the leg H0 -> H5 takes H0 -> H1 -> H5, the network routes it H0 -> H4 -> H5')
    """
    path, first, last = paths.leg_entries()
    tail, head = topology.link_src[paths.links[first]], topology.link_dst[paths.links[last]]
    routes = network_routes(topology, tail, head)
    length = last - first + 1
    wrong = routes.hops != length
    same = np.flatnonzero(~wrong)
    differ = np.bincount(np.repeat(np.arange(same.size), length[same]),
                         weights=routes.links[csr_positions(routes.offsets[same], length[same])]
                         != paths.links[csr_positions(first[same], length[same])], minlength=same.size)
    wrong[same[differ > 0]] = True
    bad = np.zeros(paths.num_paths, dtype=bool)
    bad[path[wrong]] = True
    if not wrong.any():
        return bad, ""
    i = int(np.flatnonzero(wrong)[0])
    p = int(path[i])

    def walk(links: np.ndarray) -> str:
        return " -> ".join(topology.label(int(v)) for v in [topology.link_src[links[0]], *topology.link_dst[links]])

    planned = paths.links[first[i]:last[i] + 1]
    return bad, (f"path {p} of job {paths.job[p]}: the leg {topology.label(int(tail[i]))} -> "
                 f"{topology.label(int(head[i]))} takes {walk(planned)}, the network routes it {walk(routes.path(i))}")
