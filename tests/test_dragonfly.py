"""Dragonflies: counts and diameter against Kim et al.'s formulas, minimal and Valiant routes."""

import numpy as np
import pytest

from optiq import Demands, from_spec, make_plan
from optiq.errors import PlanError, TopologyError
from optiq.paths import system_routes, valiant_paths
from optiq.planner import make_candidates
from optiq.topology import dragonfly
from optiq.workloads import constant_ratio


def _all_pairs(t):
    src, dst = np.nonzero(~np.eye(t.num_endpoints, dtype=bool))
    return Demands(src, dst, np.ones(src.size, int))


def _router_graph_diameter(t):
    """Longest shortest path between routers, by breadth-first search (router hops)."""
    from scipy.sparse.csgraph import shortest_path

    H = t.num_endpoints
    routers = np.arange(H, t.num_nodes)
    d = shortest_path(t.adjacency()[H:, :][:, H:], unweighted=True, indices=routers - H)
    return int(d.max())


@pytest.mark.parametrize("p, a, h, g, arrangement", [
    (2, 4, 2, None, "relative"), (2, 4, 2, None, "absolute"), (2, 4, 2, None, "circulant"),
    (1, 2, 1, None, "relative"), (3, 6, 3, None, "circulant"), (2, 4, 3, 5, "absolute"), (1, 3, 2, 4, "relative"),
    (2, 3, 3, 10, "circulant"),
])
def test_counts_and_diameter_follow_kim_et_al(p, a, h, g, arrangement):
    t = dragonfly(p, a, h, g, arrangement=arrangement)
    g = a * h + 1 if g is None else g
    m = (a * h) // (g - 1)  # global links between every pair of groups
    assert t.num_endpoints == p * a * g and t.num_nodes - t.num_endpoints == a * g
    host_links, local_links, global_links = 2 * p * a * g, g * a * (a - 1), g * (g - 1) * m
    assert t.num_links == host_links + local_links + global_links
    H = t.num_endpoints
    degree = np.bincount(t.link_src[t.link_src >= H] - H, minlength=a * g)
    assert degree.max() <= p + (a - 1) + h  # the router radix k = p + a - 1 + h
    if m * (g - 1) == a * h:  # every global port used: every router has radix exactly k
        assert (degree == p + a - 1 + h).all()
    # every pair of groups is joined by m global links, in both directions
    G = (np.arange(t.num_nodes) - H) // a
    glob = (t.link_src >= H) & (t.link_dst >= H) & (G[t.link_src] != G[t.link_dst])
    pairs = np.bincount(G[t.link_src[glob]] * g + G[t.link_dst[glob]], minlength=g * g).reshape(g, g)
    assert (pairs[~np.eye(g, dtype=bool)] == m).all()
    # minimal routing's diameter: at most local, global, local between routers
    assert _router_graph_diameter(t) <= 3
    ps = system_routes(t, _all_pairs(t))
    assert ps.hops.max() <= 5 and (ps.hops >= t.pair_hops(*np.nonzero(~np.eye(H, dtype=bool)))).all()
    globals_on_route = np.add.reduceat(glob[ps.links].astype(int), ps.offsets[:-1])
    assert globals_on_route.max() <= 1


def test_largest_dragonfly_has_diameter_three_router_hops():
    t = dragonfly(2, 4, 2)  # g = 9: one global link between every pair of groups
    assert _router_graph_diameter(t) == 3 and t.diameter == 5


def test_minimal_routes_take_the_global_link_that_saves_local_hops():
    t = dragonfly(1, 2, 1)  # 3 groups x 2 routers, one host each: router r of group G is host 2G + r
    ps = system_routes(t, Demands([0, 0, 1], [3, 5, 2], [1, 1, 1]))
    names = [[t.label(v) for v in ps.nodes(i, t)] for i in range(3)]
    # relative arrangement: port k of group G leads to group G + k + 1; port k belongs to router k
    assert names[0] == ["H0", "G0R0", "G1R1", "H3"]           # G0R0 owns the link to G1, landing on G1R1
    assert names[1] == ["H0", "G0R0", "G0R1", "G2R0", "G2R1", "H5"]
    assert names[2] == ["H1", "G0R1", "G0R0", "G1R1", "G1R0", "H2"]


def test_valiant_paths_detour_through_distinct_random_groups():
    t = dragonfly(2, 4, 2)
    d = constant_ratio(t.num_endpoints, "disjoint")
    ps = valiant_paths(t, d, k=5, seed=3)
    again = valiant_paths(t, d, k=5, seed=3)
    assert np.array_equal(ps.links, again.links) and not np.array_equal(ps.links, valiant_paths(t, d, k=5, seed=4).links)
    H, a = t.num_endpoints, 4
    minimal = system_routes(t, d)
    for j in range(d.num_jobs):
        paths = [ps.path(p) for p in range(ps.job_offsets[j], ps.job_offsets[j + 1])]
        assert np.array_equal(paths[0], minimal.path(j))
        groups = [{(int(v) - H) // a for v in t.link_dst[path] if v >= H} for path in paths[1:]]
        src_group, dst_group = (d.src[j] // 2) // a, (d.dst[j] // 2) // a
        middles = [gs - {src_group, dst_group} for gs in groups]
        assert all(len(m) == 1 for m in middles) and len({min(m) for m in middles}) == len(middles)
        for path in paths:
            nodes = [int(t.link_src[path[0]])] + t.link_dst[path].tolist()
            assert len(set(nodes)) == len(nodes) and nodes[0] == d.src[j] and nodes[-1] == d.dst[j]


def test_every_method_plans_the_balanced_1056_host_dragonfly():
    t = from_spec("dragonfly:1056")
    d = constant_ratio(t.num_endpoints, "disjoint")
    candidates = make_candidates(t, d, 8)  # chains of minimal routes; dynamic (free) makes its own paths
    times = {m: make_plan(t, d, m, candidates=candidates if m not in ("opt", "dynamic") else None, k=8).predicted_time_s
             for m in ("default", "heu1", "heu2", "dynamic", "lp", "opt")}
    bound = make_plan(t, d, "opt").lower_bound_time_s
    assert all(bound <= v * (1 + 1e-9) for v in times.values())
    assert times["opt"] <= times["lp"] * (1 + 1e-9) and times["opt"] <= 1.02 * bound
    assert times["opt"] < times["default"] / 2  # disjoint blocks of groups: minimal routes crowd a few global links


def test_dragonfly_mistakes():
    for args, pattern in [((0, 2, 2), "p must be an integer >= 1"), ((2, 4, 2, 10), r"g must be in 2..a\*h\+1 = 9"),
                          ((2, 4, 2, 1), "g must be in"), ((2, 4, 2), "unknown arrangement")]:
        with pytest.raises(TopologyError, match=pattern):
            dragonfly(*args, arrangement="x" if "arrangement" in pattern else "relative")
    with pytest.raises(TopologyError, match="no balanced dragonfly has 1000 hosts"):
        from_spec("dragonfly:1000")
    with pytest.raises(PlanError, match="valiant candidates need a dragonfly"):
        make_candidates(from_spec("torus:4x4"), constant_ratio(16, "disjoint"), 4, "valiant")


def test_forwarded_valiant_candidates_turn_at_a_host_of_another_group():
    from optiq.paths import misrouted_legs

    t = dragonfly(2, 4, 2)
    shape = t.dragonfly
    d = constant_ratio(t.num_endpoints, "disjoint")
    cands = make_candidates(t, d, 4, "valiant", seed=3)
    assert not misrouted_legs(cands, t)[0].any()  # every leg is a minimal route
    group = lambda host: host // (shape.p * shape.a)  # noqa: E731
    for p in range(cands.num_paths):
        stops = cands.stop_nodes(p, t)
        assert len(stops) in (2, 3)
        if len(stops) == 3:  # s -> h -> d with h in a third group
            assert group(stops[1]) not in (group(stops[0]), group(stops[2]))
    assert (cands.copies == 1).any() and (cands.paths_per_job <= 4).all()
