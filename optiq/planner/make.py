"""One entry point for every planning method: :func:`make_plan`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ParameterError, PlanError
from ..lp import cut_lower_bound
from ..mpi.workers import Workers
from ..paths import FORWARDED, ROUTINGS, PathSet, network_routes
from ..paths.chains import MAX_INTERMEDIATES
from ..paths.kept import kept_candidates, kept_for_pairs
from ..paths.space import PathSpace
from ..plan import DEFAULT_CHUNK_SIZE, Plan, PlanRecord
from ..topology import Topology
from ..utils.checks import check_count, check_progress
from ..utils.resources import PLAN_BYTES_PER_ENTRY, check_memory
from ..workloads import Demands
from ..workloads.qos import QoSClasses
from .methods import (
    PLANNERS,
    CandidatePlanner,
    Context,
    Planner,
    PlannerResult,
    SystemRoutes,
    check_candidate_kind,
    planner_named,
)

__all__ = ["make_plan", "check_plan_options", "default_routes_optimal", "plan_memory_estimate", "METHODS"]

#: Planning methods. ``opt``: column generation to a certified gap; ``lp``: the LP over ``k``
#: diverse candidates per job; then the heuristics and the system's default routes.
METHODS = tuple(PLANNERS)


def make_plan(topology: Topology, demands: Demands, method: str | Planner = "opt", *,
              chunk_size: int = DEFAULT_CHUNK_SIZE, seed: int = 0, candidates: PathSet | None = None,
              qos: QoSClasses | None = None, progress: Callable[[str], None] | None = None, comm: Any = None,
              routing: str = FORWARDED, max_intermediates: int = 1, forwarders: np.ndarray | None = None,
              **params: Any) -> Plan:
    """Plan how every job's bytes travel.

    Parameters
    ----------
    topology : Topology
    demands : Demands
    method : str or Planner
        A planner object (:mod:`optiq.planner.methods`) carrying its parameters, or its name
        with the parameters as keywords: ``"opt"`` (:class:`ColumnGeneration`: ``gap``,
        ``hop_slack``, ``time_limit``), ``"lp"`` (:class:`PathLP`: ``k``, ``solver``,
        ``time_limit``), ``"heu1"`` (:class:`MaxLoad`: ``maxload``), ``"heu2"``
        (:class:`DemandAware`: ``unit``), ``"dynamic"`` (:class:`Dynamic`) and
        ``"default"`` (:class:`SystemRoutes`); the candidate-based ones also take ``k``,
        ``hop_limit`` and ``candidate_kind``. A keyword the method does not take is not
        used, and the plan's warnings say so.
    chunk_size : int
        Chunk size recorded in the plan for the executor.
    seed : int
        Seed of every random choice (candidate jitter, smoothed-price jitter).
    candidates : PathSet, optional
        Candidate paths to use instead of generating them (e.g. shared by several methods).
    qos : QoSClasses, optional
        ``opt``/``lp``: give class ``i`` the throughput ``alpha_i * T`` and maximise ``T``;
        ``info["qos_throughput_Bps"]`` then holds every class's rate.
    progress : callable, optional
        Receives one-line progress messages (on rank 0 only under MPI).
    comm : mpi4py communicator, optional
        Every rank calls ``make_plan`` with the same arguments; the per-source work
        (candidate rounds, pricing) is spread over the ranks, rank 0 solves the LPs, and
        every rank returns the same plan, equal to a serial run's but for
        ``info["timings"]`` (which holds the rank count).
    routing : {"forwarded", "free"}
        ``forwarded`` (default): every path is a chain of legs, each the network's own route
        between two ranks, stopping (a copy) only between legs, so the plan holds on the
        network as it routes (:mod:`optiq.paths.routing`): on tori a path may turn at any
        node; on fat-trees, fabrics and dragonflies it is the direct route or a chain
        through intermediate ranks. ``free``: paths go anywhere and stop at every rank, for a
        network that routes every path as planned (an upper bound). ``dynamic`` is always free.
    max_intermediates : int
        Forwarded plans on networks whose switches are not ranks: intermediate ranks a chain
        may stop at (1, or 2 for ``opt``'s pricing and the lean step, at a cost per
        iteration that grows with the square of the ranks).
    forwarders : array of int, optional
        Forwarded plans: the endpoints a path may stop at (default all; ``optiq.alltoallv``
        gives the hosts that run a rank).

    Returns
    -------
    Plan
        Without zero-byte paths, with the best proven lower bound; its ``record`` (a
        :class:`~optiq.plan.PlanRecord`, saved as the file's ``info``) says what the planner
        did: its parameters, ``warnings``
        (e.g. when ``opt`` or ``lp`` fell back to the default routes because those were
        faster), and ``timings``, the only part of the plan that differs between two runs
        on the same inputs. ``opt`` returns the best plan found, never worse than its first
        restricted LP (whose paths include every job's default route); a time limit that
        ends before that LP is solved gives the default routes, with a warning.

    Raises
    ------
    ParameterError
        For an unknown method or routing, or invalid parameters (a :class:`~optiq.errors.PlanError`).
    PathError, SolverError
        When paths or the LP fail (on every rank).
    PlanError
        For candidates made for other demands.

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
        served: Plan = workers.serve()
        return served
    try:
        plan = _make_plan(topology, demands, method, params, chunk_size=chunk_size, seed=seed,
                          candidates=candidates, qos=qos, progress=progress, workers=workers, routing=routing,
                          max_intermediates=max_intermediates, forwarders=forwarders)
    except KeyboardInterrupt:
        raise  # every rank was interrupted: closing together could wait for one that has left
    except BaseException as exc:
        workers.close(exc)
        raise
    closed: Plan = workers.close(plan)
    return closed


def check_plan_options(method: str | Planner, *, chunk_size: Any = DEFAULT_CHUNK_SIZE, seed: Any = 0,
                       routing: Any = FORWARDED, max_intermediates: Any = 1, progress: Any = None,
                       **params: Any) -> tuple[Planner, list[str]]:
    """The planner :func:`make_plan` would plan with for ``method`` and these keywords, and
    the names of those it does not take; a bad one is refused by name, before any work and
    without a network (a call that plans later checks its options here first).

    Raises
    ------
    ParameterError
        For an unknown method or keyword, or a value out of range.

    Examples
    --------
    >>> check_plan_options("heu2", k=4)[0].name
    'heu2'
    >>> check_plan_options("heu2", kk=4)
    Traceback (most recent call last):
    optiq.errors.ParameterError: unknown planner parameter 'kk'
    """
    check_progress(progress)
    if routing not in ROUTINGS:
        raise ParameterError(f"unknown routing {routing!r}; expected one of {', '.join(ROUTINGS)}")
    check_count("max_intermediates", max_intermediates, 1)
    if max_intermediates > MAX_INTERMEDIATES:
        raise ParameterError(f"max_intermediates must be at most {MAX_INTERMEDIATES}, got {max_intermediates}")
    check_count("chunk_size", chunk_size, 1)
    check_count("seed", seed, 0)
    if isinstance(method, Planner):
        if params:
            raise ParameterError(f"give {', '.join(sorted(params))} to the {type(method).__name__} object, not to "
                            f"make_plan")
        return method, []
    if not isinstance(method, str):
        raise ParameterError(f"method must be a name ({', '.join(METHODS)}) or a Planner, not {type(method).__name__}")
    return planner_named(method, **params)


def _check_parameters(topology: Any, demands: Any, method: str | Planner, params: dict[str, Any], *,
                      chunk_size: Any, seed: Any, routing: Any = FORWARDED,
                      max_intermediates: Any = 1, progress: Any = None) -> tuple[Planner, list[str]]:
    """Refuse a bad argument by name before any work starts; the planner and the unused keywords."""
    if not isinstance(topology, Topology):
        raise ParameterError(f"topology must be a Topology (e.g. from_spec('bgq:1024')), not {type(topology).__name__}")
    if not isinstance(demands, Demands):
        raise ParameterError(f"demands must be Demands (e.g. read_demands(FILE)), not {type(demands).__name__}")
    return check_plan_options(method, chunk_size=chunk_size, seed=seed, routing=routing,
                              max_intermediates=max_intermediates, progress=progress, **params)


def plan_memory_estimate(topology: Topology, demands: Demands, method: str | Planner, k: int = 16) -> float:
    """Bytes a plan of ``method`` will need at its peak, estimated from its (path, hop) entries.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import constant_ratio
    >>> t = torus((4, 4)); d = constant_ratio(16, "disjoint", num_sources=2, ratio=4)
    >>> plan_memory_estimate(t, d, "lp", k=4) > plan_memory_estimate(t, d, "default") > 0
    True
    """
    kept = kept_for_pairs(topology, demands)   # the mean hops depend on the pairs alone
    hops = kept.get(_MEAN_HOPS)
    if hops is None:
        if topology.dims is not None:  # closed-form distances: every job
            sample = np.arange(demands.num_jobs)
        else:  # a breadth-first search per source: a spread of 4,096 jobs
            sample = np.linspace(0, demands.num_jobs - 1, min(demands.num_jobs, 4096)).astype(np.int64)
        hops = kept[_MEAN_HOPS] = max(1.0, float(topology.pair_hops(demands.src[sample], demands.dst[sample]).mean()))
    planner = planner_named(method, k=k)[0] if isinstance(method, str) else method
    per_job = planner.paths_per_job
    stretch = 1.0 if isinstance(planner, SystemRoutes) else 1.3  # other paths than the shortest are longer
    return demands.num_jobs * per_job * hops * stretch * PLAN_BYTES_PER_ENTRY


#: The key of the jobs' mean hops in :func:`optiq.paths.kept.kept_for_pairs`'s dict.
_MEAN_HOPS = "mean hops"


def _default_routes(topology: Topology, demands: Demands, progress: Callable[[str], None] | None) -> PathSet:
    """The network's routes of ``demands``' pairs, the very same set for the same pairs under
    the same fabric (kept with them, beside the candidates)."""
    return kept_candidates(topology, demands, "network routes",
                           lambda: network_routes(topology, demands.src, demands.dst, progress=progress),
                           slot="default routes")


def _no_worse_than_default(topology: Topology, demands: Demands, planner: Planner, paths: PathSet,
                           nbytes: np.ndarray, record: PlanRecord, default: PathSet,
                           say: Callable[[str], None] | None = None) -> tuple[PathSet, np.ndarray]:
    """The plan, or the machine's default routes when those finish sooner (and say so).

    Every method falls back to the default routes (``info["fallback"]`` records both times):
    ``opt`` and ``lp`` with a warning (their LP should not lose to a route it holds), the
    heuristics, which start from those routes and may place worse, with a progress line.
    """
    default_s = default.busiest_link_time(demands.nbytes.astype(float), topology.capacity)  # (ECMP: not the mean)
    own_s = paths.busiest_link_time(np.asarray(nbytes, dtype=float), topology.capacity)
    if default_s >= own_s * (1 - 1e-9):
        return paths, nbytes
    method = planner.name
    record.fallback = {"method_time_s": own_s, "default_time_s": default_s}
    said = (f"the {method} plan ({own_s * 1e3:.4f} ms) is slower than the default routes ({default_s * 1e3:.4f} ms): "
            f"keeping the default routes")
    if planner.solves_lp:
        record.warnings.append(said)
    elif say is not None:
        say(said)
    return default, demands.nbytes.copy()


def default_routes_optimal(topology: Topology, demands: Demands, *, shortest: bool = True) -> bool:
    """Whether the network's own routes of ``demands`` finish at the cut bound and, with
    ``shortest``, are shortest paths: then no plan is faster (and, shortest, none of that time
    moves fewer hop-bytes), and a method keeps them without planning
    (``info["default_optimal"]``): a method that minimises the time alone where they finish at
    the bound, ``opt`` with its lean step, which then minimises hop-bytes, where they are also
    shortest.

    Raises
    ------
    WorkloadError
        If a job's source or destination is not an endpoint of ``topology``.

    Examples
    --------
    >>> from optiq.topology import from_spec, torus
    >>> from optiq.workloads import Demands
    >>> d = Demands([0, 1, 2, 3], [1, 2, 3, 0], [8, 8, 8, 8])
    >>> default_routes_optimal(from_spec("fattree:k=4,n=1"), d)   # one switch: one route per pair
    True
    >>> default_routes_optimal(torus((4,)), Demands([0, 0], [1, 2], [8, 8]))   # both leave 0 the same way
    False
    """
    demands.check_against(topology)
    default = _default_routes(topology, demands, None)
    return _optimal_routes(topology, demands, default,
                           default.busiest_link_time(demands.nbytes.astype(float), topology.capacity),
                           cut_lower_bound(topology, demands).time_s, shortest)


def _optimal_routes(topology: Topology, demands: Demands, default: PathSet, default_s: float, bound_s: float,
                    shortest: bool) -> bool:
    """:func:`default_routes_optimal` of routes ``default`` that finish in ``default_s`` under a
    cut bound of ``bound_s``."""
    if default_s > bound_s * (1 + 1e-9):
        return False
    return not shortest or bool((default.hops == topology.pair_hops(demands.src, demands.dst)).all())


def _make_plan(topology: Topology, demands: Demands, method: str | Planner, params: dict[str, Any], *,
               chunk_size: int, seed: int, candidates: PathSet | None, qos: QoSClasses | None,
               progress: Callable[[str], None] | None, workers: Workers, routing: str, max_intermediates: int,
               forwarders: np.ndarray | None) -> Plan:
    planner, unused = _check_parameters(topology, demands, method, params, chunk_size=chunk_size, seed=seed,
                                        routing=routing, max_intermediates=max_intermediates, progress=progress)
    name = planner.name
    demands.check_against(topology)
    check_memory(plan_memory_estimate(topology, demands, planner),
                 f"a {name} plan for {demands.num_jobs:,} jobs on {topology.name}",
                 hint="plan fewer jobs, or with fewer paths per job (--k)" if isinstance(planner, CandidatePlanner) else "")
    if qos is not None and not planner.solves_lp:
        raise ParameterError(f"QoS classes need method opt or lp, not {name!r}")
    record = PlanRecord()
    if unused:
        record.warnings.append(f"{', '.join(unused)} {'does' if len(unused) == 1 else 'do'} not apply to {name} "
                               f"and {'was' if len(unused) == 1 else 'were'} not used")
    start = time.perf_counter()
    space = PathSpace(topology, demands, planner.routing or routing, max_intermediates=max_intermediates, seed=seed,
                      forwarders=forwarders, progress=progress)
    if isinstance(planner, CandidatePlanner):
        check_candidate_kind(topology, space, planner.candidate_kind)
    bound = cut_lower_bound(topology, demands)
    default = _default_routes(topology, demands, progress)
    record.default_routing = topology.default_routing
    record.cut_bound_s = bound.time_s
    record.default_time_s = default_s = default.busiest_link_time(demands.nbytes.astype(float), topology.capacity)
    if topology.ecmp_seed is not None:  # the routes differ from run to run: every gain is over their mean
        record_ecmp_spread(record, topology, demands)
    if candidates is not None:
        if candidates.num_jobs != demands.num_jobs:
            raise PlanError(f"candidates are for {candidates.num_jobs} jobs, the demands have {demands.num_jobs}")
        space.check(candidates)
    ctx = Context(topology=topology, demands=demands, seed=seed,
                  sizes=None if qos is None else qos.effective_sizes(demands), bound_s=bound.time_s,
                  bound_from=bound.cut, candidates=candidates, default=default, progress=progress, workers=workers,
                  space=space)
    ctx.say(f"cut lower bound {bound.time_s * 1e3:.4f} ms ({bound.cut})")
    # where the default routes are optimal, planning cannot gain (not asked of ``default`` itself,
    # nor where the caller gave candidates to choose from or QoS classes to share)
    if not isinstance(planner, SystemRoutes) and candidates is None and qos is None and \
            _optimal_routes(topology, demands, default, default_s, bound.time_s, planner.fewest_hops):
        ctx.say(f"the default routes finish at the cut bound ({record.default_time_s * 1e3:.4f} ms): no plan is "
                f"faster, so {name} keeps them")
        record.default_optimal = True
        result = PlannerResult(default, demands.nbytes.copy())
    else:
        result = planner.run(ctx)
    record.update(result.record)
    if space.note:
        record.warnings.append(space.note)
    paths, nbytes = result.paths, result.path_bytes
    bound_s, bound_from = (result.bound_s, result.bound_from) if result.bound_s is not None else (bound.time_s, bound.cut)
    if not isinstance(planner, SystemRoutes) and qos is None:
        paths, nbytes = _no_worse_than_default(topology, demands, planner, paths, nbytes, record, default, progress)
    nbytes = np.asarray(nbytes, dtype=np.int64)
    used = nbytes > 0  # the plan keeps the paths that carry bytes (stops and checks for those alone)
    own_routes = paths is default  # the network's routes by construction: no leg to check
    # link paths' stops come from forwarded_stops, which ends a leg where the path leaves the
    # network's route: its legs are those routes by construction too
    legs_built = own_routes or space.kind == "links"
    # a forwarded path that is the network's own route is one leg: its stops are its end
    one_leg = own_routes and space.kind != "free"
    (paths, checked), nbytes = (paths.select(used), False) if one_leg else space.finish_used(paths, used), nbytes[used]
    if qos is not None:
        record.qos_shares = dict(qos.shares)
        if record.lp_time_s is not None:
            record.qos_throughput_Bps = qos.class_throughputs(demands, record.lp_time_s)
        else:
            record.warnings.append("the LP stopped at its time limit: no QoS throughputs to report")
    record.timings.update(ranks=workers.size, total_s=time.perf_counter() - start)
    return Plan(topology, demands, paths, nbytes, chunk_size=chunk_size,
                method=name, lower_bound_time_s=bound_s, lower_bound_cut=bound_from, record=record,
                routing=space.routing, check_legs=not legs_built, check_paths=not checked)


def record_ecmp_spread(record: PlanRecord, topology: Topology, demands: Demands) -> None:
    """Record the default routes' time on an ECMP network (:func:`optiq.paths.ecmp.ecmp_spread`):
    the mean over hash draws as ``default_time_s``, and its 5th and 95th percentiles."""
    from ..paths.ecmp import ecmp_spread

    spread = ecmp_spread(topology, demands, seed=int(topology.ecmp_seed or 0))
    record.default_time_s, record.default_p05_s, record.default_p95_s = spread.mean_s, spread.p05_s, spread.p95_s
    record.default_draws = spread.draws
