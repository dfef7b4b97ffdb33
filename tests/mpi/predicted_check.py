"""Run under mpiexec -n N (N >= 3): calls predicted to be a planned pattern run its plan while the
ranks agree, and a call that breaks the prediction still moves exactly MPI's bytes.

Two patterns A and B alternate (each planned once, then cached): from the fifth call on, every
call is predicted and runs ahead (``result.ahead``). Then calls break the cycle: a third pattern
everywhere, one that differs from the predicted one on one rank only (the others' own counts are
the predicted pattern's, so they run it with their bytes, and the call moves again), an in-place
call, one rank's mistake (every rank fails, with one message), and the cycle again. Every call's
bytes are checked against ``comm.Alltoallv``'s. Prints "ok" on rank 0 and exits 0.
"""

import sys

import numpy as np
from mpi4py import MPI

from optiq.errors import OptiqError
from optiq.runtime import alltoallv, clear_cache

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
assert size >= 3, "run with 3 or more ranks"
ring = f"torus:{size}"
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(f"rank {rank}: {what}")


def matrix(seed: int, changed_row: int | None = None) -> np.ndarray:
    m = np.random.default_rng(seed).integers(1, 3000, (size, size))
    np.fill_diagonal(m, 0)
    if changed_row is not None:  # one rank sends other counts (and its peers expect them)
        m[changed_row] = np.roll(m[changed_row], 1)
        m[changed_row, changed_row] = 0
    return m


def call(m: np.ndarray, label: str, *, method: str = "heu2", in_place: bool = False):
    sc, rc = m[rank], m[:, rank].copy()
    sd, rd = (np.concatenate(([0], np.cumsum(c)[:-1])) for c in (sc, rc))
    send = np.random.default_rng([rank, int(m.sum()) % 997]).random(int(sc.sum()))
    want = np.zeros(int(rc.sum()))
    got = np.full_like(want, -1.0)
    if in_place:  # 1000 elements to every rank
        k = 1000
        buf = np.random.default_rng(rank).random(size * k)
        mine = buf.copy()
        comm.Alltoallv(MPI.IN_PLACE, [buf, ([k] * size, [i * k for i in range(size)])])
        result = alltoallv(comm, MPI.IN_PLACE, [mine, ([k] * size, [i * k for i in range(size)])], network=ring,
                           method=method)
        check(np.array_equal(mine, buf), f"{label}: in place, bytes differ from Alltoallv's")
        return result
    comm.Alltoallv([send, (sc, sd)], [want, (rc, rd)])
    result = alltoallv(comm, [send, (sc, sd)], [got, (rc, rd)], network=ring, method=method)
    check(np.array_equal(got, want), f"{label}: bytes differ from Alltoallv's ({result.reason})")
    return result


clear_cache(comm)
a, b = matrix(1), matrix(2)
results = [call(a if i % 2 == 0 else b, f"cycle call {i}") for i in range(10)]
check(all(not r.ahead for r in results[:4]) and all(r.ahead and r.cached for r in results[5:]),
      f"the cycle's calls ran ahead: {[r.ahead for r in results]}")
# a third pattern everywhere: predicted b, no rank's counts are b's
call(matrix(3), "a third pattern")
# back in the cycle, then a call that differs from the prediction on one rank only
for i in range(4):
    call(a if i % 2 == 0 else b, f"the cycle again, call {i}")
broken = call(matrix(1, changed_row=size - 1), "the predicted pattern but for one rank's counts")
check(broken.fingerprint != results[0].fingerprint, "one rank's other counts were taken for the predicted pattern")
call(b, "after the broken call")
# an in-place call where a plan was predicted
call(a, "before in place")
call(b, "before in place")
call(a, "in place", in_place=True)
# one rank's mistake where a plan was predicted: every rank fails, with one message
for i in range(4):
    call(a if i % 2 == 0 else b, f"the cycle before a mistake, call {i}")
sc, rc = a[rank], a[:, rank].copy()
sd, rd = (np.concatenate(([0], np.cumsum(c)[:-1])) for c in (sc, rc))
message = None
try:
    alltoallv(comm, [np.zeros(int(sc.sum())), (sc, sd)],
              [np.zeros(int(rc.sum()) - (1 if rank == 1 else 0)), (rc, rd)], network=ring, method="heu2")
except OptiqError as exc:
    message = str(exc)
said = comm.allgather(message)
check(all(m is not None for m in said) and len(set(said)) == 1 and "rank 1" in said[0],
      f"a mistake where a plan was predicted: {said}")
for i in range(4):
    call(a if i % 2 == 0 else b, f"the cycle after the mistake, call {i}")

clear_cache()
failures = [f for fs in comm.allgather(failures) for f in fs]
if rank == 0:
    print("\n".join(failures) or "ok")
sys.exit(1 if failures else 0)
