"""The network's own routes after cables fail (optiq.paths.failover), against breadth-first searches
of what is left: every pair a live path joins gets a route of live links from its source to its
destination; a pair none joins keeps its route and is called stranded; routes that avoided the
dead cables stay as they were on a torus, and elsewhere are shortest on what is left."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from conftest import random_graph_topology, synthetic_ibnet

from optiq.errors import PathError
from optiq.paths import network_routes
from optiq.paths.failover import crossing, routes_after_failure
from optiq.testbed.forwarding import all_pairs
from optiq.topology import from_spec
from optiq.topology.cables import reverse_link


def _network(kind: str, tmp_path):
    if kind == "ibnet":
        return synthetic_ibnet(tmp_path)
    if kind == "graph":
        return random_graph_topology(5)
    return from_spec(kind)


def _live_graph(t, dead) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(t.num_nodes))
    g.add_edges_from((int(a), int(b)) for e, (a, b) in enumerate(zip(t.link_src, t.link_dst)) if e not in set(dead))
    return g


KINDS = ["torus:4x4", "torus:3x4x2", "mesh:3x3", "fattree:k=4,n=2", "cluster:hosts=16,edges=4,cores=2",
         "dragonfly:a=2,p=1,h=1", "ibnet", "graph"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [0, 1])
def test_after_a_cable_fails_every_joined_pair_routes_on_live_links_and_the_others_are_stranded(kind, seed, tmp_path):
    t = _network(kind, tmp_path)
    rng = np.random.default_rng(seed)
    cables = [e for e in range(t.num_links) if e < reverse_link(t, e)]
    busy = np.bincount(network_routes(t, *all_pairs(t.num_endpoints)).links, minlength=t.num_links)
    cable = int(max(cables, key=lambda e: (busy[e] + busy[reverse_link(t, e)], rng.random())))
    dead = [cable, reverse_link(t, cable)]
    if seed:  # two cables at once
        other = int(rng.choice([e for e in cables if e != cable]))
        dead += [other, reverse_link(t, other)]
    src, dst = all_pairs(t.num_endpoints)
    after = routes_after_failure(t, src, dst, dead)
    before = network_routes(t, src, dst)
    g = _live_graph(t, dead)
    distance = dict(nx.all_pairs_shortest_path_length(g))
    assert after.crossed.tolist() == crossing(before, dead).tolist() and after.crossed.any()
    for p, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
        joined = d in distance[s]
        links = after.routes.links[after.routes.offsets[p]:after.routes.offsets[p + 1]]
        assert bool(after.stranded[p]) == (after.crossed[p] and not joined)
        if after.stranded[p] or not after.crossed[p] and t.is_torus:
            assert np.array_equal(links, before.links[before.offsets[p]:before.offsets[p + 1]])
            continue
        nodes = after.routes.nodes(p, t)
        assert nodes[0] == s and nodes[-1] == d and len(set(nodes)) == len(nodes)
        assert not set(links.tolist()) & set(dead), (p, s, d)
        if not t.is_torus:  # minhop and D-mod-K: shortest on what is left
            assert links.size == distance[s][d]


def test_a_torus_goes_the_other_way_round_the_ring_where_its_route_met_the_dead_cable():
    t = from_spec("torus:8")
    dead = [t.links_between(2, 3)[0], t.links_between(3, 2)[0]]
    after = routes_after_failure(t, [0, 3, 5], [3, 1, 6], dead)
    assert [after.routes.nodes(p, t) for p in range(3)] == [[0, 7, 6, 5, 4, 3], [3, 4, 5, 6, 7, 0, 1], [5, 6]]
    assert after.crossed.tolist() == [True, True, False] and not after.stranded.any()
    assert "detours" in repr(after)


def test_a_host_whose_only_cable_fails_is_stranded_and_bad_links_are_named():
    t = from_spec("cluster:hosts=4,edges=2,cores=1")
    up = int(t.links_from(0)[0])
    after = routes_after_failure(t, [0, 1, 2], [1, 0, 3], [up, reverse_link(t, up)])
    assert after.stranded.tolist() == [True, True, False]
    with pytest.raises(PathError, match="link 999 is not a link"):
        routes_after_failure(t, [0], [1], [999])
