"""Every allreduce algorithm equals MPI's Allreduce, for any rank count (run under mpiexec).

Values are integers stored as float64, so every summation order gives the same bits.
Meanwhile the application's own messages, on the same communicator and with the
algorithms' tags, wait to be received: they must arrive intact after all the algorithms
ran. Prints one line per (algorithm, length) on rank 0 and exits 1 on any difference.
"""

import sys

import numpy as np
from mpi4py import MPI

from optiq.collectives import allreduce
from optiq.collectives.algorithms import _TAG, exchanges_by, send_and_receive
from optiq.collectives.cost import algorithm_rounds, algorithms

comm = MPI.COMM_WORLD
N, rank = comm.Get_size(), comm.Get_rank()
failures = 0
right, left = (rank + 1) % N, (rank - 1) % N
app_out = np.full(5, float(rank))
app_in = np.empty(5)
app_requests = [comm.Isend(app_out, dest=right, tag=_TAG + step) for step in range(14)]  # every tag they use
for length in (0, 1, N - 1, 7, 3 * N + 1, 1000, 4099):
    data = np.random.default_rng(1000 * length + rank).integers(-1000, 1000, length).astype(np.float64)
    expected = np.empty_like(data)
    comm.Allreduce(data, expected, op=MPI.SUM)
    before = data.copy()
    for name in algorithms(N):
        got = allreduce(comm, data, name, None if length % 2 else np.full(length, np.nan))
        ok = got.shape == expected.shape and np.array_equal(got, expected) and np.array_equal(data, before)
        ok = comm.allreduce(ok, op=MPI.LAND)
        failures += not ok
        if rank == 0:
            print(f"N={N} length={length} {name}: {'ok' if ok else 'MISMATCH'}")
# the cost model's rounds (who sends what to whom, step by step) are the messages the algorithms send
length = 8 * N * (1 << N.bit_length())  # every block even
data = np.ones(length)
for name in algorithms(N):
    log = []

    def record(c, sends, recvs, tag, log=log):
        if sends or recvs:  # a group of one (CPS's second level) sends nothing
            log.append((tag, [(dst, buf.nbytes) for buf, dst in sends]))
        send_and_receive(c, sends, recvs, tag)

    with exchanges_by(record):
        allreduce(comm, data, name)
    steps = sorted({tag for tag, _ in log}.union(*[{t for t, _ in per} for per in comm.allgather(log)]))
    sent, calls, aimed = set(), {}, {}
    for tag, sends in log:
        k = calls[tag] = calls.get(tag, -1) + 1
        sent |= {(steps.index(tag), k, rank, dst, n) for dst, n in sends}
        for position, (dst, _) in enumerate(sends):
            aimed[steps.index(tag), k, position] = dst
    sent = set().union(*comm.allgather(sent))
    # the i-th message every rank posts in a step goes to a different receiver: no port gets
    # all the first messages of a full mesh while the others wait
    receivers = {}
    for per_rank in comm.allgather(aimed):
        for key, dst in per_rank.items():
            receivers.setdefault(key, []).append(dst)
    spread = all(len(set(dsts)) == len(dsts) for dsts in receivers.values())
    failures += not spread
    if rank == 0:
        print(f"N={N} send order of {name}: {'ok' if spread else 'one receiver first for several ranks'}")
    model = {(s, k, int(i), int(j), round(b)) for s, rounds in enumerate(algorithm_rounds(name, N, 8.0 * length))
             for k, (src, dst, nbytes) in enumerate(rounds) for i, j, b in zip(src, dst, nbytes)}
    ok = sent == model
    failures += not ok
    if rank == 0:
        print(f"N={N} rounds of {name}: {'ok' if ok else f'MISMATCH {sorted(sent ^ model)[:6]}'}")
for step in range(14):
    comm.Recv(app_in, source=left, tag=_TAG + step)
    ok = comm.allreduce(bool(np.all(app_in == left)), op=MPI.LAND)
    failures += not ok
    if rank == 0 and not ok:
        print(f"N={N}: the application's message of tag {_TAG + step} was taken by an algorithm")
MPI.Request.Waitall(app_requests)
if rank == 0:
    print(f"N={N}: the application's messages with the algorithms' tags arrived intact")
sys.exit(1 if failures else 0)
