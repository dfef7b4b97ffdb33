"""The metrics of the OPTIQ evaluation table (paths, hops, hop-bytes, copies, link loads)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..paths import FORWARDED
from ..utils.checks import check_progress
from .tables import metrics_table

if TYPE_CHECKING:
    from typing import Any

    from ..plan import Plan

__all__ = ["Metrics", "plan_metrics"]


@dataclass(frozen=True)
class Metrics:
    """Per-plan metrics; bytes in bytes, times in seconds, rates in bytes/s.

    ``copies`` of a path are its chunks times its intermediate stops (each stop copies every
    chunk once; between stops the network carries the chunks, :mod:`optiq.paths.routing`).
    Per-link averages are over the links that carry something. Only paths that carry bytes
    count. ``gap`` is ``1 - lower_bound_time_s / predicted_time_s``: how far the plan can be
    from the best possible, at most.

    ``routing`` is how the paths reach the wire (``forwarded``: legs of the network's own
    routes; ``free``: the network must route every path as planned). ``realized_time_s`` is
    the busiest link's time when every leg takes the network's own route: for a forwarded
    plan it equals ``predicted_time_s``; for a free plan it is what a network that routes by
    its own rule would really do.

    ``predicted_time_s`` assumes every link is shared in proportion to the bytes its paths
    still have to send (what the executor does at every sending rank); ``fair_time_s`` is
    the same plan on a network that shares every link max-min fairly between the flows
    crossing it (:func:`optiq.sim.simulate_flows` with ``sharing="equal"``), as switches
    do: flows alone on a link run ahead and the others fall behind, so it is later, unless
    the paths are paced at their planned rates (``--pace-paths``), which keeps the
    predicted time. None when not computed (``fair=False``).

    ``default_time_s`` is the completion time of the same jobs on the machine's default
    routes (``Topology.default_routing``: a fabric's own forwarding tables, dimension order,
    ...), as the planner recorded it, else computed.

    ``lower_bound_time_s`` is checked, not trusted: the cut bound is recomputed from the
    topology and demands, and the bound stored in the plan counts only if no faster than
    the plan itself (a stored bound above the plan's own time is provably false; it is then
    ignored and ``bound_note`` says so). The larger of the two is reported.

    On a network that routes by ECMP (``routes=ecmp``, :mod:`optiq.paths.ecmp`) the routes
    differ from run to run: ``realized_time_s`` is then the mean over hash draws of the time
    with every leg on its hashed route, and the default row's ``predicted_time_s`` is that
    mean, with its 5th and 95th percentiles in ``predicted_p05_s`` and ``predicted_p95_s``
    (None elsewhere).

    ``cut_bound_s`` is the workload's cut bound alone (:func:`optiq.lp.cut_lower_bound`): no
    plan of any routing beats it, and it is the same for every plan of the same workload,
    in every command (the tables' ``/cut`` column). ``lower_bound_time_s`` may be tighter: the
    best proven for plans of this one's routing (by column generation, or for tables of one
    LID per port).
    """

    method: str
    routing: str
    jobs: int
    total_bytes: int
    total_paths: int
    paths_per_job_max: int
    paths_per_job_avg: float
    hops_max: int
    hops_avg: float
    hopbytes_per_path_max: float
    hopbytes_per_path_avg: float
    copies_per_path_max: int
    copies_per_path_avg: float
    paths_per_link_max: int
    paths_per_link_avg: float
    bytes_per_link_max: float
    bytes_per_link_avg: float
    predicted_time_s: float
    realized_time_s: float
    throughput_Bps: float
    lower_bound_time_s: float
    gap: float
    default_time_s: float = 0.0
    cut_bound_s: float = 0.0
    fair_time_s: float | None = None
    bound_note: str = ""
    predicted_p05_s: float | None = None
    predicted_p95_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        """The table ``optiq eval`` prints (:func:`optiq.metrics.metrics_table`)."""
        return metrics_table([self])


def plan_metrics(plan: Plan, *, check_bound: bool = True, fair: bool = True,
                 progress: Callable[[str], None] | None = None, default_time_s: float | None = None) -> Metrics:
    """Compute the :class:`Metrics` of a plan.

    ``check_bound=False`` takes the plan's stored lower bound as it is: for a plan this
    process has just made (the planner computed that bound), where recomputing the cut
    bound would only repeat the work. ``fair=False`` skips the max-min fair flow
    simulation of ``fair_time_s`` (seconds for a plan of tens of thousands of paths;
    ``progress`` hears about it). ``default_time_s`` replaces the default routes' time (for
    a job the fabric carries otherwise, e.g. split over its LIDs).

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> from optiq.planner import make_plan
    >>> plan = make_plan(torus((4, 4), bandwidth=1e9), Demands([0], [5], [2**20]), "default")
    >>> m = plan_metrics(plan)
    >>> m.total_paths, m.hops_max, m.bytes_per_link_max, m.copies_per_path_max   # one leg: no copy
    (1, 2, 1048576.0, 0)
    >>> m.routing, m.realized_time_s == m.predicted_time_s
    ('forwarded', True)
    """
    check_progress(progress)
    p = plan.used()
    ps, nbytes = p.paths, p.path_bytes.astype(float)
    hops = ps.hops
    per_job = ps.paths_per_job
    hopbytes = nbytes * hops
    copies = -(-p.path_bytes // p.chunk_size) * ps.copies
    link_paths = np.bincount(ps.links, minlength=p.topology.num_links)
    link_bytes = p.link_bytes
    used = link_paths > 0
    predicted = p.predicted_time_s
    total = int(p.demands.total_bytes)
    stored_cut = p.info.get("cut_bound_s")
    cut = float(stored_cut) if isinstance(stored_cut, (int, float)) and not check_bound else _cut_bound(p)
    bound, note = _checked_bound(p, predicted, cut) if check_bound else (float(p.lower_bound_time_s), "")
    fair_s = None
    if fair:
        from ..sim import simulate_flows

        fair_s = simulate_flows(p, "equal", progress=progress).completion_time_s
    default = p.info.get("default_time_s") if default_time_s is None else default_time_s
    if not isinstance(default, (int, float)) or isinstance(default, bool):
        default = predicted if p.method == "default" else _default_time(p)
    realized, p05, p95 = p.realized_time_s, None, None
    if p.topology.ecmp_seed is not None:  # the routes are hashed: times over the draws
        realized, p05, p95 = _ecmp_times(p)
        if p.method == "default" and p.routing == FORWARDED:
            predicted = realized
            if default_time_s is None:
                default = realized
        else:
            p05 = p95 = None
    return Metrics(
        method=p.method, routing=p.routing, jobs=p.demands.num_jobs, total_bytes=total, total_paths=ps.num_paths,
        paths_per_job_max=int(per_job.max()), paths_per_job_avg=float(per_job.mean()),
        hops_max=int(hops.max()), hops_avg=float(hops.mean()),
        hopbytes_per_path_max=float(hopbytes.max()), hopbytes_per_path_avg=float(hopbytes.mean()),
        copies_per_path_max=int(copies.max()), copies_per_path_avg=float(copies.mean()),
        paths_per_link_max=int(link_paths.max()), paths_per_link_avg=float(link_paths[used].mean()),
        bytes_per_link_max=float(link_bytes.max()), bytes_per_link_avg=float(link_bytes[used].mean()),
        predicted_time_s=predicted, realized_time_s=realized, predicted_p05_s=p05, predicted_p95_s=p95,
        throughput_Bps=total / predicted if predicted > 0 else float("inf"),
        lower_bound_time_s=bound, gap=max(0.0, 1.0 - bound / predicted) if predicted > 0 else 0.0,
        default_time_s=float(default), cut_bound_s=cut, fair_time_s=fair_s, bound_note=note)


def _ecmp_times(plan: Plan) -> tuple[float, float, float]:
    """Mean, 5th and 95th percentile of the plan's time with every leg on its ECMP route, over
    hash draws (:func:`optiq.paths.ecmp.ecmp_leg_spread`)."""
    from ..paths.ecmp import ecmp_leg_spread

    spread = ecmp_leg_spread(plan.paths, plan.path_bytes, plan.topology, seed=int(plan.topology.ecmp_seed or 0))
    return spread.mean_s, spread.p05_s, spread.p95_s


def _default_time(plan: Plan) -> float:
    """The busiest link's time when the plan's jobs take the machine's default routes."""
    from ..paths import system_routes

    routes = system_routes(plan.topology, plan.demands)
    return routes.busiest_link_time(plan.demands.nbytes.astype(float), plan.topology.capacity)


def _cut_bound(plan: Plan) -> float:
    """The cut bound of the plan's workload, computed."""
    from ..lp.bounds import cut_lower_bound

    return float(cut_lower_bound(plan.topology, plan.demands).time_s)


def _checked_bound(plan: Plan, predicted_s: float, cut: float) -> tuple[float, str]:
    """The larger of the recomputed cut bound and the plan's stored bound, if that one holds."""
    stored = float(plan.lower_bound_time_s)
    if stored > predicted_s * (1 + 1e-9):
        return cut, (f"the plan claims a lower bound of {stored * 1e3:.6g} ms, above its own time "
                     f"{predicted_s * 1e3:.6g} ms, so the claim is false; the recomputed cut bound is used")
    return max(cut, stored), ""
