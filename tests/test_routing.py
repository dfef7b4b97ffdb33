"""How plans reach the wire: forwarded plans are chains of the network's own routes, free plans say
what the network would really do with them, and the stops are where the chunks are copied."""

import json

import networkx as nx
import numpy as np
import pytest
from conftest import random_demands, synthetic

from optiq import Demands, from_spec, load_plan, make_plan, plan_metrics
from optiq.cli import main
from optiq.errors import ParameterError, PathError, PlanError
from optiq.paths import (
    PathSet,
    every_rank_stops,
    forwarded_stops,
    misrouted_legs,
    network_routes,
    realized_link_bytes,
    route_twins,
    system_routes,
)
from optiq.planner import make_candidates
from optiq.runtime import check_routes
from optiq.topology import from_networkx, torus


def transpose(t):
    """Host 4a + b sends to host 4b + a on a 4-ary tree: D-mod-K sends a leaf's four flows up one link."""
    src = np.array([s for s in range(16) if 4 * (s % 4) + s // 4 != s])
    return Demands(src, 4 * (src % 4) + src // 4, np.full(src.size, 2**20))


def switched_graph():
    """A graph whose hosts hang off a ring of switches (a network read from networkx)."""
    g = nx.cycle_graph(["s0", "s1", "s2", "s3", "s4"])
    for i in range(10):
        g.add_edge(f"h{i}", f"s{i % 5}")
        g.nodes[f"h{i}"]["host"] = True
    nx.set_edge_attributes(g, 1e9, "capacity")
    return from_networkx(g)


def fabric(tmp_path, tables=True):
    sf = synthetic()
    model = sf.build(4, 2, seed=1, parallel=2, drop=1)  # 16 hosts, parallel and missing cables
    sf.write_ibnetdiscover(model, tmp_path / "f.txt")
    if not tables:
        return from_spec(f"ibnet:{tmp_path / 'f.txt'}")
    sf.write_lfts(model, tmp_path / "l.txt")
    return from_spec(f"ibnet:{tmp_path / 'f.txt'},routes={tmp_path / 'l.txt'}")


KINDS = {
    "bgq-like torus": lambda tmp: from_spec("torus:4x4x2"),
    "mesh": lambda tmp: from_spec("mesh:3x4"),
    "fat-tree": lambda tmp: from_spec("fattree:k=4,n=2"),
    "cluster": lambda tmp: from_spec("cluster:hosts=8,edges=4,cores=2"),
    "dragonfly": lambda tmp: from_spec("dragonfly:p=2,a=4,h=2"),
    "fabric with tables": lambda tmp: fabric(tmp),
    "fabric, minhop": lambda tmp: fabric(tmp, tables=False),
    "graph with switches": lambda tmp: switched_graph(),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("seed", [0, 1])
def test_forwarded_plans_realize_their_predicted_time_on_every_kind_of_network(kind, seed, tmp_path):
    topo = KINDS[kind](tmp_path)
    demands = random_demands(topo, min(12, topo.num_endpoints * 2), seed)
    for method in ("default", "heu2", "lp", "opt"):
        plan = make_plan(topo, demands, method, k=6, seed=seed)
        assert plan.routing == "forwarded"
        bad, why = misrouted_legs(plan.paths, topo)
        assert not bad.any(), why
        # every leg routed by the network (recomputed here, not the plan's own claim) loads the links as planned
        realized = realized_link_bytes(plan.paths, plan.path_bytes, topo)
        np.testing.assert_allclose(realized, plan.link_bytes, rtol=0, atol=0)
        assert plan_metrics(plan, fair=False).realized_time_s == pytest.approx(plan.predicted_time_s, rel=1e-12)
        check_routes(plan)  # the executor takes it


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_free_plans_say_what_the_network_would_really_do(kind, tmp_path):
    topo = KINDS[kind](tmp_path)
    demands = random_demands(topo, min(12, topo.num_endpoints * 2), 3)
    free = make_plan(topo, demands, "opt", routing="free")
    forwarded = make_plan(topo, demands, "opt")
    assert free.routing == "free" and free.predicted_time_s <= forwarded.predicted_time_s * (1 + 1e-6)
    legs = network_routes(topo, *free.paths.leg_ends(topo)[1:])  # by hand: each leg by the network's rule
    path = free.paths.leg_ends(topo)[0]
    want = legs.link_loads(free.path_bytes[path].astype(float), topo.num_links)
    assert free.realized_time_s == pytest.approx(float((want / topo.capacity).max()), rel=1e-12)
    assert free.realized_time_s >= free.predicted_time_s * (1 - 1e-12)
    np.testing.assert_array_equal(free.paths.stops, every_rank_stops(free.paths, topo))


def test_a_fat_tree_chain_stops_at_its_intermediate_host_only():
    t = from_spec("fattree:k=2,n=2")  # hosts 0-3; leaves 4 (hosts 0, 1), 5 (hosts 2, 3); spines 6, 7
    cands = make_candidates(t, Demands([0], [2], [1]), 3)
    chains = {tuple(cands.stop_nodes(p, t)): cands.nodes(p, t) for p in range(cands.num_paths)}
    # D-mod-K: 0 -> 2 over spine 6 (2 mod 2); 0 -> 3 over spine 7 (3 mod 2), 3 -> 2 down leaf 5
    assert chains[(0, 2)] == [0, 4, 6, 5, 2]
    assert chains[(0, 3, 2)] == [0, 4, 7, 5, 3, 5, 2]
    assert chains[(0, 1, 2)] == [0, 4, 1, 4, 6, 5, 2]
    assert sorted(cands.copies.tolist()) == [0, 1, 1]


def test_a_torus_path_stops_only_where_it_leaves_dimension_order():
    t = from_spec("torus:4x4")  # routes dimension 0 (stride 4) first: 0 -> 4 -> 8 -> 9
    hop = {(u, v): t.links_between(u, v)[0] for u, v in [(0, 1), (1, 5), (5, 9), (9, 10), (0, 4), (4, 8), (8, 9)]}
    detour = PathSet.from_lists([[hop[0, 1], hop[1, 5], hop[5, 9], hop[9, 10]]], [0], 1)
    # 0 -> 1 is a route; 0 -> 5 is not (dimension 0 first goes by 4): stop at 1. From 1 the route to 10
    # is 1 -> 5 -> 9 (dimension 0, two hops of a ring of 4: the tie goes + from an even coordinate) and
    # then 9 -> 10: the rest of the path, one leg
    assert forwarded_stops(detour, t).tolist() == [True, False, False, True]
    odd = PathSet.from_lists([[t.links_between(1, 13)[0], t.links_between(13, 9)[0]]], [0], 1)
    # from 4 (coordinate 1, odd) the tie wraps: 4 -> 0 -> 12 is the route to 12, but 1 -> 13 -> 9 ...
    assert forwarded_stops(odd, t).tolist() == [True, True]  # ... goes the other way round from 1: two legs
    route = PathSet.from_lists([[hop[0, 4], hop[4, 8], hop[8, 9]]], [0], 1)
    assert forwarded_stops(route, t).tolist() == [False, False, True]  # the network's own route: one leg


def _greedy_stops_by_hand(paths, t):
    """Stops by the rule itself, one path and one hop at a time: a leg grows while the network's
    route from its first node to the next node is the path so far."""
    stops = []
    for p in range(paths.num_paths):
        links = paths.path(p).tolist()
        flags, start = [False] * len(links), 0
        for i in range(len(links)):
            route = network_routes(t, [int(t.link_src[links[start]])], [int(t.link_dst[links[i]])]).links.tolist()
            if route != links[start:i + 1]:   # the leg ended at the hop before: stop there, start anew
                flags[i - 1], start = True, i
        flags[-1] = True
        stops += flags
    return np.array(stops)


@pytest.mark.parametrize("spec", ["torus:4x4", "torus:4x3x2", "mesh:3x4", "torus:5x4", "torus:6x2"])
@pytest.mark.parametrize("kind", ["diverse", "spread", "torus"])
def test_forwarded_stops_are_the_greedy_legs_made_hop_by_hop(spec, kind):
    """All paths at once (with the shortcuts dimension order allows: a whole path that is a
    route, a leg that grows by its last link) against the rule applied by hand."""
    t = from_spec(spec)
    d = random_demands(t, 30, seed=len(spec))
    cands = make_candidates(t, d, 6, kind, seed=3)
    paths = PathSet(cands.job, cands.offsets, route_twins(t)[cands.links], cands.num_jobs).unique()
    stops = forwarded_stops(paths, t)
    assert np.array_equal(stops, _greedy_stops_by_hand(paths, t))
    assert stops.sum() > paths.num_paths   # some paths have several legs


def test_forwarded_plans_use_the_e_link_the_network_routes_by():
    t = from_spec("torus:4x4x2")
    twins = route_twins(t)
    minus = (t.link_dim == 2) & (t.link_sign < 0)
    assert (twins[minus] != np.flatnonzero(minus)).all()  # every E- hop is routed over E+
    d = random_demands(t, 20, 4)
    for method in ("heu2", "opt"):
        assert not minus[make_plan(t, d, method).paths.links].any()
    assert minus[make_plan(t, d, "opt", routing="free").paths.links].any()  # free plans use both


def test_default_routes_are_one_leg_without_copies_and_free_ones_copy_at_every_rank():
    t = from_spec("bgq:512")
    d = random_demands(t, 50, 1)
    forwarded, free = make_plan(t, d, "default"), make_plan(t, d, "default", routing="free")
    assert forwarded.paths.copies.max() == 0
    np.testing.assert_array_equal(free.paths.copies, free.paths.hops - 1)
    np.testing.assert_array_equal(forwarded.paths.links, free.paths.links)


def version_1(plan) -> dict:
    """A plan as version 1 of the file format wrote it: nodes and links, no stops, no routing."""
    t, ps = plan.topology, plan.paths
    jo = ps.job_offsets
    jobs = [{"src": int(plan.demands.src[j]), "dst": int(plan.demands.dst[j]), "bytes": int(plan.demands.nbytes[j]),
             "paths": [{"nodes": ps.nodes(p, t), "links": ps.path(p).tolist(), "bytes": int(plan.path_bytes[p])}
                       for p in range(jo[j], jo[j + 1])]} for j in range(plan.demands.num_jobs)]
    return {"format": "optiq-plan", "version": 1, "topology": {"spec": t.spec}, "method": plan.method,
            "chunk_size": plan.chunk_size, "lower_bound_time_s": plan.lower_bound_time_s,
            "lower_bound_cut": plan.lower_bound_cut, "ranks": plan.ranks.tolist(), "info": plan.info, "jobs": jobs}


@pytest.mark.parametrize("spec", ["torus:4x4x2", "fattree:k=4,n=2"])
def test_a_version_1_file_loads_as_a_free_plan_that_stops_at_every_rank(spec, tmp_path):
    t = from_spec(spec)
    plan = make_plan(t, random_demands(t, 10, 2), "opt", routing="free")
    (tmp_path / "v1.json").write_text(json.dumps(version_1(plan)))
    back = load_plan(tmp_path / "v1.json")
    assert back.routing == "free" and back.fingerprint == plan.fingerprint
    np.testing.assert_array_equal(back.paths.stops, every_rank_stops(back.paths, t))
    assert back.realized_time_s == plan.realized_time_s


def test_forwarded_plan_files_give_stops_and_the_links_follow_the_network(tmp_path):
    t = from_spec("fattree:k=4,n=2")
    plan = make_plan(t, transpose(t), "opt")
    plan.save(tmp_path / "p.json")
    data = json.loads((tmp_path / "p.json").read_text())
    assert data["version"] == 2 and data["routing"] == "forwarded"
    assert any(len(p["stops"]) > 2 for job in data["jobs"] for p in job["paths"])  # some chains
    for job in data["jobs"]:
        for p in job["paths"]:
            del p["links"]  # the network's routes between the stops give them back
    (tmp_path / "stops.json").write_text(json.dumps(data))
    assert load_plan(tmp_path / "stops.json").fingerprint == plan.fingerprint


def test_executor_and_run_refuse_a_free_plan_the_network_routes_otherwise(tmp_path, capsys):
    t = from_spec("fattree:k=4,n=2")
    free = make_plan(t, transpose(t), "opt", routing="free")
    assert free.realized_time_s > 1.5 * free.predicted_time_s
    with pytest.raises(PlanError, match=r"carries it in .* ms, not the predicted .* ms"):
        check_routes(free)
    free.save(tmp_path / "free.json")
    assert main(["run", str(tmp_path / "free.json")]) == 1  # refused before any MPI work
    err = capsys.readouterr().err
    assert err.count("optiq: error:") == 1 and "--routing free" in err


def test_candidates_of_another_routing_are_refused():
    t = from_spec("fattree:k=4,n=2")
    d = random_demands(t, 6, 0)
    chains = make_candidates(t, d, 4)
    with pytest.raises(ParameterError, match="visits a node twice"):
        make_plan(t, d, "heu2", candidates=chains, routing="free")
    with pytest.raises(ParameterError, match="pick switches freely"):
        make_candidates(t, d, 4, "diverse")


def test_dynamic_routing_is_a_free_plan_and_says_so():
    t = from_spec("cluster:hosts=8,edges=4,cores=2")
    plan = make_plan(t, random_demands(t, 10, 1), "dynamic")
    assert plan.routing == "free"
    assert plan.realized_time_s >= plan.predicted_time_s


def test_default_routes_are_the_networks_own():
    t = from_spec("dragonfly:p=2,a=4,h=2")
    d = random_demands(t, 30, 0)
    np.testing.assert_array_equal(make_plan(t, d, "default").paths.links, system_routes(t, d).links)


def test_torus_without_a_spec_keeps_its_routes_in_a_plan_file(tmp_path):
    t = torus((4, 4), bandwidth=1e9)
    plan = make_plan(t, random_demands(t, 8, 0), "opt")
    plan.save(tmp_path / "p.json")
    back = load_plan(tmp_path / "p.json")
    assert back.topology.default_routing == "dimension order" and back.fingerprint == plan.fingerprint


@pytest.mark.mpi
def test_chains_and_free_plans_replay_byte_exact_under_mpiexec(tmp_path):
    from conftest import launch

    t = from_spec("fattree:k=4,n=2")
    forwarded = make_plan(t, transpose(t), "opt", chunk_size=2**16)
    assert forwarded.paths.copies.max() >= 1  # chains through intermediate hosts
    free = make_plan(t, transpose(t), "opt", routing="free")
    for name, plan, extra in (("forwarded", forwarded, []), ("free", free, ["--routing", "free"])):
        plan.save(tmp_path / f"{name}.json")
        out = tmp_path / f"{name}.out.json"
        proc, _ = launch(16, "-m", "optiq.runtime", tmp_path / f"{name}.json", "--verify", "--json", out,
                         "--repeat", 1, "--warmup", 0, *extra, timeout=300)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(out.read_text())
        assert report["verified"] is True
        chunk = report["chunk_size"]   # the executor's (at most the plan's: a stop's chunk is a share of the time)
        assert chunk <= plan.chunk_size
        forwarded_chunks = int((-(-plan.path_bytes // chunk) * plan.paths.copies).sum())
        assert report["chunks_forwarded"] == forwarded_chunks  # copies at the stops, nowhere else


def test_free_candidate_plans_are_the_link_paths_of_the_free_generators():
    from optiq.heuristics import demand_aware_heuristic
    from optiq.lp import round_to_bytes, solve_lp
    from optiq.paths import diverse_paths

    t = from_spec("torus:4x4x2")
    d = random_demands(t, 12, 6)
    cands = diverse_paths(t, d, 6)  # what every method picked among before plans said how they are carried
    heu2 = make_plan(t, d, "heu2", k=6, routing="free")
    np.testing.assert_array_equal(heu2.paths.links, cands.select(demand_aware_heuristic(t, d, cands) > 0).links)
    lp = make_plan(t, d, "lp", k=6, routing="free")
    share = solve_lp(t, d, cands).share
    np.testing.assert_array_equal(lp.path_bytes, round_to_bytes(cands, d, share)[round_to_bytes(cands, d, share) > 0])
    for plan in (heu2, lp):
        np.testing.assert_array_equal(plan.paths.stops, every_rank_stops(plan.paths, t))


@pytest.mark.parametrize("spec", ["fattree:k=4,n=3", "torus:4x4x2", "cluster:hosts=12,edges=2,cores=1"])
@pytest.mark.parametrize("memo_links", [0, None])
@pytest.mark.parametrize("dense", [0, 10**6])
def test_routes_kept_between_calls_are_the_routes_made_afresh(spec, memo_links, dense, monkeypatch):
    """Calls of overlapping pairs (repeats within a call too) give each pair the route a
    search of that pair alone gives, whether the routes made before are kept or not, looked
    up by search or by a direct index; a pair that is not one still fails as it did."""
    from optiq.paths import system, system_routes

    system.forget_routes()
    monkeypatch.setattr(system, "DENSE_INDEX_RATIO", dense)
    if memo_links is not None:
        monkeypatch.setattr(system, "ROUTE_MEMO_LINKS", memo_links)
    t = from_spec(spec)
    n = t.num_endpoints
    rng = np.random.default_rng(5)
    for _ in range(4):
        src = rng.integers(0, n, 40)
        dst = (src + rng.integers(1, n, 40)) % n
        got = network_routes(t, src, dst)
        for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
            alone = system_routes(t, Demands([s], [d], [1]))
            assert got.path(i).tolist() == alone.path(0).tolist(), (s, d)
    assert (t in system._MEMO) == (memo_links is None)
    if memo_links is None:
        assert (system._MEMO[t].index is not None) == bool(dense)
    nodes = t.num_nodes
    for bad_src, bad_dst in ((0, 0), (-1, nodes + 1), (nodes, 1)):   # the second's key is pair (0, 1)'s
        with pytest.raises(PathError):
            network_routes(t, [1, bad_src], [0, bad_dst])


def test_plans_over_kept_candidates_make_stops_only_for_paths_no_plan_used_before():
    """Three heu2 plans of the same pairs with other bytes run over the candidates kept from the
    first; the stops made are kept with them, and later plans make stops only for paths not
    used before. Each plan's stops are what forwarded_stops gives its paths afresh."""
    from optiq.paths import routing
    from optiq.paths import space as path_space
    from optiq.paths.system import forget_routes
    from optiq.planner import make_plan
    from optiq.topology import from_spec

    t = from_spec("torus:4x4x2")
    rng = np.random.default_rng(3)
    forget_routes()
    src, dst = np.nonzero(~np.eye(t.num_endpoints, dtype=bool))
    asked = []

    def counting(paths, topology):
        asked.append(paths.num_paths)
        return routing.forwarded_stops(paths, topology)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(path_space, "forwarded_stops", counting)
        plans = [make_plan(t, Demands(src, dst, rng.integers(1, 2**20, src.size)), "heu2") for _ in range(3)]
    assert len(asked) >= 1 and asked[0] == plans[0].paths.num_paths   # the first plan: its own paths
    assert sum(asked[1:]) < plans[1].paths.num_paths + plans[2].paths.num_paths   # then fewer than used
    for plan in plans:
        ps = plan.paths
        assert np.array_equal(ps.stops, routing.forwarded_stops(type(ps)(ps.job, ps.offsets, ps.links, ps.num_jobs),
                                                                t))
        assert ps.stops.sum() > ps.num_paths   # some paths stop on the way


def test_plans_over_kept_candidates_check_each_path_once_and_candidates_given_for_other_pairs_are_refused():
    """Plans of the same pairs check the structure of the paths no plan used before, and no
    other: every path of every plan is checked once (and each plan passes the full checks
    again). The same candidates given for other pairs are checked against those: refused,
    naming the path that does not end at its job's destination."""
    from optiq.errors import PlanError
    from optiq.paths import checks
    from optiq.paths import space as path_space
    from optiq.paths.system import forget_routes
    from optiq.planner import make_plan
    from optiq.topology import from_spec

    t = from_spec("torus:4x4x2")
    rng = np.random.default_rng(5)
    forget_routes()
    src, dst = np.nonzero(~np.eye(t.num_endpoints, dtype=bool))
    checked = []

    def counting(paths, *args):
        checked.append(paths.num_paths)
        return checks.check_paths(paths, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(path_space, "check_paths", counting)
        plans = [make_plan(t, Demands(src, dst, rng.integers(1, 2**20, src.size)), "heu2") for _ in range(4)]
    used = {(int(j), tuple(ps_links)) for plan in plans
            for j, ps_links in zip(plan.paths.job, np.split(plan.paths.links, plan.paths.offsets[1:-1]))}
    assert checked[0] == plans[0].paths.num_paths and sum(checked) == len(used) and len(checked) > 1
    for plan in plans:
        plan.validate()
    # candidates of one job a source, planned over for their pairs, then given for other pairs
    ring = np.arange(t.num_endpoints)
    candidates = make_plan(t, Demands(ring, (ring + 1) % ring.size, np.full(ring.size, 4096)), "heu2").paths
    make_plan(t, Demands(ring, (ring + 1) % ring.size, np.full(ring.size, 8192)), "heu2", candidates=candidates)
    with pytest.raises(PlanError, match="does not end at its destination"):
        make_plan(t, Demands(ring, (ring + 2) % ring.size, np.full(ring.size, 4096)), "heu2", candidates=candidates)
