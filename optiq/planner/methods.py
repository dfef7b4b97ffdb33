"""The planning methods as small objects that carry their own parameters, and their registry.

A planner turns a :class:`Context` (topology, demands, seed, shared candidates, progress,
the best bound known; read only) into a :class:`PlannerResult`: paths, whole bytes per
path, the :class:`~optiq.plan.PlanRecord` of what it did, and a better lower bound if it
proved one. :func:`optiq.make_plan` wraps every planner
alike (checks, the cut lower bound, the fall-back to the default routes, QoS, the plan).

Examples
--------
>>> from optiq import from_spec, make_plan
>>> from optiq.workloads import constant_ratio
>>> t = from_spec("torus:4x4"); d = constant_ratio(16, nbytes=2**20, num_sources=2, ratio=4)
>>> make_plan(t, d, ColumnGeneration(gap=0.0)).predicted_time_s <= make_plan(t, d, "heu2").predicted_time_s
True
>>> planner_named("heu1", maxload=4, k=8)
(MaxLoad(k=8, hop_limit=None, candidate_kind='auto', maxload=4), [])
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from ..errors import ParameterError, SolverError
from ..heuristics import default_unit, demand_aware_heuristic, dynamic_routing, maxload_heuristic, rebalance
from ..heuristics.demand_aware import finer_pass
from ..lp import DEFAULT_SOLVER, LP_SOLVERS, LPStatus, round_to_bytes, solve_lp
from ..lp.colgen import DEFAULT_GAP, DEFAULT_HOP_SLACK, CGOptions, CGResult, CGStatus, column_generation
from ..lp.lean import lean_plan
from ..lp.stops import fewest_stops
from ..mpi.workers import Workers
from ..paths import FREE, PathSet, diverse_paths, spread_paths, torus_paths, valiant_paths
from ..paths.kept import kept_candidates, kept_for_pairs
from ..paths.one_stop import one_stop_paths
from ..paths.space import PathSpace
from ..plan import PlanRecord
from ..topology import Topology
from ..utils.checks import check_count, check_seconds
from ..workloads import Demands

__all__ = ["Context", "PlannerResult", "Planner", "CandidatePlanner", "default_k", "DEFAULT_K", "SystemRoutes", "ColumnGeneration", "PathLP", "MaxLoad", "DemandAware", "Dynamic",
           "PLANNERS", "planner_named", "make_candidates", "check_candidate_kind", "CANDIDATE_KINDS"]

#: A gap this much over the target is the LP's rounding, not the hop limit's cost: not warned about.
GAP_NOISE = 1e-6

#: How fixed candidate paths are made. Forwarded plans on networks whose switches are not
#: ranks (fat-trees, fabrics, dragonflies) take ``chains``: the direct route and chains of
#: the network's routes through intermediate ranks chosen round by round as the load grows
#: (:mod:`optiq.paths.chains`), or on dragonflies ``valiant``: chains through a random host
#: of random intermediate groups. Link paths (free plans anywhere; forwarded ones where every
#: node is a rank): ``diverse`` (per-job penalties, best quality), ``spread`` (shared
#: penalties, one Dijkstra per source and round), ``torus`` (from coordinates on tori and
#: meshes: seconds for a whole Blue Gene/Q), ``torus-shortest`` (every shortest
#: dimension-ordered route on tori and meshes, no detours), ``valiant`` (free, on
#: dragonflies: the minimal route and Valiant paths through random intermediate groups).
#: ``auto``: chains where the plan needs them, else valiant on dragonflies; for a greedy
#: heuristic on a torus or mesh whose sources have more than :data:`DENSE_JOBS` jobs each,
#: torus-shortest; else diverse up to 2,048 nodes where sources have at most
#: :data:`DENSE_JOBS` jobs each, spread up to 16,384 nodes (and for denser patterns), then
#: torus on tori and spread elsewhere.
CANDIDATE_KINDS = ("auto", "chains", "diverse", "spread", "torus", "torus-shortest", "valiant")
#: Jobs per source above which ``auto`` takes spread candidates where it would take diverse
#: ones: spread's one search per source and round serves all of a source's jobs, and its
#: shared penalties spread them well, where diverse searches once per job
#: (``benchmarks/planner_scale.py`` measures both on a full all-to-all-v).
DENSE_JOBS = 16
#: Paths per job an ``opt`` plan holds while it is made (its initial columns and what
#: pricing adds), for the memory estimate before planning; ``whole_machine.py`` prints it.
OPT_PATHS_PER_JOB = 8
#: Column generation's vertex polish (interior point with crossover) runs only where its
#: restricted LP holds at most this many paths: it makes the time exact and drops paths where
#: that is cheap, and crossover's time is not bounded by column generation's above it (the
#: lean step, on by default, ends at a vertex itself).
VERTEX_PATHS = 10_000
#: The lean step of ``opt`` is given a budget of work, not of seconds, so that the same inputs
#: give the same plan on a quiet or a busy machine (a time limit, when given, stops it too, and
#: the plan says so): as many rounds as column generation took iterations, at least
#: :data:`LEAN_MIN_ROUNDS`, and at most ``LEAN_ROUND_SCALE * S * P / R**2``, for column
#: generation's ``S`` LP solves and the ``P`` paths and ``R`` rows (jobs and links) of its last
#: LP: a solve of the lean LP by interior point costs about ``R**2 / P`` times a solve of column
#: generation's, so that the step costs about what column generation did. Where even
#: :data:`LEAN_MIN_ROUNDS` rounds would cost more, the step cannot pay and is skipped.
LEAN_ROUND_SCALE = 2000
#: Every round adds paths and the link rows the last solve lacked, and its plan is kept where
#: it fits every link (else the plan toward it that does): three rounds give most of what ten
#: do, and the final vertex, which grows with the rounds, stays cheap
#: (``benchmarks/lean_budget.py``).
LEAN_MIN_ROUNDS = 3
#: The fewest-stops step after the lean one (:mod:`optiq.lp.stops`) is one LP solve over
#: the plan's paths and its one-stop alternatives; above this many columns it is skipped.
STOPS_MAX_COLUMNS = 50_000


def make_candidates(topology: Topology, demands: Demands, k: int = 16, kind: str = "auto", *,
                    hop_limit: int | None = None, seed: int = 0, progress: Callable[[str], None] | None = None,
                    workers: Workers | None = None, space: PathSpace | None = None, stops: bool = True,
                    greedy: bool = False) -> PathSet:
    """Up to ``k`` candidate paths per job of the path ``space`` (default forwarded), made as
    ``kind`` says (see :data:`CANDIDATE_KINDS`), with their stops; with ``stops=False``, link
    paths without them (chains keep theirs: they are the chains' choice), for a planner that
    gives the paths it keeps their stops itself, as :func:`~optiq.make_plan` does. ``greedy``:
    the candidates are for a greedy heuristic (``auto`` may then take shorter ones).

    Raises
    ------
    ParameterError
        For a ``kind`` that cannot make the space's paths (:func:`check_candidate_kind`).
    """
    space = space or PathSpace(topology, demands, seed=seed, progress=progress)
    check_candidate_kind(topology, space, kind)
    if space.kind == "chains":
        if kind in ("auto", "chains"):
            forwarders = None if space.forwarders is None else np.unique(space.forwarders).tobytes()
            recipe = ("chains", k, seed, space.seed, space.max_intermediates, forwarders)
            return kept_candidates(topology, demands, recipe,   # the chain space is made only if need be
                                   lambda: space.chains.spread(k, seed=seed, progress=progress))
        from ..paths.chains import valiant_chains

        return valiant_chains(topology, demands, k, seed=seed)
    kind = resolved_kind(topology, demands, kind, greedy)
    paths = space.from_links(_link_candidates(topology, demands, k, kind, hop_limit=hop_limit, seed=seed,
                                              progress=progress, workers=workers),
                             distinct=kind in ("torus", "torus-shortest"))
    return space.finish(paths) if stops else paths


def check_candidate_kind(topology: Topology, space: PathSpace, kind: str) -> None:
    """Refuse a candidate ``kind`` that cannot make paths of ``space`` on ``topology``, before any
    work (:func:`make_candidates` and :func:`~optiq.make_plan` call it).

    Raises
    ------
    ParameterError
        For an unknown ``kind``, ``torus`` or ``torus-shortest`` on a topology that is not a
        torus or mesh, ``valiant`` on one that is not a dragonfly, ``chains`` for paths that
        are not chains, or a kind of link paths for chains.
    """
    if kind not in CANDIDATE_KINDS:
        raise ParameterError(f"unknown candidate kind {kind!r}; expected one of {', '.join(CANDIDATE_KINDS)}")
    if space.kind == "chains":
        if kind in ("auto", "chains") or (kind == "valiant" and topology.dragonfly is not None):
            return
        raise ParameterError(f"on {topology.name} a forwarded path is the network's route or a chain of its routes "
                             f"through intermediate ranks; {kind} candidates pick switches freely: use --candidates "
                             f"auto (chains), or --routing free for a network that routes every path as planned")
    if kind == "chains":
        raise ParameterError(f"chains are the forwarded paths of networks whose switches are not ranks; "
                             f"{topology.name} " + ("takes link paths (every node is a rank)" if space.kind == "links"
                                                    else "routes free paths as planned (--routing free)"))
    if kind == "valiant" and topology.dragonfly is None:
        raise ParameterError(f"valiant candidates need a dragonfly, not {topology.name!r}")
    if kind in ("torus", "torus-shortest") and not topology.is_torus:
        raise ParameterError(f"{kind} candidates need a torus or mesh, not {topology.name!r}")


def resolved_kind(topology: Topology, demands: Demands, kind: str, greedy: bool) -> str:
    """The kind of link paths ``auto`` stands for here (see :data:`CANDIDATE_KINDS`); other kinds as they are.

    A greedy heuristic's candidates for a dense pattern on a torus are the shortest routes:
    Heuristic 1 and 2 place each job on the path least loaded now, and a longer path takes
    capacity that later jobs' shortest routes need (every job of a dense pattern has many such
    neighbours); the LP weighs all paths at once and keeps the longer candidates.
    """
    if kind != "auto":
        return kind
    n = topology.num_nodes
    kept = kept_for_pairs(topology, demands)
    if _SOURCES not in kept:
        kept[_SOURCES] = int(np.count_nonzero(np.bincount(demands.src)))
    sparse = demands.num_jobs <= DENSE_JOBS * kept[_SOURCES]
    return ("valiant" if topology.dragonfly is not None else "torus-shortest" if greedy and topology.is_torus
            and not sparse else "diverse" if n <= 2048 and sparse
            else "spread" if n <= 16384 or not topology.is_torus else "torus")


#: The key of the number of distinct sources in :func:`optiq.paths.kept.kept_for_pairs`'s dict.
_SOURCES = "distinct sources"


def _link_candidates(topology: Topology, demands: Demands, k: int, kind: str, *, hop_limit: int | None, seed: int,
                     progress: Callable[[str], None] | None, workers: Workers | None) -> PathSet:
    """Candidate link paths of ``kind`` (resolved: not ``auto``; no stops yet); the same pairs
    by the same recipe as the last plan's on the topology get its paths back (:mod:`optiq.paths.kept`)."""
    return kept_candidates(topology, demands, (kind, k, hop_limit, seed),
                           lambda: _new_link_candidates(topology, demands, k, kind, hop_limit=hop_limit, seed=seed,
                                                        progress=progress, workers=workers))


def _new_link_candidates(topology: Topology, demands: Demands, k: int, kind: str, *, hop_limit: int | None,
                         seed: int, progress: Callable[[str], None] | None, workers: Workers | None) -> PathSet:
    """:func:`_link_candidates` made anew."""
    if kind == "valiant":
        return valiant_paths(topology, demands, k, seed=seed)
    if kind == "torus-shortest":
        return torus_paths(topology, demands, k, hop_slack=0, spread=False, seed=seed, progress=progress)
    if kind == "torus":
        return torus_paths(topology, demands, k, seed=seed, progress=progress)
    if kind == "spread":
        return spread_paths(topology, demands, k, seed=seed, progress=progress, workers=workers)
    return diverse_paths(topology, demands, k, hop_limit=hop_limit, seed=seed, progress=progress)


@dataclass(frozen=True)
class Context:
    """What every planner is given (read only)."""

    topology: Topology
    demands: Demands
    seed: int
    sizes: np.ndarray | None  # bytes the LP plans per job (QoS-weighted), None: the jobs' sizes
    bound_s: float            # the best proven lower bound, seconds (the cut bound to start with)
    bound_from: str           # what proves it
    candidates: PathSet | None
    default: PathSet          # every job's default route (SystemRoutes)
    progress: Callable[[str], None] | None
    workers: Workers
    space: PathSpace          # where the paths may go: the plan's routing (optiq.paths.space)

    def say(self, message: str) -> None:
        if self.progress:
            self.progress(message)


@dataclass
class PlannerResult:
    """What a planner made: every job's paths and whole bytes per path, the record of what it
    did, and a lower bound it proved (``bound_s``, by ``bound_from``) if better than the known one."""

    paths: PathSet
    path_bytes: np.ndarray
    record: PlanRecord = field(default_factory=PlanRecord)
    bound_s: float | None = None
    bound_from: str = ""


class Planner:
    """A planning method with its parameters (a frozen dataclass in every subclass)."""

    name: ClassVar[str]
    #: Whether the planner solves the LP, so can weigh jobs by QoS class and falls back to
    #: the default routes when those are faster.
    solves_lp: ClassVar[bool] = False
    #: The routing its plans have whatever is asked (``dynamic``: per-pair rules, free), or None.
    routing: ClassVar[str | None] = None

    @property
    def fewest_hops(self) -> bool:
        """Whether the planner also minimises the hop-bytes of its time (``opt``'s lean step):
        default routes at the cut bound are then kept only where they are shortest paths."""
        return False

    @property
    def paths_per_job(self) -> int:
        """Paths per job a plan holds while it is made (for the memory estimate)."""
        raise NotImplementedError

    def run(self, ctx: Context) -> PlannerResult:
        """Paths and whole bytes per path for every job, and what the planner did."""
        raise NotImplementedError


@dataclass(frozen=True)
class SystemRoutes(Planner):
    """The machine's own routes (``Topology.default_routing``: dimension order on tori, a fabric's
    forwarding tables, minimal routes on dragonflies, D-mod-K on other fat-trees), one per job."""

    name: ClassVar[str] = "default"

    @property
    def paths_per_job(self) -> int:
        return 1

    def run(self, ctx: Context) -> PlannerResult:
        return PlannerResult(ctx.default, ctx.demands.nbytes.copy())


@dataclass(frozen=True)
class ColumnGeneration(Planner):
    """``opt``: column generation on the max-throughput LP until the plan is within ``gap`` of a
    proven lower bound, with paths at most ``hop_slack`` hops over the shortest, or until
    ``time_limit`` seconds (the best plan so far); then, with ``lean``, the plan of fewest
    hop-bytes at that time (:func:`optiq.lp.lean.lean_plan`), within a budget of work of about
    what column generation cost (:data:`LEAN_ROUND_SCALE`), and within the time limit; and
    of those the plan of fewest stop-bytes (:func:`optiq.lp.stops.fewest_stops`)."""

    gap: float = DEFAULT_GAP
    hop_slack: int = DEFAULT_HOP_SLACK
    time_limit: float | None = None
    lean: bool = True
    name: ClassVar[str] = "opt"
    solves_lp: ClassVar[bool] = True

    @property
    def paths_per_job(self) -> int:
        return OPT_PATHS_PER_JOB

    @property
    def fewest_hops(self) -> bool:
        return self.lean

    def __post_init__(self) -> None:
        if not (isinstance(self.gap, (int, float)) and 0 <= self.gap < 1):
            raise ParameterError(f"gap must be a fraction in [0, 1), got {self.gap!r}")
        check_count("hop_slack", self.hop_slack, 0)
        check_seconds("time_limit", self.time_limit)

    def run(self, ctx: Context) -> PlannerResult:
        rec, gap = PlanRecord(), self.gap
        start = time.perf_counter()
        options = CGOptions(gap=gap, hop_slack=self.hop_slack, time_limit=self.time_limit,
                            known_bound_s=ctx.bound_s if ctx.sizes is None else 0.0, seed=ctx.seed,
                            vertex_paths=VERTEX_PATHS)
        cg = column_generation(ctx.topology, ctx.demands, options, sizes=ctx.sizes, progress=ctx.progress,
                               workers=ctx.workers, space=ctx.space)
        result = PlannerResult(cg.paths, np.zeros(0, dtype=np.int64), rec)
        if ctx.sizes is None and cg.lower_bound_s > ctx.bound_s:
            result.bound_s = cg.lower_bound_s
            result.bound_from = ("Lagrangian bound from the column generation's link prices, over "
                                 + _space_words(ctx.space))
        rec.gap_target, rec.hop_slack, rec.cg_status, rec.iterations = gap, self.hop_slack, cg.status.value, \
            cg.iterations
        rec.generated_paths, rec.lp_time_s, rec.first_lp_time_s, rec.gap = cg.paths.num_paths, cg.time_s, \
            cg.first_time_s, cg.gap
        rec.timings.update(paths_s=cg.paths_s, lp_s=cg.lp_s, price_s=cg.price_s)
        if cg.gap > gap + GAP_NOISE and cg.status == CGStatus.NO_IMPROVING_PATH:
            rec.warnings.append(f"column generation stopped {cg.gap:.2%} from the lower bound (target {gap:.2%}): "
                                f"no path within --hop-slack {self.hop_slack} hops of the shortest improves the "
                                f"plan; the gap left may be the hop limit's cost, a larger --hop-slack may close it")
        elif cg.iterations == 0:
            rec.warnings.append(f"the time limit ({self.time_limit:g} s) ended before the first LP was solved: the "
                                f"plan is the default routes, {cg.gap:.2%} from the lower bound; allow more time")
        elif cg.gap > gap and cg.status == CGStatus.TIME_LIMIT:
            rec.warnings.append(f"time limit reached {cg.gap:.2%} from the lower bound (target {gap:.2%})")
        paths, share = cg.paths, cg.share
        if self.lean and cg.iterations > 0:
            paths, share = self._lean(ctx, cg, time.perf_counter() - start, rec)
        if self.lean and cg.iterations > 0 and ctx.space.kind != FREE:
            left = None if self.time_limit is None else self.time_limit - (time.perf_counter() - start)
            paths, share = fewest_stops_step(ctx, paths, share, rec, time_limit=left)
        if rec.stops and "time limit" in rec.stops.get("status", ""):
            rec.warnings.append(f"the time limit ({self.time_limit:g} s) stopped the fewest-stops step: the plan keeps "
                                f"the stops it had")
        if rec.lean and rec.lean.get("status") == "time limit":
            rec.warnings.append(f"the time limit ({self.time_limit:g} s) stopped the lean step "
                                f"{rec.lean.get('gap', 0):.2%} over its least hop-bytes")
        result.paths, result.path_bytes = paths, round_to_bytes(paths, ctx.demands, share)
        return result

    def _lean(self, ctx: Context, cg: CGResult, spent: float, rec: PlanRecord) -> tuple[PathSet, np.ndarray]:
        """The lean step within its budget; the plan it gives if no slower, else column generation's."""
        last = cg.history[-1]
        rows = ctx.demands.num_jobs + last.rows
        afford = int(LEAN_ROUND_SCALE * sum(h.solves for h in cg.history) * last.paths / rows ** 2)
        iterations = min(max(LEAN_MIN_ROUNDS, cg.iterations), afford)
        if iterations < LEAN_MIN_ROUNDS:
            rec.lean = {"status": "skipped: cannot pay"}
            rec.warnings.append(f"the lean step was skipped: {LEAN_MIN_ROUNDS} solves of its LP ({rows:,} rows) would "
                                f"cost more than column generation did; the plan moves the hop-bytes column "
                                f"generation left")
            ctx.say(f"lean step: skipped ({LEAN_MIN_ROUNDS} solves would cost more than column generation did)")
            return cg.paths, cg.share
        left = None if self.time_limit is None else self.time_limit - spent
        if left is not None and left <= 0:
            rec.lean = {"status": "time limit"}
            return cg.paths, cg.share
        ctx.say(f"lean step: the fewest hop-bytes at {cg.time_s * 1e3:.4f} ms, in at most {iterations} rounds"
                + ("" if left is None else f" and {left:.1f} s"))
        lean = lean_plan(ctx.topology, ctx.demands, cg.paths, cg.share, cg.time_s, sizes=ctx.sizes,
                         hop_slack=self.hop_slack, time_limit=left, max_iterations=iterations, workers=ctx.workers,
                         progress=ctx.progress, space=ctx.space)
        kept = lean.time_s <= cg.time_s * (1 + 1e-6) and lean.hop_bytes <= lean.hop_bytes_before
        saved = 1 - lean.hop_bytes / lean.hop_bytes_before if kept and lean.hop_bytes_before > 0 else 0.0
        rec.lean = {"status": lean.status if kept else "slower: not used",
                    "hop_bytes_before": lean.hop_bytes_before, "hop_bytes": lean.hop_bytes,
                    "hop_bytes_bound": lean.bound, "gap": lean.gap, "iterations": lean.iterations,
                    "budget": iterations, "saved": saved}
        rec.timings["lean_s"] = lean.seconds
        ctx.say(f"lean step: {saved:.2%} fewer hop-bytes ({lean.status}, {lean.iterations} of {iterations} rounds, "
                f"{lean.seconds:.1f} s)")
        return (lean.paths, lean.share) if kept else (cg.paths, cg.share)


def fewest_stops_step(ctx: Context, paths: PathSet, share: np.ndarray, rec: PlanRecord, *,
                      time_limit: float | None = None) -> tuple[PathSet, np.ndarray]:
    """The plan of fewest stop-bytes at the time and hop-bytes of ``paths`` with ``share``
    (:func:`optiq.lp.stops.fewest_stops`), over its paths and (where every node is a rank) the
    one-stop detours of every job that stops; skipped above :data:`STOPS_MAX_COLUMNS` paths, or where
    ``time_limit`` has no time left. What it did goes to ``rec.stops``."""
    space, topology = ctx.space, ctx.topology
    finished = space.finish(paths)
    stopping = np.zeros(ctx.demands.num_jobs, dtype=bool)
    stopping[finished.job[(finished.copies > 0) & (share > 0)]] = True
    detours = space.kind == "links"
    degree = int(np.bincount(topology.link_src, minlength=topology.num_nodes).max()) if detours else 0
    columns = paths.num_paths + 2 * degree * int(stopping.sum())   # at most
    if not stopping.any() or columns > STOPS_MAX_COLUMNS:
        rec.stops = {"status": "no stops" if not stopping.any() else f"skipped: up to {columns:,} columns"}
        return paths, share
    if time_limit is not None and time_limit <= 0:
        rec.stops = {"status": "time limit"}
        return paths, share
    more = space.finish(one_stop_paths(topology, ctx.demands, stopping)) if detours else paths.select(
        np.zeros(paths.num_paths, dtype=bool))
    found = fewest_stops(topology, ctx.demands, finished, share, more, sizes=ctx.sizes, time_limit=time_limit)
    rec.stops = {"status": found.status, "stop_bytes_before": found.stop_bytes_before,
                 "stop_bytes": found.stop_bytes, "saved": found.saved}
    rec.timings["stops_s"] = found.seconds
    ctx.say(f"fewest stops: {found.saved:.2%} fewer stop-bytes over {paths.num_paths + more.num_paths:,} paths "
            f"({found.status}, {found.seconds:.1f} s)")
    return (found.paths, found.share) if found.status == "optimal" else (paths, share)


@dataclass(frozen=True)
class AdaptiveBound(Planner):
    """``adaptive``: the best a network with ideal adaptive routing could do, one that sprays
    every pair's packets over all its minimal paths in the best proportions. It is the flow LP
    over minimal paths, routing free (column generation with no hop over the shortest, within
    ``gap`` of its optimum). No static route of minimal paths (D-mod-K, ECMP, a subnet
    manager's engine, per-pair rules) beats it; what beats it is non-minimal forwarding, which
    only a plan gives. It is a bound to compare with, not a plan to run: its plans split
    pairs over paths no network routes as planned."""

    gap: float = DEFAULT_GAP
    time_limit: float | None = None
    name: ClassVar[str] = "adaptive"
    solves_lp: ClassVar[bool] = True
    routing: ClassVar[str | None] = FREE

    def __post_init__(self) -> None:
        ColumnGeneration(gap=self.gap, time_limit=self.time_limit)  # the same checks

    @property
    def paths_per_job(self) -> int:
        return OPT_PATHS_PER_JOB

    def run(self, ctx: Context) -> PlannerResult:
        result = ColumnGeneration(gap=self.gap, hop_slack=0, time_limit=self.time_limit, lean=False).run(ctx)
        result.bound_s, result.bound_from = None, ""  # it bounds minimal-path plans only: not shared as every plan's
        return result


#: Candidate paths per job when ``k`` is not given...
DEFAULT_K = 16
#: ... and fewer (at least :data:`MIN_DEFAULT_K`) where ``DEFAULT_K`` for every job would
#: make more than this many paths (``benchmarks/planner_scale.py`` times a full all-to-all).
CANDIDATE_PATHS_MAX = 2_000_000
MIN_DEFAULT_K = 4


def default_k(num_jobs: int) -> int:
    """Candidate paths per job for ``num_jobs`` jobs when ``k`` is not given.

    Examples
    --------
    >>> default_k(4032), default_k(261_632)
    (16, 7)
    """
    return int(max(MIN_DEFAULT_K, min(DEFAULT_K, CANDIDATE_PATHS_MAX // max(num_jobs, 1))))


@dataclass(frozen=True)
class CandidatePlanner(Planner):
    """A method that chooses among ``k`` candidate paths per job (default :func:`default_k`),
    made as ``candidate_kind`` says, at most ``hop_limit`` hops long (default the diameter)."""

    k: int | None = None
    hop_limit: int | None = None
    candidate_kind: str = "auto"

    def __post_init__(self) -> None:
        check_count("k", self.k, 1, optional=True)
        check_count("hop_limit", self.hop_limit, 1, optional=True)
        if self.candidate_kind not in CANDIDATE_KINDS:
            raise ParameterError(f"unknown candidate kind {self.candidate_kind!r}; expected one of "
                            f"{', '.join(CANDIDATE_KINDS)}")

    @property
    def paths_per_job(self) -> int:
        return self.k or DEFAULT_K

    def k_for(self, num_jobs: int) -> int:
        """The candidate paths per job this planner makes for ``num_jobs`` jobs."""
        return self.k if self.k is not None else default_k(num_jobs)

    def run(self, ctx: Context) -> PlannerResult:
        start, rec = time.perf_counter(), PlanRecord()
        candidates = ctx.candidates
        if ctx.space.kind == "chains" and self.hop_limit is not None:
            rec.warnings.append(f"--hop-limit {self.hop_limit} does not apply to chains of the network's routes and "
                                f"was not used")
        k = self.k_for(ctx.demands.num_jobs)
        if candidates is None:
            if k < DEFAULT_K and self.k is None:
                ctx.say(f"{k} candidate paths per job ({DEFAULT_K} would make {DEFAULT_K * ctx.demands.num_jobs:,}; "
                        f"--k sets it)")
            candidates = make_candidates(ctx.topology, ctx.demands, k, self.candidate_kind,
                                         hop_limit=self.hop_limit, seed=ctx.seed, progress=ctx.progress,
                                         workers=ctx.workers, space=ctx.space, stops=False,
                                         greedy=not self.solves_lp)
        rec.k, rec.candidate_paths = k, candidates.num_paths
        rec.timings["paths_s"] = time.perf_counter() - start
        ctx.say(f"{candidates.num_paths:,} candidate paths for {ctx.demands.num_jobs:,} jobs in "
                f"{rec.timings['paths_s']:.2f} s")
        t1 = time.perf_counter()
        nbytes = self.choose(ctx, candidates, rec)
        rec.timings["plan_s"] = time.perf_counter() - t1
        return PlannerResult(candidates, nbytes, rec)

    def choose(self, ctx: Context, candidates: PathSet, rec: PlanRecord) -> np.ndarray:
        """Whole bytes per candidate; notes what it did in ``rec`` (the result's record)."""
        raise NotImplementedError


@dataclass(frozen=True)
class PathLP(CandidatePlanner):
    """``lp``: the max-throughput LP over the candidates, solved by HiGHS (``solver``) within
    ``time_limit`` seconds and rounded to whole bytes."""

    solver: str = DEFAULT_SOLVER
    time_limit: float | None = None
    name: ClassVar[str] = "lp"
    solves_lp: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.solver not in LP_SOLVERS:
            raise ParameterError(f"unknown solver {self.solver!r}; expected one of {', '.join(LP_SOLVERS)}")
        check_seconds("time_limit", self.time_limit)

    def choose(self, ctx: Context, candidates: PathSet, rec: PlanRecord) -> np.ndarray:
        ctx.say(f"solving the LP with HiGHS ({self.solver})")
        sol = solve_lp(ctx.topology, ctx.demands, candidates, solver=self.solver, time_limit=self.time_limit,
                       sizes=ctx.sizes, progress=ctx.progress)
        if sol.status == LPStatus.FAILED:
            raise SolverError(f"HiGHS ({self.solver}) did not solve the LP")
        if sol.status == LPStatus.TIME_LIMIT:
            rec.warnings.append("LP time limit reached: the plan is the best point HiGHS had found")
        rec.solver, rec.lp_status = self.solver, sol.status.value
        if sol.status == LPStatus.OPTIMAL:
            rec.lp_time_s = sol.time_s
        rec.timings.update(build_s=sol.build_s, solve_s=sol.solve_s)
        return round_to_bytes(candidates, ctx.demands, sol.share)


@dataclass(frozen=True)
class MaxLoad(CandidatePlanner):
    """``heu1``: Heuristic 1, at most ``maxload`` paths on any link."""

    maxload: int = 16
    name: ClassVar[str] = "heu1"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_count("maxload", self.maxload, 1)

    def choose(self, ctx: Context, candidates: PathSet, rec: PlanRecord) -> np.ndarray:
        rec.maxload = self.maxload
        return maxload_heuristic(ctx.topology, ctx.demands, candidates, self.maxload, progress=ctx.progress)


@dataclass(frozen=True)
class DemandAware(CandidatePlanner):
    """``heu2``: Heuristic 2, placing ``unit`` bytes at a time on the least-loaded candidate
    (default :func:`optiq.heuristics.default_unit`: 1 MiB, more for jobs over 64 MiB), then
    moving paths off the busiest link while that makes the plan faster
    (:func:`optiq.heuristics.rebalance`); with the default unit, a plan still far from its
    bound is placed again in finer units, and the faster kept
    (:func:`optiq.heuristics.demand_aware.finer_pass`). With ``fewest_stops``, the plan of
    fewest stop-bytes at that time and hop-bytes (``opt``'s last step,
    :func:`optiq.lp.stops.fewest_stops`): every stop is a chunk a rank receives and sends
    again, which costs the ranks' CPU where that, not the links, sets the pace."""

    unit: int | None = None
    fewest_stops: bool = False
    name: ClassVar[str] = "heu2"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.unit is not None:
            check_count("unit", self.unit, 1)

    def choose(self, ctx: Context, candidates: PathSet, rec: PlanRecord) -> np.ndarray:
        rec.unit = default_unit(ctx.demands.nbytes) if self.unit is None else self.unit
        placed = demand_aware_heuristic(ctx.topology, ctx.demands, candidates, rec.unit, progress=ctx.progress)
        out = rebalance(ctx.topology, candidates, placed, bound_s=ctx.bound_s)
        if self.unit is None:  # the default unit: a finer second pass where the plan is far from its bound
            out, finer = finer_pass(ctx.topology, ctx.demands, candidates, out, ctx.bound_s, progress=ctx.progress)
            rec.unit = finer or rec.unit
        return out

    def run(self, ctx: Context) -> PlannerResult:
        result = super().run(ctx)
        if not self.fewest_stops or ctx.space.kind == FREE:
            return result
        used = result.path_bytes > 0
        placed = result.paths.select(used)
        paths, share = fewest_stops_step(ctx, placed, result.path_bytes[used] / ctx.demands.nbytes[placed.job],
                                         result.record)
        if paths is not placed:   # a plan of fewer stops: else heu2's own whole bytes stay, not rounded again
            result.paths, result.path_bytes = paths, round_to_bytes(paths, ctx.demands, share)
        return result


@dataclass(frozen=True)
class Dynamic(CandidatePlanner):
    """``dynamic``: heaviest pair first, each on its least-loaded shortest candidate. The fat-tree
    study's per-pair rules (an SDN fabric's flow rules): its plans are free whatever is asked."""

    name: ClassVar[str] = "dynamic"
    routing: ClassVar[str | None] = FREE

    def choose(self, ctx: Context, candidates: PathSet, rec: PlanRecord) -> np.ndarray:
        return dynamic_routing(ctx.topology, ctx.demands, candidates, progress=ctx.progress)


def _space_words(space: PathSpace) -> str:
    """What a Lagrangian bound over ``space`` bounds, in words."""
    if space.kind == "chains":
        hosts = "one intermediate rank" if space.max_intermediates == 1 else \
            f"up to {space.max_intermediates} intermediate ranks"
        return f"the direct routes and chains through {hosts}"
    return "forwarded paths (legs of the network's routes)" if space.kind == "links" else "all paths"


#: Planner classes by method name (the CLI's ``--method``), in the order the docs list them.
PLANNERS: dict[str, type[Planner]] = {cls.name: cls for cls in
                                      (ColumnGeneration, PathLP, MaxLoad, DemandAware, Dynamic, SystemRoutes,
                                       AdaptiveBound)}


def planner_named(name: str, **params: Any) -> tuple[Planner, list[str]]:
    """The planner ``name`` with the ``params`` it takes, and the names of those it does not.

    Raises
    ------
    ParameterError
        For an unknown name or a parameter out of range.
    """
    if name not in PLANNERS:
        raise ParameterError(f"unknown method {name!r}; expected one of {', '.join(PLANNERS)}")
    def takes(cls: type[Planner]) -> set[str]:
        return {f.name for f in fields(cls)}  # type: ignore[arg-type]

    unused = sorted(set(params) - takes(PLANNERS[name]))
    for key in unused:  # a bad value is refused even where it would not be used
        owner = next((cls for cls in PLANNERS.values() if key in takes(cls)), None)
        if owner is None:
            raise ParameterError(f"unknown planner parameter {key!r}")
        owner(**{key: params[key]})
    cls = PLANNERS[name]
    return cls(**{k: v for k, v in params.items() if k in takes(cls)}), unused
