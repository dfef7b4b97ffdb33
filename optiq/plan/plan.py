"""The :class:`Plan`: jobs, their paths, where each path stops, and whole bytes per path;
versioned JSON files.

The file format is documented in ``docs/plan-format.md``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from dataclasses import InitVar, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OptiqError, PlanError
from ..paths import FORWARDED, FREE, ROUTINGS, PathSet
from ..paths.checks import check_paths, repeats
from ..paths.routing import (
    every_node_a_rank,
    every_rank_stops,
    forwarded_stops,
    misrouted_legs,
    network_routes,
    realized_time,
)
from ..topology import Topology, from_spec
from ..utils.jsonfile import write_json
from ..utils.units import MAX_BYTES
from ..workloads import Demands
from .record import PlanRecord

__all__ = ["Plan", "load_plan", "PLAN_FORMAT", "PLAN_VERSION", "DEFAULT_CHUNK_SIZE"]

PLAN_FORMAT = "optiq-plan"
PLAN_VERSION = 2
#: Versions :func:`load_plan` reads (version 1: no stops, read as a free plan stopping at every rank).
READABLE_VERSIONS = (1, 2)
#: 64 KiB, the chunk size of the OPTIQ Blue Gene/Q runs (8 MiB / 64 KiB = 128 chunks per path).
DEFAULT_CHUNK_SIZE = 64 * 1024


@dataclass(eq=False)
class Plan:
    """How every job's bytes are split over paths.

    Attributes
    ----------
    topology : Topology
    demands : Demands
    paths : PathSet
        The paths of the plan, grouped by job, with the ranks each stops at
        (``paths.stops``: the executor receives and sends on every chunk there).
    path_bytes : ndarray of int
        Bytes on every path; per job they sum exactly to the demand.
    chunk_size : int
        Bytes per chunk when the executor forwards data along a path.
    method : str
        The planner that made it (``opt``, ``lp``, ``heu1``, ``heu2``, ``dynamic``, ``default``).
    lower_bound_time_s : float
        A proven lower bound on the completion time of any plan for these demands.
    lower_bound_cut : str
        Where that bound comes from.
    ranks : ndarray of int
        MPI rank of every endpoint (default: endpoint ``i`` is rank ``i``).
    record : PlanRecord
        What the planner did (its parameters, the solver's outcome, warnings, timings);
        the file's ``info`` object (:attr:`info`).
    routing : {"forwarded", "free"}
        How the paths reach the wire (:mod:`optiq.paths.routing`): ``forwarded``, every leg
        between two stops is the network's own route, checked here, so the plan holds on
        the network as it routes; ``free``, the network must route every path as planned
        (an upper bound on what such a network could do; :attr:`realized_time_s` says what
        one that routes by its own rule would do).
    check_legs : bool
        Check that a forwarded plan's legs are the network's routes (default). Off only for
        plans derived from one already checked (a subset, or the rank-level plan of
        :mod:`optiq.runtime.ranklevel`, whose network is a model of the real one).
    check_paths : bool
        Check the paths' structure (:func:`optiq.paths.checks.check_paths`; default). Off only
        where every path was checked against these pairs before: a plan over the candidates
        kept for its pairs, whose paths are checked the first time a plan uses them
        (:meth:`optiq.paths.space.PathSpace.finish_used`).

    Raises
    ------
    PlanError
        If the plan is inconsistent (see :meth:`validate`).
    """

    topology: Topology
    demands: Demands
    paths: PathSet
    path_bytes: np.ndarray
    chunk_size: int = DEFAULT_CHUNK_SIZE
    method: str = "custom"
    lower_bound_time_s: float = 0.0
    lower_bound_cut: str = ""
    ranks: np.ndarray = None  # type: ignore[assignment]  # None: endpoint i is rank i (set in __post_init__)
    record: PlanRecord = field(default_factory=PlanRecord)
    routing: str = FORWARDED
    check_legs: InitVar[bool] = True
    check_paths: InitVar[bool] = True

    @property
    def info(self) -> dict[str, Any]:
        """The record as the plan file's ``info`` object (a new dict: change :attr:`record`)."""
        return self.record.to_dict()

    def __post_init__(self, check_legs: bool, check_paths: bool) -> None:
        self.path_bytes = np.asarray(self.path_bytes, dtype=np.int64)
        if self.ranks is None:
            self.ranks = np.arange(self.topology.num_endpoints)
        self.ranks = np.asarray(self.ranks, dtype=np.int64)
        self.validate(legs=check_legs, paths=check_paths)

    def __repr__(self) -> str:
        return (f"Plan(method={self.method!r}, routing={self.routing!r}, topology={self.topology.name!r}, "
                f"jobs={self.demands.num_jobs}, paths={self.paths.num_paths}, "
                f"predicted_time_s={self.predicted_time_s:.6g}, lower_bound_time_s={self.lower_bound_time_s:.6g})")

    # -- checks -----------------------------------------------------------------------
    def validate(self, *, legs: bool = True, paths: bool = True) -> None:
        """Check the plan against its topology and demands.

        Raises
        ------
        PlanError
            If a path does not run from its job's source to its destination over existing
            links, bytes are negative, or a job's bytes do not sum to its demand; if a free
            path revisits a node, a path stops at a node that is not a rank or at one rank
            twice, or (with ``legs``) a leg of a forwarded path is not the network's route
            between its stops; or the chunk size, rank map or routing is invalid. Without
            ``paths``, what :func:`optiq.paths.checks.check_paths` checks is taken as checked.
        """
        topo, dem, ps = self.topology, self.demands, self.paths
        if self.routing not in ROUTINGS:
            raise PlanError(f"routing must be one of {', '.join(ROUTINGS)}, got {self.routing!r}")
        if self.chunk_size < 1:
            raise PlanError(f"chunk size must be a positive number of bytes, got {self.chunk_size}")
        if ps.num_jobs != dem.num_jobs:
            raise PlanError(f"the paths are for {ps.num_jobs} jobs but the plan has {dem.num_jobs}")
        if self.path_bytes.shape != (ps.num_paths,):
            raise PlanError(f"{self.path_bytes.size} byte counts for {ps.num_paths} paths")
        try:
            dem.check_against(topo)
        except OptiqError as exc:
            raise PlanError(str(exc)) from None
        if self.ranks.shape != (topo.num_endpoints,) or (self.ranks < 0).any() or repeats(self.ranks).size:
            raise PlanError(f"ranks must give {topo.num_endpoints} distinct non-negative ranks, one per endpoint")
        if paths:
            check_paths(ps, topo, dem.src, dem.dst, self.routing)
        neg = np.flatnonzero(self.path_bytes < 0)
        if neg.size:
            raise PlanError(f"path {neg[0]} of job {ps.job[neg[0]]} has negative bytes {self.path_bytes[neg[0]]}")
        # exact integer sums (float64 would round 5e18-byte jobs); modulo 2^64 they are exact,
        # and the float sums rule out a wrap-around
        with np.errstate(over="ignore"):
            running = np.concatenate(([0], np.cumsum(self.path_bytes)))
            sums = running[ps.job_offsets[1:]] - running[ps.job_offsets[:-1]]
        approx = np.bincount(ps.job, weights=self.path_bytes.astype(float), minlength=dem.num_jobs)
        off = np.flatnonzero((sums != dem.nbytes) | (np.abs(approx - dem.nbytes) > 1e-6 * dem.nbytes))
        if off.size:
            j = off[0]
            raise PlanError(f"job {j} ({dem.src[j]} -> {dem.dst[j]}): its paths carry {sums[j]} bytes "
                            f"but its demand is {dem.nbytes[j]}")
        if legs and self.routing == FORWARDED:
            _, why = misrouted_legs(ps, topo)
            if why:
                raise PlanError(f"the plan is forwarded, but {why}: a forwarded plan's legs must be the network's "
                                f"routes ({topo.default_routing}); was it made for other routes?")

    # -- derived values ---------------------------------------------------------------
    @property
    def link_bytes(self) -> np.ndarray:
        """Bytes carried by every link."""
        return self.paths.link_loads(self.path_bytes, self.topology.num_links)

    @property
    def fingerprint(self) -> str:
        """A short hash of what the plan routes (topology, routing, jobs, paths and their stops,
        bytes; not ``info``).

        Run reports carry it, so a measurement can be matched to the plan it replayed.
        """
        h = hashlib.sha256(f"{self.topology.name}|{self.topology.num_nodes}|{self.topology.num_links}|"
                           f"{self.routing}".encode())
        for arr in (self.demands.src, self.demands.dst, self.demands.nbytes, self.paths.job, self.paths.offsets,
                    self.paths.links, self.paths.stops, self.path_bytes, self.ranks):
            h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
        return h.hexdigest()[:16]

    @property
    def predicted_time_s(self) -> float:
        """Flow-level completion time: the busiest link's bytes over its capacity."""
        return self.paths.busiest_link_time(self.path_bytes, self.topology.capacity)

    @cached_property
    def realized_time_s(self) -> float:
        """The busiest link's time when every leg takes the network's own route
        (:func:`optiq.paths.realized_time`): what the plan really costs on a network that
        routes by its own rule. For a forwarded plan, checked to follow those routes, it is
        :attr:`predicted_time_s`; for a free plan it may be far more."""
        if self.routing == FORWARDED:
            return self.predicted_time_s
        return realized_time(self.paths, self.path_bytes, self.topology)

    def used(self) -> Plan:
        """The same plan without its zero-byte paths."""
        keep = self.path_bytes > 0
        return Plan(self.topology, self.demands, self.paths.select(keep), self.path_bytes[keep], self.chunk_size,
                    self.method, self.lower_bound_time_s, self.lower_bound_cut, self.ranks, copy.deepcopy(self.record),
                    self.routing, check_legs=False)

    # -- files ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        topo, dem, ps = self.topology, self.demands, self.paths
        topo_json: dict[str, Any]
        if topo.spec is not None:
            topo_json = {"spec": topo.spec, "fingerprint": topo.fingerprint}
        elif topo.default_routing != "D-mod-K":  # a graph read back routes by D-mod-K
            raise PlanError(f"{topo.name} has no spec string, and a plan file without one cannot say that the network "
                            f"routes by {topo.default_routing}: give the topology a spec (e.g. from_spec)")
        else:
            topo_json = {"name": topo.name, "nodes": topo.num_nodes, "endpoints": topo.num_endpoints,
                         "links": [[int(u), int(v), float(c)] for u, v, c in
                                   zip(topo.link_src, topo.link_dst, topo.capacity)]}
        jo = ps.job_offsets
        jobs = []
        for j in range(dem.num_jobs):
            jobs.append({"src": int(dem.src[j]), "dst": int(dem.dst[j]), "bytes": int(dem.nbytes[j]),
                         "paths": [{"stops": ps.stop_nodes(p, topo), "links": ps.path(p).tolist(),
                                    "bytes": int(self.path_bytes[p])} for p in range(jo[j], jo[j + 1])]})
        return {"format": PLAN_FORMAT, "version": PLAN_VERSION, "topology": topo_json, "routing": self.routing,
                "method": self.method, "workload": dem.name, "chunk_size": int(self.chunk_size),
                "lower_bound_time_s": float(self.lower_bound_time_s),
                "lower_bound_cut": self.lower_bound_cut, "ranks": self.ranks.tolist(), "info": self.info,
                "jobs": jobs}

    def save(self, path: str | Path) -> None:
        """Write the plan as JSON (``docs/plan-format.md``).

        Raises
        ------
        OutputError
            If the file cannot be written (no such directory, a directory, a full disk).
        """
        write_json(path, self.to_dict(), what="plan file", compact=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        """Rebuild and validate a plan from its JSON object (version 2, or version 1: a free plan
        that stops at every rank on its paths).

        Raises
        ------
        PlanError
            Naming the first thing that is missing, malformed or inconsistent.
        """
        if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
            raise PlanError(f"not an optiq plan: the \"format\" field must be {PLAN_FORMAT!r}")
        version = data.get("version")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            raise PlanError(f"plan version {version!r} is not supported (this optiq reads "
                            f"{', '.join(map(str, READABLE_VERSIONS))})")
        routing = data.get("routing", FREE if version == 1 else None)
        if routing not in ROUTINGS:
            raise PlanError(f"\"routing\" must be one of {', '.join(map(repr, ROUTINGS))}, got {routing!r}")
        topology = _topology_from_json(data.get("topology"))
        jobs = data.get("jobs")
        if not isinstance(jobs, list) or not jobs:
            raise PlanError("the plan has no \"jobs\" list")
        src: list[int] = []
        dst: list[int] = []
        size: list[int] = []
        paths: list[_PathSpec] = []
        for j, job in enumerate(jobs):
            where = f"job {j}"
            if not isinstance(job, dict):
                raise PlanError(f"{where} is not an object")
            s, d = (_int(job.get(k), f"{where} {k!r}", allow_zero=True) for k in ("src", "dst"))
            b = _int(job.get("bytes"), f"{where} 'bytes'")
            src.append(s)
            dst.append(d)
            size.append(b)
            jp = job.get("paths")
            if not isinstance(jp, list) or not jp:
                raise PlanError(f"{where} ({s} -> {d}) has no paths")
            for i, path in enumerate(jp):
                paths.append(_path_spec(topology, path, f"{where} path {i}", j, version, routing))
        try:
            workload = data.get("workload")
            demands = Demands(np.asarray(src), np.asarray(dst), np.asarray(size),
                              name=workload if isinstance(workload, str) and workload else "plan")
        except OptiqError as exc:
            raise PlanError(str(exc)) from None
        ps = _path_set(topology, paths, len(jobs), routing)
        ranks = data.get("ranks")
        if ranks is not None and (not isinstance(ranks, list) or not all(isinstance(r, int) for r in ranks)):
            raise PlanError("\"ranks\" must be a list of integers, one per endpoint")
        bound = data.get("lower_bound_time_s") or 0.0
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not 0 <= bound < math.inf:
            raise PlanError(f"\"lower_bound_time_s\" must be a finite non-negative number, got {bound!r}")
        info = data.get("info") or {}
        if not isinstance(info, dict):
            raise PlanError(f"\"info\" must be an object, got {info!r}")
        return cls(topology, demands, ps, np.asarray([p.nbytes for p in paths], dtype=np.int64),
                   chunk_size=_int(data.get("chunk_size", DEFAULT_CHUNK_SIZE), "chunk_size"),
                   method=str(data.get("method", "custom")), lower_bound_time_s=float(bound),
                   lower_bound_cut=str(data.get("lower_bound_cut", "")),
                   ranks=None if ranks is None else np.asarray(ranks),  # type: ignore[arg-type]
                   record=PlanRecord.from_dict(info), routing=routing)


def load_plan(path: str | Path) -> Plan:
    """Read and validate a plan file.

    Raises
    ------
    PlanError
        If the file is missing, not JSON, or not a valid plan (the message says what is wrong).
    """
    path = Path(path)
    if not path.is_file():
        raise PlanError(f"plan file {str(path)!r} " + ("is a directory" if path.is_dir() else "does not exist"))
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlanError(f"plan file {str(path)!r} is not valid JSON: {exc}") from None
    except OSError as exc:
        raise PlanError(f"cannot read plan file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        return Plan.from_dict(data)
    except (TypeError, ValueError, OverflowError, KeyError, IndexError) as exc:  # a check this loader lacks
        raise PlanError(f"plan file {str(path)!r} is malformed: {type(exc).__name__}: {exc}") from None


def _int(value: Any, where: str, *, allow_zero: bool = False) -> int:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value != int(value)):
        raise PlanError(f"{where} must be an integer, got {value!r}")
    if value > MAX_BYTES:
        raise PlanError(f"{where} is too large: {value!r} (at most 2^63 - 1)")
    if value < 0 or (value == 0 and not allow_zero):
        raise PlanError(f"{where} must be {'non-negative' if allow_zero else 'positive'}, got {value!r}")
    return int(value)


def _topology_from_json(obj: Any) -> Topology:
    try:
        if isinstance(obj, dict) and "spec" in obj:
            topology = from_spec(obj["spec"])
            stored = obj.get("fingerprint")
            if stored is not None and stored != topology.fingerprint:
                files = [part.partition(":")[2] if ":" in part else part.partition("=")[2]
                         for part in str(obj["spec"]).split(",") if ":" in part or part.startswith("names=")]
                files = [f for f in files if "/" in f]  # the network's files (the tables do not change it)
                why = (f"{' or '.join(map(repr, files))} changed since the plan was written" if files else
                       "this optiq builds that spec differently")
                raise PlanError(f"the plan was made for another network than {obj['spec']!r} is now (fingerprint "
                                f"{stored}, now {topology.fingerprint}): {why}; plan again")
            return topology
        if isinstance(obj, dict) and "links" in obj:
            links = np.asarray(obj["links"], dtype=float).reshape(-1, 3)
            return Topology(name=str(obj.get("name", "graph")), num_nodes=int(obj["nodes"]),
                            link_src=links[:, 0].astype(np.int64), link_dst=links[:, 1].astype(np.int64),
                            capacity=links[:, 2], num_endpoints=int(obj["endpoints"] if "endpoints" in obj else obj["nodes"]))
    except OptiqError as exc:
        raise PlanError(f"plan topology: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"plan topology is malformed: {exc}") from None
    raise PlanError("the plan's \"topology\" must be {\"spec\": ...} or {\"nodes\": .., \"links\": [[u, v, capacity], ..]}")


@dataclass
class _PathSpec:
    """One path as a plan file gives it: its job, bytes, links (None: the network's routes
    between its stops) and stops (None: by the routing's rule)."""

    job: int
    nbytes: int
    links: list[int] | None
    stops: list[int] | None
    where: str


def _path_spec(topology: Topology, path: Any, where: str, job: int, version: int, routing: str) -> _PathSpec:
    if not isinstance(path, dict):
        raise PlanError(f"{where} is not an object")
    nbytes = _int(path.get("bytes"), f"{where} 'bytes'", allow_zero=True)
    stops = path.get("stops") if version >= 2 else None
    if stops is not None:
        if not isinstance(stops, list) or len(stops) < 2 or not all(isinstance(v, int) for v in stops):
            raise PlanError(f"{where}: \"stops\" must list at least two integer node ids: the source, the ranks the "
                            f"path stops at, the destination")
        for v in stops:
            if not 0 <= v < topology.num_nodes:
                raise PlanError(f"{where}: stop {v} does not exist (nodes are 0..{topology.num_nodes - 1})")
    if path.get("links") is None and path.get("nodes") is None:
        if routing == FREE or stops is None:
            raise PlanError(f"{where}: give its \"links\" (or \"nodes\")"
                            + ("" if routing == FREE else ", or its \"stops\" to take the network's routes between"))
        return _PathSpec(job, nbytes, None, stops, where)
    return _PathSpec(job, nbytes, _path_links(topology, path, where), stops, where)


def _path_set(topology: Topology, specs: list[_PathSpec], num_jobs: int, routing: str) -> PathSet:
    """The paths of a plan file: links given or routed between the stops, stops given or by rule."""
    legs = [(a, b) for spec in specs if spec.links is None and spec.stops is not None
            for a, b in zip(spec.stops, spec.stops[1:])]
    if legs:
        try:
            routes = network_routes(topology, [a for a, _ in legs], [b for _, b in legs])
        except OptiqError as exc:
            raise PlanError(f"cannot route the plan's legs: {exc}") from None
        leg = 0
        for spec in specs:
            if spec.links is None and spec.stops is not None:
                count = len(spec.stops) - 1
                spec.links = np.concatenate([routes.path(i) for i in range(leg, leg + count)]).tolist()
                leg += count
    links = [spec.links for spec in specs]
    ps = PathSet.from_lists(links, [spec.job for spec in specs], num_jobs)  # specs come job by job: order kept
    if all(spec.stops is None for spec in specs):
        return ps.with_stops(_rule_stops(topology, ps, routing))
    flags = _rule_stops(topology, ps, routing) if any(spec.stops is None for spec in specs) else \
        np.zeros(ps.links.size, dtype=bool)
    for p, spec in enumerate(specs):
        if spec.stops is not None:
            flags[ps.offsets[p]:ps.offsets[p + 1]] = _stop_flags(topology, ps.path(p), spec.stops, spec.where)
    return ps.with_stops(flags)


def _rule_stops(topology: Topology, ps: PathSet, routing: str) -> np.ndarray:
    """Stops of paths given without them: free paths and version-1 files stop at every rank;
    forwarded ones where they leave the network's route (every node a rank) or at every rank."""
    if routing == FORWARDED and every_node_a_rank(topology):
        try:
            return forwarded_stops(ps, topology)
        except OptiqError as exc:
            raise PlanError(f"the plan is forwarded, but {exc}") from None
    return every_rank_stops(ps, topology)


def _stop_flags(topology: Topology, links: np.ndarray, stops: list[int], where: str) -> np.ndarray:
    """One flag per link: whether the path stops at its head, from the list of stop nodes."""
    nodes = [int(topology.link_src[links[0]])] + topology.link_dst[links].tolist() if links.size else []
    if not nodes or stops[0] != nodes[0] or stops[-1] != nodes[-1]:
        raise PlanError(f"{where}: its stops must begin at its first node and end at its last ({nodes[:1]}, "
                        f"{nodes[-1:]}), got {stops[0]} ... {stops[-1]}")
    flags = np.zeros(links.size, dtype=bool)
    at = 0
    for v in stops[1:]:
        try:
            at = nodes.index(v, at + 1)
        except ValueError:
            raise PlanError(f"{where}: stop {v} is not on the path after stop {nodes[at]}") from None
        flags[at - 1] = True
    return flags


def _path_links(topology: Topology, path: dict[str, Any], where: str) -> list[int]:
    nodes, links = path.get("nodes"), path.get("links")
    if nodes is None:  # links alone (version 2): the plan's checks follow them
        if not isinstance(links, list) or not links or not all(isinstance(e, int) for e in links):
            raise PlanError(f"{where}: \"links\" must list integer link ids")
        bad = [e for e in links if not 0 <= e < topology.num_links]
        if bad:
            raise PlanError(f"{where}: link {bad[0]} does not exist (links are 0..{topology.num_links - 1})")
        return list(links)
    if not isinstance(nodes, list) or len(nodes) < 2 or not all(isinstance(v, int) for v in nodes):
        raise PlanError(f"{where}: \"nodes\" must list at least two integer node ids")
    for v in nodes:
        if not 0 <= v < topology.num_nodes:
            raise PlanError(f"{where}: node {v} does not exist (nodes are 0..{topology.num_nodes - 1})")
    if links is None:  # without explicit links, the lowest-numbered link between two nodes
        links = []
        for u, v in zip(nodes, nodes[1:]):
            between = topology.links_between(u, v)
            if not between:
                raise PlanError(f"{where}: no link from node {u} to node {v}")
            links.append(between[0])
        return links
    if not isinstance(links, list) or len(links) != len(nodes) - 1 or not all(isinstance(e, int) for e in links):
        raise PlanError(f"{where}: \"links\" must list {len(nodes) - 1} integer link ids, one per hop")
    for u, v, e in zip(nodes, nodes[1:], links):
        if not 0 <= e < topology.num_links or topology.link_src[e] != u or topology.link_dst[e] != v:
            raise PlanError(f"{where}: link {e} does not go from node {u} to node {v}")
    return links
