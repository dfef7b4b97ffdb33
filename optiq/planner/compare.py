"""Several methods on one workload, sharing one candidate search: the comparison behind
``optiq compare``, ``optiq demo`` and the studies."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import PlanError
from ..paths import FORWARDED, FREE
from ..paths.space import PathSpace
from ..plan import DEFAULT_CHUNK_SIZE
from .make import METHODS, default_routes_optimal, make_plan, record_ecmp_spread
from .methods import CandidatePlanner, make_candidates, planner_named, resolved_kind
from .tables import job_tables, split_plan

if TYPE_CHECKING:
    import numpy as np

    from ..paths import PathSet
    from ..plan import Plan
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["MethodRun", "compare_methods", "COMPARE_METHODS", "TABLES"]

#: The method that routes the job by forwarding tables written for it (:mod:`optiq.planner.tables`):
#: on an InfiniBand fabric only, beside the planners.
TABLES = "tables"
#: Every method :func:`compare_methods` takes.
COMPARE_METHODS = (*METHODS, TABLES)


@dataclass(frozen=True)
class MethodRun:
    """One method's plan and the seconds it took (the shared candidate search excluded)."""

    method: str
    plan: Plan
    plan_s: float

    def __repr__(self) -> str:
        return (f"MethodRun({self.method!r}, predicted {self.plan.predicted_time_s * 1e3:.4g} ms, "
                f"planned in {self.plan_s:.2f} s)")


def compare_methods(topology: Topology, demands: Demands, methods: Sequence[str], options: dict[str, Any] | None = None,
                    *, chunk_size: int = DEFAULT_CHUNK_SIZE, seed: int = 0,
                    progress: Callable[[str], None] | None = None, routing: str = FORWARDED,
                    max_intermediates: int = 1, split: np.ndarray | None = None) -> list[MethodRun]:
    """Plan ``demands`` with every method, each taking the ``options`` that apply to it.

    The candidate paths are searched once, as the first method that picks among candidates
    asks (its ``k``, kind and hop limit), and given to every method that picks among them and
    plans with the same ``routing`` (``dynamic`` is always free and makes its own); where
    ``auto`` gives a greedy heuristic other candidates than an LP (:func:`make_candidates`),
    once for each, so every method plans as :func:`make_plan` would plan it alone. Every plan
    then carries the best lower bound proven for plans of its routing, whichever method
    proved it.

    Parameters
    ----------
    topology : Topology
    demands : Demands
    methods : sequence of str
        Names from :data:`optiq.planner.METHODS`, or ``"tables"`` on an InfiniBand fabric:
        the job on forwarding tables written for it (:func:`optiq.planner.tables.job_tables`),
        routed by destination with one LID per port, its bound the best any such tables can
        do (:func:`optiq.planner.tables.single_path_bound`) where that is higher.
    options : dict, optional
        Planner parameters (``k``, ``time_limit``, ``gap``, ...); each method takes those it has
        (:func:`optiq.planner.planner_named`).
    chunk_size, seed : int
        As for :func:`optiq.planner.make_plan`.
    routing : {"forwarded", "free"}
    max_intermediates : int
        As for :func:`optiq.planner.make_plan`.
    split : ndarray, optional
        On a fabric routed with LMC > 0, the bytes each pair sends to each of its
        destination's LIDs (:func:`optiq.workloads.read_split`): ``default`` is then the job
        as the fabric's tables carry it with the senders splitting so
        (:func:`optiq.planner.tables.split_plan`), and every plan's ``/default`` is against it.
    progress : callable, optional

    Returns
    -------
    list of MethodRun
        In the order of ``methods``.

    Raises
    ------
    PlanError
        For an unknown method or a parameter it refuses.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import constant_ratio
    >>> runs = compare_methods(torus((4, 4), bandwidth=1e9), constant_ratio(16, nbytes=2**20, num_sources=2, ratio=4),
    ...                        ["default", "heu2", "opt"], dict(k=4))
    >>> [r.method for r in runs], runs[2].plan.predicted_time_s <= runs[0].plan.predicted_time_s
    (['default', 'heu2', 'opt'], True)
    """
    planners = [None if method == TABLES else planner_named(method, **(options or {}))[0] for method in methods]
    if TABLES in methods and topology.fabric is None:
        raise PlanError(f"the tables method writes an InfiniBand fabric's forwarding tables; {topology.name} is not "
                        f"a fabric (ibnet:FILE)")
    first = next((p for p in planners if isinstance(p, CandidatePlanner) and (p.routing or routing) == routing), None)
    # the candidates ``first`` asks for, made once per kind they resolve to (``auto`` may give a
    # greedy heuristic other paths than an LP), before any method's plan is timed
    shared: list[PathSet | None] = [None] * len(planners)
    # where the default routes are optimal every method keeps them without candidates, as alone
    if first is not None and not default_routes_optimal(topology, demands, shortest=False):
        space = PathSpace(topology, demands, routing, max_intermediates=max_intermediates, seed=seed,
                          progress=progress)
        made: dict[str, PathSet] = {}
        for i, planner in enumerate(planners):
            if not isinstance(planner, CandidatePlanner) or (planner.routing or routing) != routing:
                continue
            greedy = not planner.solves_lp
            kind = "chains" if space.kind == "chains" else resolved_kind(topology, demands, first.candidate_kind,
                                                                           greedy)
            if kind not in made:
                made[kind] = make_candidates(topology, demands, first.k_for(demands.num_jobs), first.candidate_kind,
                                             hop_limit=first.hop_limit, seed=seed, progress=progress, space=space,
                                             stops=False, greedy=greedy)
            shared[i] = made[kind]
    runs = []
    carried: Plan | None = None  # the job as the tables carry it with the split (the default row)
    for method, planner, given in zip(methods, planners, shared):
        if progress:
            progress(f"planning with {method}")
        start = time.perf_counter()
        if planner is None:
            plan = _tables_plan(topology, demands, progress)
        elif split is not None and method == "default":
            plan = carried = split_plan(topology, demands, split)
        else:
            plan = make_plan(topology, demands, planner, progress=progress, candidates=given, chunk_size=chunk_size,
                             seed=seed, routing=routing, max_intermediates=max_intermediates)
        runs.append(MethodRun(method, plan, time.perf_counter() - start))
    if split is not None:
        carried_s = (carried or split_plan(topology, demands, split)).predicted_time_s
        for run in runs:
            run.plan.record.default_time_s = carried_s
    _share_bounds([run.plan for run in runs])
    return runs


def _tables_plan(topology: Topology, demands: Demands, progress: Callable[[str], None] | None) -> Plan:
    """The job on tables written for it, bounded by what any such tables can do."""
    made = job_tables(topology, demands, progress=progress)
    plan = made.plan()
    if made.bound_s > plan.lower_bound_time_s:
        plan.lower_bound_time_s = made.bound_s
        plan.lower_bound_cut = "the best any tables of one LID per port can do (each pair on one path)"
    if topology.ecmp_seed is None:
        plan.record.default_time_s = made.given_time_s  # against the tables it replaces
    else:  # against the network's hashed routes, as every row
        record_ecmp_spread(plan.record, topology, demands)
    plan.record.warnings.extend(made.report.problems())
    return plan


def _share_bounds(plans: list[Plan]) -> None:
    """Give every plan the best lower bound proven for plans like it.

    A bound proven by column generation bounds every plan of its path space: a free plan's
    bounds every plan, a forwarded plan's every forwarded plan of the same space and network
    routes (one comparison plans every forwarded method in one). Each row then compares
    against the same bound, and equal times read equal.
    """
    for plan in plans:
        holds = [other for other in plans if other.routing == FREE
                 or (other.routing == plan.routing and other.topology is plan.topology)]
        best = max(holds, key=lambda other: other.lower_bound_time_s)
        if plan.lower_bound_time_s < best.lower_bound_time_s <= plan.predicted_time_s * (1 + 1e-9):
            plan.lower_bound_time_s = best.lower_bound_time_s
            plan.lower_bound_cut = f"{best.lower_bound_cut} (proven by {best.method})"
