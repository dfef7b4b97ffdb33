"""Run under mpiexec -n N (any N >= 1): optiq.alltoallw against comm.Alltoallw, byte for byte.

Every form mpi4py takes ([buf, types], [buf, (counts, displs), types], [buf, counts, displs,
types]), every kind of datatype (predefined, subarray, vector, indexed, struct, resized, one
per peer and mixed), zero counts and gaps, MPI.IN_PLACE, MPI.BOTTOM with absolute addresses,
buffers that are not numpy arrays, every method, the cache, the non-blocking and persistent
forms; and mistakes that fail on every rank together, as the type mpi4py raises. Prints "ok"
on rank 0 and exits 0 when everything holds.
"""

import sys

import numpy as np
from mpi4py import MPI

from optiq.errors import OptiqError
from optiq.runtime import alltoallw, alltoallw_init, clear_cache, ialltoallw

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
network = f"torus:{max(size, 2)}"
failures: list[str] = []
freed: list = []


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(f"rank {rank}: {what}")


def committed(datatype):
    datatype.Commit()
    freed.append(datatype)
    return datatype


def raw(buffer) -> bytes:
    return bytes(MPI.buffer.frombuffer(buffer)) if buffer is not None else b""


def same_as_mpi(what: str, make, methods=("opt", "heu2", "default", "auto", "mpi"), **options):
    """``make()`` gives fresh (sendbuf, recvbuf, receive buffer): MPI's call and optiq's, every
    method, must leave the receive buffer byte for byte alike."""
    sendbuf, recvbuf, buffer = make()
    comm.Alltoallw(sendbuf, recvbuf)
    want = raw(buffer)
    results = {}
    for method in methods:
        sendbuf, recvbuf, buffer = make()
        results[method] = alltoallw(comm, sendbuf, recvbuf, network=network, method=method, chunk_size=256,
                                    **options)
        check(raw(buffer) == want, f"{what}, method={method}: received bytes differ from Alltoallw's "
                                   f"({results[method].method}: {results[method].reason})")
    return results


# 1. mpi4py-fft's transpose: subarrays of a 2-D array, one element of each per peer, [buf, (1s, 0s), types]
n, m = 3, 2
a_types = [committed(MPI.DOUBLE.Create_subarray([n, size * m], [n, m], [0, i * m])) for i in range(size)]
b_types = [committed(MPI.DOUBLE.Create_subarray([size * n, m], [n, m], [i * n, 0])) for i in range(size)]
ones_zeros = ([1] * size, [0] * size)


def transpose():
    a = np.arange(n * size * m, dtype="d").reshape(n, size * m) + 1000 * rank
    b = np.full((size * n, m), -1.0)
    return [a, ones_zeros, a_types], [b, ones_zeros, b_types], b


planned = same_as_mpi("subarray transpose", transpose)
if size > 1:
    check(planned["opt"].method == "opt", f"the subarray transpose was not planned: {planned['opt'].reason}")


def two_items():
    a = np.arange(n * size * m, dtype="d").reshape(n, size * m) - rank
    b = np.zeros((size * n, m))
    return [a, a_types], [b, b_types], b


same_as_mpi("[buf, types]", two_items)


# 2. random counts with zeros, a datatype per peer (mixed kinds), byte displacements with gaps, four items
def kinds():
    """Pairs of (send type, receive type) of the same signature, by kind."""
    vector = committed(MPI.INT.Create_vector(3, 1, 2))                    # 3 ints, stride 2: signature 3 ints
    indexed = committed(MPI.INT.Create_indexed([1, 2], [0, 3]))           # 3 ints at 0, 3, 4
    contiguous3 = committed(MPI.INT.Create_contiguous(3))
    resized = committed(MPI.INT.Create_resized(0, 12))                    # 1 int every 12 bytes
    struct = committed(MPI.Datatype.Create_struct([1, 2], [0, 8], [MPI.INT, MPI.INT]))  # 3 ints, a gap
    return [(vector, contiguous3), (indexed, vector), (contiguous3, struct), (struct, indexed), (MPI.INT, resized),
            (resized, MPI.INT)]


pairs = kinds()
signature = [3, 3, 3, 3, 1, 1]  # ints per element of each pair


def mixed(seed: int, form: int):
    rng = np.random.default_rng(seed)
    choice = rng.integers(0, len(pairs), (size, size))          # the pair of types from s to r, the same matrix
    counts = rng.integers(0, 4, (size, size))
    counts[rng.random((size, size)) < 0.3] = 0
    send_types = [pairs[choice[rank, r]][0] for r in range(size)]
    recv_types = [pairs[choice[s, rank]][1] for s in range(size)]
    sc, rc = counts[rank].tolist(), counts[:, rank].tolist()
    gap = np.random.default_rng(seed * 7 + rank).integers(0, 9, size)
    sd = np.concatenate(([4], 4 + np.cumsum([c * t.Get_extent()[1] + 4 * g for c, t, g in zip(sc, send_types, gap)])
                         ))[:-1].tolist()
    rd = np.concatenate(([8], 8 + np.cumsum([c * t.Get_extent()[1] + 4 * g for c, t, g in zip(rc, recv_types, gap)])
                         ))[:-1].tolist()
    send = np.random.default_rng(seed + rank).integers(-99, 99, (int(max(sd)) + 64 * 4) // 4 + 64).astype("i")
    recv = np.full((int(max(rd)) + 64 * 4) // 4 + 64, -7, dtype="i")
    if form == 3:
        return [send, (sc, sd), send_types], [recv, (rc, rd), recv_types], recv
    return [send, np.array(sc), np.array(sd), send_types], [recv, rc, rd, tuple(recv_types)], recv


for seed in range(3):
    same_as_mpi(f"mixed types, seed {seed}, three items", lambda seed=seed: mixed(seed, 3))
    same_as_mpi(f"mixed types, seed {seed}, four items", lambda seed=seed: mixed(seed, 4),
                methods=("heu2", "auto"))

# 3. MPI.IN_PLACE: what is sent is read from the receive buffer before anything lands in it
for method in ("heu2", "auto", "mpi"):
    base = np.arange(4 * size, dtype="d") + 10 * rank
    spec = lambda buf: [buf, ([4] * size, [32 * i for i in range(size)]), [MPI.DOUBLE] * size]  # noqa: E731
    expect = base.copy()
    comm.Alltoallw(MPI.IN_PLACE, spec(expect))
    got = base.copy()
    alltoallw(comm, MPI.IN_PLACE, spec(got), network=network, method=method)
    check(np.array_equal(got, expect), f"IN_PLACE ({method}): received bytes differ from Alltoallw's")


# 4. buffers that are not numpy arrays, and MPI.BOTTOM with absolute addresses (handed to MPI)
def byte_buffers():
    send = bytearray(bytes((rank * 16 + i) % 256 for i in range(3 * size)))
    recv = MPI.Alloc_mem(3 * size)
    recv[:] = b"\0" * (3 * size)
    return [send, ([3] * size, [3 * i for i in range(size)]), [MPI.BYTE] * size], \
        [recv, ([3] * size, [3 * i for i in range(size)]), [MPI.BYTE] * size], recv


same_as_mpi("bytearray to MPI memory", byte_buffers, methods=("heu2", "auto"))
held = []


def bottom():
    send = np.arange(2 * size, dtype="i") + 100 * rank
    recv = np.zeros(2 * size, dtype="i")
    held.append((send, recv))
    addresses = lambda a: [MPI.Get_address(a) + 8 * i for i in range(size)]  # noqa: E731
    return [MPI.BOTTOM, ([2] * size, addresses(send)), [MPI.INT] * size], \
        [MPI.BOTTOM, ([2] * size, addresses(recv)), [MPI.INT] * size], recv


results = same_as_mpi("MPI.BOTTOM with addresses", bottom, methods=("heu2", "auto"))
check(all(r.method == "mpi" and "BOTTOM" in r.reason for r in results.values()),
      f"MPI.BOTTOM with data was not handed to MPI: {[r.reason for r in results.values()]}")
empty = [None, ([0] * size, [0] * size), [MPI.INT] * size]
check(alltoallw(comm, empty, empty, network=network).method == "local", "zero counts on no buffer: not a no-op")

# 5. the cache: the same counts and types do not plan again, new types of the same sizes neither
clear_cache(comm)
first = alltoallw(comm, *transpose()[:2], network=network, method="heu2")
again = alltoallw(comm, *transpose()[:2], network=network, method="heu2")
check(not first.cached and again.cached and again.fingerprint == first.fingerprint, "a repeated call planned again")

# 6. the non-blocking and persistent forms against MPI's
sendbuf, recvbuf, want = transpose()
comm.Ialltoallw(sendbuf, recvbuf).Wait()
sendbuf, recvbuf, got = transpose()
MPI.Request.Waitall([ialltoallw(comm, sendbuf, recvbuf, network=network, method="heu2")])
check(np.array_equal(got, want), "ialltoallw: received bytes differ from Ialltoallw's")
a = np.zeros((n, size * m))
mine, theirs = np.zeros((size * n, m)), np.zeros((size * n, m))
reference = comm.Alltoallw_init([a, ones_zeros, a_types], [theirs, ones_zeros, b_types])
with alltoallw_init(comm, [a, ones_zeros, a_types], [mine, ones_zeros, b_types], network=network,
                    method="heu2") as persistent:
    for step in range(3):
        a[:] = np.random.default_rng(step * 100 + rank).random(a.shape)  # every start moves the current contents
        reference.Start()
        reference.Wait()
        persistent.Start()
        persistent.Wait()
        check(np.array_equal(mine, theirs), f"alltoallw_init start {step}: bytes differ from Alltoallw_init's")
reference.Free()


# 7. mistakes fail on every rank together, with one message and the type mpi4py raises (an OptiqError too)
def mpi_error(call):
    try:
        call()
    except Exception as exc:
        return type(exc)
    return None


def same_error_everywhere(what: str, make, on=None) -> None:
    """``make()`` gives (sendbuf, recvbuf); on rank ``on`` only (every rank: None)."""
    here = on is None or rank == on
    kind = mpi_error(lambda: MPI.COMM_SELF.Alltoallw(*make())) if here and size == 1 else None
    message, raised = None, None
    try:
        alltoallw(comm, *(make() if here else transpose()[:2]), network=network)
    except OptiqError as exc:
        message, raised = str(exc), type(exc)
    said = comm.allgather((message, getattr(raised, "__name__", None)))
    check(all(m is not None for m, _ in said), f"{what}: some rank did not fail: {said}")
    check(len(set(said)) == 1, f"{what}: the ranks said different things: {said}")
    if kind is not None:
        check(raised is not None and issubclass(raised, kind), f"{what}: raised {raised}, mpi4py raises {kind}")


a, b = np.zeros((n, size * m)), np.zeros((size * n, m))
same_error_everywhere("five items", lambda: ([a, ones_zeros[0], ones_zeros[1], a_types, None], [b, b_types]))
same_error_everywhere("too few types", lambda: ([a, a_types[:-1] + [] if size > 1 else []], [b, b_types]))
same_error_everywhere("a typecode for a type", lambda: ([a, ["d"] * size], [b, b_types]))
same_error_everywhere("float counts", lambda: ([a, ([1.5] * size, [0] * size), a_types], [b, b_types]))
same_error_everywhere("BOTTOM without counts", lambda: ([MPI.BOTTOM, a_types], [b, b_types]))
same_error_everywhere("a read-only receive buffer", lambda: ([a, a_types], [bytes(b.nbytes), b_types]))
same_error_everywhere("a part outside its buffer", lambda: ([a[:1], a_types], [b, b_types]), on=size - 1)
if size > 1:
    same_error_everywhere("mismatched counts", lambda: ([a, a_types], [b, ([2] * size, [0] * size), b_types]),
                          on=0)

for datatype in freed:
    datatype.Free()
clear_cache()
failures = [f for fs in comm.allgather(failures) for f in fs]
if rank == 0:
    print("\n".join(failures) or "ok")
sys.exit(1 if failures else 0)
