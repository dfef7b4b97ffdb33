"""Plan one workload with make_plan(comm=...) on every rank; rank 0 writes the plan as JSON.

Usage: plan_ranks.py SPEC METHOD OUT [sparse]: the disjoint pattern, randomly paired, or with
``sparse`` a fifth of all pairs at random sizes planned to a 0.1% gap (column generation then
runs several iterations, its pricing beside its LP solves)."""

import sys

import numpy as np

from optiq import from_spec, make_plan
from optiq.workloads import Demands, constant_ratio, random_pairing


def workload(topology, kind: str) -> tuple[Demands, dict]:
    """The demands and the planner's options of workload ``kind`` (``disjoint`` or ``sparse``)."""
    n = topology.num_endpoints
    if kind == "sparse":
        rng = np.random.default_rng(1)
        sizes = rng.integers(1, 2**20, (n, n))
        sizes[(rng.random((n, n)) < 0.8) | np.eye(n, dtype=bool)] = 0
        src, dst = np.nonzero(sizes)
        return Demands(src, dst, sizes[src, dst]), {"gap": 0.001}
    return random_pairing(constant_ratio(n, "disjoint", nbytes=2**20), seed=1), {"k": 4, "candidate_kind": "spread"}


if __name__ == "__main__":
    from mpi4py import MPI

    spec, method, out = sys.argv[1:4]
    topology = from_spec(spec)
    demands, options = workload(topology, sys.argv[4] if len(sys.argv) > 4 else "disjoint")
    plan = make_plan(topology, demands, method, comm=MPI.COMM_WORLD, **options)
    same = MPI.COMM_WORLD.allgather(plan.path_bytes.tolist() + plan.paths.links.tolist())
    assert all(s == same[0] for s in same), "the ranks returned different plans"
    if MPI.COMM_WORLD.Get_rank() == 0:
        plan.save(out)
