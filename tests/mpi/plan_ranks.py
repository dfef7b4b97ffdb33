"""Plan one workload with make_plan(comm=...) on every rank; rank 0 writes the plan as JSON."""

import sys

from mpi4py import MPI

from optiq import from_spec, make_plan
from optiq.workloads import constant_ratio, random_pairing

spec, method, out = sys.argv[1:4]
topology = from_spec(spec)
demands = random_pairing(constant_ratio(topology.num_endpoints, "disjoint", nbytes=2**20), seed=1)
plan = make_plan(topology, demands, method, k=4, candidate_kind="spread", comm=MPI.COMM_WORLD)
same = MPI.COMM_WORLD.allgather(plan.path_bytes.tolist() + plan.paths.links.tolist())
assert all(s == same[0] for s in same), "the ranks returned different plans"
if MPI.COMM_WORLD.Get_rank() == 0:
    plan.save(out)
