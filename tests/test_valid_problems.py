"""No valid problem is refused: every method plans random small problems of every kind of network.

Sizes are drawn log-uniform from 1 B to 1 TiB, so one LP holds coefficients twelve orders of
magnitude apart, the scaling under which a solver may end without a solution. Every method
must return a plan that validates, that no plan beats (its cut bound), and that is no slower
than the network's own routes where the method is an optimiser; ``opt`` must also meet the
gap it was asked for. One draw per kind in the fast lane; more seeds in the slow lane.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_graph_topology, synthetic_ibnet

from optiq.lp import cut_lower_bound
from optiq.planner import METHODS, make_plan
from optiq.topology import from_spec
from optiq.workloads import Demands

TIB = 2**40
#: kind -> spec of a small network of that kind
KINDS = {
    "ring": "torus:5",
    "torus": "torus:2x2x2",
    "torus2d": "torus:3x4",
    "mesh": "mesh:3x2",
    "fattree": "fattree:k=4,n=2",
    "cluster": "cluster:hosts=8,edges=2,cores=1",
    "dragonfly": "dragonfly:p=1,a=2,h=1",
    "bgq": "bgq:32",
    "graph": None,   # a random graph of mixed capacities
    "ibnet": None,   # a synthetic InfiniBand fabric with its own forwarding tables
}
#: methods that optimise: never slower than the network's own routes
OPTIMISERS = ("opt", "lp", "heu2")


def network(kind: str, tmp_path):
    if kind == "graph":
        return random_graph_topology(11)
    if kind == "ibnet":
        return synthetic_ibnet(tmp_path)
    return from_spec(KINDS[kind])


def random_problem(topology, seed: int, jobs: int | None = None) -> Demands:
    """``jobs`` (else 1 to 24) distinct pairs, each of a size log-uniform in [1 B, 1 TiB]."""
    rng = np.random.default_rng(seed)
    n = topology.num_endpoints
    jobs = min(jobs or int(rng.integers(1, 25)), n * (n - 1))
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < jobs:
        s, d = (int(v) for v in rng.integers(0, n, 2))
        if s != d:
            pairs.add((s, d))
    src, dst = zip(*sorted(pairs))
    sizes = np.exp(rng.uniform(0.0, np.log(TIB), jobs)).round().astype(np.int64).clip(1, TIB)
    return Demands(src, dst, sizes)


def check_every_method(topology, demands: Demands) -> None:
    bound = cut_lower_bound(topology, demands).time_s
    plans = {m: make_plan(topology, demands, m, seed=0) for m in METHODS}
    default_s = plans["default"].predicted_time_s
    for method, plan in plans.items():
        plan.validate()
        assert plan.demands.num_jobs == demands.num_jobs and (plan.paths.paths_per_job > 0).all(), method
        assert plan.predicted_time_s >= bound * (1 - 1e-9), (method, plan.predicted_time_s, bound)
        assert plan.predicted_time_s >= plan.lower_bound_time_s * (1 - 1e-9), method
        if method in OPTIMISERS:
            assert plan.predicted_time_s <= default_s * (1 + 1e-9), (method, plan.predicted_time_s, default_s)
    opt = plans["opt"]
    gap = opt.record.gap_target or 0.0  # none: the network's own routes were proven optimal
    assert opt.predicted_time_s <= opt.lower_bound_time_s * (1 + gap) * (1 + 1e-9), (opt.record, gap)


@pytest.mark.parametrize("kind", KINDS)
def test_every_method_plans_every_kind(kind, tmp_path):
    topology = network(kind, tmp_path)
    check_every_method(topology, random_problem(topology, seed=1000 + len(kind), jobs=16))


def test_the_reported_torus_case():
    """The 14 pairs of 1 B to 3 MiB on which the restricted LP once ended with no solution
    (interior point taking over from a stalled first-order solve at the first-order tolerance)."""
    rows = [(0, 2, 1), (0, 3, 3145745), (0, 6, 3145745), (1, 3, 4095), (1, 6, 65537), (2, 1, 1), (3, 0, 3145745),
            (3, 1, 1), (4, 2, 3145745), (4, 6, 1), (5, 0, 3145745), (5, 2, 4095), (6, 0, 1000003), (6, 1, 3145745)]
    src, dst, size = zip(*rows)
    topology = from_spec("torus:2x2x2")
    demands = Demands(src, dst, size)
    check_every_method(topology, demands)
    for lean in (True, False):
        plan = make_plan(topology, demands, "opt", lean=lean)
        assert plan.predicted_time_s <= plan.lower_bound_time_s * (1 + plan.record.gap_target) * (1 + 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(4))
def test_every_method_plans_many_draws(kind, seed, tmp_path):
    topology = network(kind, tmp_path)
    check_every_method(topology, random_problem(topology, seed=seed))
