import networkx as nx
import numpy as np
import pytest

from optiq.errors import TopologyError
from optiq.topology import BGQ_SHAPES, bgq, cluster, from_networkx, from_spec, kary_ntree, mesh, read_graphml, torus


def test_torus_links_are_one_per_direction_per_dimension():
    t = torus((4, 3, 5))
    assert t.num_links == 60 * 6
    # every link moves one coordinate by +-1 (mod length) and nothing else
    diff = (t.coords[t.link_dst] - t.coords[t.link_src]) % np.array(t.dims)
    moved = diff != 0
    assert (moved.sum(axis=1) == 1).all()
    step = diff[moved]
    length = np.array(t.dims)[np.argmax(moved, axis=1)]
    assert np.all((step == 1) | (step == length - 1))


def test_length_two_dimension_has_two_distinct_links_per_direction():
    t = torus((2,))
    assert t.num_links == 4
    assert sorted(t.links_between(0, 1)) != [] and len(t.links_between(0, 1)) == 2
    assert len(t.links_between(1, 0)) == 2


def test_mesh_has_no_wraparound():
    t = mesh((3, 3))
    assert t.num_links == 2 * 2 * 3 * 2  # 2 dims x 3 rows x 2 edges per row x 2 directions
    assert not t.links_between(0, 2)
    assert t.diameter == 4


@pytest.mark.parametrize("nodes", [512, 1024, 2048, 49152])
def test_bgq_presets_shape_numbering_and_bandwidth(nodes):
    t = bgq(nodes)
    assert t.num_nodes == nodes == int(np.prod(BGQ_SHAPES[nodes]))
    assert t.num_links == 10 * nodes
    A, B, C, D, E = t.dims
    assert E == 2
    a, b, c, d, e = t.coords[nodes - 3]
    assert ((((a * B + b) * C + c) * D + d) * E + e) == nodes - 3
    assert np.all(t.capacity == 1.8e9)


def test_mira_full_machine_shape():
    assert bgq(49152).dims == (8, 12, 16, 16, 2)


def test_kary_ntree_structure_matches_networkx_shortest_paths():
    t = kary_ntree(3, 3)
    assert t.num_endpoints == 27 and t.num_nodes == 27 + 3 * 9
    g = nx.DiGraph(list(zip(t.link_src.tolist(), t.link_dst.tolist())))
    # hosts under one edge switch are 2 hops apart, in different pods 6
    assert nx.shortest_path_length(g, 0, 1) == 2
    assert nx.shortest_path_length(g, 0, 26) == 6
    # every switch has radix 2k (k down, k up) except top-level ones (k down)
    deg = np.bincount(t.link_src, minlength=t.num_nodes)
    assert (deg[:27] == 1).all()
    assert (deg[27:27 + 18] == 6).all() and (deg[27 + 18:] == 3).all()


def test_cluster_preset():
    t = from_spec("cluster:hosts=20,edges=4,cores=2")
    assert (t.num_endpoints, t.num_nodes) == (20, 26)
    assert t.links_between(0, 20) and t.links_between(20, 24) and t.links_between(23, 25)


@pytest.mark.parametrize("spec,nodes", [("bgq:1024", 1024), ("torus:4x4x4x8x2", 1024), ("mesh:8x8", 64),
                                        ("fattree:k=4", 112), ("fattree:k=2,n=2", 8)])
def test_spec_strings(spec, nodes):
    assert from_spec(spec).num_nodes == nodes


def test_an_oversubscribed_cluster_has_slower_uplinks_and_keeps_them_in_its_spec():
    t = from_spec("cluster:hosts=4,edges=2,cores=1,bw=40Mb/s,core_bw=10Mb/s")
    between_switches = (t.link_src >= 4) & (t.link_dst >= 4)
    assert set(t.capacity[between_switches]) == {1.25e6} and set(t.capacity[~between_switches]) == {5e6}
    again = from_spec(t.spec)
    assert np.array_equal(again.capacity, t.capacity) and np.array_equal(again.link_dst, t.link_dst)
    made = cluster(4, 2, 1, bandwidth=5e6, core_bandwidth=1.25e6)
    assert np.array_equal(from_spec(made.spec).capacity, t.capacity)
    assert "core_bw" not in cluster(4, 2, 1, bandwidth=5e6, core_bandwidth=5e6).spec  # the hosts' rate: not said
    with pytest.raises(TopologyError, match="core_bw"):
        from_spec("cluster:hosts=4,edges=2,cores=1,core_bw=fast")
    with pytest.raises(TopologyError, match="positive"):
        from_spec("cluster:hosts=4,edges=2,cores=1,core_bw=0Gb/s")


def test_spec_bandwidth_option():
    assert from_spec("torus:4x4,bw=200MB/s").capacity[0] == 2e8


@pytest.mark.parametrize("spec,fragment", [("bgq:1000", "1000"), ("hypercube:4", "hypercube"),
                                           ("torus:4xq", "4xq"), ("fattree:n=3", "k="),
                                           ("cluster:hosts=21", "21"), ("torus:4x4,speed=3", "speed"),
                                           ("bgq", "KIND:ARGS"), ("graphml:/no/such.graphml", "does not exist")])
def test_bad_specs_name_the_problem(spec, fragment):
    with pytest.raises(TopologyError, match=fragment):
        from_spec(spec)


def test_networkx_graph_needs_capacities():
    g = nx.path_graph(3)
    with pytest.raises(TopologyError, match="capacity"):
        from_networkx(g)
    assert from_networkx(g, default_capacity=1.0).num_links == 4


def test_disconnected_graph_is_rejected():
    g = nx.Graph()
    g.add_edge(0, 1, capacity=1.0)
    g.add_edge(2, 3, capacity=1.0)
    with pytest.raises(TopologyError, match="disconnected"):
        from_networkx(g)


def test_graphml_hosts_come_first(tmp_path):
    g = nx.Graph()
    g.add_node("sw", host=False)
    for h in ("a", "b", "c"):
        g.add_node(h, host=True)
        g.add_edge(h, "sw", capacity=5.0)
    path = tmp_path / "star.graphml"
    nx.write_graphml(g, path)
    t = read_graphml(path)
    assert t.num_endpoints == 3 and t.num_nodes == 4
    assert t.node_labels[:3] == ["a", "b", "c"]
    assert from_spec(f"graphml:{path}").num_links == 6


def test_is_tree_is_networkx_is_tree_of_the_cables_with_one_link_each_way():
    rng = np.random.default_rng(3)
    seen = {True: 0, False: 0}
    for trial in range(60):
        n = int(rng.integers(2, 9))
        g = nx.random_labeled_tree(n, seed=int(rng.integers(1 << 30))) if trial % 2 else \
            nx.gnm_random_graph(n, int(rng.integers(n - 1, n + 3)), seed=int(rng.integers(1 << 30)))
        if not nx.is_connected(g):
            continue
        multi = nx.MultiGraph(g)
        if trial % 3 == 0:  # a second cable between two nodes: two routes
            u, v = next(iter(g.edges))
            multi.add_edge(u, v)
        nx.set_edge_attributes(multi, 1e9, "capacity")
        expected = nx.is_tree(g) and multi.number_of_edges() == g.number_of_edges()
        assert from_networkx(multi).is_tree == expected, (trial, list(multi.edges))
        seen[expected] += 1
    assert seen[True] > 10 and seen[False] > 10, seen


@pytest.mark.parametrize("seed", range(4))
def test_on_a_tree_no_plan_beats_the_network_routes(seed):
    """The claim :attr:`Topology.is_tree` makes, by an independent formulation: the arc-flow LP
    over every path (any node may forward) finds no time below the default routes'."""
    from conftest import arc_flow_optimum

    from optiq.planner import make_plan
    from optiq.workloads import Demands

    rng = np.random.default_rng(seed)
    g = nx.random_labeled_tree(9, seed=seed)
    for u, v in g.edges:
        g.edges[u, v]["capacity"] = float(rng.choice([1e9, 2e9, 5e8]))
    for v in rng.choice(9, 5, replace=False):
        g.nodes[int(v)]["host"] = True
    t = from_networkx(g)
    assert t.is_tree
    pairs = [(s, r) for s in range(t.num_endpoints) for r in range(t.num_endpoints) if s != r]
    src, dst = np.array([pairs[i] for i in rng.choice(len(pairs), 10, replace=False)]).T
    d = Demands(src, dst, rng.integers(1, 9, src.size) * 2**20)
    default = make_plan(t, d, "default").predicted_time_s
    assert arc_flow_optimum(t, d) == pytest.approx(default, rel=1e-6)
