"""Destination-based forwarding tables for one job: a routing tree per LID that spreads the
job's bytes, on up*/down* routes that cannot close a credit loop.

An InfiniBand switch forwards by destination LID alone, so the routes to one LID form a tree
into it, one output port per switch. The job's bytes to that LID enter the tree at the
switches its senders are cabled to; a switch's choice of port carries everything that
reached it. The tables here choose those ports.

**Up*/down*.** Every switch gets a rank: its distance from the roots, the switches farthest
from any host (the top of a fat-tree). A move to a switch of lower (rank, index) is *up*,
the other way *down*. A route that never goes up after going down cannot close a cycle of
channel dependencies, whatever the other routes do; so each switch routes a LID down when
it can reach the LID's switch going only down (the LID's ancestors), else up, always on a
shortest route of that kind. If some host's switch cannot reach another host that way, the
ranks are taken from one root instead. A switch that no such route leads from to a LID
(one root of a fat-tree to another; a host's switch to a switch it lost the cable toward)
takes a shortest route to it: that carries only traffic to switches' own LIDs, and the
check of the tables (:func:`optiq.paths.tablecheck.check_tables`) says whether it closes a
credit loop. ``minimal=True`` takes any shortest route instead, which on a fabric with
cycles (a torus) closes credit loops.

**Choosing ports, one LID at a time.** The job's LIDs go heaviest first. For one LID, the
switches are taken farthest first, so all the bytes a switch forwards are known when it
chooses: among its ports on a legal shortest route it takes the one whose route would be
least busy, counting the link out of the port with the bytes added and the rest of the way
by the least busy route from the switch it leads to (the busiest link's seconds, bytes over
capacity); ties go to the port with the fewest LIDs routed so far, then the lowest port.
Then rounds of rip-up and reroute, while the busiest link is above a proven bound: each
LID's tree that crosses a link at least half as busy as the busiest is taken out and built
again against everyone else's bytes, and kept if the busiest link is then less busy, or as
busy with a smaller sum of squares. After a round in which the busiest link did not drop,
the next builds the trees as if the busiest links were twice as full (a tree then leaves
them even where its own route gets busier), kept by the same test; the rounds end when
neither kind helped, or after :data:`REROUTE_ROUNDS`. A switch that forwards none of the job's bytes for a LID, and every LID the
job does not send to, keeps the port of the given tables where that port is on a legal
route, else takes the least busy one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TopologyError
from ..paths.minhop import switch_slots
from ..topology.lft import NO_PORT, ForwardingTables, empty_tables

if TYPE_CHECKING:
    from collections.abc import Callable

    from scipy.sparse import csr_matrix

    from ..topology import Topology

__all__ = ["TreeRouter", "ColumnTraffic", "JobRoutes", "REROUTE_ROUNDS"]

_INF = np.iinfo(np.int32).max // 2
#: Rip-up and reroute takes the trees that cross a link at least this busy, relative to the
#: busiest link, each round.
HOT = 0.5
#: Rounds of rip-up and reroute at most (a budget of work: the same tables on any machine).
REROUTE_ROUNDS = 16


@dataclass(frozen=True)
class ColumnTraffic:
    """The job's bytes to one LID (a column of the tables): where they enter.

    Attributes
    ----------
    column : int
    switch : ndarray of int
        Switch rows the bytes enter at (a sender's switch; repeated rows add up).
    nbytes : ndarray of float
    """

    column: int
    switch: np.ndarray
    nbytes: np.ndarray

    @property
    def total(self) -> float:
        return float(self.nbytes.sum())


@dataclass
class JobRoutes:
    """The tables a :class:`TreeRouter` made and the job's bytes on every link.

    Attributes
    ----------
    table : ndarray of uint8, shape (switches, LIDs)
    link_bytes : ndarray of float
        The job's bytes on every link (its senders' and receivers' host cables included).
    """

    table: np.ndarray
    link_bytes: np.ndarray

    def busiest_s(self, capacity: np.ndarray) -> float:
        return float((self.link_bytes / capacity).max(initial=0.0))


class TreeRouter:
    """Routing trees for every LID of ``topology``'s fabric (module docstring).

    Parameters
    ----------
    topology : Topology
        An InfiniBand fabric (``ibnet:``).
    minimal : bool
        Shortest routes of any kind instead of up*/down* ones (they may close credit loops).

    Raises
    ------
    TopologyError
        If the topology is not a fabric, or a switch cannot reach a LID.
    """

    def __init__(self, topology: Topology, *, minimal: bool = False):
        fabric = topology.fabric
        if fabric is None:
            raise TopologyError(f"{topology.name} is not an InfiniBand fabric (ibnet:FILE)")
        self.topology, self.minimal = topology, minimal
        E = topology.num_endpoints
        self.E, self.S = E, topology.num_nodes - E
        self.nb, self.nb_port, self.nb_link = switch_slots(topology)
        self.capacity = topology.capacity
        space = fabric.lid_space
        owner = space.entry
        is_ca = fabric.lid_link[owner] >= 0
        link = np.maximum(fabric.lid_link[owner], 0)
        self.target = np.where(is_ca, topology.link_src[link], fabric.lid_node[owner]) - E
        self.final_port = np.where(is_ca, fabric.link_port[link], 0)
        self.final_link = np.where(is_ca, link, -1)
        if (self.target < 0).any():
            c = int(np.flatnonzero(self.target < 0)[0])
            raise TopologyError(f"LID 0x{int(space.lids[c]):04x} belongs to a host port cabled to another host")
        self.columns = space.lids.size
        S = self.S
        valid = self.nb >= 0
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import shortest_path
        adjacency = csr_matrix((np.ones(int(valid.sum())), (np.nonzero(valid)[0], self.nb[valid])), shape=(S, S))
        self.hops = shortest_path(adjacency, unweighted=True)
        if not np.isfinite(self.hops).all():
            raise TopologyError(f"{topology.name}: the switches are not all connected to one another")
        self.rank, self.roots = self._ranks(adjacency)

    # -- the orientation ----------------------------------------------------------------

    def _ranks(self, adjacency: csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """Ranks from the roots (module docstring), falling back to one root if needed."""
        E, S = self.E, self.S
        topo = self.topology
        with_hosts = np.unique(topo.link_dst[(topo.link_src < E) & (topo.link_dst >= E)] - E)
        self.leaves = with_hosts
        height = self.hops[with_hosts].min(axis=0) if with_hosts.size else np.zeros(S)
        roots = np.flatnonzero(height == height.max())
        for attempt in (roots, roots[[int(np.argmax(np.asarray(adjacency.sum(axis=1)).ravel()[roots]))]]):
            rank = self.hops[attempt].min(axis=0).astype(np.int64)
            self.key = rank * S + np.arange(S)
            self.dist = self._distances()
            if np.isfinite(self.dist[np.ix_(with_hosts, with_hosts)]).all():  # every host reaches every host
                return rank, attempt
        raise TopologyError(f"{topo.name}: no up*/down* routes join every switch")  # cannot happen with one root

    def _distances(self) -> np.ndarray:
        """``dist[s, x]``: hops of the legal shortest route from switch s to switch x (inf: none).

        Down-only distances are a breadth-first search over the down moves; then, in order of
        (rank, index), a switch that cannot go down all the way goes up to its best neighbour
        above, whose distances are known by then."""
        if self.minimal:
            return self.hops
        S, nb, key = self.S, self.nb, self.key
        valid = nb >= 0
        down = valid & (key[np.maximum(nb, 0)] > key[:, None])
        rows, slots = np.nonzero(down)
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import shortest_path
        graph = csr_matrix((np.ones(rows.size), (rows, nb[rows, slots])), shape=(S, S))
        self.down_dist = dd = shortest_path(graph, unweighted=True, directed=True)
        d = dd.copy()
        up = valid & ~down
        for s in np.argsort(key, kind="stable").tolist():
            above = nb[s, up[s]]
            if above.size:
                d[s] = np.where(np.isfinite(dd[s]), dd[s], d[above].min(axis=0) + 1)
        return d

    @lru_cache(maxsize=512)  # noqa: B019  (one router per call to job_tables)
    def legal(self, x: int) -> np.ndarray:
        """``legal[s, d]``: slot d of switch s is on a legal shortest route to switch x."""
        nb = np.maximum(self.nb, 0)
        valid = self.nb >= 0
        if self.minimal:
            return valid & (self.hops[nb, x] == self.hops[:, x, None] - 1)
        down = valid & (self.key[nb] > self.key[:, None])
        anc = np.isfinite(self.down_dist[:, x])
        go_down = down & (self.down_dist[nb, x] == self.down_dist[:, x, None] - 1)
        go_up = valid & ~down & (self.dist[nb, x] == self.dist[:, x, None] - 1)
        return np.where(anc[:, None], go_down, go_up)

    @property
    def longer_than_minimal(self) -> float:
        """The fraction of routes from hosts' switches to switches that up*/down* makes
        longer than the shortest."""
        d, h = self.dist[self.leaves], self.hops[self.leaves]
        return float((d > h).mean()) if d.size else 0.0

    # -- one tree ----------------------------------------------------------------------

    def build(self, column: int, enter: np.ndarray, load: np.ndarray, count: np.ndarray,
              given: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The tree of one LID: every switch's port, and the job's (links, bytes) on it.

        ``enter[s]``: the job's bytes entering at switch s for this LID. ``load`` (bytes per
        link, the job's other routes) and ``count`` (LIDs per link) are updated in place.
        ``given``: the given tables' column, kept where legal and no job bytes pass.
        """
        x = int(self.target[column])
        legal = self.legal(x)
        nb, nb_link, cap = self.nb, self.nb_link, self.capacity
        d = self.dist[:, x]
        port = np.full(self.S, NO_PORT, dtype=np.uint8)
        port[x] = self.final_port[column]
        final = int(self.final_link[column])
        if not enter.any():  # no job bytes: every switch at once
            rows = np.flatnonzero(np.isfinite(d) & (d > 0))
            safe = np.maximum(nb_link[rows], 0)
            ok = legal[rows]
            busy = np.where(ok, load[safe] / cap[safe], np.inf)
            tied = ok & (busy <= busy.min(axis=1, keepdims=True) * (1 + 1e-12) + 1e-300)
            pick = self._given(rows, ok, np.where(tied, count[safe], np.iinfo(np.int64).max).argmin(axis=1), given)
            port[rows] = self.nb_port[rows, pick]
            np.add.at(count, safe[np.arange(rows.size), pick], 1)
            self._shortest_rest(port, x, d, count, given)
            return port, np.zeros(0, np.int64), np.zeros(0)
        links, carried = [], []
        levels = np.unique(d[np.isfinite(d) & (d > 0)]).astype(int)
        # the least busy rest of the way from every switch: its bottleneck's seconds and capacity
        rest_s = np.full(self.S, np.inf)
        rest_cap = np.full(self.S, np.inf)
        rest_s[x] = load[final] / cap[final] if final >= 0 else 0.0
        rest_cap[x] = cap[final] if final >= 0 else np.inf
        rows_at = [np.flatnonzero(d == k) for k in levels]
        safe = np.maximum(nb_link, 0)
        for rows in rows_at:
            t = np.where(legal[rows], np.maximum(load[safe[rows]] / cap[safe[rows]], rest_s[np.maximum(nb[rows], 0)]),
                         np.inf)
            pick = t.argmin(axis=1)
            rest_s[rows] = t[np.arange(rows.size), pick]
            link = safe[rows, pick]
            after = rest_cap[nb[rows, pick]]
            worse = load[link] / cap[link] >= rest_s[nb[rows, pick]]
            rest_cap[rows] = np.where(worse, cap[link], after)
        arriving = enter.astype(float).copy()
        for rows in reversed(rows_at):
            T = arriving[rows]
            ok = legal[rows]
            link = safe[rows]
            cost = np.maximum((load[link] + T[:, None]) / cap[link],
                              rest_s[np.maximum(nb[rows], 0)] + T[:, None] / rest_cap[np.maximum(nb[rows], 0)])
            cost = np.where(ok, cost, np.inf)
            best = cost.min(axis=1, keepdims=True)
            tied = ok & (cost <= best * (1 + 1e-12) + 1e-300)
            pick = np.where(tied, count[link], np.iinfo(np.int64).max).argmin(axis=1)
            pick = self._given(rows, ok, pick, given, T == 0)  # no job bytes here: the given port where legal
            chosen = link[np.arange(rows.size), pick]
            if not ok[np.arange(rows.size), pick].all():
                bad = rows[~ok[np.arange(rows.size), pick]][0]
                raise TopologyError(f"switch {self.topology.label(int(bad) + self.E)} has no route to LID column "
                                    f"{column}")
            port[rows] = self.nb_port[rows, pick]
            count[chosen] += 1
            moving = T > 0
            np.add.at(load, chosen[moving], T[moving])
            np.add.at(arriving, nb[rows, pick][moving], T[moving])
            links.append(chosen[moving])
            carried.append(T[moving])
        self._shortest_rest(port, x, d, count, given)
        total = float(enter.sum())
        if final >= 0 and total > 0:
            load[final] += total
            links.append(np.array([final]))
            carried.append(np.array([total]))
        return port, (np.concatenate(links) if links else np.zeros(0, np.int64)), \
            (np.concatenate(carried) if carried else np.zeros(0))

    def _shortest_rest(self, port: np.ndarray, x: int, d: np.ndarray, count: np.ndarray,
                       given: np.ndarray | None) -> None:
        """Switches with no up*/down* route to x (on no host's route): a shortest one."""
        rows = np.flatnonzero(~np.isfinite(d))
        if not rows.size:
            return
        nb = self.nb[rows]
        ok = (nb >= 0) & (self.hops[np.maximum(nb, 0), x] == self.hops[rows, x, None] - 1)
        pick = np.where(ok, count[np.maximum(self.nb_link[rows], 0)], np.iinfo(np.int64).max).argmin(axis=1)
        port[rows] = self.nb_port[rows, self._given(rows, ok, pick, given)]

    def _given(self, rows: np.ndarray, ok: np.ndarray, pick: np.ndarray, given: np.ndarray | None,
               where: np.ndarray | None = None) -> np.ndarray:
        """``pick`` (a slot per row), but the slot of the given port where that slot is ``ok``
        (and ``where`` holds)."""
        if given is None:
            return pick
        match = ok & (self.nb_port[rows] == given[rows][:, None].astype(np.int64))
        keep = match.any(axis=1) if where is None else match.any(axis=1) & where
        return np.where(keep, match.argmax(axis=1), pick)

    # -- every LID ---------------------------------------------------------------------

    def route(self, traffic: list[ColumnTraffic], *, given: ForwardingTables | None = None, base_load: np.ndarray,
              rounds: int = REROUTE_ROUNDS, floor: float = 0.0, progress: Callable[[str], None] | None = None) -> JobRoutes:
        """Tables for every LID: the job's LIDs by load, then rip-up and reroute (module docstring).

        ``base_load``: the job's bytes on links no table decides (its hosts' cables into
        their switches), in bytes per link. Rip-up and reroute runs at most ``rounds`` rounds,
        while the busiest link drops and is above ``floor`` seconds (a proven lower bound).
        """
        tables = empty_tables(self.topology, "job tables")
        table = tables.table
        load = base_load.astype(float).copy()
        count = np.zeros(self.topology.num_links, dtype=np.int64)
        given_table = given.table if given is not None else None
        heavy = sorted(traffic, key=lambda c: -c.total)
        job_cols = {c.column for c in heavy}
        contrib: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        enter_of = {}
        for n, col in enumerate(heavy):
            if progress and n and n % 512 == 0:
                progress(f"job tables: LID {n:,} of {len(heavy):,} the job sends to")
            enter = np.zeros(self.S)
            np.add.at(enter, col.switch, col.nbytes)
            enter_of[col.column] = enter
            port, links, nbytes = self.build(col.column, enter, load, count,
                                             None if given_table is None else given_table[:, col.column])
            table[:, col.column] = port
            contrib[col.column] = (links, nbytes)
        for c in range(self.columns):  # every other LID: kept as given where legal, else balanced
            if c not in job_cols:
                port, _, _ = self.build(c, np.zeros(self.S), load, count,
                                        None if given_table is None else given_table[:, c])
                table[:, c] = port
        cap = self.capacity
        push = False
        for done in range(1, rounds + 1):
            busiest = _score(load, cap)[0]
            if busiest <= floor * (1 + 1e-9):
                break  # at the bound: no tables can do better
            hot = load / cap >= HOT * busiest
            # after a round that did not help, the trees are rebuilt as if the busiest links
            # were fuller still, so that a tree leaves them even where its own route gets busier
            penalty = np.where(load / cap >= busiest * (1 - 1e-9), busiest * cap, 0.0) if push else None
            for col in heavy:
                links, nbytes = contrib[col.column]
                if not hot[links].any():  # far from the busiest links: left as it is
                    continue
                before = _score(load, cap)
                np.subtract.at(load, links, nbytes)
                seen = load if penalty is None else load + penalty
                port, new_links, new_bytes = self.build(col.column, enter_of[col.column], seen, count.copy(),
                                                        table[:, col.column].copy())
                if penalty is not None:
                    np.add.at(load, new_links, new_bytes)
                if _score(load, cap) < before:
                    table[:, col.column], contrib[col.column] = port, (new_links, new_bytes)
                else:
                    np.subtract.at(load, new_links, new_bytes)
                    np.add.at(load, links, nbytes)
            if progress:
                progress(f"job tables: reroute round {done}, busiest link {_score(load, cap)[0] * 1e3:.4f} ms")
            if _score(load, cap)[0] >= busiest * (1 - 1e-12):
                if push:
                    break  # neither kind of round helped
                push = True
            else:
                push = False
        if not self.minimal:
            table = self.escape(table)
        return JobRoutes(table, load)

    def escape(self, table: np.ndarray) -> np.ndarray:
        """Routes for the hosts that no up*/down* route leads from to a switch's own LID (module
        docstring), chosen so that no credit loop closes: each host switch's route steps to a
        neighbour nearer the switches that do reach it, the first whose channel dependency
        (the link taken, then the neighbour's) closes no cycle with the routes already there."""
        from ..paths.tablecheck import dependencies

        leaves = self.leaves
        columns = [c for c in range(self.columns) if self.final_link[c] < 0
                   and not np.isfinite(self.dist[leaves, self.target[c]]).all()]
        if not columns:
            return table
        work = table.copy()
        for c in columns:  # their routes from the hosts, taken out while the others' dependencies are found
            work[np.ix_(leaves[~np.isfinite(self.dist[leaves, self.target[c]])], [c])] = NO_PORT
        shell = empty_tables(self.topology, "escape")
        a, b, _ = dependencies(self.topology, shell.with_table(work, "escape"))
        after: list[set[int]] = [set() for _ in range(self.topology.num_links)]
        for x, y in zip(a.tolist(), b.tolist()):
            after[x].add(y)
        for c in columns:
            x = int(self.target[c])
            reach = np.isfinite(self.dist[:, x])
            near = _steps_to(reach, self.nb)  # steps to a switch that reaches x by up*/down*
            done: set[int] = set()
            for s in leaves[~reach[leaves]].tolist():
                self._escape_from(int(s), c, x, work, reach, near, after, done)
        return work

    def _next_link(self, table: np.ndarray, s: int, c: int) -> int:
        """The link switch row ``s`` sends column ``c`` out of to another switch (-1: none)."""
        match = np.flatnonzero((self.nb_port[s] == table[s, c]) & (self.nb[s] >= 0))
        return int(self.nb_link[s, match[0]]) if table[s, c] not in (0, NO_PORT) and match.size else -1

    def _chain(self, table: np.ndarray, s: int, c: int) -> list[tuple[int, int]]:
        """The dependencies of the route from switch row ``s`` for column ``c``."""
        edges, link = [], self._next_link(table, s, c)
        while link >= 0:
            v = int(self.topology.link_dst[link]) - self.E
            onward = self._next_link(table, v, c)
            if onward >= 0:
                edges.append((link, onward))
            link = onward
            if len(edges) > self.S:
                break
        return edges

    def _escape_from(self, s: int, c: int, x: int, table: np.ndarray, reach: np.ndarray, near: np.ndarray,
                     after: list[set[int]], done: set[int]) -> None:
        """Route switch row ``s`` (which no up*/down* route leads from) to column ``c``."""
        if s in done or reach[s]:
            return
        done.add(s)
        slots = np.flatnonzero((self.nb[s] >= 0) & (near[np.maximum(self.nb[s], 0)] < near[s]))
        slots = slots[np.lexsort((self.nb_port[s, slots], self.hops[self.nb[s, slots], x], near[self.nb[s, slots]]))]
        chosen = None
        for slot in slots.tolist():
            v, link = int(self.nb[s, slot]), int(self.nb_link[s, slot])
            self._escape_from(v, c, x, table, reach, near, after, done)  # v's own route first
            onward = self._next_link(table, v, c)
            new = ([(link, onward)] if onward >= 0 else []) + self._chain(table, v, c)
            added = [(p, q) for p, q in new if q not in after[p]]
            for p, q in added:
                after[p].add(q)
            if not any(_reaches(after, q, p) for p, q in added):
                chosen = slot
                break
            for p, q in added:
                after[p].discard(q)
        if chosen is None:  # every way closes a loop: the shortest; the check of the tables names it
            chosen = int(slots[0])
            v = int(self.nb[s, chosen])
            onward = self._next_link(table, v, c)
            for p, q in ([(int(self.nb_link[s, chosen]), onward)] if onward >= 0 else []) + self._chain(table, v, c):
                after[p].add(q)
        table[s, c] = self.nb_port[s, chosen]


def _steps_to(reach: np.ndarray, nb: np.ndarray) -> np.ndarray:
    """Hops from every switch to the nearest switch where ``reach`` holds (0 there)."""
    near = np.where(reach, 0, _INF)
    for _ in range(nb.shape[0]):
        via = np.where(nb >= 0, near[np.maximum(nb, 0)] + 1, _INF).min(axis=1)
        new = np.minimum(near, via)
        if np.array_equal(new, near):
            break
        near = new
    return near


def _reaches(after: list[set[int]], start: int, goal: int) -> bool:
    """Whether the dependency graph ``after`` leads from link ``start`` to link ``goal``."""
    seen, todo = {start}, [start]
    while todo:
        x = todo.pop()
        if x == goal:
            return True
        for y in after[x]:
            if y not in seen:
                seen.add(y)
                todo.append(y)
    return False


def _score(load: np.ndarray, capacity: np.ndarray) -> tuple[float, float]:
    """The busiest link's seconds, then the sum of squares: what rip-up and reroute lowers."""
    t = load / capacity
    return float(t.max(initial=0.0)), float(np.dot(t, t))
