"""One entry point for every planning method: :func:`make_plan`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from .errors import PlanError, SolverError
from .heuristics import DEFAULT_UNIT, demand_aware_heuristic, dynamic_routing, maxload_heuristic
from .lp import DEFAULT_SOLVER, LP_SOLVERS, LPStatus, cut_lower_bound, round_to_bytes, solve_lp
from .lp.colgen import DEFAULT_GAP, DEFAULT_HOP_SLACK, CGStatus, column_generation
from .workloads.qos import QoSClasses
from .paths import PathSet, diverse_paths, system_routes
from .paths import spread_paths, torus_paths
from .paths.workers import Workers
from .plan import DEFAULT_CHUNK_SIZE, Plan
from .resources import PLAN_BYTES_PER_ENTRY, check_memory
from .topology import Topology
from .workloads import Demands

__all__ = ["make_plan", "make_candidates", "plan_memory_estimate", "METHODS", "CANDIDATE_KINDS"]

#: How fixed candidate paths are made: ``diverse`` (per-job penalties, best quality),
#: ``spread`` (shared penalties, one Dijkstra per source and round), ``torus`` (from
#: coordinates on tori and meshes: seconds for a whole Blue Gene/Q), or ``auto``: diverse
#: up to 2,048 nodes, spread up to 16,384, then torus on tori and spread elsewhere.
CANDIDATE_KINDS = ("auto", "diverse", "spread", "torus")


def make_candidates(topology, demands, k: int = 16, kind: str = "auto", *, hop_limit: int | None = None,
                    seed: int = 0, progress: Callable[[str], None] | None = None,
                    workers: Workers | None = None) -> PathSet:
    """Up to ``k`` candidate paths per job, made as ``kind`` says (see :data:`CANDIDATE_KINDS`).

    Raises
    ------
    PlanError
        For an unknown ``kind``, or ``torus`` on a topology that is not a torus or mesh.
    """
    if kind not in CANDIDATE_KINDS:
        raise PlanError(f"unknown candidate kind {kind!r}; expected one of {', '.join(CANDIDATE_KINDS)}")
    if kind == "auto":
        n = topology.num_nodes
        kind = "diverse" if n <= 2048 else "spread" if n <= 16384 or not topology.is_torus else "torus"
    if kind == "torus":
        if not topology.is_torus:
            raise PlanError(f"torus candidates need a torus or mesh, not {topology.name!r}")
        return torus_paths(topology, demands, k, seed=seed, progress=progress)
    if kind == "spread":
        return spread_paths(topology, demands, k, seed=seed, progress=progress, workers=workers)
    return diverse_paths(topology, demands, k, hop_limit=hop_limit, seed=seed, progress=progress)


#: Planning methods. ``opt``: column generation to a certified gap; ``lp``: the LP over ``k``
#: diverse candidates per job; then the heuristics and the system's default routes.
METHODS = ("opt", "lp", "heu1", "heu2", "dynamic", "default")


def make_plan(topology, demands, method: str = "opt", *, k: int = 16, maxload: int = 16,
              unit: int = DEFAULT_UNIT, hop_limit: int | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
              solver: str = DEFAULT_SOLVER, time_limit: float | None = None, seed: int = 0,
              candidates: PathSet | None = None, gap: float = DEFAULT_GAP, hop_slack: int = DEFAULT_HOP_SLACK,
              qos: QoSClasses | None = None, candidate_kind: str = "auto",
              progress: Callable[[str], None] | None = None, comm=None) -> Plan:
    """Plan how every job's bytes travel.

    Parameters
    ----------
    topology : Topology
    demands : Demands
    method : {"opt", "lp", "heu1", "heu2", "dynamic", "default"}
        ``opt``: column generation on the max-throughput LP until the plan is within
        ``gap`` of a proven lower bound (or ``time_limit``); ``lp``: the LP over ``k``
        candidate paths per job; both solved with HiGHS and rounded to whole bytes;
        ``heu1``: Heuristic 1 with ``maxload``; ``heu2``: Heuristic 2 with ``unit``;
        ``dynamic``: heaviest pair first on its least-loaded shortest candidate;
        ``default``: the system's own routes.
    k : int
        Candidate paths per job (not used by ``default`` and ``opt``).
    hop_limit : int, optional
        Longest candidate path in hops; default the network diameter.
    chunk_size : int
        Chunk size recorded in the plan for the executor.
    solver, time_limit
        HiGHS algorithm (``lp``) and time limit in seconds (``opt`` and ``lp``). ``opt``
        returns the best plan found, never worse than its first restricted LP (whose paths
        include every job's default route); a time limit that ends before that LP is
        solved gives the default routes, with a warning.
    gap : float
        ``opt``: stop when the plan is within this fraction of the best lower bound.
    hop_slack : int
        ``opt``: paths at most this many hops longer than the job's shortest route.
    candidate_kind : {"auto", "diverse", "spread", "torus"}
        How candidates are made when not given (:func:`make_candidates`).
    qos : QoSClasses, optional
        ``opt``/``lp``: give class ``i`` the throughput ``alpha_i * T`` and maximise ``T``;
        ``info["qos_throughput_Bps"]`` then holds every class's rate.
    seed : int
        Seed of every random choice (candidate jitter, smoothed-price jitter).
    candidates : PathSet, optional
        Candidate paths to use instead of generating them (e.g. shared by several methods).
    progress : callable, optional
        Receives one-line progress messages (on rank 0 only under MPI).
    comm : mpi4py communicator, optional
        Every rank calls ``make_plan`` with the same arguments; the per-source work
        (candidate rounds, pricing) is spread over the ranks, rank 0 solves the LPs, and
        every rank returns the same plan, equal to a serial run's but for
        ``info["timings"]`` (which holds the rank count).

    Returns
    -------
    Plan
        Without zero-byte paths, with the cut lower bound; ``info`` says what the planner did
        (``warnings`` among it, e.g. when ``opt`` or ``lp`` fell back to the default routes
        because those were faster), and ``info["timings"]`` how long each step took: the only
        part of the plan that differs between two runs on the same inputs.

    Raises
    ------
    PlanError
        For an unknown method or invalid parameters; :class:`~optiq.errors.PathError` and
        :class:`~optiq.errors.SolverError` when paths or the LP fail (on every rank).

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import constant_ratio
    >>> t = torus((4, 4, 2)); d = constant_ratio(32, nbytes=2**20, num_sources=2, ratio=4)
    >>> opt, default = make_plan(t, d, "opt"), make_plan(t, d, "default")
    >>> opt.predicted_time_s < default.predicted_time_s
    True
    """
    workers = Workers(comm)
    if not workers.leader:
        return workers.serve()
    try:
        plan = _make_plan(topology, demands, method, k=k, maxload=maxload, unit=unit, hop_limit=hop_limit,
                          chunk_size=chunk_size, solver=solver, time_limit=time_limit, seed=seed,
                          candidates=candidates, gap=gap, hop_slack=hop_slack, qos=qos,
                          candidate_kind=candidate_kind, progress=progress, workers=workers)
    except BaseException as exc:
        workers.close(exc)
        raise
    return workers.close(plan)


def _check_parameters(topology, demands, method, *, solver, time_limit, gap, candidate_kind, **counts) -> None:
    """Refuse a bad argument by name before any work starts."""
    if not isinstance(topology, Topology):
        raise PlanError(f"topology must be a Topology (e.g. from_spec('bgq:1024')), not {type(topology).__name__}")
    if not isinstance(demands, Demands):
        raise PlanError(f"demands must be Demands (e.g. read_demands(FILE)), not {type(demands).__name__}")
    if method not in METHODS:
        raise PlanError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    low = {"k": 1, "maxload": 1, "unit": 1, "hop_limit": 1, "chunk_size": 1, "seed": 0, "hop_slack": 0}
    for name, value in counts.items():
        if value is None and name == "hop_limit":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low[name]:
            raise PlanError(f"{name} must be an integer >= {low[name]}, got {value!r}")
    if time_limit is not None and not (isinstance(time_limit, (int, float)) and 0 < time_limit < math.inf):
        raise PlanError(f"time_limit must be a finite number of seconds > 0, got {time_limit!r}")
    if not (isinstance(gap, (int, float)) and 0 <= gap < 1):
        raise PlanError(f"gap must be a fraction in [0, 1), got {gap!r}")
    if solver not in LP_SOLVERS:
        raise PlanError(f"unknown solver {solver!r}; expected one of {', '.join(LP_SOLVERS)}")
    if candidate_kind not in CANDIDATE_KINDS:
        raise PlanError(f"unknown candidate kind {candidate_kind!r}; expected one of {', '.join(CANDIDATE_KINDS)}")


#: Paths per job a plan holds while it is made, by method (``k`` for the fixed-candidate ones).
_PATHS_PER_JOB = {"default": 1, "opt": 8}


def plan_memory_estimate(topology, demands, method: str, k: int = 16) -> float:
    """Bytes a plan of ``method`` will need at its peak, estimated from its (path, hop) entries.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import constant_ratio
    >>> t = torus((4, 4)); d = constant_ratio(16, "disjoint", num_sources=2, ratio=4)
    >>> plan_memory_estimate(t, d, "lp", k=4) > plan_memory_estimate(t, d, "default") > 0
    True
    """
    if topology.dims is not None:  # closed-form distances: every job
        sample = np.arange(demands.num_jobs)
    else:  # a breadth-first search per source: a spread of 4,096 jobs
        sample = np.linspace(0, demands.num_jobs - 1, min(demands.num_jobs, 4096)).astype(np.int64)
    hops = max(1.0, float(topology.pair_hops(demands.src[sample], demands.dst[sample]).mean()))
    per_job = _PATHS_PER_JOB.get(method, k)
    stretch = 1.0 if method == "default" else 1.3  # other paths than the shortest are longer
    return demands.num_jobs * per_job * hops * stretch * PLAN_BYTES_PER_ENTRY


def _no_worse_than_default(topology, demands, method, paths: PathSet, nbytes, info: dict,
                           warnings: list[str]) -> tuple[PathSet, np.ndarray]:
    """The plan, or the machine's default routes when those finish sooner (and say so).

    ``opt`` and ``lp`` fall back to the default routes (``info["fallback"]`` records both
    times); a heuristic's plan is kept, with a warning.
    """
    default = system_routes(topology, demands)
    default_s = float((default.link_loads(demands.nbytes.astype(float), topology.num_links) / topology.capacity).max())
    own_s = float((paths.link_loads(np.asarray(nbytes, dtype=float), topology.num_links) / topology.capacity).max())
    if default_s >= own_s * (1 - 1e-9):
        return paths, nbytes
    if method in ("opt", "lp"):
        info["fallback"] = {"method_time_s": own_s, "default_time_s": default_s}
        warnings.append(f"the {method} plan ({own_s * 1e3:.4f} ms) is slower than the default routes "
                        f"({default_s * 1e3:.4f} ms): keeping the default routes")
        return default, demands.nbytes.copy()
    warnings.append(f"the {method} plan ({own_s * 1e3:.4f} ms) is slower than the default routes "
                    f"({default_s * 1e3:.4f} ms)")
    return paths, nbytes


def _make_plan(topology, demands, method: str, *, k: int, maxload: int, unit: int, hop_limit: int | None,
               chunk_size: int, solver: str, time_limit: float | None, seed: int, candidates: PathSet | None,
               gap: float, hop_slack: int, qos: QoSClasses | None, candidate_kind: str,
               progress: Callable[[str], None] | None, workers: Workers) -> Plan:
    _check_parameters(topology, demands, method, k=k, maxload=maxload, unit=unit, hop_limit=hop_limit,
                      chunk_size=chunk_size, solver=solver, time_limit=time_limit, seed=seed, gap=gap,
                      hop_slack=hop_slack, candidate_kind=candidate_kind)
    demands.check_against(topology)
    check_memory(plan_memory_estimate(topology, demands, method, k),
                 f"a {method} plan for {demands.num_jobs:,} jobs on {topology.name}",
                 hint="plan fewer jobs, or with fewer paths per job (--k)" if method not in ("default", "opt") else "")
    say = progress or (lambda msg: None)
    if qos is not None and method not in ("opt", "lp"):
        raise PlanError(f"QoS classes need method opt or lp, not {method!r}")
    sizes = None if qos is None else qos.effective_sizes(demands)
    info: dict = {"k": k} if method not in ("default", "opt") else {}
    timings: dict = {}
    warnings: list[str] = []
    start = time.perf_counter()
    bound = cut_lower_bound(topology, demands)
    bound_s, bound_from = bound.time_s, bound.cut
    say(f"cut lower bound {bound_s * 1e3:.4f} ms ({bound_from})")
    if method == "default":
        candidates = system_routes(topology, demands)
        nbytes = demands.nbytes.copy()
    elif method == "opt":
        cg = column_generation(topology, demands, gap=gap, hop_slack=hop_slack, time_limit=time_limit,
                               known_bound_s=bound.time_s if qos is None else 0.0, sizes=sizes, seed=seed,
                               progress=progress, workers=workers)
        candidates = cg.paths
        nbytes = round_to_bytes(candidates, demands, cg.share)
        if qos is None and cg.lower_bound_s > bound_s:
            bound_s, bound_from = cg.lower_bound_s, "Lagrangian bound from the column generation's link prices"
        info.update(gap_target=gap, hop_slack=hop_slack, cg_status=cg.status.value, iterations=cg.iterations,
                    generated_paths=cg.paths.num_paths, lp_time_s=cg.time_s, first_lp_time_s=cg.first_time_s,
                    gap=cg.gap)
        timings.update(paths_s=cg.paths_s, lp_s=cg.lp_s, price_s=cg.price_s)
        if cg.gap > gap and cg.status == CGStatus.NO_IMPROVING_PATH:
            warnings.append(f"column generation stopped {cg.gap:.2%} from the lower bound (target {gap:.2%}): no "
                            f"path within --hop-slack {hop_slack} hops of the shortest improves the plan; the gap "
                            f"left may be the hop limit's cost, a larger --hop-slack may close it")
        elif cg.iterations == 0:
            warnings.append(f"the time limit ({time_limit:g} s) ended before the first LP was solved: the plan "
                            f"is the default routes, {cg.gap:.2%} from the lower bound; allow more time")
        elif cg.gap > gap and cg.status == CGStatus.TIME_LIMIT:
            warnings.append(f"time limit reached {cg.gap:.2%} from the lower bound (target {gap:.2%})")
    else:
        if candidates is None:
            candidates = make_candidates(topology, demands, k, candidate_kind, hop_limit=hop_limit, seed=seed,
                                         progress=progress, workers=workers)
        elif candidates.num_jobs != demands.num_jobs:
            raise PlanError(f"candidates are for {candidates.num_jobs} jobs, the demands have {demands.num_jobs}")
        info["candidate_paths"] = candidates.num_paths
        timings["paths_s"] = time.perf_counter() - start
        say(f"{candidates.num_paths:,} candidate paths for {demands.num_jobs:,} jobs in {timings['paths_s']:.2f} s")
        t1 = time.perf_counter()
        if method == "lp":
            say(f"solving the LP with HiGHS ({solver})")
            sol = solve_lp(topology, demands, candidates, solver=solver, time_limit=time_limit, sizes=sizes,
                           progress=progress)
            if sol.status == LPStatus.FAILED:
                raise SolverError(f"HiGHS ({solver}) did not solve the LP")
            if sol.status == LPStatus.TIME_LIMIT:
                warnings.append("LP time limit reached: the plan is the best point HiGHS had found")
            nbytes = round_to_bytes(candidates, demands, sol.share)
            info.update(solver=solver, lp_status=sol.status.value)
            if sol.status == LPStatus.OPTIMAL:
                info["lp_time_s"] = sol.time_s
            timings.update(build_s=sol.build_s, solve_s=sol.solve_s)
        elif method == "heu1":
            nbytes = maxload_heuristic(topology, demands, candidates, maxload, progress=progress)
            info["maxload"] = maxload
        elif method == "heu2":
            nbytes = demand_aware_heuristic(topology, demands, candidates, unit, progress=progress)
            info["unit"] = unit
        else:
            nbytes = dynamic_routing(topology, demands, candidates, progress=progress)
        timings["plan_s"] = time.perf_counter() - t1
    if method != "default" and qos is None:
        candidates, nbytes = _no_worse_than_default(topology, demands, method, candidates, nbytes, info, warnings)
    if qos is not None:
        info["qos_shares"] = dict(qos.shares)
        if "lp_time_s" in info:
            info["qos_throughput_Bps"] = qos.class_throughputs(demands, info["lp_time_s"])
        else:
            warnings.append("the LP stopped at its time limit: no QoS throughputs to report")
    if warnings:
        info["warnings"] = warnings
    timings.update(ranks=workers.size, total_s=time.perf_counter() - start)
    info["timings"] = timings
    plan = Plan(topology, demands, candidates, np.asarray(nbytes, dtype=np.int64), chunk_size=chunk_size,
                method=method, lower_bound_time_s=bound_s, lower_bound_cut=bound_from, info=info)
    return plan.used()
