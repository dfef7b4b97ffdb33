"""ECMP routes (optiq.paths.ecmp) against an independent count: random next hops drawn per
flow and switch over networkx's shortest-path distances, and the contract of ``--routes ecmp``."""

import json
import random

import networkx as nx
import numpy as np
import pytest

from optiq import Demands, make_plan
from optiq.cli.main import main
from optiq.paths.ecmp import _walk, ecmp_draw_times, ecmp_leg_spread, ecmp_routes, ecmp_spread
from optiq.topology import from_spec, kary_ntree


def _graph(t):
    g = nx.DiGraph()
    g.add_edges_from(zip(t.link_src.tolist(), t.link_dst.tolist()))
    return g


def brute_force_mean(t, src, dst, draws, seed):
    """Mean busiest-link flow count when every flow takes, at every node, a uniformly random
    next hop among those one step nearer its destination (unit bytes, unit rates)."""
    g = _graph(t)
    dist = {d: nx.single_target_shortest_path_length(g, d) for d in set(dst)}
    rng = random.Random(seed)
    maxima = []
    for _ in range(draws):
        load: dict[tuple[int, int], int] = {}
        for s, d in zip(src, dst):
            v = s
            while v != d:
                nxt = [w for w in g.successors(v) if dist[d].get(w, 1e9) == dist[d][v] - 1]
                w = rng.choice(nxt)
                load[v, w] = load.get((v, w), 0) + 1
                v = w
        maxima.append(max(load.values()))
    return float(np.mean(maxima))


@pytest.mark.parametrize("k", [4, 8])
@pytest.mark.parametrize("perm_seed", [0, 1])
def test_model_mean_matches_a_brute_force_count_of_random_hash_draws(k, perm_seed):
    t = kary_ntree(k, 2, bandwidth=1.0)
    n = t.num_endpoints
    perm = np.random.default_rng(perm_seed).permutation(n)
    keep = perm != np.arange(n)
    src, dst = np.arange(n)[keep], perm[keep]
    model = ecmp_draw_times(t, src, dst, np.ones(src.size), seed=perm_seed, draws=2000).mean()
    brute = brute_force_mean(t, src.tolist(), dst.tolist(), 2000, perm_seed)
    assert abs(model - brute) <= 0.03 * brute, (model, brute)


def test_routes_are_shortest_and_the_same_for_the_same_seed_only():
    t = from_spec("fattree:k=4,n=3")
    n = t.num_endpoints
    rng = np.random.default_rng(5)
    key = np.unique(rng.integers(0, n, 300) * n + rng.integers(0, n, 300))
    key = key[key // n != key % n]
    dem = Demands(key // n, key % n, np.ones(key.size, np.int64))
    g = _graph(t)
    a, b, c = (ecmp_routes(t, dem, seed=s) for s in (1, 1, 2))
    assert np.array_equal(a.links, b.links) and not np.array_equal(a.links, c.links)
    for p in range(a.num_paths):
        nodes = a.nodes(p, t)
        assert nodes[0] == dem.src[a.job[p]] and nodes[-1] == dem.dst[a.job[p]]
        assert len(nodes) - 1 == nx.shortest_path_length(g, nodes[0], nodes[-1])


def test_every_equal_cost_next_hop_is_taken_about_equally_often():
    t = kary_ntree(8, 2, bandwidth=1.0)   # 8 spines above each leaf
    draws = 4000
    ps = _walk(t, np.zeros(draws, np.int64), np.full(draws, 63), np.arange(draws), 9)   # draw i is path i
    spines = [ps.nodes(p, t)[2] for p in range(draws)]   # the spine each climbs to
    counts = np.bincount(spines)[np.unique(spines)]
    assert counts.size == 8 and counts.min() > 0.8 * 500 and counts.max() < 1.2 * 500


def test_spread_of_a_plan_of_the_default_routes_is_the_spread_of_its_pairs():
    t = from_spec("fattree:k=4,n=2,bw=1GB/s,routes=ecmp:4")
    dem = Demands([0, 1, 2, 3, 4], [8, 9, 12, 13, 15], [2**20] * 5)
    plan = make_plan(t, dem, "default")
    legs, pairs = ecmp_leg_spread(plan.paths, plan.path_bytes, t, seed=4), ecmp_spread(t, dem, seed=4)
    assert legs == pairs
    assert legs.p05_s <= legs.mean_s <= legs.p95_s
    # draw 0 of the seed is the network's own routes
    assert ecmp_draw_times(t, dem.src, dem.dst, dem.nbytes, seed=4, draws=1)[0] == pytest.approx(plan.predicted_time_s)


def test_compare_with_routes_ecmp_has_the_mean_and_percentiles_and_every_gain_over_the_mean(capsys):
    args = ["compare", "-t", "fattree:k=4,n=2,bw=1GB/s", "--routes", "ecmp", "--pattern", "permutation",
            "--size", "8MiB", "--methods", "default,heu2,dynamic", "--seed", "2", "-q"]
    assert main([*args, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    default = rows[0]
    t = from_spec("fattree:k=4,n=2,bw=1GB/s,routes=ecmp:2")
    assert t.default_routing == "ECMP (hash seed 2)"
    assert default["predicted_p05_s"] <= default["predicted_time_s"] <= default["predicted_p95_s"]
    assert default["predicted_p05_s"] < default["predicted_p95_s"]   # the hash decides
    assert all(r["default_time_s"] == pytest.approx(default["predicted_time_s"]) for r in rows)
    assert all(r["predicted_p05_s"] is None for r in rows[1:])
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[3].startswith("default  ecmp ") and "ECMP: the default row is the mean" in out


def test_a_tables_file_as_routes_of_a_network_that_is_not_a_fabric_is_refused_in_one_line(capsys, tmp_path):
    assert main(["compare", "-t", "torus:4x4", "--routes", "lfts.txt", "--pattern", "disjoint", "-q"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("optiq: error:") and "--routes ecmp" in err[0]
    assert main(["plan", "-t", "torus:4x4,routes=ecmp:x", "--pattern", "disjoint", "-q", "-o", str(tmp_path / "p.json")]) != 0
    assert "ecmp[:SEED]" in capsys.readouterr().err
