"""Forwarding tables for a job: what ``optiq tables`` writes and ``optiq compare`` calls ``tables``.

:func:`job_tables` routes every LID of an InfiniBand fabric by destination, as the switches
must, with the job's bytes spread over the fabric (:mod:`optiq.heuristics.tables`): tables
for every switch and every LID, checked (:func:`optiq.paths.tablecheck.check_tables`) and
ready for OpenSM's ``file`` engine (:func:`optiq.topology.lft.write_forwarding_tables`).

* The job's LIDs are routed for the job; every other LID keeps its port in the given tables
  (the fabric's own, ``routes=``, else OpenSM minhop's) wherever that port is on a legal
  up*/down* route, else takes the least busy one. Nothing is dropped.
* The tables are up*/down*: they cannot close a credit loop. On a fabric where the shortest
  routes must close one (a torus), the result says so with the loop named, and
  ``allow_credit_loops=True`` routes on shortest routes instead (the operator then owes
  the virtual lanes that break the loops).
* A permutation on a full-bisection fat-tree is routed stage by stage as a Clos network
  (:mod:`optiq.heuristics.clos`): no link carries two pairs. Where a gap to
  :func:`single_path_bound` is left and the fabric is small, the integer program of
  :func:`optiq.planner.exact_tables` is solved, within a number of nodes.
* If the given tables carry the job faster and are themselves safe, they are kept.
* ``lmc=True`` on a fabric routed at LMC = L > 0: each destination's ``2**L`` LIDs get
  trees of their own (the pairs' bytes split evenly to start), and the job's bytes are split
  over them by the max-throughput LP over those routes (:func:`optiq.lp.solve_lp`); then
  trees for that split and the LP's split for those trees, while the busiest link drops (at
  most :data:`LMC_ROUNDS` times). The split is the plan of which LID each pair sends how
  many bytes to (:meth:`JobTables.write_split`).
"""

from __future__ import annotations

import csv
import time
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import OptiqError, PathError, PlanError, TopologyError
from ..heuristics.clos import clos_routes
from ..heuristics.tables import REROUTE_ROUNDS, ColumnTraffic, TreeRouter
from ..lp import LPStatus, cut_lower_bound, round_to_bytes, solve_lp
from ..paths import FREE, PathSet, forwarding_routes, minhop_tables
from ..paths.tablecheck import TableReport, check_tables
from ..topology.lft import ForwardingTables, write_forwarding_tables
from ..utils.resources import peak_memory_mib
from .exact_tables import SEARCH_ROUNDS

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..plan import Plan
    from ..topology import Topology
    from ..topology.ibnet import Fabric
    from ..workloads import Demands
    from .exact_tables import ExactTables

__all__ = ["JobTables", "job_tables", "with_tables", "tables_bound", "single_path_bound", "host_cable_bound",
           "split_plan"]

#: Rounds of the LMC split: trees for the split, then the LP's split for the trees.
LMC_ROUNDS = 3
#: The exact program runs after the heuristic where it has at most this many variables...
EXACT_ROUTES = 2_000
#: ... within this many branch-and-bound nodes (work, not seconds: the same tables on any machine).
EXACT_NODES = 1_000


@dataclass
class JobTables:
    """Tables made for a job, and what they are worth.

    Attributes
    ----------
    topology : Topology
        The fabric with the given tables.
    demands : Demands
    tables, given : ForwardingTables
        The new tables and the ones they replace.
    time_s, given_time_s : float
        The job's busiest link (seconds) on the new tables (with the split when ``lmc``) and
        on the given ones.
    report, given_report : TableReport
        The checks of both (:func:`optiq.paths.tablecheck.check_tables`).
    kept_given : bool
        The given tables were as fast and safe: they are the result.
    minimal_credit_loop : list of str
        On a fabric whose shortest routes close credit loops: one such loop (the tables use
        longer up*/down* routes instead, or, with ``allow_credit_loops``, close it).
    longer_routes : float
        Fraction of switch pairs whose legal route is longer than the shortest.
    changed : int
        Entries (switch, LID) that differ from the given tables.
    split : ndarray, optional
        With ``lmc``: ``split[j, k]`` bytes of job ``j`` sent to its destination's base LID + k.
    bound_s : float
        A lower bound on the busiest link of any tables for this job (:func:`single_path_bound`
        without ``lmc``, the cut bound of any plan with it).
    seconds, memory_mib : float
        Time to make them, and the process's peak memory after.
    exact : ExactTables, optional
        Where the integer program over every pair's legal shortest routes ran: its best tables'
        busiest link and its proven bound (over tables on those routes).
    """

    topology: Topology
    demands: Demands
    tables: ForwardingTables
    given: ForwardingTables
    time_s: float
    given_time_s: float
    report: TableReport
    given_report: TableReport
    kept_given: bool
    longer_routes: float
    changed: int
    minimal_credit_loop: list[str] = field(default_factory=list)
    split: np.ndarray | None = None
    bound_s: float = 0.0
    seconds: float = 0.0
    memory_mib: float = 0.0
    exact: ExactTables | None = None

    def __repr__(self) -> str:
        return (f"JobTables({self.topology.name!r}, busiest link {self.time_s * 1e3:.4g} ms, given "
                f"{self.given_time_s * 1e3:.4g} ms, {self.changed:,} entries changed, "
                f"{'deadlock free' if self.report.deadlock_free else 'CREDIT LOOP'})")

    @property
    def gap(self) -> float:
        """How far the busiest link is above :attr:`bound_s`, as a fraction of it (0: optimal)."""
        return max(0.0, (self.time_s - self.bound_s) / self.time_s) if self.bound_s and self.time_s > 0 else 0.0

    def warnings(self) -> list[str]:
        """What an operator must know before loading the tables: the given tables' problems,
        credit loops of the shortest routes (these tables take longer ones) or of these tables."""
        out = [f"the given tables: {line}" for line in self.given_report.problems()]
        if self.minimal_credit_loop:
            out.append(f"shortest routes on this fabric close credit loops (for instance "
                       f"{' -> '.join(self.minimal_credit_loop)}); these tables take up*/down* routes, longer for "
                       f"{self.longer_routes:.1%} of the routes from hosts' switches to switches; --allow-credit-loops "
                       f"takes the shortest routes (the fabric then needs virtual lanes that break the loops)")
        if self.report.credit_loop:
            out.append(f"--allow-credit-loops: the tables close a credit loop: {' -> '.join(self.report.credit_loop)}; "
                       f"load them only where virtual lanes break it (OpenSM's dfsssp or torus-2QoS with their "
                       f"SL-to-VL tables)")
        return out

    def as_dict(self) -> dict[str, object]:
        """The figures of the report: busiest link on these tables, on the given ones, the bound."""
        given = self.given_time_s if np.isfinite(self.given_time_s) else None  # None: they do not carry the job
        exact = None if self.exact is None else {"time_s": self.exact.time_s, "bound_s": self.exact.bound_s,
                                                  "optimal": self.exact.optimal, "variables": self.exact.variables}
        return {"time_s": self.time_s, "given_s": given, "bound_s": self.bound_s, "gap": self.gap,
                "changed": self.changed, "kept_given": self.kept_given, "seconds": self.seconds, "exact": exact}

    def __str__(self) -> str:
        fabric = self.topology.fabric
        lmc = fabric.lmc if fabric is not None else 0
        lids = self.tables.lids.size
        lines = [f"{self.topology.name}: {lids:,} LIDs" + (f" (LMC {lmc})" if lmc else "")
                 + f"; given tables: {self.given.source}",
                 (f"the job's busiest link: given tables {self.given_time_s * 1e3:.4f} ms, job tables "
                  f"{self.time_s * 1e3:.4f} ms ({self.gain:.2f}x)" if np.isfinite(self.given_time_s) else
                  f"the job's busiest link: {self.time_s * 1e3:.4f} ms on the job tables; the given tables do not "
                  f"carry the job (they route some of its pairs into a dead end)")
                 + (", the given tables kept" if self.kept_given else "")]
        if self.exact is not None:
            e = self.exact
            lines.append(f"the integer program over every pair's legal shortest routes: best tables "
                         f"{e.time_s * 1e3:.4f} ms, " + ("proven optimal among them" if e.optimal else
                                                          f"proven bound {e.bound_s * 1e3:.4f} ms")
                         + ("; these are as good" if self.time_s <= e.time_s * (1 + 1e-9) else ""))
        if self.bound_s:
            where = "optimal" if self.gap <= 1e-9 else f"{self.gap:.2%} above it"
            lines.append(f"no tables of one LID per port can do better than {self.bound_s * 1e3:.4f} ms (each pair on "
                         f"one path, a destination's pairs on one tree): these are {where}" + ("" if self.gap <= 1e-9 or lmc == 0 else
                                                            "; --lmc splits pairs over each destination's LIDs"))
        lines.append(f"checks: {self.report}")
        lines.append(f"{self.changed:,} of {self.tables.table.size:,} entries changed ({self.tables.table.shape[0]} "
                     f"switches x {lids:,} LIDs), made in {self.seconds:.1f} s, peak memory {self.memory_mib:.0f} MiB")
        return "\n".join(lines)

    @property
    def gain(self) -> float:
        """The given tables' busiest link over the new tables'."""
        return self.given_time_s / self.time_s if self.time_s > 0 else 1.0

    def write(self, path: str | Path) -> None:
        """The tables for OpenSM's ``file`` engine (``opensm -R file,no_fallback -U PATH``: without
        ``no_fallback`` OpenSM routes minhop instead when the file is wrong, and says nothing)."""
        write_forwarding_tables(self.tables, self.topology, path)

    def write_split(self, path: str | Path) -> None:
        """With ``lmc``: ``src,dst,lid,bytes`` lines, which LID of its destination each pair
        sends how many of its bytes to (hosts by name, LIDs in hex)."""
        if self.split is None:
            raise PlanError("the tables were made without lmc: every pair sends to its destination's base LID")
        fabric = self.topology.fabric
        assert fabric is not None
        names, d = self.topology.endpoint_names, self.demands
        with open(path, "w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["src", "dst", "lid", "bytes"])
            for j, k in zip(*np.nonzero(self.split)):
                out.writerow([names[d.src[j]], names[d.dst[j]], f"0x{int(fabric.endpoint_lid[d.dst[j]]) + int(k):04x}",
                              int(self.split[j, k])])

    def plan(self) -> Plan:
        """The job as the new tables route it: a plan on the fabric with them, one path per pair
        (forwarded: the tables' own routes), or with the split one per pair and LID (free: it
        holds when each sender picks the LIDs as the split says)."""
        from .make import make_plan

        routed = with_tables(self.topology, self.tables)
        plan = make_plan(routed, self.demands, "default") if self.split is None else \
            split_plan(routed, self.demands, self.split)
        plan.method = "tables"
        return plan


def split_plan(topology: Topology, demands: Demands, split: np.ndarray) -> Plan:
    """The job on the fabric's own tables, each pair's bytes over its destination's LIDs as
    ``split`` says (``split[j, k]``: bytes of job ``j`` to the base LID + ``k``, as
    :func:`optiq.workloads.read_split` reads them).

    A pair's LIDs other than the base are not the route MPI takes by default: the split is
    realized by the sender choosing the LID (e.g. ``UCX_IB_LID_PATH_BITS``), so the plan is
    free (``default`` by method: the network's own routes, nothing planned).
    """
    from .make import make_plan

    fabric = topology.fabric
    if fabric is None or fabric.forwarding is None:
        raise TopologyError(f"a split over LIDs needs a fabric with its forwarding tables (--routes), not {topology.name}")
    if split.shape != (demands.num_jobs, 1 << fabric.lmc):
        raise PlanError(f"the split is for {split.shape[0]} jobs and {split.shape[1]} LIDs per port; the workload "
                        f"has {demands.num_jobs} jobs and the fabric {1 << fabric.lmc} LIDs per port")
    plan = make_plan(topology, demands, "default")
    paths, offset = _lid_routes(topology, demands, fabric.forwarding, split.shape[1])
    nbytes = split[paths.job, offset]
    keep = nbytes > 0
    return replace(plan, paths=paths.select(keep), path_bytes=nbytes[keep].astype(np.int64), routing=FREE)


def with_tables(topology: Topology, tables: ForwardingTables, spec: str | None = None) -> Topology:
    """``topology`` routed by ``tables`` instead of its own (``spec``: how to build it again,
    e.g. with ``routes=`` the file the tables were written to)."""
    if topology.fabric is None:
        raise TopologyError(f"{topology.name} is not an InfiniBand fabric")
    given = topology.spec
    if given is not None and topology.ecmp_seed is not None:  # the tables route it, not a hash
        given = given.replace(f",routes=ecmp:{topology.ecmp_seed}", "")
    return replace(topology, fabric=topology.fabric.with_forwarding(tables), spec=spec or given, ecmp_seed=None)


def _lid_routes(topology: Topology, demands: Demands, tables: ForwardingTables, lids: int) -> tuple[PathSet, np.ndarray]:
    """Every job's route to each of its destination's first ``lids`` LIDs, grouped by job,
    and the LID offset of every path."""
    parts = [forwarding_routes(topology, demands, tables, lid_offset=np.full(demands.num_jobs, k)) for k in range(lids)]
    paths, order = PathSet.concat(parts)
    return paths, np.repeat(np.arange(lids), demands.num_jobs)[order]


def _busiest(topology: Topology, paths: PathSet, nbytes: np.ndarray) -> float:
    return paths.busiest_link_time(nbytes, topology.capacity)


def job_tables(topology: Topology, demands: Demands, *, lmc: bool = False, allow_credit_loops: bool = False,
               rounds: int = REROUTE_ROUNDS, exact_routes: int = EXACT_ROUTES, search_rounds: int = SEARCH_ROUNDS,
               progress: Callable[[str], None] | None = None) -> JobTables:
    """Forwarding tables that carry ``demands`` on ``topology``'s fabric with the least busy
    busiest link (module docstring).

    Parameters
    ----------
    topology : Topology
        An InfiniBand fabric (``ibnet:FILE``, with ``routes=`` its tables; else OpenSM minhop's
        are the given ones).
    demands : Demands
    lmc : bool
        Route each destination's ``2**L`` LIDs on trees of their own and split the pairs'
        bytes over them (the fabric must be routed at LMC L > 0).
    allow_credit_loops : bool
        Shortest routes even where they close credit loops.
    rounds : int
        Rounds of rip-up and reroute.
    exact_routes : int
        Where the tables are above :func:`single_path_bound` after that, solve the integer
        program of :func:`optiq.planner.exact_tables` if it has at most this many (pair,
        route) variables (``0``: never), within :data:`EXACT_NODES` branch-and-bound nodes.
    search_rounds : int
        Where a gap is left after that (and the program did not prove its tables optimal),
        rounds of the large neighbourhood search of :func:`optiq.planner.exact_tables.search_tables`
        (``0``: none): the destinations of the busiest link's pairs routed again by the
        integer program around the rest.
    progress : callable, optional

    Returns
    -------
    JobTables

    Raises
    ------
    TopologyError
        If the topology is not a fabric, or ``lmc`` on a fabric at LMC 0.
    OptiqError
        If the tables made have a credit loop and ``allow_credit_loops`` is not set (up*/down*
        routes have none; only the way around for a host's switch that no such route leads
        from to a switch's own LID can close one), or a LID is unreachable.
    """
    start = time.perf_counter()
    fabric = topology.fabric
    if fabric is None:
        raise TopologyError(f"forwarding tables are for InfiniBand fabrics (ibnet:FILE), not {topology.name}")
    demands.check_against(topology)
    if lmc and fabric.lmc == 0:
        raise TopologyError(f"{fabric.source} is routed at LMC 0 (one LID per port): route it with LMC > 0 "
                            f"(opensm -l 2) and discover it again to give each destination several LIDs")
    say = progress or (lambda message: None)
    given = fabric.forwarding or minhop_tables(topology, progress=progress)
    given_report = _checked(topology, given)
    try:
        given_routes = forwarding_routes(topology, demands, given)
        given_time = _busiest(topology, given_routes, demands.nbytes.astype(float))
        say(f"given tables ({given.source}): the job's busiest link {given_time * 1e3:.4f} ms")
    except PathError as exc:  # tables of a fabric that lost a cable since: the job's LIDs are routed anew
        given_time = float("inf")
        say(f"given tables ({given.source}) do not carry the job: {exc}")
    router = TreeRouter(topology, minimal=allow_credit_loops)
    longer = 0.0 if allow_credit_loops else router.longer_than_minimal
    minimal_loop: list[str] = []
    if longer > 0:
        shortest = TreeRouter(topology, minimal=True)
        trial = shortest.route([], given=given, base_load=np.zeros(topology.num_links))
        minimal_loop = check_tables(topology, given.with_table(trial.table, "shortest routes")).credit_loop
    E = topology.num_endpoints
    entry_switch = topology.link_dst[fabric.egress[demands.src]] - E
    base_load = np.bincount(fabric.egress[demands.src], weights=demands.nbytes.astype(float),
                            minlength=topology.num_links)
    lids = (1 << fabric.lmc) if lmc else 1
    share = np.full((demands.num_jobs, lids), 1.0 / lids)
    best: tuple[float, np.ndarray, np.ndarray | None] | None = None
    exact = None
    # any tables are routes, so the cut bound holds for them too
    bound = tables_bound(topology, demands) if not lmc else 0.0
    clos = None if lmc else clos_routes(topology, demands)  # where it applies, rip-up and reroute is not needed
    for _ in range(LMC_ROUNDS if lmc else 1):
        traffic = _column_traffic(fabric, demands, entry_switch, share, given)
        routes = router.route(traffic, given=given, base_load=base_load, rounds=0 if clos else rounds, floor=bound,
                              progress=progress)
        tables = given.with_table(routes.table, "job tables")
        if not lmc:
            best = (routes.busiest_s(topology.capacity), routes.table, None)
            if best[0] > bound * (1 + 1e-9):
                with_clos = _with_routes(topology, demands, given, best, clos, say,
                                         "the permutation routed stage by stage as a Clos network")
                if with_clos is best and clos:  # not taken after all: the rounds it skipped
                    routes = router.route(traffic, given=given, base_load=base_load, rounds=rounds, floor=bound,
                                          progress=progress)
                    with_clos = (routes.busiest_s(topology.capacity), routes.table, None)
                best = with_clos
            if best[0] > bound * (1 + 1e-9) and exact_routes > 0:
                best, exact = _with_exact_routes(topology, demands, given, best, exact_routes, say)
            if best[0] > bound * (1 + 1e-9) and search_rounds > 0 and not (exact is not None and exact.optimal):
                best = _with_search(topology, demands, given, best, search_rounds, say, progress)
            break
        paths, offset = _lid_routes(topology, demands, tables, lids)
        say(f"LMC split: the LP over {paths.num_paths:,} routes ({lids} LIDs per destination)")
        sol = solve_lp(topology, demands, paths)
        if sol.status not in (LPStatus.OPTIMAL, LPStatus.TIME_LIMIT):
            raise OptiqError("HiGHS did not solve the LMC split")
        nbytes = round_to_bytes(paths, demands, sol.share)
        lid_bytes = np.zeros((demands.num_jobs, lids))
        np.add.at(lid_bytes, (paths.job, offset), nbytes)
        t = _busiest(topology, paths, nbytes.astype(float))
        say(f"LMC split: busiest link {t * 1e3:.4f} ms")
        if best is not None and t >= best[0] * (1 - 1e-6):
            break  # the split's trees did no better
        best = (t, routes.table, lid_bytes)
        share = lid_bytes / np.maximum(demands.nbytes[:, None], 1)
    assert best is not None
    time_s, table, split = best
    tables = given.with_table(table, "job tables")
    report = _checked_table(topology, tables)
    kept = False
    if time_s > given_time * (1 + 1e-9) and given_report.ok and not lmc:
        tables, time_s, report, kept = given, given_time, given_report, True
        say("the given tables carry the job as fast: kept")
    if report.credit_loop and not allow_credit_loops:
        raise OptiqError(f"no tables without a credit loop were found: the routes from hosts' switches to switches "
                         f"they reach by no up*/down* route close one ({'; '.join(report.problems())}); "
                         f"--allow-credit-loops writes them (the fabric then needs virtual lanes that break it)")
    if report.unreachable or report.looping or report.bad_ports:
        raise OptiqError(f"the tables made do not reach every LID: {'; '.join(report.problems())}")
    changed = int((tables.table != given.table).sum())
    return JobTables(topology, demands, tables, given, time_s, given_time, report, given_report, kept, longer,
                     changed, minimal_loop, split, bound, time.perf_counter() - start, peak_memory_mib(), exact)


#: The check of tables given again (``id`` -> (the tables, their topology, the report)): the
#: cluster's tables make tables for every job from the same given ones.
_CHECKED: dict[int, tuple[weakref.ref[ForwardingTables], weakref.ref[Topology], TableReport]] = {}


def _checked(topology: Topology, tables: ForwardingTables) -> TableReport:
    """:func:`~optiq.paths.tablecheck.check_tables` of ``tables``, once per tables object."""
    kept = _CHECKED.get(id(tables))
    if kept is not None and kept[0]() is tables and kept[1]() is topology:
        return kept[2]
    report = check_tables(topology, tables)
    for key in [k for k, (t, g, _) in _CHECKED.items() if t() is None or g() is None]:
        del _CHECKED[key]
    _CHECKED[id(tables)] = (weakref.ref(tables), weakref.ref(topology), report)
    return report


#: The last few tables checked by content (digest of the table, the topology, the report): the
#: tables a step makes are checked there and again as the job's tables.
_CHECKED_TABLES: list[tuple[bytes, weakref.ref[Topology], TableReport]] = []


def _checked_table(topology: Topology, tables: ForwardingTables) -> TableReport:
    """:func:`~optiq.paths.tablecheck.check_tables` of ``tables``, once per table content."""
    import hashlib

    hashed = hashlib.blake2b(np.ascontiguousarray(tables.table).tobytes(), digest_size=20)
    hashed.update(np.ascontiguousarray(tables.lids).tobytes())
    digest = hashed.digest()
    for key, topo, report in _CHECKED_TABLES:
        if key == digest and topo() is topology:
            return report
    report = check_tables(topology, tables)
    _CHECKED_TABLES[:] = [*_CHECKED_TABLES[-3:], (digest, weakref.ref(topology), report)]
    return report


def _with_exact_routes(topology: Topology, demands: Demands, given: ForwardingTables,
                       best: tuple[float, np.ndarray, np.ndarray | None], max_routes: int,
                       say: Callable[[str], None]) -> tuple[tuple[float, np.ndarray, np.ndarray | None],
                                                             ExactTables | None]:
    """The tables of the integer program (:func:`optiq.planner.exact_tables`) where it has at
    most ``max_routes`` variables, within :data:`EXACT_NODES` nodes, if faster; and what the
    program found (None: too big)."""
    from .exact_tables import exact_tables

    try:
        exact = exact_tables(topology, demands, time_limit=None, max_routes=max_routes, node_limit=EXACT_NODES)
    except OptiqError:
        return best, None
    what = "the integer program over every pair's legal routes" + ("" if exact.optimal else " (not proven optimal)")
    return _with_routes(topology, demands, given, best, exact.routes, say, what), exact


def _with_search(topology: Topology, demands: Demands, given: ForwardingTables,
                 best: tuple[float, np.ndarray, np.ndarray | None], search_rounds: int, say: Callable[[str], None],
                 progress: Callable[[str], None] | None) -> tuple[float, np.ndarray, np.ndarray | None]:
    """The tables of the neighbourhood search from ``best``'s routes, if faster."""
    from .exact_tables import search_tables

    E = topology.num_endpoints
    paths = forwarding_routes(topology, demands, given.with_table(best[1], "job tables"))
    inner = (topology.link_src[paths.links] >= E) & (topology.link_dst[paths.links] >= E)
    starts = paths.offsets
    routes = [paths.links[starts[p]:starts[p + 1]][inner[starts[p]:starts[p + 1]]] for p in range(paths.num_paths)]
    found = search_tables(topology, demands, routes, rounds=search_rounds, progress=progress)
    return _with_routes(topology, demands, given, best, found, say, "the neighbourhood search over the busiest links")


def _with_routes(topology: Topology, demands: Demands, given: ForwardingTables,
                 best: tuple[float, np.ndarray, np.ndarray | None], routes: list[np.ndarray] | None,
                 say: Callable[[str], None], what: str) -> tuple[float, np.ndarray, np.ndarray | None]:
    """The tables with every pair's LID column set along its route (one route per job, link
    ids from host to host), if they are faster and pass the checks; else ``best`` as it is."""
    if routes is None:
        return best
    fabric = topology.fabric
    assert fabric is not None
    E = topology.num_endpoints
    table = best[1].copy()
    column = fabric.lid_space.columns(fabric.endpoint_lid[demands.dst])
    lengths = np.array([r.size for r in routes])
    links = np.concatenate(routes) if routes else np.zeros(0, dtype=np.int64)
    cols = np.repeat(column, lengths)
    on_switch = topology.link_src[links] >= E
    table[topology.link_src[links[on_switch]] - E, cols[on_switch]] = fabric.link_port[links[on_switch]]
    tables = given.with_table(table, "job tables")
    report = _checked_table(topology, tables)
    if not (report.ok and report.deadlock_free):
        return best
    time_s = _busiest(topology, forwarding_routes(topology, demands, tables), demands.nbytes.astype(float))
    if time_s >= best[0]:
        return best
    say(f"job tables: {what}: busiest link {time_s * 1e3:.4f} ms")
    return time_s, table, None


def tables_bound(topology: Topology, demands: Demands) -> float:
    """The lower bound :func:`job_tables` reports: the most of :func:`single_path_bound` and
    the cut bound (:func:`optiq.lp.cut_lower_bound`; tables are routes, so it holds for them)."""
    return max(single_path_bound(topology, demands), cut_lower_bound(topology, demands).time_s)


def single_path_bound(topology: Topology, demands: Demands) -> float:
    """A lower bound on the busiest link of any destination-based tables with one LID per
    port: each pair on one path, and the pairs to one destination on one tree.

    Every pair between two switches crosses one of the links out of its source's switch and
    one of the links into its destination's switch, whole. And the pairs from one switch to
    one destination go together: that switch has one port for the destination's LID, and from
    there on their route is one, so they count as one piece on both sides. Where a switch's
    pieces all have one size, placing them one by one on the link they would finish earliest
    on is optimal (identical jobs on machines of different speeds), so that finish is a bound;
    where the sizes differ, the bound is the largest piece on the fastest link or the bytes
    over the links' total capacity, whichever is more. And every host's own cable carries all
    it sends and all it receives (:func:`host_cable_bound`).

    Examples
    --------
    >>> from optiq.topology import Topology
    >>> from optiq.workloads import Demands
    >>> # hosts 0, 1 on switch 4, hosts 2, 3 on switch 5, one cable between the switches
    >>> t = Topology("two leaves", 6, [0, 4, 1, 4, 2, 5, 3, 5, 4, 5], [4, 0, 4, 1, 5, 2, 5, 3, 5, 4], [1.0] * 10,
    ...              num_endpoints=4)
    >>> single_path_bound(t, Demands([0, 1], [2, 3], [1, 1]))  # both pairs cross the one cable
    2.0
    """
    import heapq

    E = topology.num_endpoints
    cap = topology.capacity
    host_out = np.flatnonzero(topology.link_src < E)
    leaf_of = np.full(E, -1)
    leaf_of[topology.link_src[host_out]] = topology.link_dst[host_out]
    bound = host_cable_bound(topology, demands)
    # one piece per (source's switch, destination): its pairs share every link from that switch on
    cross = leaf_of[demands.src] != leaf_of[demands.dst]
    keys, piece = np.unique(np.stack([leaf_of[demands.src][cross], demands.dst[cross]]), axis=1,
                            return_inverse=True)
    piece_bytes = np.bincount(piece.ravel(), weights=demands.nbytes[cross].astype(float), minlength=keys.shape[1])
    for side, leaf in (("out", keys[0]), ("in", leaf_of[keys[1]])):
        for sw in np.unique(leaf):
            mine = piece_bytes[leaf == sw]
            links = np.flatnonzero((topology.link_src == sw) & (topology.link_dst >= E)) if side == "out" else \
                np.flatnonzero((topology.link_dst == sw) & (topology.link_src >= E))
            c = cap[links]
            if (mine == mine[0]).all():
                heap = [(mine[0] / x, 1, x) for x in c]
                heapq.heapify(heap)
                worst = 0.0
                for _ in range(mine.size):
                    t, n, x = heapq.heappop(heap)
                    worst = max(worst, float(t))
                    heapq.heappush(heap, ((n + 1) * mine[0] / x, n + 1, x))
            else:
                worst = float(max(mine.max() / c.max(), mine.sum() / c.sum()))
            bound = max(bound, worst)
    return bound


def host_cable_bound(topology: Topology, demands: Demands) -> float:
    """The busiest host cable's time, a bound no routing beats: every byte a host sends leaves
    by its cable (a fabric's host: the port it sends from) and every byte it receives comes in
    by its cable (the port of the LID it is addressed by), each at that cable's rate. On other
    networks a host's cables count together.

    Examples
    --------
    >>> from optiq.topology import kary_ntree
    >>> from optiq.workloads import Demands
    >>> host_cable_bound(kary_ntree(2, 2, bandwidth=1.0), Demands([0, 1, 3], [2, 2, 2], [1, 1, 1]))   # 3 into host 2
    3.0
    """
    E, cap = topology.num_endpoints, topology.capacity
    sent = np.bincount(demands.src, weights=demands.nbytes.astype(float), minlength=E)
    got = np.bincount(demands.dst, weights=demands.nbytes.astype(float), minlength=E)
    fabric = topology.fabric
    if fabric is not None:
        row = {int(lid): i for i, lid in enumerate(fabric.lids.tolist()) if lid > 0}
        into = fabric.lid_link[[row[int(lid)] for lid in fabric.endpoint_lid.tolist()]]
        out_cap, in_cap = cap[fabric.egress], np.where(into >= 0, cap[np.maximum(into, 0)], np.inf)
    else:
        ups = topology.link_src < E
        downs = topology.link_dst < E
        out_cap = np.bincount(topology.link_src[ups], weights=cap[ups], minlength=E)
        in_cap = np.bincount(topology.link_dst[downs], weights=cap[downs], minlength=E)
    with np.errstate(divide="ignore", invalid="ignore"):
        times = np.concatenate((np.where(sent > 0, sent / out_cap, 0.0), np.where(got > 0, got / in_cap, 0.0)))
    return float(times.max(initial=0.0))


def _column_traffic(fabric: Fabric, demands: Demands, entry_switch: np.ndarray, share: np.ndarray,
                    given: ForwardingTables) -> list[ColumnTraffic]:
    """The job's bytes per LID column, where they enter (each pair's share of each LID)."""
    space = fabric.lid_space
    cols, switches, nbytes = [], [], []
    for k in range(share.shape[1]):
        column = space.columns(fabric.endpoint_lid[demands.dst] + k)
        cols.append(column)
        switches.append(entry_switch)
        nbytes.append(demands.nbytes * share[:, k])
    col, sw, b = np.concatenate(cols), np.concatenate(switches), np.concatenate(nbytes)
    keep = b > 0
    col, sw, b = col[keep], sw[keep], b[keep]
    order = np.argsort(col, kind="stable")
    col, sw, b = col[order], sw[order], b[order]
    bounds = np.flatnonzero(np.diff(col)) + 1
    return [ColumnTraffic(int(c[0]), s, x) for c, s, x in
            zip(np.split(col, bounds), np.split(sw, bounds), np.split(b, bounds)) if c.size]
