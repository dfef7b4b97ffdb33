"""opt's fewest-stops step and the one-stop detours it chooses among."""

import networkx as nx
import numpy as np
import pytest
from conftest import random_demands
from scipy.optimize import linprog
from scipy.sparse import lil_matrix

from optiq import make_plan
from optiq.errors import PathError
from optiq.lp.stops import fewest_stops
from optiq.paths import PathSet, system_routes
from optiq.paths.one_stop import one_stop_paths
from optiq.paths.routing import forwarded_stops, route_twins
from optiq.topology import cluster, mesh, torus
from optiq.workloads import Demands, grid_transpose


def _nodes(topo, src, links):
    return [int(src)] + [int(topo.link_dst[e]) for e in links]


def _route(topo, a, b):
    return system_routes(topo, Demands([a], [b], [1])).path(0).tolist()


@pytest.mark.parametrize("topo", [torus((4, 4)), mesh((3, 3)), torus((3, 2, 2))], ids=["torus4x4", "mesh3x3", "torus3x2x2"])
def test_one_stop_paths_are_every_route_through_a_neighbour_of_either_end(topo):
    demands = random_demands(topo, 10, seed=3)
    got = one_stop_paths(topo, demands)
    for j, (s, d) in enumerate(zip(demands.src.tolist(), demands.dst.tolist())):
        near = {int(topo.link_dst[e]) for e in np.flatnonzero(topo.link_src == s)} | \
               {int(topo.link_src[e]) for e in np.flatnonzero(topo.link_dst == d)}
        want = set()
        for v in near - {s, d}:
            links = _route(topo, s, v) + _route(topo, v, d)
            nodes = _nodes(topo, s, links)
            if len(set(nodes)) == len(nodes):
                want.add((tuple(links), len(_route(topo, s, v))))
        mine = {(tuple(got.path(p).tolist()), int(np.flatnonzero(got.stops[got.offsets[p]:got.offsets[p + 1]])[0]) + 1)
                for p in np.flatnonzero(got.job == j)}
        assert mine == want, f"job {j}: {s} -> {d}"


def test_one_stop_paths_of_some_jobs_only():
    topo = torus((4, 4))
    demands = random_demands(topo, 8, seed=1)
    chosen = np.zeros(8, dtype=bool)
    chosen[[2, 5]] = True
    some = one_stop_paths(topo, demands, chosen)
    every = one_stop_paths(topo, demands)
    assert set(some.job.tolist()) == {2, 5}
    for j in (2, 5):
        assert [some.path(p).tolist() for p in np.flatnonzero(some.job == j)] == \
               [every.path(p).tolist() for p in np.flatnonzero(every.job == j)]


def test_one_stop_paths_need_every_node_a_rank():
    with pytest.raises(PathError, match="not every node is a rank"):
        one_stop_paths(cluster(4, 2, 2), Demands([0], [3], [8]))


def _stop_bytes(plan) -> float:
    return float(plan.path_bytes @ plan.paths.copies)


def test_opt_on_a_ring_of_four_stops_only_the_half_of_the_far_pairs_that_goes_the_other_way():
    # an all-to-all on a ring of 4: every link carries 2 pairs' bytes at the cut bound, which
    # needs half of the 4 far pairs' bytes the way the route does not go, each with one stop
    topo = torus((4,), bandwidth=1e6)
    demands = grid_transpose((4,), 0, 2**16)
    plan = make_plan(topo, demands, "opt")
    assert plan.predicted_time_s == pytest.approx(2 * 2**16 / 1e6, rel=1e-9)
    assert _stop_bytes(plan) == pytest.approx(2 * 2**16, abs=8)


def _least_stop_bytes(topo, demands, time_s: float, hop_bytes: float) -> float:
    """Brute force: over every simple path of every job (its stops where it leaves the
    network's route), the fewest stop-bytes of a plan of at most ``time_s`` and ``hop_bytes``."""
    g = nx.MultiDiGraph()
    for e in np.flatnonzero(route_twins(topo) == np.arange(topo.num_links)).tolist():   # the links routes take
        g.add_edge(int(topo.link_src[e]), int(topo.link_dst[e]), key=e)
    paths, jobs = [], []
    for j, (s, d) in enumerate(zip(demands.src.tolist(), demands.dst.tolist())):
        for edges in nx.all_simple_edge_paths(g, s, d):
            paths.append([k for _, _, k in edges])
            jobs.append(j)
    ps = PathSet.from_lists(paths, jobs, demands.num_jobs)
    ps = ps.with_stops(forwarded_stops(ps, topo))
    P, J, L = ps.num_paths, demands.num_jobs, topo.num_links
    size = demands.nbytes[ps.job].astype(float)
    eq = lil_matrix((J, P))
    eq[ps.job, np.arange(P)] = 1
    ub = lil_matrix((L + 1, P))
    for p in range(P):
        for e in ps.path(p):
            ub[e, p] += size[p]
    ub[L, :] = size * ps.hops
    res = linprog(size * ps.copies, A_ub=ub.tocsr(),
                  b_ub=np.concatenate([topo.capacity * time_s, [hop_bytes]]) * (1 + 1e-9),
                  A_eq=eq.tocsr(), b_eq=np.ones(J), method="highs")
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize("topo, seed", [(torus((3, 2), bandwidth=1e9), 1), (torus((3, 2), bandwidth=1e9), 2),
                                        (mesh((2, 3), bandwidth=1e9), 1), (torus((4,), bandwidth=1e9), 4)])
def test_opt_keeps_its_time_and_hop_bytes_and_no_plan_of_them_stops_fewer_bytes_than_it_by_much(topo, seed):
    demands = random_demands(topo, 6, seed=seed)
    plain = make_plan(topo, demands, "opt", lean=False)
    plan = make_plan(topo, demands, "opt")
    assert plan.predicted_time_s <= plain.predicted_time_s * (1 + 1e-6)
    hop_bytes = float(plan.path_bytes @ plan.paths.hops)
    least = _least_stop_bytes(topo, demands, plan.predicted_time_s, hop_bytes)
    stops = _stop_bytes(plan)
    assert least - 8 <= stops <= 1.05 * least + 8 * demands.num_jobs   # bytes are whole: 8 per job of rounding
    info = plan.info.get("stops")
    if info and info["status"] == "optimal":
        assert info["stop_bytes"] <= info["stop_bytes_before"] * (1 - 1e-3)


def test_fewest_stops_on_the_slabs_of_a_4x4_torus_keeps_the_time_and_cuts_the_stops():
    topo = torus((4, 4), bandwidth=2.5e6)
    demands = grid_transpose((16,), 0, 2**14)
    plan = make_plan(topo, demands, "opt")
    info = plan.info["stops"]
    assert info["status"] == "optimal" and info["stop_bytes"] < info["stop_bytes_before"]
    assert _stop_bytes(plan) == pytest.approx(info["stop_bytes"], abs=8 * demands.num_jobs)
    assert plan.predicted_time_s == pytest.approx(plan.info["cut_bound_s"], rel=1e-6)
    # every path a shortest one (hop-bytes at their least), every stop where a path leaves the route
    dist = system_routes(topo, demands).hops
    assert np.array_equal(plan.paths.hops, dist[plan.paths.job])
    assert np.array_equal(plan.paths.stops, forwarded_stops(plan.paths, topo))


def test_fewest_stops_keeps_a_plan_without_stops_and_a_plan_it_cannot_better():
    t = torus((4,), bandwidth=1.0)
    go = lambda *nodes: [t.links_between(a, b)[0] for a, b in zip(nodes, nodes[1:])]  # noqa: E731
    d = Demands([0, 1], [2, 2], [8, 8])
    route = PathSet.from_lists([go(0, 1, 2), go(1, 2)], [0, 1], 2)
    same = fewest_stops(t, d, route, np.ones(2), route.select(np.zeros(2, dtype=bool)))
    assert same.status == "no stops" and same.paths is route
    # 0 -> 2 the other way round, the only way that fits the time with 1 -> 2's bytes on link 1 -> 2
    other = PathSet.from_lists([go(0, 3, 2), go(1, 2)], [0, 1], 2, stops=[[True, True], [True]])
    kept = fewest_stops(t, d, other, np.ones(2), route.select(np.array([True, False])))
    assert kept.time_s == 8.0 and kept.stop_bytes == kept.stop_bytes_before == 8.0 and kept.paths is other


def test_the_step_is_deterministic():
    topo = torus((2, 2, 2), bandwidth=1e9)
    demands = grid_transpose((8,), 0, 4096)
    first, again = make_plan(topo, demands, "opt"), make_plan(topo, demands, "opt")
    assert first.info["stops"]["status"] == "optimal"   # the step ran and changed the plan
    assert np.array_equal(first.path_bytes, again.path_bytes) and np.array_equal(first.paths.links, again.paths.links)


@pytest.mark.parametrize("topo, demands", [(torus((4, 4), bandwidth=2.5e6), grid_transpose((16,), 0, 2**14)),
                                           (torus((4, 4), bandwidth=2.5e6), grid_transpose((4, 4), 1, 2**16)),
                                           (torus((3, 2), bandwidth=1e9), random_demands(torus((3, 2)), 6, seed=3))])
def test_heu2_with_fewest_stops_keeps_its_time_and_hop_bytes_and_stops_no_more(topo, demands):
    plain = make_plan(topo, demands, "heu2")
    plan = make_plan(topo, demands, "heu2", fewest_stops=True)
    slack = 8 * demands.num_jobs   # bytes are whole: 8 per job of rounding
    assert plan.predicted_time_s <= plain.predicted_time_s + slack / topo.capacity.min()
    assert plan.path_bytes @ plan.paths.hops <= plain.path_bytes @ plain.paths.hops + slack
    assert _stop_bytes(plan) <= _stop_bytes(plain) + slack
    assert np.bincount(plan.paths.job, plan.path_bytes, demands.num_jobs).tolist() == demands.nbytes.tolist()
    # no plan of that time and those hop-bytes stops much fewer bytes (the step's LP, solved independently)
    if topo.num_nodes <= 6:
        least = _least_stop_bytes(topo, demands, plain.predicted_time_s * (1 + 1e-6),
                                  float(plain.path_bytes @ plain.paths.hops) + slack)
        assert _stop_bytes(plan) <= 1.05 * least + slack
    else:   # heu2 alone stops more than it needs on the 4 x 4 torus: the step cuts them
        assert plan.info["stops"]["status"] == "optimal" and _stop_bytes(plan) < _stop_bytes(plain) - slack

