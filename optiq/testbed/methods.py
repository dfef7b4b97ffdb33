"""What a testbed run measures: for every method, its plan, how the network carries it, and what moves it.

Each method becomes a :class:`Method`: the plan, the forwarding the kernel holds while it runs
(:class:`~optiq.testbed.forwarding.Forwarding`), and the MPI program that moves the bytes.

=============  ===================================  ======================  =================
method         plan                                 kernel routes           bytes moved by
=============  ===================================  ======================  =================
``default``    every pair on the network's route    the network's           ``MPI_Alltoallv``
planners       forwarded (``heu2``, ``opt``, ...)   the network's           the executor
``tables``     the job on tables written for it     the job tables          ``MPI_Alltoallv``
``dynamic``    one path per pair, switches chosen   per-pair rules          ``MPI_Alltoallv``
``M:free``     planner ``M``'s free plan            rules if one path per   ``MPI_Alltoallv``
                                                    pair, else the
                                                    network's (realized)    the executor
=============  ===================================  ======================  =================

A free plan that splits a pair over several paths cannot be carried by per-pair rules: MPI
has one connection per rank pair and a rule moves all of it. Such a plan runs on the
network's own routes, and its prediction is what those routes make of it (its realized time).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import PlanError, TestbedError
from ..paths import FORWARDED, FREE, network_routes
from ..planner import COMPARE_METHODS, compare_methods
from ..planner.compare import TABLES
from .forwarding import Forwarding, all_pairs

if TYPE_CHECKING:
    from ..plan import Plan
    from ..topology import Topology
    from ..workloads import Demands
    from .layout import Layout

__all__ = ["Method", "rerouted", "plan_methods", "methods_of_plan", "parse_methods", "FREE_SUFFIX", "NETWORK", "RULES",
           "REALIZED", "TABLE_ROUTES"]

#: ``M:free``: planner ``M``'s free plan.
FREE_SUFFIX = ":free"
#: How the network carries a method's bytes (a row's ``routing``).
NETWORK, RULES, REALIZED, TABLE_ROUTES = "network routes", "per-pair rules", "free, realized", "job tables"


@dataclass(eq=False)
class Method:
    """One row of a testbed run.

    Attributes
    ----------
    name : str
        As given (``default``, ``heu2``, ``tables``, ``opt:free`` ...).
    plan : Plan
        Its plan, on the network the testbed is built from (the ``tables`` plan: on the
        fabric with the job tables).
    routing : str
        ``forwarded`` (the executor's legs on the network's routes), or one of
        :data:`NETWORK`, :data:`TABLE_ROUTES`, :data:`RULES`, :data:`REALIZED`.
    runner : {"alltoallv", "executor"}
        What moves the bytes.
    forwarding : Forwarding
        The kernel's routes while it runs.
    model_time_s : float
        The busiest link's time on the plan's own capacities: the predicted time, or the
        realized time for a free plan on the network's routes.
    """

    name: str
    plan: Plan
    routing: str
    runner: str
    forwarding: Forwarding
    model_time_s: float

    def __repr__(self) -> str:
        return f"Method({self.name!r}, {self.routing}, by {self.runner}, {self.model_time_s * 1e3:.4g} ms)"

    def flows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The TCP flows it makes: ``(source host, destination host, bytes)``, one per pair for
        ``MPI_Alltoallv`` and one per leg for the executor (repeats not merged)."""
        plan = self.plan
        if self.runner == "alltoallv":
            dem = plan.demands
            return dem.src.copy(), dem.dst.copy(), dem.nbytes.astype(np.float64)
        used = plan.path_bytes > 0
        path, tail, head = plan.paths.leg_ends(plan.topology)
        keep = used[path]
        return tail[keep], head[keep], plan.path_bytes[path[keep]].astype(np.float64)

    def link_bytes(self, header: float, ack: float) -> np.ndarray:
        """Bytes every link carries in one run: each flow's bytes on its route times ``1 + header``,
        and ``ack`` times them on the route back (TCP's acknowledgements)."""
        src, dst, nbytes = self.flows()
        fwd = self.forwarding
        num_links = fwd.layout.topology.num_links
        out = np.zeros(num_links)
        for a, b, weight in ((src, dst, 1.0 + header), (dst, src, ack)):
            pairs = fwd.pair_index(a, b)
            routes = fwd.routes
            hops = routes.hops[pairs]
            from ..paths.pathset import csr_positions

            links = routes.links[csr_positions(routes.offsets[pairs], hops)]
            out += weight * np.bincount(links, weights=np.repeat(nbytes, hops), minlength=num_links)
        return out


def rerouted(method: Method, network: Forwarding) -> Forwarding | None:
    """The kernel's routes for ``method`` once the network has routed around a failure as
    ``network`` (its own routes after the sweep): the network's for methods that ride them, the
    same per-pair rules over the new tables, and None for job tables (they stay as loaded).
    """
    if method.routing == TABLE_ROUTES:
        return None
    if method.routing == RULES:
        dem, paths = method.plan.demands, method.plan.paths
        return network.with_routes(network.pair_index(dem.src[paths.job], dem.dst[paths.job]), paths)
    return network


def parse_methods(text: str | Sequence[str], topology: Topology) -> list[str]:
    """The method names of ``--methods``, checked before any planning.

    Raises
    ------
    PlanError
        For an unknown name, a repeat, ``tables`` off InfiniBand fabrics, or ``:free`` after a
        method that has no free plan.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> parse_methods("default, heu2,opt:free", torus((4, 4)))
    ['default', 'heu2', 'opt:free']
    >>> parse_methods("default,opt2", torus((4, 4)))
    Traceback (most recent call last):
    ...
    optiq.errors.PlanError: unknown method 'opt2' (choose from opt, lp, heu1, heu2, dynamic, default, tables, or a planner with :free, e.g. opt:free)
    """
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    if not names:
        raise PlanError("no methods given (e.g. default,heu2,opt)")
    if "adaptive" in names:
        raise PlanError("adaptive is the bound of ideal adaptive routing, not a plan a network runs: optiq compare "
                        "--methods ...,adaptive shows it beside the plans")
    known = [m for m in COMPARE_METHODS if m != "adaptive"]
    for name in names:
        base, free, _ = name.partition(FREE_SUFFIX)
        if name not in known and not (free and base in known and base not in ("default", "dynamic", TABLES)):
            raise PlanError(f"unknown method {name!r} (choose from {', '.join(known)}, or a planner with "
                            f"{FREE_SUFFIX}, e.g. opt{FREE_SUFFIX})")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise PlanError(f"method {repeated[0]} is given twice")
    if TABLES in names and topology.fabric is None:
        raise PlanError(f"the tables method writes an InfiniBand fabric's forwarding tables; {topology.name} is not "
                        f"one (ibnet:FILE)")
    return names


def plan_methods(layout: Layout, demands: Demands, names: Sequence[str], options: dict[str, Any] | None = None, *,
                 network: Forwarding | None = None, seed: int = 0, chunk_size: int | None = None,
                 progress: Callable[[str], None] | None = None) -> list[Method]:
    """Plan every method of ``names`` (checked by :func:`parse_methods`) for ``demands`` on the
    testbed's topology, ``default`` first if not given; forwarded methods share one candidate
    search, free ones another.

    Raises
    ------
    PlanError
        For a method a planner refuses.
    """
    topology = layout.topology
    names = list(dict.fromkeys(["default", *names]))
    network = network or Forwarding.network(layout)
    forwarded = [n for n in names if FREE_SUFFIX not in n]
    free = [n.removesuffix(FREE_SUFFIX) for n in names if FREE_SUFFIX in n]
    kwargs: dict[str, Any] = {"seed": seed, "progress": progress}
    if chunk_size is not None:
        kwargs["chunk_size"] = chunk_size
    plans = {run.method: run.plan for run in compare_methods(topology, demands, forwarded, options, routing=FORWARDED,
                                                              **kwargs)}
    if free:
        plans.update({f"{run.method}{FREE_SUFFIX}": run.plan for run in
                      compare_methods(topology, demands, free, options, routing=FREE, **kwargs)})
    return [_method(name, plans[name], layout, network) for name in names]


def methods_of_plan(layout: Layout, plan: Plan, *, network: Forwarding | None = None) -> list[Method]:
    """The rows of one plan file: ``default`` (its demands on the network's routes, moved by
    ``MPI_Alltoallv``) and the plan (a plan of the default routes is moved by the executor: the
    executor's own cost against MPI's, on the same routes)."""
    from ..planner import make_plan

    network = network or Forwarding.network(layout)
    default = make_plan(layout.topology, plan.demands, "default", chunk_size=plan.chunk_size)
    name = plan.method + (FREE_SUFFIX if plan.routing == FREE and plan.method != "dynamic" else "")
    return [_method("default", default, layout, network), _method(name if name != "default" else "plan", plan, layout,
                                                                  network)]


def _method(name: str, plan: Plan, layout: Layout, network: Forwarding) -> Method:
    if name == "default":
        return Method(name, plan, NETWORK, "alltoallv", network, plan.predicted_time_s)
    if name == TABLES:
        if plan.routing == FREE:
            raise TestbedError("tables split over several LIDs (--lmc) need senders that choose a LID per pair; "
                               "the testbed carries one route per pair")
        src, dst = all_pairs(layout.topology.num_endpoints)
        fwd = Forwarding.of_routes(layout, network_routes(plan.topology, src, dst))
        return Method(name, plan, TABLE_ROUTES, "alltoallv", fwd, plan.predicted_time_s)
    if plan.routing == FORWARDED:
        return Method(name, plan, FORWARDED, "executor", network, plan.predicted_time_s)
    used = plan.used()
    if np.array_equal(np.bincount(used.paths.job, minlength=used.demands.num_jobs), np.ones(used.demands.num_jobs)):
        dem = used.demands
        fwd = network.with_routes(network.pair_index(dem.src[used.paths.job], dem.dst[used.paths.job]), used.paths)
        return Method(name, used, RULES, "alltoallv", fwd, used.predicted_time_s)
    return Method(name, plan, REALIZED, "executor", network, plan.realized_time_s)
