"""The best destination-based tables for a job on a small fabric, by an integer program.

Every pair of the job takes one of its legal shortest routes (the up*/down* routes that
:class:`optiq.heuristics.tables.TreeRouter` chooses among); two pairs to one destination
that meet at a switch leave it by the same port, as a forwarding table forces; the busiest
link (bytes over capacity, the hosts' cables included) is minimised. HiGHS solves it to
optimality. The number of routes grows quickly with the fabric, so this is for small
fabrics: :func:`optiq.planner.job_tables` runs it where the program is small and its
heuristic left a gap to the bound, and the tests hold the heuristic against it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import OptiqError, TopologyError
from ..heuristics.tables import TreeRouter
from ..lp.solution import silent_highs
from ..workloads import Demands

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..topology import Topology

__all__ = ["ExactTables", "exact_tables", "search_tables", "MAX_ROUTES", "SEARCH_ROUNDS", "SEARCH_DESTINATIONS"]

#: The integer program is refused above this many (pair, route) variables.
MAX_ROUTES = 20_000


@dataclass(frozen=True)
class ExactTables:
    """The optimum of :func:`exact_tables`.

    Attributes
    ----------
    time_s : float
        The least busiest link (seconds) of any destination-based tables on legal routes.
    routes : list of ndarray
        Per job, the links of its route in the optimum.
    variables : int
        (pair, route) variables of the integer program.
    optimal : bool
        Proven optimal; else the best tables found within the limits.
    bound_s : float
        HiGHS's proven lower bound on the busiest link of any such tables (``time_s`` where
        optimal).
    """

    time_s: float
    routes: list[np.ndarray] = field(repr=False)
    variables: int
    optimal: bool = True
    bound_s: float = 0.0


def exact_tables(topology: Topology, demands: Demands, *, time_limit: float | None = 60.0,
                 max_routes: int = MAX_ROUTES, node_limit: int | None = None,
                 base_load: np.ndarray | None = None, router: TreeRouter | None = None) -> ExactTables:
    """The least busiest link of any destination-based tables for ``demands`` (module docstring).

    Parameters
    ----------
    topology : Topology
        An InfiniBand fabric (``ibnet:``).
    demands : Demands
    time_limit : float, optional
        Seconds for HiGHS (``None``: no limit).
    max_routes : int
        Refuse a program with more (pair, route) variables than this.
    node_limit : int, optional
        Branch-and-bound nodes for HiGHS: a limit in work, so the result is the same on a
        busy machine. Past either limit the best tables found are returned, not proven
        optimal (``optimal`` false).
    base_load : ndarray, optional
        Bytes every link carries besides ``demands`` (other pairs' routes, fixed): the program
        then routes ``demands`` around them (:func:`search_tables`).
    router : TreeRouter, optional
        The fabric's legal routes, made once by a caller that solves many programs.

    Returns
    -------
    ExactTables

    Raises
    ------
    TopologyError
        If the topology is not a fabric.
    OptiqError
        If the program has more than ``max_routes`` variables, or HiGHS finds no tables
        within its limits.
    """
    import highspy

    router = router or TreeRouter(topology)
    fabric = topology.fabric
    assert fabric is not None
    E = topology.num_endpoints
    cap = topology.capacity
    size = demands.nbytes.astype(float)
    fixed = np.zeros(topology.num_links) if base_load is None else np.asarray(base_load, dtype=float).copy()
    np.add.at(fixed, fabric.egress[demands.src], size)
    src_switch = topology.link_dst[fabric.egress[demands.src]] - E
    dst_link = fabric.egress[demands.dst]  # the host's cable out; its reverse carries the bytes in
    into_host = np.array([_reverse(topology, int(link)) for link in dst_link], dtype=np.int64)
    np.add.at(fixed, into_host, size)
    dst_switch = topology.link_src[into_host] - E
    routes: list[list[np.ndarray]] = []
    for j in range(demands.num_jobs):
        if demands.src[j] == demands.dst[j]:
            routes.append([np.zeros(0, dtype=np.int64)])
            continue
        left = max_routes - sum(len(r) for r in routes)
        found = _legal_routes(router, int(src_switch[j]), int(dst_switch[j]), left)
        if found is None:
            raise OptiqError(f"the exact tables' program would have more than {max_routes:,} route variables: it is "
                             f"for small fabrics")
        routes.append(found)
    count = sum(len(r) for r in routes)
    owner = np.repeat(np.arange(demands.num_jobs), [len(r) for r in routes])
    flat = [r for rs in routes for r in rs]
    h = silent_highs()
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    if node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(node_limit))
    inf = highspy.kHighsInf
    # columns: T, then one binary per (pair, route)
    h.addVar(0.0, inf)
    h.changeColCost(0, 1.0)
    for _ in range(count):
        h.addVar(0.0, 1.0)
    h.changeColsIntegrality(count, np.arange(1, count + 1, dtype=np.int32),
                            np.full(count, highspy.HighsVarType.kInteger))
    for j in range(demands.num_jobs):  # every pair on one route
        mine = np.flatnonzero(owner == j) + 1
        h.addRow(1.0, 1.0, mine.size, mine.astype(np.int32), np.ones(mine.size))
    lengths = np.array([r.size for r in flat])
    links = np.concatenate(flat) if flat else np.zeros(0, dtype=np.int64)
    col = np.repeat(np.arange(count), lengths) + 1
    for e in np.unique(links):  # fixed + routed bytes over capacity at most T
        on = col[links == e]
        idx = np.concatenate(([0], on)).astype(np.int32)
        val = np.concatenate(([-cap[e]], size[owner[on - 1]]))
        h.addRow(-inf, -fixed[e], idx.size, idx, val)
    for a, b in _conflicts(topology, demands, owner, flat):  # one port per switch and destination
        h.addRow(-inf, 1.0, 2, np.array([a + 1, b + 1], dtype=np.int32), np.ones(2))
    h.run()
    optimal = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    solution = h.getSolution()
    if not optimal and not solution.value_valid:
        raise OptiqError(f"HiGHS found no exact tables: {h.modelStatusToString(h.getModelStatus())}")
    x = np.asarray(solution.col_value)[1:]
    pick = np.flatnonzero(x > 0.5)
    chosen = [flat[i] for i in pick]
    load = fixed.copy()  # the optimum's busiest link from its routes, not HiGHS's rounded objective
    for i in pick:
        np.add.at(load, flat[i], size[owner[i]])
    time_s = float((load / cap).max(initial=0.0))
    proven = time_s if optimal else min(time_s, max(0.0, float(h.getInfo().mip_dual_bound)))
    return ExactTables(time_s, chosen, count, optimal, proven)


#: Rounds of :func:`search_tables` at most (work, not seconds: the same tables on any machine)...
SEARCH_ROUNDS = 60
#: ... each re-routing the pairs to at most this many destinations of the busiest link's pairs...
SEARCH_DESTINATIONS = 6
#: ... by a program of at most this many (pair, route) variables, within this many nodes.
SEARCH_ROUTES, SEARCH_NODES = 3_000, 200


def search_tables(topology: Topology, demands: Demands, routes: list[np.ndarray], *, rounds: int = SEARCH_ROUNDS,
                  destinations: int = SEARCH_DESTINATIONS,
                  progress: Callable[[str], None] | None = None) -> list[np.ndarray]:
    """Tables for ``demands`` from ``routes`` (per job, its switch links) by a large neighbourhood
    search: each round takes the busiest link, the destinations whose pairs cross it (the
    heaviest first, at most ``destinations``, skipping sets tried there before), and routes
    every pair to them again by the integer program (:func:`exact_tables`) around the rest
    of the traffic, fixed. A round's routes are kept where the busiest link drops, or stays
    and fewer links are that busy. Deterministic: rounds and nodes, not seconds, bound it.

    Returns
    -------
    list of ndarray
        Per job, its switch links: destination based, as the program keeps them (all pairs to
        one destination re-routed together, one port per switch for them).
    """
    fabric = topology.fabric
    assert fabric is not None
    cap = topology.capacity
    size = demands.nbytes.astype(float)
    router = TreeRouter(topology)
    routes = [np.asarray(r, dtype=np.int64) for r in routes]
    load = np.zeros(topology.num_links)
    np.add.at(load, fabric.egress[demands.src], size)
    into = np.array([_reverse(topology, int(e)) for e in fabric.egress[demands.dst]], dtype=np.int64)  # once
    np.add.at(load, into, size)
    for j, links in enumerate(routes):
        np.add.at(load, links, size[j])

    def score(ld: np.ndarray) -> tuple[float, int]:
        t = ld / cap
        top = float(t.max(initial=0.0))
        return top, int((t >= top * (1 - 1e-9)).sum())

    tried: set[tuple[int, tuple[int, ...]]] = set()
    for r in range(rounds):
        now = score(load)
        busy = np.flatnonzero(load / cap >= now[0] * (1 - 1e-9))
        flat = np.concatenate(routes) if routes else np.zeros(0, np.int64)
        owner = np.repeat(np.arange(len(routes)), [r.size for r in routes])
        chosen = None
        for e in busy.tolist():
            crossing = np.unique(owner[flat == e])
            dsts, inverse = np.unique(demands.dst[crossing], return_inverse=True)
            weight = np.bincount(inverse, weights=size[crossing], minlength=dsts.size)
            order = dsts[np.lexsort((dsts, -weight))].tolist()   # the heaviest first, ties by destination
            for skip in range(max(1, len(order) - destinations + 1)):
                pick = tuple(sorted(order[skip:skip + destinations]))
                if pick and (e, pick) not in tried:
                    chosen = (e, pick)
                    break
            if chosen:
                break
        if chosen is None:
            break
        tried.add(chosen)
        jobs = np.flatnonzero(np.isin(demands.dst, chosen[1]))
        base = load.copy()
        for j in jobs.tolist():
            np.subtract.at(base, routes[j], size[j])
        sub = Demands(demands.src[jobs], demands.dst[jobs], demands.nbytes[jobs])
        host_base = base.copy()  # the program adds the subset's host cables itself
        np.subtract.at(host_base, fabric.egress[sub.src], sub.nbytes.astype(float))
        np.subtract.at(host_base, into[jobs], sub.nbytes.astype(float))
        try:
            found = exact_tables(topology, sub, time_limit=None, max_routes=SEARCH_ROUTES, node_limit=SEARCH_NODES,
                                 base_load=host_base, router=router)
        except OptiqError:
            continue
        trial = base.copy()
        for j, links in zip(jobs.tolist(), found.routes):
            np.add.at(trial, links, size[j])
        if score(trial) < now:
            for j, links in zip(jobs.tolist(), found.routes):
                routes[j] = np.asarray(links, dtype=np.int64)
            load = trial
            if progress:
                progress(f"table search round {r + 1}: busiest link {score(load)[0] * 1e3:.4f} ms")
    return routes


def _reverse(topology: Topology, link: int) -> int:
    """The link the other way along the same cable."""
    back = np.flatnonzero((topology.link_src == topology.link_dst[link]) & (topology.link_dst == topology.link_src[link]))
    if not back.size:
        raise TopologyError(f"link {link} of {topology.name} has no link back")
    return int(back[0])


def _legal_routes(router: TreeRouter, s: int, x: int, budget: int) -> list[np.ndarray] | None:
    """Every legal shortest route from switch ``s`` to switch ``x``, as link ids; ``None``
    as soon as there are more than ``budget``."""
    legal = router.legal(x)
    out: list[np.ndarray] = []

    def walk(at: int, links: list[int]) -> bool:
        if at == x:
            out.append(np.array(links, dtype=np.int64))
            return len(out) <= budget
        return all(walk(int(router.nb[at, slot]), links + [int(router.nb_link[at, slot])])
                   for slot in np.flatnonzero(legal[at]))

    return out if walk(s, []) else None


def _conflicts(topology: Topology, demands: Demands, owner: np.ndarray,
               flat: list[np.ndarray]) -> list[tuple[int, int]]:
    """Pairs of routes of two jobs to one destination that leave a common switch by different links."""
    pairs = []
    by_dst: dict[int, list[int]] = {}
    for i in range(len(flat)):
        by_dst.setdefault(int(demands.dst[owner[i]]), []).append(i)
    for routes in by_dst.values():
        leaves = [{int(topology.link_src[e]): int(e) for e in flat[i]} for i in routes]
        for (a, ra), (b, rb) in itertools.combinations(zip(routes, leaves), 2):
            if owner[a] == owner[b]:
                continue
            if any(rb.get(s, e) != e for s, e in ra.items()):
                pairs.append((a, b))
    return pairs
