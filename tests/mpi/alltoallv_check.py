"""Run under mpiexec -n N (any N >= 2): optiq.runtime.alltoallv against comm.Alltoallv.

Random counts with zeros and gaps between the parts, several dtypes, every method, one and
two ranks per host; the cache (a hit does not plan again, new counts do); the buffer-spec
form; and mistakes that must fail on every rank together, with the same message. Prints
"ok" on rank 0 and exits 0 when everything holds.
"""

import sys

import numpy as np
from mpi4py import MPI

from optiq.errors import OptiqError
from optiq.runtime import alltoallv, clear_cache
from optiq.runtime.planned_alltoallv import _context

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(f"rank {rank}: {what}")


def pattern(seed: int, scale: int = 2000):
    """Counts with zeros (every rank draws the same matrix), displacements with gaps."""
    rng = np.random.default_rng(seed)
    matrix = rng.integers(0, scale, (size, size))
    matrix[rng.random((size, size)) < 0.3] = 0
    sendcounts, recvcounts = matrix[rank], matrix[:, rank].copy()
    gaps = np.random.default_rng(seed * 100 + rank).integers(0, 7, size)
    sdispls = np.concatenate(([0], np.cumsum(sendcounts + gaps)[:-1]))
    rgaps = np.random.default_rng(seed * 1000 + rank).integers(0, 5, size)
    rdispls = np.concatenate(([3], 3 + np.cumsum(recvcounts + rgaps)[:-1]))
    return sendcounts, sdispls, recvcounts, rdispls


def reference(send, sc, sd, rc, rd, out_like):
    out = np.full_like(out_like, 0)
    comm.Alltoallv([send, (sc, sd)], [out, (rc, rd)])
    return out


def buffers(dtype, sc, sd, rc, rd, seed):
    rng = np.random.default_rng(seed + rank)
    n = int((sd + sc).max(initial=0)) + 5
    send = (rng.random(n) * 1000).astype(dtype) if np.dtype(dtype).kind in "fc" else \
        rng.integers(0, 100, n).astype(dtype)
    recv = np.full(int((rd + rc).max(initial=0)) + 4, 7, dtype=dtype)
    return send, recv


# 1. byte-exact against comm.Alltoallv, every method and dtype
ring = f"torus:{size}"
for seed, dtype in enumerate((np.uint8, np.float64, np.int32, np.complex128), start=1):
    sc, sd, rc, rd = pattern(seed)
    send, recv = buffers(dtype, sc, sd, rc, rd, seed)
    want = reference(send, sc, sd, rc, rd, recv)
    for method in ("opt", "heu2", "default", "auto", "mpi"):
        got = np.full_like(recv, 7)
        result = alltoallv(comm, send, sc, sd, got, rc, rd, network=ring, method=method, chunk_size=512)
        touched = np.zeros(got.size, bool)
        for s in range(size):
            touched[rd[s]:rd[s] + rc[s]] = True
        check(np.array_equal(got[touched].view(np.uint8), want[touched].view(np.uint8)),
              f"{method} {np.dtype(dtype).name}: received bytes differ from Alltoallv's")
        check((got[~touched] == 7).all(), f"{method} {np.dtype(dtype).name}: wrote outside its receive regions")
        check(result.method == "mpi" if method == "mpi" else True, f"method=mpi ran {result.method}")

# 2. two ranks per host: their traffic within the host goes directly, the rest on planned paths
hosts = [r // 2 for r in range(size)]
sc, sd, rc, rd = pattern(11)
send, recv = buffers(np.float32, sc, sd, rc, rd, 11)
want = reference(send, sc, sd, rc, rd, recv)
got = np.zeros_like(recv)
alltoallv(comm, send, sc, sd, got, rc, rd, network=f"torus:{max(2, (size + 1) // 2)}", hosts=hosts, method="opt")
check(all(np.array_equal(got[rd[s]:rd[s] + rc[s]], want[rd[s]:rd[s] + rc[s]]) for s in range(size)),
      "two ranks per host: received bytes differ")

# 3. the cache: the same counts do not plan again, even with other displacements; new counts do
clear_cache(comm)
sc, sd, rc, rd = pattern(21)
send, recv = buffers(np.int64, sc, sd, rc, rd, 21)
first = alltoallv(comm, send, sc, sd, recv, rc, rd, network=ring, method="heu2")
again = alltoallv(comm, send, sc, sd, recv, rc, rd, network=ring, method="heu2")
shifted = alltoallv(comm, np.concatenate((send, send)), sc, sd + 1, np.concatenate((recv, recv)), rc, rd + 2,
                    network=ring, method="heu2")
check(not first.cached and first.plan_s > 0, "the first call of a pattern planned nothing")
check(again.cached and again.plan_s == 0 and again.fingerprint == first.fingerprint, "a repeated call planned again")
check(shifted.cached, "other displacements with the same counts planned again")
sc2, sd2, rc2, rd2 = pattern(22)
send2, recv2 = buffers(np.int64, sc2, sd2, rc2, rd2, 22)
other = alltoallv(comm, send2, sc2, sd2, recv2, rc2, rd2, network=ring, method="heu2")
check(not other.cached and other.fingerprint != first.fingerprint, "new counts were taken from the cache")
sc3, sd3, rc3, rd3 = pattern(23)
send3, recv3 = buffers(np.int64, sc3, sd3, rc3, rd3, 23)
small = [alltoallv(comm, send3, sc3, sd3, recv3, rc3, rd3, network=ring, method="heu2", cache_size=1)
         for _ in range(2)]
evicted = alltoallv(comm, send, sc, sd, recv, rc, rd, network=ring, method="heu2", cache_size=1)
check(not small[0].cached and small[1].cached and not evicted.cached, "cache_size=1 keeps only the last pattern")

# 4. mpi4py's buffer-spec form
sc, sd, rc, rd = pattern(31)
send, recv = buffers(np.int16, sc, sd, rc, rd, 31)
want = reference(send, sc, sd, rc, rd, recv)
got = np.zeros_like(recv)
alltoallv(comm, [send, (sc, sd)], [got, (rc, rd)], network=ring, method="opt")
check(all(np.array_equal(got[rd[s]:rd[s] + rc[s]], want[rd[s]:rd[s] + rc[s]]) for s in range(size)),
      "buffer-spec form: received bytes differ")
got = np.zeros(int(rc.sum()), np.int16)
alltoallv(comm, [send[:int(sc.sum())], sc], [got, rc], network=ring, method="default")  # parts back to back
want = reference(send[:int(sc.sum())], sc, None, rc, None, got)
check(np.array_equal(got, want), "buffer-spec form without displacements: received bytes differ")


# 5. mistakes fail on every rank together, with one message
def same_error_everywhere(what: str, call, expected: str) -> None:
    message = None
    try:
        call()
    except OptiqError as exc:
        message = str(exc)
    messages = comm.allgather(message)
    check(all(m is not None for m in messages), f"{what}: some rank did not fail: {messages}")
    check(len(set(messages)) == 1, f"{what}: the ranks said different things: {messages}")
    check(message is not None and expected in message, f"{what}: {message!r} does not say {expected!r}")


sc, sd, rc, rd = pattern(41)
send, recv = buffers(np.uint8, sc, sd, rc, rd, 41)
bad = rc.copy()
if rank == size - 1:
    bad[0] += 1
said = comm.bcast(f"rank {size - 1} expects {int(bad[0])} bytes from rank 0, which sends it {int(rc[0])}",
                  root=size - 1)
same_error_everywhere("mismatched counts", lambda: alltoallv(comm, send, sc, sd, recv, bad, rd, network=ring), said)
tiny = recv[:1] if rank == 1 else recv
same_error_everywhere("receive buffer too small", lambda: alltoallv(comm, send, sc, sd, tiny, rc, rd, network=ring),
                      "rank 1: the receive buffer holds")
if size > 2:
    same_error_everywhere("communicator larger than the network",
                          lambda: alltoallv(comm, send, sc, sd, recv, rc, rd, network="torus:2", method="heu2"),
                          f"the communicator has {size} ranks, more than the 2 endpoints")
same_error_everywhere("host not in the map",
                      lambda: alltoallv(comm, send, sc, sd, recv, rc, rd, network=ring, hosts={"nowhere": "H0"}),
                      "which the hosts= map does not name")
same_error_everywhere("different options", lambda: alltoallv(comm, send, sc, sd, recv, rc, rd, network=ring,
                                                             method="opt" if rank == 0 else "heu2"),
                      "different options")

# 5. a communicator's cache goes with it: freeing it releases the duplicate and the executors
own = comm.Dup()
alltoallv(own, send, sc, sd, recv, rc, rd, network=ring, method="heu2")
kept = _context(own)
check(kept.entries and kept.comm != MPI.COMM_NULL, "the call left no cache on its communicator")
own.Free()
check(kept.comm == MPI.COMM_NULL and not kept.entries, "freeing a communicator kept its cache")

clear_cache()
failures = [f for fs in comm.allgather(failures) for f in fs]
if rank == 0:
    print("\n".join(failures) or "ok")
sys.exit(1 if failures else 0)
