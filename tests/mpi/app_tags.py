"""Run under mpiexec: the application's own messages on the same communicator, with the
executor's tags, in flight during a transfer, and send buffers of float64 and int32; then
windows that differ between ranks, refused on every rank.

Exit code 0 only if the application's messages arrive intact and every job's bytes arrive
exactly. Usage: mpiexec -n N python app_tags.py (N in 4, 8: a torus with one rank per node)
"""

import sys

import numpy as np
from mpi4py import MPI

from optiq import from_spec, make_plan
from optiq.errors import PlanError
from optiq.runtime import Executor
from optiq.workloads import constant_ratio, random_pairing

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
topology = from_spec({4: "torus:2x2", 8: "torus:2x2x2"}[size])
demands = random_pairing(constant_ratio(size, "disjoint", nbytes=8 * 40_000, num_sources=1, ratio=size // 2), seed=3)
plan = make_plan(topology, demands, "opt", chunk_size=4096)
failures = []
for dtype in (np.float64, np.int32):
    rng = np.random.default_rng(rank)
    with Executor(comm, plan, window=2) as executor:
        items = np.dtype(dtype).itemsize
        send = {j: (rng.standard_normal(n // items) * 1e6).astype(dtype) for j, n in executor.schedule.send_jobs.items()}
        recv = {j: np.zeros(n // items, dtype=dtype) for j, n in executor.schedule.recv_jobs.items()}
        # the application talks to its neighbours with the tags the executor uses (path ids 0..)
        mine = [np.full(64, rank * 1000 + tag, dtype=np.int64) for tag in range(4)]
        theirs = [np.empty(64, dtype=np.int64) for _ in range(4)]
        left, right = (rank - 1) % size, (rank + 1) % size
        reqs = [comm.Irecv(theirs[tag], source=left, tag=tag) for tag in range(4)]
        reqs += [comm.Isend(mine[tag], dest=right, tag=tag) for tag in range(4)]
        executor.run(send, recv, timeout=60)
        MPI.Request.Waitall(reqs)
        for tag in range(4):
            if not (theirs[tag] == left * 1000 + tag).all():
                failures.append(f"rank {rank}: application message tag {tag} was disturbed")
    # every job's bytes, as the source made them
    sources = comm.allgather({j: buf for j, buf in send.items()})
    for j, buf in recv.items():
        want = next(s[j] for s in sources if j in s)
        if buf.dtype != dtype or not np.array_equal(buf.view(np.uint8), want.view(np.uint8)):
            failures.append(f"rank {rank}: job {j} ({np.dtype(dtype).name}) arrived wrong")
# windows that differ between ranks are refused on every rank alike, naming both
try:
    Executor(comm, plan, window=3 if rank == size - 1 else None).close()
    failures.append(f"rank {rank}: windows that differ between ranks were taken")
except PlanError as exc:
    if "the window must be the same on every rank, got 3 and default" not in str(exc):
        failures.append(f"rank {rank}: the wrong error for windows that differ: {exc}")
failures = [f for fs in comm.allgather(failures) for f in fs]
if rank == 0:
    print("\n".join(failures) or "ok")
sys.exit(1 if failures else 0)
