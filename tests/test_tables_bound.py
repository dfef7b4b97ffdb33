"""The bound ``optiq tables`` prints against brute force: on small fat-trees with uneven links, the
least busiest link of any destination-based routing (one simple path per pair, and wherever two
pairs to one destination meet, the same next link, as tables of one LID per port route them) is
never below the bound, for every kind of traffic, and the bound is that optimum wherever the
hosts' own cables decide it."""

import itertools

import numpy as np
import pytest
from conftest import all_simple_paths

from optiq import Demands
from optiq.planner.tables import host_cable_bound, single_path_bound
from optiq.topology import Topology, cluster


def uneven_cluster(seed: int) -> Topology:
    """8 hosts on 2 edge switches under 2 cores; every cable at its own rate (1 to 4), both ways."""
    base = cluster(8, 2, 2)
    rng = np.random.default_rng(seed)
    cable = {}
    cap = np.empty(base.num_links)
    for e, (u, v) in enumerate(zip(base.link_src.tolist(), base.link_dst.tolist())):
        cap[e] = cable.setdefault((min(u, v), max(u, v)), float(rng.integers(1, 5)))
    return Topology("uneven", base.num_nodes, base.link_src, base.link_dst, cap, num_endpoints=base.num_endpoints)


def traffic(kind: str, seed: int) -> Demands:
    rng = np.random.default_rng(seed)
    n = 8
    if kind == "random pairs":
        pairs = rng.permutation(n)[:6].reshape(3, 2)
        return Demands(pairs[:, 0], pairs[:, 1], rng.integers(1, 4, 3))
    if kind == "many-to-few":
        few = rng.choice(n, 2, replace=False)
        senders = [h for h in rng.permutation(n) if h not in few][:4]
        return Demands(senders, np.repeat(few, 2), [2, 2, 2, 2])
    if kind == "all-to-all subset":
        hosts = rng.choice(n, 3, replace=False)
        a, b = np.meshgrid(hosts, hosts)
        keep = a != b
        return Demands(a[keep], b[keep], np.ones(int(keep.sum()), np.int64))
    if kind == "shift":
        return Demands(np.arange(n), (np.arange(n) + 3) % n, np.full(n, 2))
    perm = rng.permutation(n)
    keep = perm != np.arange(n)
    return Demands(np.arange(n)[keep], perm[keep], rng.integers(1, 3, int(keep.sum())))


def _by_destination(t: Topology, pick, dsts) -> bool:
    """Whether the paths are one tree per destination: one next link at every node they cross."""
    next_link: dict[tuple[int, int], int] = {}
    for links, dst in zip(pick, dsts):
        for link in links.tolist():
            if next_link.setdefault((dst, int(t.link_src[link])), link) != link:
                return False
    return True


def single_path_optimum(t: Topology, d: Demands) -> float:
    """The least busiest link of destination-based routes over every choice of one simple path
    per pair (brute force)."""
    every = all_simple_paths(t, d)
    choices = [[every.path(p) for p in np.flatnonzero(every.job == j)] for j in range(d.num_jobs)]
    best = np.inf
    for pick in itertools.product(*choices):
        if not _by_destination(t, pick, d.dst.tolist()):
            continue
        load = np.zeros(t.num_links)
        for links, size in zip(pick, d.nbytes.tolist()):
            load[links] += size
        best = min(best, float((load / t.capacity).max()))
    return best


@pytest.mark.parametrize("kind", ["random pairs", "many-to-few", "all-to-all subset", "shift", "permutation"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_bound_is_never_above_the_best_single_path_routing_and_meets_a_tight_host_cable(kind, seed):
    t = uneven_cluster(seed)
    d = traffic(kind, seed)
    bound, cables = single_path_bound(t, d), host_cable_bound(t, d)
    best = single_path_optimum(t, d)
    assert cables <= bound <= best * (1 + 1e-9), (bound, best)
    if cables >= best * (1 - 1e-9):   # the hosts' cables decide: the bound says so exactly
        assert bound == pytest.approx(best)


def test_a_host_that_receives_from_many_is_bounded_by_its_own_cable():
    t = cluster(8, 2, 2, bandwidth=1.0)
    d = Demands([1, 2, 3, 4], [0, 0, 0, 0], [5, 5, 5, 5])   # many-to-one: 20 bytes into host 0
    assert single_path_bound(t, d) == host_cable_bound(t, d) == 20.0 == single_path_optimum(t, d)


def test_pairs_from_one_switch_to_one_host_count_as_one_on_its_uplinks():
    """Two hosts of one edge switch send to one host elsewhere: their switch has one port for that
    LID, so both cross one uplink (2 at rate 1), though each alone and the hosts' cables (rate 4)
    would allow 1."""
    base = cluster(8, 2, 2)
    E = base.num_endpoints
    cap = np.where((base.link_src < E) | (base.link_dst < E), 4.0, 1.0)
    t = Topology("slow uplinks", base.num_nodes, base.link_src, base.link_dst, cap, num_endpoints=E)
    d = Demands([0, 1], [4, 4], [1, 1])
    assert host_cable_bound(t, d) == 0.5
    assert single_path_bound(t, d) == 2.0 == single_path_optimum(t, d)
    assert single_path_bound(t, Demands([0, 1], [4, 5], [1, 1])) == 1.0 == single_path_optimum(
        t, Demands([0, 1], [4, 5], [1, 1]))


def test_job_tables_for_an_aggregation_are_reported_optimal_at_the_aggregators_cables(tmp_path):
    from conftest import synthetic_ibnet

    from optiq.planner import job_tables

    fabric = synthetic_ibnet(tmp_path)   # 8 hosts
    d = Demands([1, 2, 3, 5, 6, 7], [0, 0, 0, 4, 4, 4], [2**20] * 6)   # three hosts into each of two
    made = job_tables(fabric, d)
    into = fabric.capacity[fabric.fabric.lid_link[np.searchsorted(fabric.fabric.lids, fabric.fabric.endpoint_lid[0])]]
    assert made.bound_s == pytest.approx(host_cable_bound(fabric, d)) == pytest.approx(3 * 2**20 / into)
    assert made.time_s == pytest.approx(made.bound_s) and "these are optimal" in str(made)
