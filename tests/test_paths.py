
import networkx as nx
import numpy as np
import pytest
from conftest import SMALL_TOPOLOGIES, random_demands

from optiq.errors import PathError
from optiq.paths import (
    PathSet,
    bgq_dimension_order,
    diverse_paths,
    dmodk_routes,
    hop_limited_shortest_paths,
    system_routes,
    yen_paths,
)
from optiq.paths.pathset import path_key
from optiq.paths.shortest import hop_limited_shortest_records
from optiq.topology import bgq, cluster, kary_ntree, mesh, torus
from optiq.workloads import Demands, constant_ratio


def torus_distance(t, s, d):
    delta = np.abs(t.coords[s] - t.coords[d])
    dims = np.array(t.dims)
    return int(np.where(t.wrap, np.minimum(delta, dims - delta), delta).sum())


def route_dims(t, ps, p):
    return [int(t.link_dim[e]) for e in ps.path(p)]


def test_dimension_order_follows_selection_sort():
    assert bgq_dimension_order((4, 4, 4, 8, 2)) == [3, 1, 2, 0, 4]  # D, B, C, A, E
    assert bgq_dimension_order((4, 4, 4, 16, 2)) == [3, 1, 2, 0, 4]
    assert bgq_dimension_order((4, 4, 4, 4, 2)) == [0, 1, 2, 3, 4]
    assert bgq_dimension_order((2, 8, 4)) == [1, 2, 0]


def test_bgq_routes_by_hand():
    t = bgq(1024)  # 4x4x4x8x2, route D, B, C, A, E
    node = lambda a, b, c, d, e: int(np.ravel_multi_index((a, b, c, d, e), t.dims))  # noqa: E731
    s, d = node(0, 1, 0, 0, 0), node(1, 0, 0, 5, 1)
    ps = system_routes(t, Demands([s], [d], [1]))
    # D: 0 -> 5 is 5 forward or 3 back: 3 steps back (wrapping); B: 1 -> 0 one step back;
    # A: 0 -> 1 one forward; E: 0 -> 1 is half the ring, even source: the non-wrapping + link
    assert route_dims(t, ps, 0) == [3, 3, 3, 1, 0, 4]
    assert [int(t.link_sign[e]) for e in ps.path(0)] == [-1, -1, -1, -1, +1, +1]
    assert ps.nodes(0, t)[1] == node(0, 1, 0, 7, 0)


@pytest.mark.parametrize("start,expected_sign", [(0, +1), (1, -1), (2, -1), (3, +1)])
def test_half_ring_tie_rule(start, expected_sign):
    # ring of 4, distance exactly 2: even source goes the non-wrapping way, odd wraps
    t = torus((4,))
    ps = system_routes(t, Demands([start], [(start + 2) % 4], [1]))
    sign = int(t.link_sign[ps.path(0)[0]])
    wraps = any(abs(int(t.coords[u][0]) - int(t.coords[v][0])) > 1
                for u, v in zip(ps.nodes(0, t), ps.nodes(0, t)[1:]))
    assert wraps == (start % 2 == 1)
    assert sign == expected_sign


def test_length_two_dimension_uses_plus_link_from_both_sides():
    t = torus((2, 2))
    ps = system_routes(t, Demands([0, 1], [1, 0], [1, 1]))
    assert all(t.link_sign[ps.path(p)[0]] == +1 for p in range(2))


def test_dimension_order_routes_are_shortest_on_random_pairs():
    t = bgq(512)
    d = random_demands(t, 200, seed=5)
    ps = system_routes(t, d)
    assert all(ps.hops[j] == torus_distance(t, d.src[j], d.dst[j]) for j in range(d.num_jobs))


def test_default_routing_reproduces_paper_mpi_row():
    # seed 000, Table constantr, Disjoint / MPI: 16 paths max and 3.07 avg per link, max 11 hops, avg 6
    t, d = bgq(1024), constant_ratio(1024)
    ps = system_routes(t, d)
    per_link = np.bincount(ps.links, minlength=t.num_links)
    assert per_link.max() == 16 and round(per_link[per_link > 0].mean(), 2) == 3.07
    assert ps.hops.max() == 11 and ps.hops.mean() == 6.0


def test_mesh_routes_never_wrap():
    t = mesh((4, 4))
    d = Demands([0, 15], [15, 0], [1, 1])
    assert system_routes(t, d).hops.tolist() == [6, 6]


def test_dmodk_picks_core_by_destination():
    t = cluster()
    d = Demands([0] * 10, list(range(5, 15)), [1] * 10)
    ps = dmodk_routes(t, d)
    cores = [ps.nodes(p, t)[2] for p in range(ps.num_paths)]
    assert cores == [24 + (dst % 2) for dst in range(5, 15)]


def test_dmodk_on_kary_ntree_is_shortest_and_spreads():
    t = kary_ntree(4, 3)
    d = Demands([0] * 16, list(range(48, 64)), [1] * 16)
    ps = dmodk_routes(t, d)
    assert (ps.hops == 6).all()
    assert len({ps.nodes(p, t)[3] for p in range(16)}) == 16  # 16 destinations, 16 distinct top switches


def brute_force_best(topology, s, d, w, limit):
    g = topology.to_networkx()
    best = np.inf
    for edge_path in nx.all_simple_edge_paths(g, s, d, cutoff=limit):
        best = min(best, sum(w[k] for _, _, k in edge_path))
    return best


@pytest.mark.parametrize("name", sorted(SMALL_TOPOLOGIES))
@pytest.mark.parametrize("limit", [2, 3, 6])
def test_hop_limited_shortest_paths_match_brute_force(name, limit):
    topology = SMALL_TOPOLOGIES[name]()
    rng = np.random.default_rng(limit)
    pairs = [(s, d) for s in range(topology.num_endpoints) for d in range(topology.num_endpoints) if s != d]
    w = rng.random((len(pairs), topology.num_links)) + 0.1
    src, dst = zip(*pairs)
    paths, cost = hop_limited_shortest_paths(topology, src, dst, w, limit)
    for i, (s, d) in enumerate(pairs):
        want = brute_force_best(topology, s, d, w[i], limit)
        if np.isinf(want):
            assert paths[i] is None
            continue
        path = paths[i]
        assert len(path) <= limit
        assert topology.link_src[path[0]] == s and topology.link_dst[path[-1]] == d
        assert np.all(topology.link_dst[path[:-1]] == topology.link_src[path[1:]])
        assert cost[i] == pytest.approx(want) == pytest.approx(w[i][path].sum())


@pytest.mark.parametrize("spec", ["torus:4x4", "torus:3x3x2", "fattree:k=4,n=3", "mesh:4x3"])
def test_the_numpy_layers_give_the_compiled_kernels_paths(spec, monkeypatch):
    # the same sums in the same order: equal costs and paths, ties (small integer weights) and
    # targets out of reach (hop limit 1) included, a job whose source is its target too
    from optiq.paths import shortest
    from optiq.topology.spec import from_spec

    topology = from_spec(spec)
    rng = np.random.default_rng(5)
    jobs = 300
    src, dst = rng.integers(0, topology.num_nodes, jobs), rng.integers(0, topology.num_nodes, jobs)
    dst[0] = src[0]

    def search(work: int, weights: np.ndarray, limit: int):
        monkeypatch.setattr(shortest, "DENSE_WORK", work)  # 0: the kernel; no limit: numpy
        return hop_limited_shortest_records(topology, src, dst, weights, limit)

    for weights in (rng.integers(1, 4, (jobs, topology.num_links)).astype(float),
                    rng.random((jobs, topology.num_links)) + 0.1,
                    (1.0 + rng.random((jobs, topology.num_links)) * 0.07).astype(np.float32)):  # as diverse_paths
        for limit in (1, 3, 7):
            record, cost = search(0, weights, limit)
            dense_record, dense_cost = search(np.iinfo(np.int64).max, weights, limit)
            assert dense_cost.dtype == cost.dtype and np.array_equal(cost, dense_cost), limit
            assert np.array_equal(record, dense_record), limit
            if limit == 1:
                assert np.isinf(cost).any()
            if limit == 7:
                assert np.isfinite(cost).all()


def test_diverse_paths_are_valid_distinct_and_within_the_hop_limit():
    t = torus((4, 4, 2))
    d = random_demands(t, 20, seed=1)
    ps = diverse_paths(t, d, k=8, hop_limit=6, seed=3)
    assert ps.hops.max() <= 6
    for j in range(d.num_jobs):
        jo = ps.job_offsets
        own = [tuple(ps.path(p)) for p in range(jo[j], jo[j + 1])]
        assert len(own) == len(set(own)) >= 1
        assert len(own[0]) == torus_distance(t, d.src[j], d.dst[j])  # first path is a shortest one
        for p in range(jo[j], jo[j + 1]):
            nodes = ps.nodes(p, t)
            assert nodes[0] == d.src[j] and nodes[-1] == d.dst[j] and len(set(nodes)) == len(nodes)


def test_diverse_paths_use_more_distinct_links_than_yen():
    t = torus((4, 4, 4))
    d = constant_ratio(64, nbytes=1, num_sources=4, ratio=4)
    div, yen = diverse_paths(t, d, k=8), yen_paths(t, d, k=8)
    distinct = lambda ps, j: len(set(ps.links[ps.offsets[ps.job_offsets[j]]:ps.offsets[ps.job_offsets[j + 1]]]))  # noqa: E731
    assert sum(distinct(div, j) for j in range(d.num_jobs)) > 1.3 * sum(distinct(yen, j) for j in range(d.num_jobs))


def test_diverse_paths_are_seeded():
    t, d = torus((4, 4)), random_demands(torus((4, 4)), 6, seed=2)
    a, b = diverse_paths(t, d, k=4, seed=9), diverse_paths(t, d, k=4, seed=9)
    assert np.array_equal(a.links, b.links)


def test_no_path_within_hop_limit_is_an_error():
    t = torus((8,))
    with pytest.raises(PathError, match="no path of at most 2 hops"):
        diverse_paths(t, Demands([0], [4], [1]), k=2, hop_limit=2)


def test_pathset_select_and_loads():
    ps = PathSet.from_lists([[0, 1], [2], [3, 4, 5]], [0, 1, 1], num_jobs=2)
    sub = ps.select([True, False, True])
    assert sub.num_paths == 2 and sub.path(1).tolist() == [3, 4, 5]
    assert ps.link_loads([1, 2, 3], 6).tolist() == [1, 1, 2, 3, 3, 3]


@pytest.mark.parametrize("dims,wrap", [((4, 4, 2), True), ((5, 3), True), ((3, 4), False), ((8, 2, 3), True)])
@pytest.mark.parametrize("slack", [0, 2])
@pytest.mark.parametrize("spread", [False, True])
def test_torus_paths_are_distinct_simple_and_within_the_slack(dims, wrap, slack, spread):
    from optiq.paths import torus_paths

    t = torus(dims, wrap=wrap)
    d = random_demands(t, 25, seed=len(dims) + slack)
    ps = torus_paths(t, d, k=12, hop_slack=slack, spread=spread, seed=3)
    default = system_routes(t, d)
    shortest = np.array([torus_distance(t, s, x) for s, x in zip(d.src, d.dst)])
    jo = ps.job_offsets
    for j in range(d.num_jobs):
        paths = [ps.path(p) for p in range(jo[j], jo[j + 1])]
        assert 1 <= len(paths) <= 12
        assert spread or paths[0].tolist() == default.path(j).tolist()   # in recipe order the default comes first
        assert len({p.tobytes() for p in paths}) == len(paths)
        for p in range(jo[j], jo[j + 1]):
            nodes = ps.nodes(p, t)
            assert nodes[0] == d.src[j] and nodes[-1] == d.dst[j] and len(set(nodes)) == len(nodes)
            assert shortest[j] <= ps.hops[p] <= shortest[j] + slack
    if slack == 0:
        assert (ps.hops == shortest[ps.job]).all()


def test_spread_torus_paths_are_seeded_and_spread_the_load():
    from optiq.paths import torus_paths

    t = torus((4, 4, 4, 2))
    d = constant_ratio(128, "disjoint", nbytes=1)
    a, b = torus_paths(t, d, 6, seed=1), torus_paths(t, d, 6, seed=1)
    assert np.array_equal(a.links, b.links) and np.array_equal(a.job, b.job)
    in_order = torus_paths(t, d, 6, spread=False)
    uses = lambda ps: np.bincount(ps.links, minlength=t.num_links)  # noqa: E731
    assert uses(a).max() < uses(in_order).max()


def test_recipe_pool_cheapest_is_the_least_cost_recipe_by_brute_force():
    from optiq.paths.torus import RecipePool

    t = torus((4, 3, 2))
    d = random_demands(t, 10, seed=5)
    pool = RecipePool(t, d, vias=6, seed=2)
    cost = np.random.default_rng(0).random(t.num_links)
    pick, got = pool.cheapest(cost)
    for j in range(d.num_jobs):
        costs = [cost[pool.path(j, r)].sum() for r in range(len(pool.recipes)) if pool.valid[j, r]]
        assert got[j] == pytest.approx(min(costs)) and pool.valid[j, pick[j]]


def test_torus_paths_leave_a_source_by_every_link_when_detours_are_allowed():
    from optiq.paths import torus_paths

    t = torus((4, 4, 4))
    ps = torus_paths(t, Demands([0], [21], [1]), k=40, spread=False)      # 21 = (1, 1, 1): one step per dimension
    first = {int(ps.path(p)[0]) for p in range(ps.num_paths)}
    assert first == set(t.links_from(0).tolist())


def test_pair_hops_on_tori_is_the_breadth_first_distance():
    for t in (torus((5, 4, 2)), mesh((3, 5)), bgq(512)):
        rng = np.random.default_rng(0)
        s, x = rng.integers(0, t.num_nodes, 50), rng.integers(0, t.num_nodes, 50)
        bfs = t.hop_distances(s)[np.arange(50), x]
        assert t.pair_hops(s, x).tolist() == bfs.astype(int).tolist()


@pytest.mark.parametrize("dims, wrap", [((4, 4), True), ((3, 4, 2), True), ((4, 3), False), ((5,), True)])
@pytest.mark.parametrize("slack", [0, 1, 2])
def test_regions_hold_every_node_of_every_hop_limited_path(dims, wrap, slack):
    import networkx as nx

    from optiq.paths.regions import region_nodes
    from optiq.topology import mesh

    t = torus(dims) if wrap else mesh(dims)
    g = nx.DiGraph(list(zip(t.link_src.tolist(), t.link_dst.tolist())))
    hops = dict(nx.all_pairs_shortest_path_length(g))
    rng = np.random.default_rng(len(dims) + slack)
    for s, d in rng.integers(0, t.num_nodes, (6, 2)).tolist():
        if s == d:
            continue
        limit = hops[s][d] + slack
        region = set(region_nodes(t, s, np.array([d]), np.array([slack])).tolist())
        assert region >= {v for p in nx.all_simple_paths(g, s, d, cutoff=limit) for v in p}
        assert region == {v for v in range(t.num_nodes) if hops[s][v] + hops[v][d] <= limit}  # no more


@pytest.mark.parametrize("spec", ["torus:4x4x2", "mesh:4x3", "torus:6x4"])
def test_least_cost_paths_in_regions_equal_the_whole_graph_search(spec):
    from optiq import from_spec
    from optiq.paths import least_cost_paths, min_hops

    t = from_spec(spec)
    d = random_demands(t, 12, seed=4)
    rng = np.random.default_rng(5)
    for cost in (rng.random(t.num_links), rng.random(t.num_links) * (rng.random(t.num_links) < 0.2)):
        limit = min_hops(t, d.src, d.dst) + 1
        full = least_cost_paths(t, d.src, d.dst, cost, limit, too_long="exact")
        confined = least_cost_paths(t, d.src, d.dst, cost, limit, too_long="exact", regions=True)
        assert confined[1] == pytest.approx(full[1], rel=1e-9, abs=1e-12)
        assert (confined[0].hops <= limit).all()
        assert np.isnan(confined[2]).all()  # a confined search proves no bound


@pytest.mark.parametrize("threads", [2, 3])
def test_least_cost_paths_in_threads_are_the_serial_search(threads):
    """Blocks of the sources searched in threads give the serial search's paths, costs and
    bounds, for every way of handling a path over its limit, in regions and not."""
    from optiq import from_spec
    from optiq.paths import least_cost_paths, min_hops

    t = from_spec("torus:4x4x3")
    d = random_demands(t, 40, seed=6)
    rng = np.random.default_rng(7)
    cost = rng.random(t.num_links) * (rng.random(t.num_links) < 0.5)   # zeros: ties
    limit = min_hops(t, d.src, d.dst) + 1
    for too_long in ("exact", "penalty", "drop"):
        for regions in (False, True):
            serial = least_cost_paths(t, d.src, d.dst, cost, limit, too_long=too_long, regions=regions)
            lines: list[str] = []
            split = least_cost_paths(t, d.src, d.dst, cost, limit, too_long=too_long, regions=regions,
                                     threads=threads, progress=lines.append)
            assert np.array_equal(serial[0].offsets, split[0].offsets) and np.array_equal(serial[0].links, split[0].links)
            np.testing.assert_array_equal(serial[1], split[1])
            np.testing.assert_array_equal(serial[2], split[2])


def test_a_threaded_search_raises_the_error_of_the_part_that_failed():
    from optiq import Topology
    from optiq.paths import least_cost_paths

    # node 3 cannot reach node 0: the part with source 3 fails, the search raises it
    t = Topology("one way", 4, np.array([0, 1, 2, 1]), np.array([1, 2, 3, 0]), np.ones(4))
    with pytest.raises(PathError, match="node 0 cannot be reached from node 3"):
        least_cost_paths(t, np.array([0, 1, 2, 3]), np.array([3, 0, 3, 0]), np.ones(4), np.array([3, 3, 3, 3]),
                         threads=2)


def _random_pathset(rng, num_jobs, count):
    if count == 0:
        return PathSet(np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), num_jobs)
    paths = [rng.integers(0, 50, rng.integers(1, 5)) for _ in range(count)]
    stops = [np.append(rng.random(p.size - 1) < 0.5, True) for p in paths]
    ps, _ = PathSet.from_csr(np.concatenate(paths), np.concatenate(([0], np.cumsum([p.size for p in paths]))),
                             rng.integers(0, num_jobs, count), num_jobs, np.concatenate(stops))
    return ps


@pytest.mark.parametrize("seed", range(5))
def test_concat_places_paths_as_sorting_them_by_job_does(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        num_jobs = int(rng.integers(1, 6))
        parts = [_random_pathset(rng, num_jobs, int(rng.integers(0, 8))) for _ in range(int(rng.integers(1, 4)))]
        got, order = PathSet.concat(parts)
        hops = np.concatenate([p.hops for p in parts])
        want, want_order = PathSet.from_csr(np.concatenate([p.links for p in parts]),
                                            np.concatenate(([0], np.cumsum(hops))),
                                            np.concatenate([p.job for p in parts]), num_jobs,
                                            np.concatenate([p.stops for p in parts]))
        for a, b in ((got.job, want.job), (got.offsets, want.offsets), (got.links, want.links),
                     (got.stops, want.stops), (order, want_order)):
            assert np.array_equal(a, b)


def test_chain_candidates_priced_in_slices_are_valid_distinct_chains(monkeypatch):
    from optiq.paths import chains
    from optiq.paths.space import PathSpace

    t = kary_ntree(4, 2)
    d = random_demands(t, 40, seed=3)
    space = PathSpace(t, d)
    full = space.chains.spread(6, seed=1)
    monkeypatch.setattr(chains, "SPREAD_FULL_ENTRIES", 0)  # every round offers a slice of the intermediates
    sliced = space.chains.spread(6, seed=1)
    space.check(sliced)
    assert np.array_equal(sliced.paths_per_job, full.paths_per_job)  # 16 intermediates, five slices of up to 4
    for j in range(d.num_jobs):
        mine = [tuple(sliced.path(p)) for p in range(sliced.job_offsets[j], sliced.job_offsets[j + 1])]
        assert len(set(mine)) == len(mine)
        stops = [sliced.stop_nodes(p, t) for p in range(sliced.job_offsets[j], sliced.job_offsets[j + 1])]
        assert stops[0] == [d.src[j], d.dst[j]] and all(s[0] == d.src[j] and s[-1] == d.dst[j] for s in stops)
        assert all(d.src[j] not in s[1:-1] and d.dst[j] not in s[1:-1] for s in stops)


@pytest.mark.parametrize("seed", range(6))
def test_repeats_are_the_paths_a_set_of_keys_has_seen_before(seed):
    rng = np.random.default_rng(seed)
    num_jobs = int(rng.integers(1, 5))
    count = int(rng.integers(2, 60))
    # few links and short paths, so that many paths repeat; empty paths too
    paths = [rng.integers(0, 3, rng.integers(0, 4)) for _ in range(count)]
    ps = PathSet.from_lists(paths, rng.integers(0, num_jobs, count), num_jobs)
    seen: set = set()
    want = []
    for p in range(ps.num_paths):
        key = path_key(int(ps.job[p]), ps.path(p))
        want.append(key in seen)
        seen.add(key)
    assert ps.repeats().tolist() == want
    assert ps.unique().num_paths == len(seen)


@pytest.mark.parametrize("collide", [False, True])
def test_spread_rounds_index_finds_exactly_the_paths_seen_in_earlier_rounds(collide, monkeypatch):
    from optiq.paths.candidates import _SeenPaths

    if collide:  # every path of a job gets the same key: only the link-by-link check tells them apart
        monkeypatch.setattr(_SeenPaths, "_keys", staticmethod(lambda ps: ps.job.astype(np.uint64)))
    rng = np.random.default_rng(7)
    num_jobs, seen, index = 5, set(), _SeenPaths()
    for _ in range(8):
        jobs = np.sort(rng.choice(num_jobs, rng.integers(1, num_jobs + 1), replace=False))
        ps = PathSet.from_lists([rng.integers(0, 3, rng.integers(1, 4)) for _ in jobs], jobs, num_jobs)
        want = [path_key(int(ps.job[p]), ps.path(p)) in seen for p in range(ps.num_paths)]
        got = index.contains(ps).tolist()
        if collide:  # a stored collision may hide a repeat, never invent one
            assert all(w or not g for w, g in zip(want, got))
        else:
            assert got == want
        fresh = ps.select(~np.array(got))
        index.add(fresh)
        seen |= {path_key(int(fresh.job[p]), fresh.path(p)) for p in range(fresh.num_paths)}
    merged = index.paths(num_jobs)
    assert merged.num_paths == index.num_paths and np.all(np.diff(merged.job) >= 0)


@pytest.mark.parametrize("spec", ["torus:4x3x2", "bgq:64", "torus:4x4"])
def test_distinct_link_paths_as_forwarded_paths_drop_only_the_repeats_the_routes_make(spec):
    """``from_links(distinct=True)`` skips the search for repeats unless the network's routes
    replaced a link, and then gives what the full search gives."""
    from optiq.paths import torus_paths
    from optiq.paths.routing import route_twins
    from optiq.paths.space import PathSpace
    from optiq.topology import from_spec

    t = from_spec(spec)
    d = random_demands(t, 40, seed=2)
    space = PathSpace(t, d)
    raw = torus_paths(t, d, k=8, hop_slack=0, spread=False)
    fast, full = space.from_links(raw, distinct=True), space.from_links(raw)
    assert np.array_equal(fast.links, full.links) and np.array_equal(fast.offsets, full.offsets)
    assert np.array_equal(fast.job, full.job)
    replaced = (route_twins(t)[raw.links] != raw.links).any()
    assert (fast is raw) == (not replaced)
    if replaced:
        assert full.num_paths < raw.num_paths  # the routes made repeats, and they were dropped


@pytest.mark.parametrize("spec", ["torus:4x4x4", "torus:3x5x2", "mesh:4x5", "torus:2x2x2", "bgq:64", "torus:6x1x3",
                                  "torus:5x4x3x2"])
@pytest.mark.parametrize("k", [1, 2, 3, 16])
def test_shortest_torus_routes_are_the_recipe_pools_first_routes(spec, k):
    """The shortest dimension-ordered routes made without the pool (which recipes repeat is
    told from coordinates) are the pool's first ``k`` distinct routes, in its order."""
    from optiq.paths import torus_paths
    from optiq.paths.torus import RecipePool
    from optiq.topology import from_spec

    t = from_spec(spec)
    n = t.num_endpoints
    d = random_demands(t, min(200, n * (n - 1)), seed=k)
    want = RecipePool(t, d, hop_slack=0, vias=0).first(k)
    got = torus_paths(t, d, k, hop_slack=0, spread=False)
    assert np.array_equal(got.job, want.job) and np.array_equal(got.offsets, want.offsets)
    assert np.array_equal(got.links, want.links)


@pytest.mark.parametrize("spec", ["torus:4x4x4", "torus:6x6", "torus:8x3x5", "mesh:4x5", "torus:5x4x3", "torus:4x6x2",
                                  "bgq:64", "torus:6x6x6x4"])
@pytest.mark.parametrize("k", [1, 3, 16])
def test_shortest_torus_routes_carry_the_stops_the_search_finds(spec, k, monkeypatch):
    """The stops told from each route's recipe (where it turns back to an earlier dimension, and
    one hop before a tie crossed the other way reaches half its ring) are those the hop-by-hop
    search of :func:`forwarded_stops` finds; every pair of the machine, each tie both ways.
    Where links are not the network's routes (a wrapped ring of two) none are kept. Candidates
    made over them take those stops without searching."""
    import optiq.paths.space
    from optiq.paths import torus_paths
    from optiq.paths.kept import FORWARDED_STOPS, derived_from
    from optiq.paths.routing import forwarded_stops, links_are_routes
    from optiq.paths.system import forget_routes
    from optiq.planner import make_candidates
    from optiq.topology import from_spec

    forget_routes()   # the candidates below are made anew, not the last test's kept set
    t = from_spec(spec)
    n = t.num_endpoints
    src, dst = np.nonzero(~np.eye(n, dtype=bool))
    d = Demands(src, dst, np.full(src.size, 8.0))
    paths = torus_paths(t, d, k, hop_slack=0, spread=False)
    told = derived_from(paths, t).get(FORWARDED_STOPS)
    if not links_are_routes(t):
        assert told is None
        return
    found = forwarded_stops(paths, t)
    assert np.array_equal(told, found)
    assert k == 1 or found.sum() > paths.num_paths   # some routes take more than one leg

    def searched(*args):
        raise AssertionError("the stops were searched for")

    monkeypatch.setattr(optiq.paths.space, "forwarded_stops", searched)
    made = make_candidates(t, d, k, "torus-shortest")
    assert np.array_equal(made.links, paths.links) and np.array_equal(made.stops, found)


@pytest.mark.parametrize("spec, kind", [("torus:4x4x2", "torus-shortest"), ("torus:4x4", "diverse"),
                                        ("torus:4x4", "spread"), ("torus:4x4x2", "torus"),
                                        ("fattree:k=4,n=2", "chains")])
def test_candidates_are_kept_for_the_same_pairs_and_recipe_only(spec, kind):
    """An application plans the same pairs again with other bytes: their candidates are kept;
    another ``k`` or other pairs get candidates made anew (what a fresh process makes), and
    ``forget_routes`` drops what was kept."""
    from optiq.paths.system import forget_routes
    from optiq.planner import make_candidates
    from optiq.topology import from_spec

    t = from_spec(spec)
    d = random_demands(t, 100, seed=1)

    def made(demands, k):
        return make_candidates(t, demands, k, kind, stops=False)

    first = made(d, 4)
    assert made(Demands(d.src, d.dst, d.nbytes * 2), 4) is first
    for k, other in ((2, d), (4, random_demands(t, 100, seed=2)), (4, d)):
        got = made(other, k)
        forget_routes()
        want = made(other, k)
        assert got is not want
        assert np.array_equal(got.links, want.links) and np.array_equal(got.offsets, want.offsets)
    assert made(d, 4) is not first


def test_candidates_kept_for_a_topology_are_not_given_back_once_its_fabric_changed():
    """Chains follow the network's forwarding tables: a topology given another fabric gets its
    candidates made anew, not the set kept under the old one."""
    from optiq.paths.kept import kept_candidates
    from optiq.topology import from_spec

    t = from_spec("torus:4x4")
    d = random_demands(t, 20, seed=3)
    first = kept_candidates(t, d, ("diverse", 2), lambda: diverse_paths(t, d, 2))
    assert kept_candidates(t, d, ("diverse", 2), lambda: diverse_paths(t, d, 2)) is first
    t.fabric = object()   # as if new forwarding tables were read for the same topology object
    again = kept_candidates(t, d, ("diverse", 2), lambda: diverse_paths(t, d, 2))
    assert again is not first and np.array_equal(again.links, first.links)


def test_a_plans_default_routes_are_kept_beside_its_candidates_not_in_their_place():
    """Both sets depend on the pairs alone: a second plan of the same pairs with other bytes
    gets the very same default routes and candidates back, though each was made after the other."""
    from optiq.paths.kept import kept_candidates
    from optiq.planner import make_plan

    t = torus((4, 4))
    d = random_demands(t, 30, seed=4)
    make_plan(t, d, "heu2")
    routes = kept_candidates(t, d, "network routes", lambda: 1 / 0, slot="default routes")
    candidates = kept_candidates(t, d, ("diverse", 16, None, 0), lambda: 1 / 0)
    make_plan(t, Demands(d.src, d.dst, d.nbytes[::-1]), "heu2")
    assert kept_candidates(t, d, "network routes", lambda: 1 / 0, slot="default routes") is routes
    assert kept_candidates(t, d, ("diverse", 16, None, 0), lambda: 1 / 0) is candidates
