"""The ``adaptive`` bound (ideal adaptive routing over minimal paths) against an independent
path LP over every minimal path networkx enumerates, and where it stands among the others."""

import networkx as nx
import numpy as np
import pytest
from conftest import SMALL_TOPOLOGIES, all_simple_paths, random_demands
from scipy.optimize import linprog
from scipy.sparse import lil_matrix

from optiq import make_plan
from optiq.paths.ecmp import ecmp_spread
from optiq.planner import compare_methods
from optiq.topology import from_spec, torus
from optiq.workloads import Demands, grid_transpose


def minimal_path_optimum(topology, demands) -> float:
    """min T such that every job's bytes split over its minimal paths load no link past T x capacity."""
    every = all_simple_paths(topology, demands)
    fewest = np.full(demands.num_jobs, np.inf)
    np.minimum.at(fewest, every.job, every.hops)
    keep = every.hops == fewest[every.job]
    paths = every.select(keep)
    P, L = paths.num_paths, topology.num_links
    scale = float(demands.nbytes.max())
    a_eq = lil_matrix((demands.num_jobs, P + 1))
    for p in range(P):
        a_eq[paths.job[p], p] = 1
    a_ub = lil_matrix((L, P + 1))
    for p in range(P):
        for e in paths.path(p):
            a_ub[e, p] += 1
    cap = topology.capacity / topology.capacity.max()
    for e in range(L):
        a_ub[e, P] = -cap[e]
    cost = np.zeros(P + 1)
    cost[-1] = 1
    res = linprog(cost, A_ub=a_ub.tocsr(), b_ub=np.zeros(L), A_eq=a_eq.tocsr(), b_eq=demands.nbytes / scale,
                  method="highs")
    assert res.status == 0
    return res.fun * scale / topology.capacity.max()


@pytest.mark.parametrize("name", sorted(SMALL_TOPOLOGIES))
@pytest.mark.parametrize("seed", [0, 1])
def test_adaptive_is_the_flow_lp_over_minimal_paths(name, seed):
    topology = SMALL_TOPOLOGIES[name]()
    demands = random_demands(topology, 6, seed)
    plan = make_plan(topology, demands, "adaptive", gap=1e-4)
    best = minimal_path_optimum(topology, demands)
    assert best * (1 - 1e-6) <= plan.predicted_time_s <= best * (1 + 2e-4)
    g = topology.to_networkx()
    shortest = [nx.shortest_path_length(g, s, d) for s, d in zip(demands.src.tolist(), demands.dst.tolist())]
    assert plan.routing == "free" and plan.paths.hops.tolist() == [shortest[j] for j in plan.paths.job.tolist()]


def test_no_minimal_static_route_beats_it_and_non_minimal_forwarding_does():
    t = from_spec("fattree:k=4,n=2,bw=1GB/s,routes=ecmp:1")
    rng = np.random.default_rng(3)
    perm = rng.permutation(16)
    keep = perm != np.arange(16)
    demands = Demands(np.arange(16)[keep], perm[keep], np.full(int(keep.sum()), 2**23))
    runs = {r.method: r.plan for r in compare_methods(t, demands, ["default", "dynamic", "adaptive"])}
    adaptive = runs["adaptive"].predicted_time_s
    assert adaptive <= runs["dynamic"].predicted_time_s * (1 + 1e-9)
    assert adaptive <= ecmp_spread(t, demands, seed=1).p05_s * (1 + 1e-9)
    # on a ring of 8, a pair 3 apart has one minimal way round; forwarding may go the long way
    ring = torus((8,), bandwidth=1e9)
    shift = grid_transpose((8,), 0, 2**20)
    opt, adaptive = (make_plan(ring, shift, m).predicted_time_s for m in ("opt", "adaptive"))
    assert opt <= adaptive * (1 + 1e-9)
    exchange = Demands([0, 1, 2], [3, 4, 5], [2**20] * 3)
    opt, adaptive = (make_plan(ring, exchange, m).predicted_time_s for m in ("opt", "adaptive"))
    assert opt < 0.9 * adaptive
