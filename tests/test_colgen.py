import networkx as nx
import numpy as np
import pytest

from optiq.models import solve_lp
from optiq.models.colgen import CGStatus, RestrictedLP, column_generation
from optiq.paths import diverse_paths
from optiq.paths.pricing import least_cost_paths, min_hops
from optiq.planner import make_plan
from optiq.topology import torus
from optiq.workloads import constant_ratio

from conftest import SMALL_TOPOLOGIES, random_demands
from test_models import arc_flow_optimum


@pytest.mark.parametrize("name", sorted(SMALL_TOPOLOGIES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_column_generation_reaches_the_arc_flow_optimum(name, seed):
    topo = SMALL_TOPOLOGIES[name]()
    d = random_demands(topo, 5, seed)
    want = arc_flow_optimum(topo, d)
    cg = column_generation(topo, d, gap=0.0, hop_slack=topo.num_nodes)  # every simple path allowed
    assert cg.time_s == pytest.approx(want, rel=1e-6)
    assert cg.lower_bound_s <= want * (1 + 1e-9)
    assert all(it.bound_s <= want * (1 + 1e-9) for it in cg.history)  # every bound is a proven one
    assert cg.status in (CGStatus.GAP_REACHED, CGStatus.NO_IMPROVING_PATH)


def test_gap_stops_early_and_is_honest():
    t = torus((4, 4, 4), bandwidth=1e9)
    d = constant_ratio(64, nbytes=2**20, num_sources=4, ratio=8)
    exact = column_generation(t, d, gap=0.0)
    loose = column_generation(t, d, gap=0.2)
    assert loose.iterations <= exact.iterations
    assert loose.history[-1].gap <= 0.2
    assert loose.lower_bound_s <= exact.time_s * (1 + 1e-9) <= loose.time_s * (1 + 1e-9)


def test_restricted_lp_matches_the_one_shot_lp():
    t = torus((4, 4), bandwidth=1e9)
    d = constant_ratio(16, nbytes=2**20, num_sources=2, ratio=4)
    cands = diverse_paths(t, d, 4)
    lp = RestrictedLP(t, d)
    lp.add_paths([cands.path(p) for p in range(cands.num_paths)], cands.job)
    time_s, share, link_dual, job_dual, _ = lp.solve()
    assert time_s == pytest.approx(solve_lp(t, d, cands).time_s, rel=1e-7)
    assert link_dual.sum() == pytest.approx(1.0, rel=1e-6)  # the dual of tau's column


def test_pricing_is_the_cheapest_path_within_the_hop_limit():
    t = torus((4, 4), bandwidth=1e9)
    rng = np.random.default_rng(0)
    cost = rng.random(t.num_links)
    src, dst = np.array([0, 3, 5]), np.array([10, 12, 6])
    limit = min_hops(t, src, dst) + 1
    paths, got, free = least_cost_paths(t, src, dst, cost, limit)
    g = t.to_networkx()

    for j in range(3):
        best = min(sum(cost[k] for _, _, k in p)
                   for p in nx.all_simple_edge_paths(g, int(src[j]), int(dst[j]), cutoff=int(limit[j])))
        assert got[j] == pytest.approx(best)
        assert paths[j].size <= limit[j] and t.link_src[paths[j][0]] == src[j] and t.link_dst[paths[j][-1]] == dst[j]
        assert free[j] <= got[j] + 1e-12


def test_opt_plan_records_gap_and_bound():
    t = torus((4, 4, 2), bandwidth=1e9)
    d = constant_ratio(32, nbytes=2**20, num_sources=2, ratio=4)
    plan = make_plan(t, d, "opt")
    assert plan.info["cg_status"] == "gap reached"
    assert plan.lower_bound_time_s <= plan.predicted_time_s
    assert plan.predicted_time_s <= plan.lower_bound_time_s / (1 - 0.01) * (1 + 1e-6)
