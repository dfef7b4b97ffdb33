"""Run under mpiexec -n N (N even, >= 4): ``method="auto"``'s policy stays alike on every rank
whatever each rank's own timings.

The rows, then the columns, of a 2 x N/2 grid exchange at once with ``parent=`` (as mpi4py-fft's
transposes do), call after call, each rank sleeping a random while before each call, so that
what every rank measures of its calls and of its planning differs from rank to rank. Planning
pays at once (``plan_budget=inf``), so shapes are planned while MPI moves their bytes, on a
ring (plans that win) and on a full tree (the network's routes are optimal: MPI is kept). After
every call the policy's state (every shape's account and verdict, the window of unchecked calls,
the cached patterns) is gathered and must be the same on every rank: a rank that decided
otherwise would send its next call elsewhere, and the job would hang or mix up its calls.
Every call's bytes are checked against the row's own ``comm.Alltoallv``. Prints "ok" on rank 0.
"""

import sys
import time

import numpy as np
from mpi4py import MPI

from optiq.runtime import alltoallv, clear_cache
from optiq.runtime.context import context

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
assert size >= 4 and size % 2 == 0, "run with an even number of ranks, 4 or more"
cart = world.Create_cart([2, size // 2])
groups = [cart.Sub([False, True]), cart.Sub([True, False])]   # the rows, then the columns
failures: list[str] = []


def state(parent) -> tuple:
    ctx = context(parent)
    shapes = tuple(sorted((key, s.calls, s.hot, bool(s.mpi_faster)) for key, s in ctx.shapes.shapes.items()))
    q = ctx.quiet
    entries = tuple((key, p.method) for key, p in ctx.entries.items())
    return shapes, (q.shape, q.streak, q.remaining), entries, ctx.shapes.plans_made


def one_call(sub, parent, network: str, call: int) -> str:
    n, me = sub.Get_size(), sub.Get_rank()
    key = sub.allreduce(rank, op=MPI.MIN)
    m = np.random.default_rng([key, call % 3]).integers(2000, 6000, (n, n))  # three patterns per group, in turn
    np.fill_diagonal(m, 0)
    sc, rc = m[me], m[:, me].copy()
    sd, rd = (np.concatenate(([0], np.cumsum(c)[:-1])) for c in (sc, rc))
    send = np.random.default_rng([rank, call]).random(int(sc.sum()))
    want, got = np.zeros(int(rc.sum())), np.full(int(rc.sum()), -1.0)
    sub.Alltoallv([send, (sc, sd)], [want, (rc, rd)])
    time.sleep(float(np.random.default_rng([rank, call, 7]).uniform(0, 0.03)))  # every rank late by its own amount
    result = alltoallv(sub, [send, (sc, sd)], [got, (rc, rd)], network=network, parent=parent,
                       plan_budget=float("inf"))
    if not np.array_equal(got, want):
        failures.append(f"rank {rank}: call {call} on {network}: bytes differ from Alltoallv's ({result.reason})")
    return result.method


for network in (f"torus:{size}", f"cluster:hosts={size},edges=2,cores=2"):
    parent = world.Dup()
    clear_cache()
    methods = set()
    for call in range(24):
        methods.add(one_call(groups[call % 2], parent, network, call))
        mine = state(parent)
        every = world.allgather(mine)
        if any(other != mine for other in every):
            differs = [r for r, other in enumerate(every) if other != every[0]]
            failures.append(f"rank {rank}: after call {call} on {network} the policy differs on ranks {differs}")
            break
    if rank == 0:
        print(f"{network}: {sorted(methods)}", file=sys.stderr)
    clear_cache()
    parent.Free()

every_failure = world.gather(failures)
for g in groups:
    g.Free()
cart.Free()
if rank == 0:
    lines = [f for fs in every_failure for f in fs]
    print("\n".join(lines) if lines else "ok")
    sys.exit(1 if lines else 0)
