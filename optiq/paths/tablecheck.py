"""Are a fabric's forwarding tables safe to load? Every port in range, every LID reachable from
every host, no forwarding loop, and no credit loop.

A **credit loop** is a cycle in the channel dependency graph: an edge from link ``a`` to
link ``b`` when some route enters a switch by ``a`` and leaves it by ``b``. With lossless
links and one virtual lane, the packets on a cycle of such links can each wait for buffer
space the next one holds, for ever (a deadlock). Tables whose graph is acyclic cannot
deadlock; up*/down* routes on a tree never close a cycle. Only the routes some host's
traffic takes count: the entries of switches no host reaches for a LID are never used.

**How.** Every (switch, LID) entry names the next node, or the LID's own port (arrived), or
nothing (a dead end: no entry, port 0 of a switch the LID is not, a port without a cable or
beyond the switch's count, another host). Following these pointers by doubling
(``log2(switches)`` gathers over the whole table) finds for every switch and LID whether
the route arrives, ends, or loops. The used entries are found by marching from the switches
the hosts are cabled to; the dependency edges are their (in-link, out-link) pairs, and a
strongly connected component of more than one link holds a credit loop, which is named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TopologyError
from ..topology.lft import NO_PORT

if TYPE_CHECKING:
    from ..topology import Topology
    from ..topology.lft import ForwardingTables

__all__ = ["TableReport", "check_tables", "dependencies"]


@dataclass(frozen=True)
class TableReport:
    """What :func:`check_tables` found.

    Attributes
    ----------
    source : str
        The tables checked.
    entries : int
        Switches x LIDs.
    bad_ports : int
        Entries naming a port the switch does not have.
    unreachable : int
        (host port, LID) pairs whose route does not arrive (a dead end or a loop).
    looping : int
        (switch, LID) entries whose route comes back to the switch.
    dependencies : int
        Edges of the channel dependency graph of the routes hosts use.
    credit_loop : list of str
        The links of one cycle of that graph, each as the switch and port it leaves by and
        a LID whose route makes it wait for the next (empty: none, the tables are deadlock
        free).
    examples : list of str
        One example of each problem, in words.
    lost : list of str
        Every LID some host's route to does not arrive, one line each: the LID, whose it is,
        how many hosts it fails from, and where the route stops (a dead port, no entry, or a
        loop).
    """

    source: str
    entries: int
    bad_ports: int
    unreachable: int
    looping: int
    dependencies: int
    credit_loop: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    @property
    def deadlock_free(self) -> bool:
        return not self.credit_loop

    @property
    def ok(self) -> bool:
        """Nothing unreachable, no loop of any kind, every port in range."""
        return not (self.bad_ports or self.unreachable or self.looping or self.credit_loop)

    def problems(self) -> list[str]:
        """One line per problem found (none when :attr:`ok`)."""
        lines = list(self.examples)
        if self.credit_loop:
            lines.append(f"a credit loop (a cycle of {len(self.credit_loop)} links in the channel dependency "
                         f"graph, which can deadlock without virtual lanes): " + " -> ".join(self.credit_loop))
        return lines

    def __str__(self) -> str:
        if self.ok:
            return (f"{self.source}: every LID reachable from every host, no forwarding loop, no credit loop "
                    f"({self.dependencies:,} channel dependencies, acyclic)")
        return f"{self.source}: " + "; ".join(self.problems())


def check_tables(topology: Topology, tables: ForwardingTables | None = None) -> TableReport:
    """Check ``tables`` (default the fabric's own) on ``topology`` (module docstring).

    Raises
    ------
    TopologyError
        If the topology is not an InfiniBand fabric or has no tables to check.

    Examples
    --------
    >>> import numpy as np
    >>> from optiq.topology import Topology
    >>> from optiq.topology.ibnet import Fabric
    >>> from optiq.paths import minhop_tables
    >>> src, dst, port = [0, 2, 1, 3, 2, 3, 2, 3], [2, 0, 3, 1, 3, 2, 3, 2], [1, 1, 1, 1, 2, 2, 3, 3]
    >>> fab = Fabric("example", np.array(port), lids=np.array([1, 2, 3, 4]), lid_node=np.array([2, 3, 0, 1]),
    ...              lid_link=np.array([-1, -1, 1, 3]), lid_endpoint=np.array([-1, -1, 0, 1]),
    ...              endpoint_lid=np.array([3, 4]), egress=np.array([0, 2]), descriptions=[""] * 4, lines=[0] * 4,
    ...              lid_guid=np.array([2, 3, 10, 11], dtype=np.uint64), node_guid=np.arange(4, dtype=np.uint64))
    >>> t = Topology("two switches", 4, src, dst, np.ones(8), num_endpoints=2, fabric=fab)
    >>> check_tables(t, minhop_tables(t)).ok
    True
    """
    fabric = topology.fabric
    if fabric is None:
        raise TopologyError(f"{topology.name} is not an InfiniBand fabric (ibnet:FILE)")
    tables = tables or fabric.forwarding
    if tables is None:
        raise TopologyError(f"{topology.name} has no forwarding tables to check (give them with --routes)")
    E = topology.num_endpoints
    S, L = tables.table.shape
    host_links, leaves, per_leaf = _injection(topology)
    bad_ports = unreachable = looping = 0
    bad_example = fail_example = loop_example = ""
    edges = []
    lost: list[str] = []
    for cols in _blocks(S, L):
        step, out, bad = _steps(topology, tables, cols)
        end = _ends(step)
        if bad.any() and not bad_example:
            s, c = np.argwhere(bad)[0]
            c += cols.start
            bad_example = (f"switch {fabric.describe(topology, int(s) + E)} sends LID 0x{int(tables.lids[c]):04x} to "
                           f"port {int(tables.table[s, c])}, and it has {int(fabric.num_ports[int(s) + E])} ports")
        fail = end[leaves] != S
        if fail.any() and not fail_example:
            li, c = np.argwhere(fail)[0]
            sw = int(leaves[li])
            host = int(topology.link_src[host_links[np.flatnonzero(topology.link_dst[host_links] - E == sw)[0]]])
            how = "loops" if end[sw, c] < S else "ends"
            fail_example = (f"LID 0x{int(tables.lids[cols.start + c]):04x} is unreachable from host "
                            f"{topology.endpoint_names[host]}: its route {how} at "
                            f"{_where(topology, tables, step, sw, c, cols.start)}")
        loops = end < S
        if loops.any() and not loop_example:
            sw, c = np.argwhere(loops)[0]
            ring = [int(sw)]
            while ring.count(ring[-1]) < 2:
                ring.append(int(step[ring[-1], c]))
            ring = ring[ring.index(ring[-1]):]  # the loop itself, its first switch again at the end
            names = " -> ".join(_short(topology, v + E) for v in ring)
            loop_example = f"a forwarding loop for LID 0x{int(tables.lids[cols.start + c]):04x}: {names}"
        for c in np.flatnonzero(fail.any(axis=0)).tolist():
            li = np.flatnonzero(fail[:, c])
            sw = int(leaves[li[0]])
            how = "loops at" if end[sw, c] < S else "ends at"
            lost.append(f"LID 0x{int(tables.lids[cols.start + c]):04x}{_owner(topology, tables, cols.start + c)}: "
                        f"unreachable from {int(per_leaf[li].sum())} hosts, its route {how} "
                        f"{_where(topology, tables, step, sw, c, cols.start)}")
        bad_ports += int(bad.sum())
        unreachable += int((fail * per_leaf[:, None]).sum())
        looping += int(loops.sum())
        a, b, why = _dependencies(topology, step, out, leaves)
        edges.append((a, b, why + cols.start))
    examples = [text + note for text, note in (
        (bad_example, f" ({bad_ports:,} such entries)"), (fail_example, f" ({unreachable:,} host-LID pairs unreachable)"),
        (loop_example, f" ({looping:,} switch-LID entries loop)")) if text]
    a, b, why = _unique_edges(topology, *(np.concatenate(x) for x in zip(*edges)))
    deps, cycle = _credit_loop(topology, tables, a, b, why)
    return TableReport(tables.source, S * L, bad_ports, unreachable, looping, deps, cycle, examples, lost)


def _owner(topology: Topology, tables: ForwardingTables, column: int) -> str:
    """`` (host NAME)`` when the LID of ``column`` is a host's port, else ""."""
    fabric = topology.fabric
    assert fabric is not None
    lid = int(tables.lids[column])
    at = np.flatnonzero(fabric.endpoint_lid == lid)
    return f" (host {topology.endpoint_names[int(at[0])]})" if at.size else ""


#: Entries (switches x LIDs) checked at once: the check's memory stays bounded on any fabric.
BLOCK_ENTRIES = 1 << 22


def _blocks(S: int, L: int) -> list[slice]:
    """The LID columns in blocks of about :data:`BLOCK_ENTRIES` entries."""
    size = max(1, BLOCK_ENTRIES // max(S, 1))
    return [slice(start, min(L, start + size)) for start in range(0, L, size)]


def _ends(step: np.ndarray) -> np.ndarray:
    """Where every entry's route ends (S: arrived, S + 1: a dead end, a switch: it loops),
    by doubling: after k rounds each pointer is 2**k hops on."""
    S, L = step.shape
    nxt = np.vstack([step, np.full((1, L), S, dtype=step.dtype), np.full((1, L), S + 1, dtype=step.dtype)])
    cols = np.arange(L)[None, :]
    for _ in range(int(np.ceil(np.log2(S + 2))) + 1):
        nxt = nxt[nxt, cols]
    return nxt[:S]


def _steps(topology: Topology, tables: ForwardingTables,
           cols: slice = slice(None)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the LID columns ``cols``: every entry's next switch (S: arrived, S + 1: a dead
    end), the link it takes (-1: none) and whether it names a port the switch does not have."""
    from .fabric import port_links

    fabric = topology.fabric
    assert fabric is not None
    E = topology.num_endpoints
    T = tables.table[:, cols].astype(np.int32)
    S = T.shape[0]
    links_of = port_links(topology).astype(np.int32)
    ARRIVED, DEAD = S, S + 1
    space = fabric.lid_space
    owner = space.entry[np.searchsorted(space.lids, tables.lids[cols])]
    own_link = fabric.lid_link[owner]                         # the cable into a CA port's LID (-1: a switch LID)
    own_switch = np.where(own_link >= 0, -1, fabric.lid_node[owner] - E)
    rows = np.arange(S)[:, None]
    in_range = (T != NO_PORT) & (T <= fabric.num_ports[E:, None])
    bad = (T != NO_PORT) & ~in_range
    port = np.where(in_range & (T < links_of.shape[1]), T, 0)
    out = np.where(in_range & (T > 0) & (T < links_of.shape[1]), links_of[rows, port], -1)  # the link each entry takes
    head = topology.link_dst[np.maximum(out, 0)]
    step = np.where(out < 0, DEAD, np.where(head >= E, head - E, np.where(out == own_link[None, :], ARRIVED, DEAD)))
    step = np.where((T == 0) & (rows == own_switch[None, :]), ARRIVED, step).astype(np.int32)
    return step, out, bad


def _injection(topology: Topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hosts' cables into switches, the switch rows they enter and how many enter each."""
    E = topology.num_endpoints
    host_links = np.flatnonzero((topology.link_src < E) & (topology.link_dst >= E))
    leaves, per_leaf = np.unique(topology.link_dst[host_links] - E, return_counts=True)
    return host_links, leaves, per_leaf


def dependencies(topology: Topology, tables: ForwardingTables) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The channel dependencies of the routes hosts take through ``tables``: unique edges
    ``a[i] -> b[i]`` (link ids), each with a LID column whose route makes it."""
    _, leaves, _ = _injection(topology)
    parts = []
    for cols in _blocks(*tables.table.shape):
        step, out, _ = _steps(topology, tables, cols)
        a, b, why = _dependencies(topology, step, out, leaves)
        parts.append((a, b, why + cols.start))
    return _unique_edges(topology, *(np.concatenate(x) for x in zip(*parts)))


def _dependencies(topology: Topology, step: np.ndarray, out: np.ndarray,
                  leaves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The dependency edges of one block of columns (repeats left in), with their columns."""
    S, L = step.shape
    used = np.zeros((S, L), dtype=bool)
    used[leaves] = True
    frontier = used.copy()
    for _ in range(S):
        s, c = np.nonzero(frontier)
        nxt = step[s, c]
        onward = nxt < S
        fresh = np.zeros_like(used)
        fresh[nxt[onward], c[onward]] = True
        frontier = fresh & ~used
        used |= fresh
        if not frontier.any():
            break
    s, c = np.nonzero(used)
    nxt = step[s, c]
    keep = nxt < S
    s, c, nxt = s[keep], c[keep], nxt[keep]
    a, b = out[s, c].astype(np.int64), out[nxt, c].astype(np.int64)
    keep = (a >= 0) & (b >= 0)
    return a[keep], b[keep], c[keep]


def _unique_edges(topology: Topology, a: np.ndarray, b: np.ndarray,
                  why: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = topology.num_links
    codes, first = np.unique(a * n + b, return_index=True)
    return codes // n, codes % n, why[first]


def _short(topology: Topology, node: int) -> str:
    """A switch by its description where that is short, else by its name (``S-<guid>``)."""
    fabric = topology.fabric
    assert fabric is not None
    desc = fabric.descriptions[node].strip()
    return desc if desc and len(desc) <= 24 else topology.node_names[node]


def _where(topology: Topology, tables: ForwardingTables, step: np.ndarray, s: int, c: int, start: int) -> str:
    """The switch where the route from switch row ``s`` for column ``c`` of the block of
    ``step`` (from column ``start``) stops going."""
    S, E = step.shape[0], topology.num_endpoints
    seen = []
    while s < S and s not in seen:
        seen.append(s)
        if step[s, c] >= S:
            break
        s = int(step[s, c])
    fabric = topology.fabric
    assert fabric is not None
    port = int(tables.table[seen[-1], start + c])
    return f"switch {fabric.describe(topology, seen[-1] + E)}" + ("" if port == NO_PORT else f" (port {port})")


def _credit_loop(topology: Topology, tables: ForwardingTables, a: np.ndarray, b: np.ndarray,
                 why: np.ndarray) -> tuple[int, list[str]]:
    """How many dependencies there are, and one cycle among them by name."""
    n = topology.num_links
    if not a.size:
        return 0, []
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components
    graph = csr_matrix((np.ones(a.size), (a, b)), shape=(n, n))
    count, label = connected_components(graph, directed=True, connection="strong")
    sizes = np.bincount(label, minlength=count)
    if sizes.max() < 2:
        return int(a.size), []
    comp = int(np.argmax(sizes))
    inside = (label[a] == comp) & (label[b] == comp)
    succ: dict[int, tuple[int, int]] = {}
    for x, y, c in zip(a[inside].tolist(), b[inside].tolist(), why[inside].tolist()):
        succ.setdefault(x, (y, c))
    walk, at = [], int(a[inside][0])
    while at not in walk:
        walk.append(at)
        at = succ[at][0]
    cycle = walk[walk.index(at):]
    fabric = topology.fabric
    assert fabric is not None
    names = [f"{_short(topology, int(topology.link_src[link]))} port {int(fabric.link_port[link])} "
             f"(LID 0x{int(tables.lids[succ[link][1]]):04x})" for link in cycle]
    return int(a.size), names
