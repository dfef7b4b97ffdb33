import shutil
import signal
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

SYNTHETIC_FABRIC = Path(__file__).parent.parent / "scripts" / "synthetic_fabric.py"


def sigint_as_at_a_terminal() -> None:
    """``Popen(preexec_fn=...)`` for a child that a test interrupts: Ctrl-C's default action,
    whatever the test runner inherited. A shell without job control starts a background job
    with SIGINT ignored, and every process it starts would ignore the test's SIGINT too."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def script(name: str):
    """The module ``scripts/NAME.py`` (test data is written by the repository's own scripts)."""
    if name not in sys.modules:
        import importlib.util

        spec = importlib.util.spec_from_file_location(name, SYNTHETIC_FABRIC.parent / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[name]


def synthetic():
    """The fabric writer of ``scripts/``."""
    return script("synthetic_fabric")


def synthetic_ibnet(directory: Path):
    """A small synthetic InfiniBand fabric (8 hosts, 12 switches) with its own forwarding tables,
    written to ``directory`` and read back."""
    from optiq.topology import read_ibnetdiscover

    sf = synthetic()
    model = sf.build(2, 3, seed=3)
    sf.write_ibnetdiscover(model, directory / "f.txt")
    sf.write_lfts(model, directory / "l.txt")
    return read_ibnetdiscover(directory / "f.txt", routes=directory / "l.txt")


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
    if jobs > n * (n - 1):
        raise ValueError(f"{jobs} distinct pairs asked of {n} endpoints, which have {n * (n - 1)}")
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


def arc_flow_optimum(topology, demands, links=None) -> float:
    """Independent formulation: multicommodity flow on links (only those where the mask
    ``links`` is true, if given), minimise the completion time.

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
    res = linprog(cost, A_ub=ub.tocsr(), b_ub=np.zeros(L), A_eq=eq.tocsr(), b_eq=b_eq, method="highs",
                  bounds=_link_bounds(links, J, L, extra=1))
    assert res.status == 0
    return res.fun * byte_unit / cap_unit


def _link_bounds(links, J: int, L: int, extra: int = 0):
    """linprog bounds of one flow variable per (job, link): zero on the links not in the mask."""
    if links is None:
        return (0, None)
    per_link = [(0, None) if ok else (0, 0) for ok in np.asarray(links, bool)]
    return per_link * J + [(0, None)] * extra


def all_chains(topology, demands, *, forwarders=None) -> PathSet:
    """Every forwarded path of one or two legs: each job's route, and its chain through every
    other rank (brute force, from the network's own routes)."""
    from optiq.paths import network_routes

    hosts = range(topology.num_endpoints) if forwarders is None else forwarders
    links, jobs, stops = [], [], []
    for j, (s, d) in enumerate(zip(demands.src.tolist(), demands.dst.tolist())):
        direct = network_routes(topology, [s], [d]).path(0)
        links.append(direct)
        stops.append(np.arange(direct.size) == direct.size - 1)
        jobs.append(j)
        for h in hosts:
            if h not in (s, d):
                legs = network_routes(topology, [s, h], [h, d])
                first, second = legs.path(0), legs.path(1)
                links.append(np.concatenate([first, second]))
                stops.append(np.concatenate([np.arange(first.size) == first.size - 1,
                                             np.arange(second.size) == second.size - 1]))
                jobs.append(j)
    return PathSet.from_lists(links, jobs, demands.num_jobs, stops)


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


def arc_flow_least_hop_bytes(topology, demands, time_s: float, links=None) -> float:
    """Independent formulation of the lean step: multicommodity flow on links (those of the
    mask ``links``, if given), every link carrying at most ``capacity * time_s``, fewest
    bytes times links."""
    J, L = demands.num_jobs, topology.num_links
    unit = float(demands.nbytes.max())
    eq, b_eq, ub = _arc_flow_rows(topology, demands, demands.nbytes / unit)
    res = linprog(np.ones(J * L), A_ub=ub.tocsr(), b_ub=topology.capacity * time_s / unit * (1 + 1e-9),
                  A_eq=eq.tocsr(), b_eq=b_eq, method="highs", bounds=_link_bounds(links, J, L))
    assert res.status == 0
    return res.fun * unit


def path_least_hop_bytes(topology, demands, paths, time_s: float) -> float:
    """The lean step's LP over a fixed set of paths (brute force): fewest bytes times links with
    every link carrying at most ``capacity * time_s``."""
    unit = float(demands.nbytes.max())
    P, J, L = paths.num_paths, demands.num_jobs, topology.num_links
    size = demands.nbytes[paths.job] / unit
    eq = lil_matrix((J, P))
    eq[paths.job, np.arange(P)] = 1
    ub = lil_matrix((L, P))
    for p in range(P):
        for e in paths.path(p):
            ub[e, p] += size[p]
    res = linprog(size * paths.hops, A_ub=ub.tocsr(), b_ub=topology.capacity * time_s / unit * (1 + 1e-9),
                  A_eq=eq.tocsr(), b_eq=np.ones(J), method="highs")
    assert res.status == 0
    return res.fun * unit
