"""One entry point for every planning method: :func:`make_plan`."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from .errors import PlanError, SolverError
from .heuristics import DEFAULT_UNIT, demand_aware_heuristic, dynamic_routing, maxload_heuristic
from .models import DEFAULT_SOLVER, LPStatus, cut_lower_bound, round_to_bytes, solve_lp
from .models.colgen import DEFAULT_GAP, DEFAULT_HOP_SLACK, column_generation
from .models.qos import QoSClasses
from .paths import PathSet, diverse_paths, system_routes
from .paths import spread_paths, torus_paths
from .paths.workers import Workers
from .plan import DEFAULT_CHUNK_SIZE, Plan

__all__ = ["make_plan", "make_candidates", "METHODS", "CANDIDATE_KINDS"]

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
        always finishes its first restricted LP, so its plan is never worse than the LP over
        its initial paths (every job's default route among them).
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
        every rank returns the same plan, equal to a serial run's but for its timings and
        ``info["ranks"]``.

    Returns
    -------
    Plan
        Without zero-byte paths, with the cut lower bound and timings in ``info``.

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


def _make_plan(topology, demands, method: str, *, k: int, maxload: int, unit: int, hop_limit: int | None,
               chunk_size: int, solver: str, time_limit: float | None, seed: int, candidates: PathSet | None,
               gap: float, hop_slack: int, qos: QoSClasses | None, candidate_kind: str,
               progress: Callable[[str], None] | None, workers: Workers) -> Plan:
    if method not in METHODS:
        raise PlanError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    demands.check_against(topology)
    say = progress or (lambda msg: None)
    if qos is not None and method not in ("opt", "lp"):
        raise PlanError(f"QoS classes need method opt or lp, not {method!r}")
    sizes = None if qos is None else qos.effective_sizes(demands)
    info: dict = {"k": k} if method not in ("default", "opt") else {}
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
                    gap=cg.gap, paths_s=cg.paths_s, lp_s=cg.lp_s, price_s=cg.price_s)
    else:
        if candidates is None:
            candidates = make_candidates(topology, demands, k, candidate_kind, hop_limit=hop_limit, seed=seed,
                                         progress=progress, workers=workers)
        elif candidates.num_jobs != demands.num_jobs:
            raise PlanError(f"candidates are for {candidates.num_jobs} jobs, the demands have {demands.num_jobs}")
        info["candidate_paths"] = candidates.num_paths
        info["paths_s"] = time.perf_counter() - start
        say(f"{candidates.num_paths:,} candidate paths for {demands.num_jobs:,} jobs in {info['paths_s']:.2f} s")
        t1 = time.perf_counter()
        if method == "lp":
            say(f"solving the LP with HiGHS ({solver})")
            sol = solve_lp(topology, demands, candidates, solver=solver, time_limit=time_limit, sizes=sizes,
                           progress=progress)
            if sol.status == LPStatus.FAILED:
                raise SolverError(f"HiGHS ({solver}) did not solve the LP")
            if sol.status == LPStatus.TIME_LIMIT:
                say("LP time limit reached: using the best point found so far")
            nbytes = round_to_bytes(candidates, demands, sol.share)
            info.update(solver=solver, lp_status=sol.status.value, lp_time_s=sol.time_s,
                        build_s=sol.build_s, solve_s=sol.solve_s)
        elif method == "heu1":
            nbytes = maxload_heuristic(topology, demands, candidates, maxload, progress=progress)
            info["maxload"] = maxload
        elif method == "heu2":
            nbytes = demand_aware_heuristic(topology, demands, candidates, unit, progress=progress)
            info["unit"] = unit
        else:
            nbytes = dynamic_routing(topology, demands, candidates, progress=progress)
        info["plan_s"] = time.perf_counter() - t1
    if qos is not None:
        lp_time = info["lp_time_s"]
        info["qos_shares"] = dict(qos.shares)
        info["qos_throughput_Bps"] = qos.class_throughputs(demands, lp_time)
    info["ranks"] = workers.size
    info["total_s"] = time.perf_counter() - start
    plan = Plan(topology, demands, candidates, np.asarray(nbytes, dtype=np.int64), chunk_size=chunk_size,
                method=method, lower_bound_time_s=bound_s, lower_bound_cut=bound_from, info=info)
    return plan.used()
