"""Run under mpiexec -n N (N >= 3): a plan whose transfer fails ends within its bound on every
rank, and the calls after it are moved by MPI.

Three calls of one pattern by ``method="heu2"`` on a ring, then one whose plan fails on rank 1
(its executor raises at once, as a transfer whose cable died would at its bound): every other
rank, waiting for rank 1's bytes, gives up within :func:`optiq.runtime.watch.bound` (five
times the plan's fastest call and 5 s, far below ``timeout``), with ``TransferError``. The
next call of the pattern, on every rank, is ``comm.Alltoallv``'s, and says why. Every
completed call's bytes are checked against ``comm.Alltoallv``'s. Prints "ok" on rank 0.
"""

import sys
import time

import numpy as np
from mpi4py import MPI

from optiq.errors import TransferError
from optiq.runtime import alltoallv
from optiq.runtime.context import context
from optiq.runtime.watch import FAULT_GRACE_S, FAULT_MULTIPLE

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
assert size >= 3, "run with 3 or more ranks"
TIMEOUT = 60.0
failures: list[str] = []
m = np.random.default_rng(7).integers(1, 3000, (size, size))
np.fill_diagonal(m, 0)
sc, rc = m[rank], m[:, rank].copy()
sd, rd = (np.concatenate(([0], np.cumsum(c)[:-1])) for c in (sc, rc))
send = np.random.default_rng(rank).random(int(sc.sum()))
want = np.zeros(int(rc.sum()))
comm.Alltoallv([send, (sc, sd)], [want, (rc, rd)])


def call():
    got = np.full_like(want, -1.0)
    result = alltoallv(comm, [send, (sc, sd)], [got, (rc, rd)], network=f"torus:{size}", method="heu2",
                       timeout=TIMEOUT)
    if not np.array_equal(got, want):
        failures.append(f"rank {rank}: bytes differ from Alltoallv's ({result.reason})")
    return result


for _ in range(3):
    first = call()
if first.method != "heu2":
    failures.append(f"rank {rank}: planned calls went to {first.method}: {first.reason}")
pattern = next(iter(context(comm).entries.values()))
fastest = pattern.fastest_s
if fastest is None:
    failures.append(f"rank {rank}: no fastest call kept after three calls")
    fastest = 0.0
if rank == 1:
    def dead(*args, **kwargs):
        raise TransferError("rank 1: injected: a path's cable carries nothing")
    pattern.executor.run = dead
began = time.perf_counter()
try:
    call()
    failures.append(f"rank {rank}: the call whose plan failed on rank 1 completed")
except TransferError as exc:
    waited = time.perf_counter() - began
    limit = FAULT_MULTIPLE * fastest + FAULT_GRACE_S + 3.0  # the bound and the time to notice it
    if waited > limit:
        failures.append(f"rank {rank}: gave up after {waited:.1f} s, beyond its bound ({limit:.1f} s): {exc}")
after = call()
if after.method != "mpi" or "last call failed on" not in after.reason or "comm.Alltoallv" not in after.reason:
    failures.append(f"rank {rank}: the call after the failed plan went to {after.method}: {after.reason}")
again = call()
if again.method != "mpi":
    failures.append(f"rank {rank}: a later call went back to {again.method}")

gathered = comm.gather(failures, root=0)
if rank == 0:
    flat = [f for part in gathered for f in part]
    print("\n".join(flat) if flat else "ok")
    sys.exit(1 if flat else 0)
