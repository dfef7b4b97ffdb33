"""An application's all-to-all moved by optiq instead of MPI_Alltoallv, on a 4x4 torus.

    mpiexec -n 16 python examples/alltoallv.py [--link-bw 100MB/s] [--size 8MiB]
    optiq testbed exec -t torus:4x4 --rate 20Mb/s -- python examples/alltoallv.py \
        --network torus:4x4,bw=20Mb/s --link-bw none

Ranks 0 and 1 each send ``--size`` bytes to 4 of the last 8 ranks (the demo's disjoint
pattern). The application's call changes in one line:

    comm.Alltoallv([send, (scounts, sdispls)], [recv, (rcounts, rdispls)])  # before
    optiq.alltoallv(comm, [send, (scounts, sdispls)], [recv, (rcounts, rdispls)], network="torus:4x4")  # after

On one machine every link leaving a rank is paced at ``--link-bw`` (an emulated network);
on the testbed (``--link-bw none``) the network is a real one of namespaces, every node a
host that routes by dimension order, and ``comm.Alltoallv`` is timed beside optiq. The
torus's own routes (``method="default"``) and the optimised plan (``"opt"``) move the same
bytes through the same executor, and both are checked against what ``comm.Alltoallv``
delivers.
"""

import argparse
import time

import numpy as np
from mpi4py import MPI

import optiq
from optiq.utils.units import parse_rate, parse_size

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--link-bw", default="100MB/s",
                help="emulated link bandwidth (default 100MB/s); none: the links are real (optiq testbed exec)")
ap.add_argument("--network", default="torus:4x4", help="the machine as optiq plans it (default torus:4x4)")
ap.add_argument("--size", default="8MiB", help="bytes per pair (default 8MiB)")
args = ap.parse_args()
link_bw = None if args.link_bw == "none" else parse_rate(args.link_bw)
size = parse_size(args.size)

comm = MPI.COMM_WORLD
rank, ranks = comm.Get_rank(), comm.Get_size()
if ranks != 16:
    if rank == 0:
        print(f"run me with mpiexec -n 16 (one rank per node of the 4x4 torus), not {ranks}", flush=True)
    raise SystemExit(2)

# the pattern: rank 0 to ranks 8-11, rank 1 to ranks 12-15
scounts = np.zeros(ranks, dtype=np.int64)
if rank < 2:
    scounts[8 + 4 * rank: 12 + 4 * rank] = size
rcounts = np.zeros(ranks, dtype=np.int64)
if rank >= 8:
    rcounts[(rank - 8) // 4] = size
sdispls = np.concatenate(([0], np.cumsum(scounts)[:-1]))
rdispls = np.concatenate(([0], np.cumsum(rcounts)[:-1]))
send = np.random.default_rng(rank).integers(0, 256, int(scounts.sum()), dtype=np.uint8)

want = np.empty(int(rcounts.sum()), dtype=np.uint8)
for _call in range(2):  # the second call is timed (the first makes MPI's connections)
    comm.Barrier()
    start = time.perf_counter()
    comm.Alltoallv([send, (scounts, sdispls)], [want, (rcounts, rdispls)])
    elapsed = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
if rank == 0 and link_bw is None:
    print(f"{'MPI':8} {elapsed:.3f} s, comm.Alltoallv")

for method in ("default", "opt"):
    recv = np.zeros_like(want)
    for _call in range(2):  # the first call plans; the second finds the plan in the cache
        comm.Barrier()
        start = time.perf_counter()
        result = optiq.alltoallv(comm, [send, (scounts, sdispls)], [recv, (rcounts, rdispls)], network=args.network,
                                 method=method, link_bw=link_bw)
        elapsed = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
    same = comm.allreduce(int(np.array_equal(recv, want)), op=MPI.MIN)
    if rank == 0:
        print(f"{method:8} {elapsed:.3f} s, predicted {result.predicted_s:.3f} s (cached plan: {result.cached}); "
              f"the same bytes as MPI_Alltoallv: {bool(same)}")
