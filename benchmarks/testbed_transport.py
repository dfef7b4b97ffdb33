"""The allreduce algorithms' exchanges over MPI against the same exchanges over plain TCP sockets.

Builds a star of ``--ranks`` hosts (``optiq testbed exec -t fattree:k=RANKS,n=1``) and runs
this script on every rank. For each algorithm it records the exchanges one run makes (every
step's messages: partner, bytes, in order; :func:`optiq.collectives.algorithms.exchanges_by`),
then times, in turn, the algorithm over MPI (as ``optiq testbed collectives`` times it,
reductions included) and a replay of the same exchanges over TCP sockets between the same
hosts, one connection per pair, with no MPI at all: every message of a step written as soon
as its socket takes bytes, first to the partner the algorithm sends to first, every socket
read as soon as bytes arrive. Printed per algorithm:
the slowest rank's median time of each, over the time the bytes a rank sends take at the link
rate, and MPI's over the sockets'. Where MPI's is well above the sockets', the time goes to
how the MPI library moves the messages, not to the network or TCP: a cost model fitted on MPI
timings then describes the library as much as the network.

MPI's connections are opened one partner at a time before anything is timed, as the
collectives' benchmarks open them (:func:`optiq.mpi.connect.connect_in_turn`); with
``--first-use`` the algorithms' first run opens them, all of a step's at once.

    python benchmarks/testbed_transport.py [--ranks 12] [--rate 10Mb/s] [--queue 4MiB] [--size 256KiB] [--repeat 7]
        [--algorithms ring,cps,hcps:2x6,...] [--first-use]

Needs root.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

OPTIQ = str(Path(sys.executable).parent / "optiq")  # the command installed beside this Python


def _address(device: str) -> str:
    import subprocess

    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", device], capture_output=True, text=True,
                         check=True).stdout.split()
    return out[out.index("inet") + 1].split("/")[0]


def _connect(comm):
    """A connected TCP socket to every other rank, on the data network (non-blocking, no Nagle)."""
    import socket

    from optiq.testbed.layout import DATA_DEVICE

    rank, size = comm.Get_rank(), comm.Get_size()
    addresses = comm.allgather(_address(DATA_DEVICE))
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((addresses[rank], 0))
    server.listen(size)
    ports = comm.allgather(server.getsockname()[1])
    peers = {}
    for other in range(rank + 1, size):  # the lower rank connects; the listen queue holds them until accepted
        s = socket.create_connection((addresses[other], ports[other]))
        s.sendall(rank.to_bytes(4, "little"))
        peers[other] = s
    for _ in range(rank):
        s, _ = server.accept()
        peers[int.from_bytes(s.recv(4, socket.MSG_WAITALL), "little")] = s
    server.close()
    for s in peers.values():
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
    return peers


def _replay(peers, steps) -> None:
    """Every step's messages over the sockets: all written and read at once, each read exactly."""
    import selectors

    for sends, recvs in steps:
        sel = selectors.DefaultSelector()
        out = {dest: memoryview(bytes(n)) for n, dest in sends}
        left = {src: n for n, src in recvs}
        # registered in the order the algorithm sends (then the peers it only hears from): the
        # kernel reports ready sockets in that order, so the first bytes go where the algorithm
        # sends first
        for p in dict.fromkeys([dest for _, dest in sends] + [src for _, src in recvs]):
            sel.register(peers[p], (selectors.EVENT_WRITE if p in out else 0)
                         | (selectors.EVENT_READ if left.get(p) else 0), p)
        while sel.get_map():
            for key, events in sel.select():
                p, s = key.data, key.fileobj
                if events & selectors.EVENT_WRITE:
                    out[p] = out[p][s.send(out[p]):]
                    if not len(out[p]):
                        del out[p]
                if events & selectors.EVENT_READ:
                    left[p] -= len(s.recv(min(left[p], 1 << 16)))
                want = (selectors.EVENT_WRITE if p in out else 0) | (selectors.EVENT_READ if left.get(p) else 0)
                if want:
                    sel.modify(s, want, p)
                else:
                    sel.unregister(s)
        sel.close()


def measure(names: list[str], nbytes: int, rate_bytes: float, repeat: int, first_use: bool = False) -> None:
    """On every rank, under mpiexec: the table (printed by rank 0)."""
    import numpy as np
    from mpi4py import MPI

    from optiq.collectives.algorithms import allreduce, exchanges_by
    from optiq.collectives.bench import _timed
    from optiq.mpi.connect import connect_in_turn

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    peers = _connect(comm)
    if not first_use:
        connect_in_turn(comm)
    data = np.random.default_rng([0, rank]).integers(-2**20, 2**20, nbytes // 8).astype(np.float64)
    result = np.empty_like(data)
    wire = 2 * (size - 1) / size * nbytes / rate_bytes
    if rank == 0:
        print(f"{'algorithm':10} {'MPI ms':>8} {'x wire':>7} {'sockets ms':>11} {'x wire':>7} {'MPI/sockets':>12}",
              flush=True)
    for name in names:
        steps: list[tuple[list[tuple[int, int]], list[tuple[int, int]]]] = []

        def record(c, sends, recvs, tag) -> None:
            steps.append(([(b.nbytes, d) for b, d in sends], [(b.nbytes, s) for b, s in recvs]))

        with exchanges_by(record):
            allreduce(comm, data, name, result)
        mpi = _timed(comm, lambda: allreduce(comm, data, name, result), repeat, 1)[0]
        raw = _timed(comm, lambda: _replay(peers, steps), repeat, 1)[0]
        if rank == 0:
            print(f"{name:10} {mpi * 1e3:8.1f} {mpi / wire:7.3f} {raw * 1e3:11.1f} {raw / wire:7.3f} "
                  f"{mpi / raw:12.3f}", flush=True)
    for s in peers.values():
        s.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=12, help="hosts on one switch, a rank on each")
    ap.add_argument("--rate", default="10Mb/s")
    ap.add_argument("--queue", default="4MiB", help="bytes every link direction queues before it drops")
    ap.add_argument("--size", default="256KiB", help="the vector each rank reduces")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--algorithms", help="comma-separated (default: every one for the rank count)")
    ap.add_argument("--first-use", action="store_true",
                    help="MPI opens its connections with the algorithms' first messages (default: one partner at a "
                         "time before anything is timed)")
    ap.add_argument("--rank-side", action="store_true", help=argparse.SUPPRESS)  # under mpiexec
    args = ap.parse_args()
    from optiq.collectives.cost import algorithms
    from optiq.utils.units import parse_rate, parse_size

    names = args.algorithms.split(",") if args.algorithms else algorithms(args.ranks)
    nbytes = parse_size(args.size)
    if args.rank_side:
        measure(names, nbytes, parse_rate(args.rate), args.repeat, args.first_use)
        return
    from children import run_cleanly

    print(f"allreduce of {nbytes:,} B on {args.ranks} ranks, a star with links at {args.rate} and queues of "
          f"{parse_size(args.queue):,} B, "
          f"medians of {args.repeat}; x wire: over the time a rank's sent bytes take at the link rate; MPI's "
          f"connections opened {'by the first run' if args.first_use else 'one partner at a time first'}")
    run = run_cleanly([OPTIQ, "testbed", "exec", "-t", f"fattree:k={args.ranks},n=1", "--rate", args.rate,
                       "--queue", str(parse_size(args.queue)), "-q", "--",
                       sys.executable, "-m", "mpi4py", __file__, "--rank-side", "--rate", args.rate, "--size", str(nbytes),
                       "--repeat", str(args.repeat), "--algorithms", ",".join(names)]
                      + (["--first-use"] if args.first_use else []))
    print(run.stdout, end="")
    if run.returncode:
        sys.exit(run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"exit code {run.returncode}")


if __name__ == "__main__":
    main()
