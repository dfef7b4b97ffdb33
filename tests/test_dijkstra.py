"""The compiled pricing search (optiq.paths.dijkstra) against scipy's Dijkstra."""

import numpy as np
import pytest
from conftest import SMALL_TOPOLOGIES
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import dijkstra

from optiq.errors import PathError
from optiq.paths.dijkstra import source_paths
from optiq.paths.regions import region_nodes
from optiq.topology import Topology, from_spec


def _scipy_distances(t: Topology, weight: np.ndarray, sources: np.ndarray, nodes: np.ndarray | None = None) -> np.ndarray:
    """Least weight from every source to every node, parallel links at their cheapest (scipy
    keeps the smallest of duplicate entries only after this explicit reduction)."""
    n = t.num_nodes
    key = t.link_src * n + t.link_dst
    uniq, inv = np.unique(key, return_inverse=True)
    best = np.full(uniq.size, np.inf)
    np.minimum.at(best, inv, weight)
    graph = coo_matrix((best, (uniq // n, uniq % n)), shape=(n, n)).tocsr()
    if nodes is None:
        return dijkstra(graph, directed=True, indices=sources)
    sub = graph[nodes][:, nodes]
    return dijkstra(sub, directed=True, indices=np.searchsorted(nodes, sources))


def _split(links, offsets):
    return [links[offsets[j]:offsets[j + 1]] for j in range(offsets.size - 1)]


def _check_paths(t, src, dst, paths, hops, limit):
    for p, s, d, h, lim in zip(paths, src, dst, hops, limit):
        if h > lim:
            assert p.size == 0
            continue
        assert p.size == h
        if h:
            assert t.link_src[p[0]] == s and t.link_dst[p[-1]] == d
            assert (t.link_dst[p[:-1]] == t.link_src[p[1:]]).all()


@pytest.mark.parametrize("name", sorted(SMALL_TOPOLOGIES) + ["bgq:64", "torus:5x4x3", "fattree:k=4,n=2"])
def test_every_path_is_as_cheap_as_scipys_dijkstra(name):
    t = SMALL_TOPOLOGIES[name]() if name in SMALL_TOPOLOGIES else from_spec(name)
    rng = np.random.default_rng(len(name))
    n = t.num_endpoints
    src = rng.integers(0, n, 60)
    dst = rng.integers(0, n, 60)
    for weight in (rng.random(t.num_links) + 1e-3, np.where(rng.random(t.num_links) < 0.3, rng.random(t.num_links), 1e-12)):
        limit = np.full(src.size, t.num_nodes)
        links, offsets, cost, hops = source_paths(t, src, dst, weight, weight, limit)
        paths = _split(links, offsets)
        want = _scipy_distances(t, weight, src)[np.arange(src.size), dst]
        assert cost == pytest.approx(want, rel=1e-12, abs=1e-15)
        assert np.allclose([weight[p].sum() for p in paths], cost, rtol=1e-12, atol=1e-15)
        _check_paths(t, src, dst, paths, hops, limit)


@pytest.mark.parametrize("spec", ["torus:4x4x2", "mesh:5x3", "torus:6x5", "bgq:128"])
@pytest.mark.parametrize("slack", [0, 2, 4])
def test_a_confined_search_is_scipys_dijkstra_on_the_union_of_the_regions(spec, slack):
    t = from_spec(spec)
    rng = np.random.default_rng(slack)
    weight = rng.random(t.num_links) + 1e-3
    src = np.repeat(rng.integers(0, t.num_nodes, 6), 3)  # three jobs per source: their regions' union
    dst = rng.integers(0, t.num_nodes, src.size)
    slacks = rng.integers(0, slack + 1, src.size)
    limit = t.pair_hops(src, dst) + slacks
    links, offsets, cost, hops = source_paths(t, src, dst, weight, 2 * weight, limit, slack=slacks)
    paths = _split(links, offsets)
    for s in np.unique(src):
        jobs = np.flatnonzero(src == s)
        nodes = region_nodes(t, s, dst[jobs], slacks[jobs])
        want = _scipy_distances(t, weight, np.array([s]), nodes)[0, np.searchsorted(nodes, dst[jobs])]
        assert cost[jobs] == pytest.approx(2 * want, rel=1e-12)
    _check_paths(t, src, dst, paths, hops, limit)
    assert (hops[hops <= limit] == [p.size for p, h, lim in zip(paths, hops, limit) if h <= lim]).all()


def test_too_long_paths_come_back_empty_with_their_length():
    t = from_spec("torus:8")
    weight = np.ones(t.num_links)
    weight[t.links_between(0, 1)] = 100.0
    links, offsets, cost, hops = source_paths(t, np.array([0, 0]), np.array([2, 7]), weight, weight, np.array([2, 1]))
    assert hops.tolist() == [6, 1] and cost.tolist() == [6.0, 1.0]
    assert offsets.tolist() == [0, 0, 1] and t.link_dst[links].tolist() == [7]


def test_an_unreachable_target_is_named():
    t = Topology("one way", 3, np.array([0, 1]), np.array([1, 2]), np.ones(2))
    with pytest.raises(PathError, match="node 0 cannot be reached from node 2"):
        source_paths(t, np.array([0, 2]), np.array([2, 0]), np.ones(2), np.ones(2), np.array([5, 5]))


def test_ctrl_c_during_a_compiled_call_arrives_after_it():
    import signal

    from optiq.utils.compiled import interrupts_held

    # Python's own handler, whatever the process started with (a shell starts background jobs
    # with Ctrl-C ignored)
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        reached_end = False
        with pytest.raises(KeyboardInterrupt):
            with interrupts_held():
                signal.raise_signal(signal.SIGINT)  # held, not raised here
                reached_end = True
        assert reached_end and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)
