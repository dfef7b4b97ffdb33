"""optiq.runtime.alltoallv: rank-level plans from host plans in process; the call under mpiexec."""

import numpy as np
import pytest
from conftest import MPI_SCRIPTS, launch

from optiq import from_spec, make_plan
from optiq.errors import PlanError
from optiq.runtime.ranklevel import WITHIN_HOST, host_demands_of, rank_network, rank_plan


@pytest.mark.parametrize("spec, host_of", [
    ("torus:4x4", list(range(16))),                  # one rank per node
    ("torus:4x4", [0, 0, 5, 5, 5, 10, 15, 15]),      # several ranks per node, most nodes without a rank
    ("fattree:k=2,n=3", [0, 1, 1, 2, 7, 7, 7, 3]),   # hosts of a fat-tree, switches forward
    ("mesh:6", [5, 4, 3, 2, 1, 0]),                  # ranks in reverse
])
def test_rank_plans_carry_every_rank_pair_on_its_host_pairs_paths(spec, host_of):
    t = from_spec(spec)
    host_of = np.array(host_of)
    N = host_of.size
    rng = np.random.default_rng(N)
    matrix = rng.integers(0, 5000, (N, N))
    matrix[rng.random((N, N)) < 0.25] = 0
    net = rank_network(t, host_of)
    hosts = host_demands_of(matrix, host_of)
    host_plan = make_plan(t, hosts, "opt", forwarders=np.unique(host_of))  # only hosts with a rank forward
    plan = rank_plan(net, matrix, host_plan)  # a valid Plan: paths connect, bytes add up per job
    x = net.topology
    rank = net.rank_of_endpoint
    pairs = {(int(rank[s]), int(rank[d])): int(n) for s, d, n in zip(plan.demands.src, plan.demands.dst,
                                                                     plan.demands.nbytes)}
    want = {(a, b): int(matrix[a, b]) for a in range(N) for b in range(N) if a != b and matrix[a, b]}
    assert pairs == want
    # the network's links carry what the host plan puts on them, give or take a byte per rank pair and path
    network = plan.link_bytes[:t.num_links]
    assert np.abs(network - host_plan.link_bytes).max() <= N * N
    assert (x.capacity[t.num_links:] == WITHIN_HOST).all()
    assert plan.predicted_time_s == pytest.approx(host_plan.predicted_time_s, rel=1e-3)
    # pairs on one host: one hop; other ranks reach the network through their host's leader
    for j in range(plan.demands.num_jobs):
        a, b = int(rank[plan.demands.src[j]]), int(rank[plan.demands.dst[j]])
        hops = plan.paths.hops[plan.paths.job_offsets[j]:plan.paths.job_offsets[j + 1]]
        if host_of[a] == host_of[b]:
            assert hops.tolist() == [1]
        else:
            leader = {h: int(np.flatnonzero(host_of == h)[0]) for h in host_of}
            extra = (leader[host_of[a]] != a) + (leader[host_of[b]] != b)
            assert (hops >= t.pair_hops([host_of[a]], [host_of[b]])[0] + extra).all()


def test_a_host_plan_that_stops_where_no_rank_runs_is_refused():
    t = from_spec("torus:4x4")
    host_of = np.array([0, 0, 5, 10])
    matrix = np.full((4, 4), 10**6) * (1 - np.eye(4, dtype=np.int64))
    anywhere = make_plan(t, host_demands_of(matrix, host_of), "opt")  # may stop at any node of the torus
    assert set(anywhere.topology.link_dst[anywhere.paths.links[anywhere.paths.stops]].tolist()) - {0, 5, 10}
    with pytest.raises(PlanError, match="where no rank runs"):
        rank_plan(rank_network(t, host_of), matrix, anywhere)


def test_host_demands_leave_out_traffic_within_hosts():
    m = np.array([[9, 4, 0], [3, 9, 2], [0, 0, 9]])
    assert host_demands_of(m, np.array([1, 1, 1])) is None
    assert host_demands_of(m, np.array([0, 1, 1])).to_rows() == [(0, 1, 4), (1, 0, 3)]


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [4, 8])
def test_alltoallv_moves_what_mpi_alltoallv_moves_caches_and_fails_together(ranks):
    proc, _ = launch(ranks, MPI_SCRIPTS / "alltoallv_check.py")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.mpi
@pytest.mark.slow
def test_the_example_runs_on_16_ranks_and_delivers_what_alltoallv_delivers():
    from pathlib import Path

    example = Path(__file__).parent.parent / "examples" / "alltoallv.py"
    proc, _ = launch(16, example, "--size", "1MiB", "--link-bw", "400MB/s", timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["default", "opt"]
    assert all(line.endswith("the same bytes as MPI_Alltoallv: True") for line in lines)
