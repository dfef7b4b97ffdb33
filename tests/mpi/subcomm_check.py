"""Run under mpiexec -n N (N even, >= 6): exchanges on sub-communicators at once, planned over the parent.

The rows, then the columns, of a 2 x N/2 process grid exchange at once (alltoallv with
random counts, alltoallw with subarray types), every method, byte for byte against each
row's own MPI call; a busy group beside a quiet one on a ring: the joint plan forwards the
busy group's bytes through the quiet group's ranks and predicts less than the busy group
planned alone; ranks of the parent that exchange nothing join with MPI.COMM_NULL and
forward; two overlapping groups are refused on every rank with one message. Prints "ok" on
rank 0 and exits 0 when everything holds.
"""

import sys

import numpy as np
from mpi4py import MPI

from optiq import Demands, from_spec, make_plan
from optiq.errors import ArgumentError, OptiqError
from optiq.runtime import alltoallv, alltoallw, clear_cache
from optiq.runtime.context import context

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
assert size >= 6 and size % 2 == 0, "run with an even number of ranks, 6 or more"
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(f"rank {rank}: {what}")


def counts_in(sub, seed: int, scale: int):
    """Random counts within ``sub`` (every member draws the same matrix, zeros included); seed 0:
    ``scale`` bytes between every two ranks."""
    n, me = sub.Get_size(), sub.Get_rank()
    key = sub.allreduce(rank, op=MPI.MIN)  # the group's lowest parent rank: every group its own matrix
    matrix = np.random.default_rng(seed * 1000 + key).integers(1, scale, (n, n))
    matrix[np.random.default_rng(seed * 1000 + key + 1).random((n, n)) < 0.2] = 0
    if seed == 0:
        matrix[:] = scale
    sc, rc = matrix[me], matrix[:, me].copy()
    sd = np.concatenate(([0], np.cumsum(sc + 1)[:-1]))   # a gap of one between parts
    rd = np.concatenate(([2], 2 + np.cumsum(rc + 2)[:-1]))
    return sc, sd, rc, rd


def exchange(sub, parent, seed, scale=3000, methods=("opt", "heu2", "default", "auto", "mpi"), network=None,
             **options):
    """Every method of one exchange on ``sub`` with ``parent``, against ``sub.Alltoallv``."""
    sc, sd, rc, rd = counts_in(sub, seed, scale)
    send = np.random.default_rng(seed + rank).integers(0, 255, int((sc + sd).max()) + 3).astype(np.uint8)
    want = np.full(int((rc + rd).max()) + 3, 9, np.uint8)
    sub.Alltoallv([send, (sc, sd)], [want, (rc, rd)])
    results = {}
    for method in methods:
        got = np.full_like(want, 9)
        results[method] = alltoallv(sub, [send, (sc, sd)], [got, (rc, rd)], network=network, method=method,
                                    parent=parent, **options)
        check(np.array_equal(got, want), f"seed {seed}, {method}: received bytes differ from the group's "
                                         f"Alltoallv ({results[method].reason})")
    return results, (sc, rc)


def pairs_of(sub, sc):
    """Every (source, destination, bytes) of the exchange over the parent's ranks (collective)."""
    members = MPI.Group.Translate_ranks(sub.Get_group(), list(range(sub.Get_size())), world.Get_group())
    mine = [(rank, members[i], int(n)) for i, n in enumerate(sc) if n and members[i] != rank]
    return [p for ps in world.allgather(mine) for p in ps]


# 1. the rows, then the columns, of a 2 x N/2 grid at once, on a 2 x N/2 torus: parent rank i on endpoint i
cart = world.Create_cart([2, size // 2])
rows, cols = cart.Sub([False, True]), cart.Sub([True, False])
grid = f"torus:2x{size // 2}"
for seed, (sub, what) in enumerate(((rows, "rows"), (cols, "columns")), start=1):
    results, (sc, rc) = exchange(sub, world, seed, network=grid)
    pairs = pairs_of(sub, sc)
    expected = make_plan(from_spec(grid), Demands(*map(list, zip(*pairs))), "opt").predicted_time_s
    got = results["opt"].predicted_s
    check(got is not None and abs(got - expected) <= 1e-6 * expected,
          f"{what}: the joint opt plan predicts {got}, the plan of every group's pairs {expected}")

# alltoallw: mpi4py-fft's transpose on the rows and on the columns, subarray types
n = 2
for sub, what in ((rows, "rows"), (cols, "columns")):
    p = sub.Get_size()
    a_types = [MPI.DOUBLE.Create_subarray([n, p * n], [n, n], [0, i * n]).Commit() for i in range(p)]
    b_types = [MPI.DOUBLE.Create_subarray([p * n, n], [n, n], [i * n, 0]).Commit() for i in range(p)]
    cd = ([1] * p, [0] * p)
    a = np.arange(n * p * n, dtype="d").reshape(n, p * n) + 100 * rank
    want = np.zeros((p * n, n))
    sub.Alltoallw([a, cd, a_types], [want, cd, b_types])
    for method in ("opt", "heu2", "auto"):
        got = np.zeros((p * n, n))
        alltoallw(sub, [a, cd, a_types], [got, cd, b_types], network=grid, method=method, parent=world)
        check(np.array_equal(got, want), f"alltoallw on the {what}, {method}: bytes differ from Alltoallw's")
    for t in a_types + b_types:
        t.Free()

# 2. a busy group beside a quiet one on a ring of N: the quiet group's ranks forward the busy group's bytes
half = size // 2
busy = world.Split(int(rank >= half), rank)
ring = f"torus:{size}"
results, (sc, _) = exchange(busy, world, 0, scale=100_000 if rank < half else 10, methods=("opt",), network=ring,
                            chunk_size=4096)
fingerprint = results["opt"].fingerprint
entry = context(world).entries[(int(fingerprint[:16], 16), int(fingerprint[16:], 16))]
demands = entry.executor.plan.demands if entry.executor is not None else None
forwarded = 0
if demands is not None:
    for stream in entry.executor.schedule.streams:
        job = stream.job
        if stream.prev >= 0 and stream.next >= 0 and rank >= half and demands.src[job] < half:
            forwarded += stream.nbytes
check(world.allreduce(forwarded) > 0, "no rank of the quiet group forwarded the busy group's bytes")
clear_cache(world)
if rank < half:
    lonely, _ = exchange(busy, None, 0, scale=100_000, methods=("opt",), network=ring, chunk_size=4096)
    joint_s, alone_s = results["opt"].predicted_s, lonely["opt"].predicted_s
    check(joint_s is not None and alone_s is not None and joint_s < alone_s * 0.99,
          f"the busy group planned with the parent's ranks predicts {joint_s} s, alone {alone_s} s")
busy.Free()

# 3. ranks that exchange nothing join with MPI.COMM_NULL, and forward
clear_cache(world)
active = world.Split(0 if rank < half else MPI.UNDEFINED, rank)
if rank < half:
    exchange(active, world, 9, scale=100_000, methods=("opt", "heu2", "auto"), network=ring, chunk_size=4096)
    active.Free()
else:
    for method in ("opt", "heu2", "auto"):
        result = alltoallv(MPI.COMM_NULL, None, None, network=ring, method=method, parent=world, chunk_size=4096)
        check(result.method in (method, "mpi", "local"), f"a relay's call: {result}")


# 4. two groups that overlap are refused on every rank, with one message
def one_error(call):
    message, kind = None, None
    try:
        call()
    except OptiqError as exc:
        message, kind = str(exc), type(exc)
    said = world.allgather((message, getattr(kind, "__name__", None)))
    return said, message, kind


members = [list(range(0, 4)), list(range(2, 6))]
g1 = world.Create_group(world.Get_group().Incl(members[0])) if rank in members[0] else MPI.COMM_NULL
g2 = world.Create_group(world.Get_group().Incl(members[1]), tag=1) if rank in members[1] else MPI.COMM_NULL
mine = g1 if rank < 4 else g2 if rank < 6 else MPI.COMM_SELF
k = mine.Get_size()
said, message, kind = one_error(lambda: alltoallv(mine, np.zeros(k, "i"), np.zeros(k, "i"), network=ring,
                                                  method="heu2", parent=world))
check(all(m is not None for m, _ in said) and len(set(said)) == 1, f"overlapping groups: {said}")
check(message is not None and "overlap" in message and issubclass(kind, ArgumentError),
      f"overlapping groups: {message!r}")
for c in (g1, g2):
    if c != MPI.COMM_NULL:
        c.Free()

# 5. a timeout one rank got wrong, on a parent's first call: every rank refuses it, with one message
fresh = world.Dup()
said, message, kind = one_error(lambda: alltoallv(rows, np.zeros(rows.Get_size(), "i"), np.zeros(rows.Get_size(), "i"),
                                                  network=ring, parent=fresh, timeout=-1.0 if rank == 0 else 60.0))
check(len(set(said)) == 1 and message is not None and "timeout" in message and "rank 0" in message,
      f"a timeout of -1 on rank 0: {said}")
clear_cache(fresh)
fresh.Free()

rows.Free()
cols.Free()
cart.Free()
clear_cache()
failures = [f for fs in world.allgather(failures) for f in fs]
if rank == 0:
    print("\n".join(failures) or "ok")
sys.exit(1 if failures else 0)
