"""The compiled kernels of the heuristics and of the chain candidates' sliced rounds, against
plain loops over the same numbers and against the numpy forms they replace: the same choice,
ties included."""

import numpy as np
import pytest

from optiq.heuristics import common
from optiq.paths import PathSet
from optiq.paths.chain_picks import cheapest_columns


def _random_candidates(rng, num_jobs: int, num_links: int) -> PathSet:
    lists, jobs = [], []
    for j in range(num_jobs):
        for _ in range(int(rng.integers(1, 6))):
            lists.append(rng.integers(0, num_links, int(rng.integers(1, 6))).tolist())
            jobs.append(j)
    return PathSet.from_lists(lists, jobs, num_jobs)


def _least_loaded_by_loops(ps: PathSet, jobs, amount, load, cap):
    best, worst = [], []
    for i, j in enumerate(jobs):
        keys = [(max((load[link] + amount[i]) / cap[link] for link in ps.path(p)), int(ps.hops[p]), p)
                for p in range(ps.job_offsets[j], ps.job_offsets[j + 1])]
        w, _, p = min(keys)   # least busiest link, then fewer hops, then the earlier path
        best.append(p)
        worst.append(w)
    return np.array(best), np.array(worst)


@pytest.mark.parametrize("seed", range(20))
def test_least_loaded_compiled_and_in_numpy_pick_what_loops_pick(seed):
    rng = np.random.default_rng(seed)
    num_links = int(rng.integers(2, 30))
    ps = _random_candidates(rng, int(rng.integers(1, 40)), num_links)
    load = rng.integers(0, 5, num_links) * 3.0       # few distinct values: many ties
    cap = rng.choice([1.0, 2.0], num_links)
    jobs = rng.choice(ps.num_jobs, int(rng.integers(1, ps.num_jobs + 1)), replace=False)
    amount = rng.integers(1, 4, jobs.size).astype(float)
    want = _least_loaded_by_loops(ps, jobs, amount, load, cap)
    for compiled in (True, False):
        got = common.least_loaded(ps, jobs, amount, load, cap, compiled=compiled)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("seed", range(20))
def test_heuristic_2_pass_layout_picks_what_loops_pick_batch_by_batch(seed):
    """Heuristic 2 lays a pass's candidates out in the pass's order; any batch (a slice of the
    pass) picks what the loops pick, ties included, and gives the picked paths' links."""
    from optiq.heuristics.common import CandidateLayout

    rng = np.random.default_rng(seed)
    num_links = int(rng.integers(2, 30))
    ps = _random_candidates(rng, int(rng.integers(1, 40)), num_links)
    load = rng.integers(0, 5, num_links) * 3.0
    cap = rng.choice([1.0, 2.0], num_links)
    jobs = rng.choice(ps.num_jobs, int(rng.integers(1, ps.num_jobs + 1)), replace=False)
    amount = rng.integers(1, 4, jobs.size)
    layout = CandidateLayout(ps, jobs, amount, cap)
    lo = int(rng.integers(0, jobs.size))
    hi = int(rng.integers(lo + 1, jobs.size + 1))
    best, _, links, per_link = layout.least_loaded(lo, hi, load)
    want, _ = _least_loaded_by_loops(ps, jobs[lo:hi], amount[lo:hi].astype(float), load, cap)
    assert np.array_equal(best, want)
    assert links.tolist() == [int(x) for p in want for x in ps.path(p)]
    assert per_link.tolist() == [float(a) for p, a in zip(want, amount[lo:hi]) for _ in ps.path(p)]


@pytest.mark.parametrize("seed", range(20))
def test_heuristic_2_compiled_batches_place_what_loops_place(seed):
    """The compiled pass (several batches a call, in calls of a few batches) chooses every batch
    against the loads before it, then adds the batch's bytes: the same paths, and the same
    loads to the bit, as loops doing that batch by batch."""
    from optiq.heuristics.least_loaded_kernel import place_batches

    rng = np.random.default_rng(seed)
    num_links = int(rng.integers(2, 30))
    ps = _random_candidates(rng, int(rng.integers(1, 40)), num_links)
    cap = rng.choice([1.0, 2.0, 3.0], num_links)
    jobs = rng.choice(ps.num_jobs, int(rng.integers(1, ps.num_jobs + 1)), replace=False)
    amount = rng.integers(1, 4, jobs.size) * 3
    block = int(rng.integers(1, 6))
    want_load, want_out = rng.integers(0, 5, num_links) * 3.0, np.zeros(ps.num_paths, dtype=np.int64)
    load, out = want_load.copy(), want_out.copy()
    for lo in range(0, jobs.size, block):
        batch = slice(lo, lo + block)
        best, _ = _least_loaded_by_loops(ps, jobs[batch], amount[batch].astype(float), want_load, cap)
        added = np.zeros(num_links)
        for p, a in zip(best, amount[batch]):
            np.add.at(added, ps.path(p), float(a))   # a path may cross a link twice: it loads it twice
            want_out[p] += a
        want_load += added
    split = int(rng.integers(0, jobs.size // block + 1)) * block   # two calls: the loads carry over
    for part in (slice(0, split), slice(split, None)):
        place_batches(ps.job_offsets, ps.offsets, ps.links, jobs[part], amount[part], block, load, cap, out)
    assert np.array_equal(out, want_out) and np.array_equal(load, want_load)


@pytest.mark.parametrize("seed", range(10))
def test_cheapest_columns_are_numpy_argmin_with_the_skipped_columns_infinite(seed):
    rng = np.random.default_rng(seed)
    sources, targets, width, jobs = 7, 5, int(rng.integers(1, 9)), 60
    out_c = rng.integers(0, 4, (sources, width)).astype(float)   # integers: ties
    into_c = rng.integers(0, 4, (targets, width)).astype(float)
    out_c[:, rng.random(width) < 0.2] = np.inf                    # columns no slice offers
    src, dst = rng.integers(0, sources, jobs), rng.integers(0, targets, jobs)
    skip_a, skip_b = rng.integers(-1, width, jobs), rng.integers(-1, width, jobs)
    cost = out_c[src] + into_c[dst]
    for skip in (skip_a, skip_b):
        rows = np.flatnonzero(skip >= 0)
        cost[rows, skip[rows]] = np.inf
    best, fine = cheapest_columns(out_c, into_c, src, dst, skip_a, skip_b)
    assert np.array_equal(best, np.argmin(cost, axis=1))
    assert np.array_equal(fine, np.isfinite(cost.min(axis=1)))


@pytest.mark.parametrize("seed", range(20))
def test_rebalance_compiled_makes_the_moves_numpy_makes(seed):
    """Rebalance's compiled moves against its numpy loop from a random placement (whole jobs on
    random candidates, loads of few distinct values: many ties), with and without a bound: the
    same bytes on every path."""
    from optiq.heuristics import rebalance
    from optiq.topology import Topology

    rng = np.random.default_rng(seed)
    num_links = int(rng.integers(2, 30))
    ps = _random_candidates(rng, int(rng.integers(1, 40)), num_links)
    t = Topology("links", 2, np.zeros(num_links, dtype=int), np.ones(num_links, dtype=int),
                 rng.choice([1.0, 2.0], num_links))
    start = np.zeros(ps.num_paths, dtype=np.int64)
    jo = ps.job_offsets
    start[jo[:-1] + rng.integers(0, np.diff(jo))] = rng.integers(1, 4, ps.num_jobs) * 3
    moved = 0
    for bound in (None, 0.0, float(rng.uniform(0, ps.busiest_link_time(start, t.capacity)))):
        want = rebalance(t, ps, start, bound_s=bound, compiled=False)
        assert np.array_equal(rebalance(t, ps, start, bound_s=bound, compiled=True), want)
        moved += int((want != start).any())
    if seed == 0:
        assert moved   # the random starts do give rebalance moves to make (19 seeds of these 20)


def test_the_kernels_run_once_the_scans_made_in_numpy_reach_the_cold_threshold(monkeypatch):
    """Without numba loaded, work below the threshold runs in numpy and is counted; the call
    that brings the count to it runs compiled (so does all work after it): many small plans of
    an application planning again load the kernels as one large plan would."""
    import sys

    monkeypatch.delitem(sys.modules, "numba", raising=False)
    monkeypatch.setattr(common, "_numpy_scans", 0)
    cold = common.COMPILED_COLD_FROM
    assert not common.compiled_pays(cold // 2) and not common.compiled_pays(cold - cold // 2 - 1)
    assert common._numpy_scans == cold - 1
    assert common.compiled_pays(1) and common.compiled_pays(1)
    monkeypatch.setattr(common, "_numpy_scans", 0)
    assert common.compiled_pays(cold)   # one large plan at once
