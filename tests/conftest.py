import shutil
import subprocess
import sys
import time
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.sparse import lil_matrix

from optiq.paths import PathSet
from optiq.topology import cluster, from_networkx, mesh, torus
from optiq.workloads import Demands

collect_ignore = ["mpi"]  # scripts run under mpiexec by the tests, not test modules


def all_simple_paths(topology, demands) -> PathSet:
    """Every simple path of every job, parallel links distinguished (brute force)."""
    g = topology.to_networkx()
    paths, jobs = [], []
    for j, (s, d) in enumerate(zip(demands.src.tolist(), demands.dst.tolist())):
        for edge_path in nx.all_simple_edge_paths(g, s, d):
            paths.append([key for _, _, key in edge_path])
            jobs.append(j)
    return PathSet.from_lists(paths, jobs, demands.num_jobs)


def random_graph_topology(seed: int):
    rng = np.random.default_rng(seed)
    g = nx.connected_watts_strogatz_graph(7, 4, 0.5, seed=seed)
    for u, v in g.edges:
        g.edges[u, v]["capacity"] = float(rng.integers(1, 5)) * 1e9
    return from_networkx(g)


SMALL_TOPOLOGIES = {
    "torus3x2": lambda: torus((3, 2), bandwidth=1e9),
    "mesh2x3": lambda: mesh((2, 3), bandwidth=1e9),
    "cluster4": lambda: cluster(4, 2, 2, bandwidth=1e9),
    "random7": lambda: random_graph_topology(3),
}


def random_demands(topology, jobs: int, seed: int) -> Demands:
    rng = np.random.default_rng(seed)
    pairs = set()
    n = topology.num_endpoints
    while len(pairs) < jobs:
        s, d = rng.integers(0, n, 2)
        if s != d:
            pairs.add((int(s), int(d)))
    src, dst = zip(*sorted(pairs))
    return Demands(src, dst, rng.integers(1, 100, len(src)) * 10**6)


def _arc_flow_rows(topology, demands, size, extra_columns: int = 0):
    """Flow conservation (one row per job and node, ``size[j]`` out of its source and into its
    destination) and every link's total over the jobs, on one flow variable per (job, link)."""
    J, L, N = demands.num_jobs, topology.num_links, topology.num_nodes
    eq = lil_matrix((J * N, J * L + extra_columns))
    b_eq = np.zeros(J * N)
    for j in range(J):
        for e in range(L):
            eq[j * N + topology.link_src[e], j * L + e] += 1
            eq[j * N + topology.link_dst[e], j * L + e] -= 1
        b_eq[j * N + demands.src[j]] = size[j]
        b_eq[j * N + demands.dst[j]] = -size[j]
    ub = lil_matrix((L, J * L + extra_columns))
    for e in range(L):
        for j in range(J):
            ub[e, j * L + e] = 1
    return eq, b_eq, ub


def arc_flow_optimum(topology, demands) -> float:
    """Independent formulation: multicommodity flow on links, minimise the completion time.

    Bytes and capacities are scaled to O(1) first: raw 1e9 coefficients defeat LP tolerances.
    """
    J, L = demands.num_jobs, topology.num_links
    byte_unit, cap_unit = float(demands.nbytes.max()), float(topology.capacity.max())
    cap = topology.capacity / cap_unit
    eq, b_eq, ub = _arc_flow_rows(topology, demands, demands.nbytes / byte_unit, extra_columns=1)
    for e in range(L):
        ub[e, J * L] = -cap[e]
    nvar = J * L + 1
    cost = np.zeros(nvar)
    cost[-1] = 1
    res = linprog(cost, A_ub=ub.tocsr(), b_ub=np.zeros(L), A_eq=eq.tocsr(), b_eq=b_eq, method="highs")
    assert res.status == 0
    return res.fun * byte_unit / cap_unit


@pytest.fixture(params=sorted(SMALL_TOPOLOGIES))
def small_topology(request):
    return SMALL_TOPOLOGIES[request.param]()


# -- running scripts under mpiexec ---------------------------------------------------------

MPI_SCRIPTS = Path(__file__).parent / "mpi"


def mpiexec() -> str:
    found = Path(sys.executable).parent / "mpiexec"
    if found.exists():
        return str(found)
    found = shutil.which("mpiexec")
    if not found:
        pytest.skip("mpiexec not found: install the MPI extra, pip install -e '.[mpi,test]'")
    return found


def launch(n: int, *argv, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    proc = subprocess.run([mpiexec(), "-n", str(n), sys.executable, *map(str, argv)], capture_output=True,
                          text=True, timeout=timeout)
    return proc, time.perf_counter() - start


def arc_flow_least_hop_bytes(topology, demands, time_s: float) -> float:
    """Independent formulation of the lean step: multicommodity flow on links, every link
    carrying at most ``capacity * time_s``, fewest bytes times links."""
    J, L = demands.num_jobs, topology.num_links
    unit = float(demands.nbytes.max())
    eq, b_eq, ub = _arc_flow_rows(topology, demands, demands.nbytes / unit)
    res = linprog(np.ones(J * L), A_ub=ub.tocsr(), b_ub=topology.capacity * time_s / unit * (1 + 1e-9),
                  A_eq=eq.tocsr(), b_eq=b_eq, method="highs")
    assert res.status == 0
    return res.fun * unit
