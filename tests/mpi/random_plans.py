"""Run under mpiexec: seeded random plans, replayed and checked byte for byte on every rank.

The plans are free (random paths, stopping at a random subset of the ranks they cross), and
replayed as on a network that routes every path as planned.

Exit code 0 only if every plan is delivered exactly on every rank. Usage:
    mpiexec -n N python random_plans.py [--plans-per-topology P] [--seed S]
"""

import argparse
import itertools
import sys

import networkx as nx
import numpy as np
from mpi4py import MPI

from optiq import Demands, Plan, from_spec
from optiq.errors import PlanError
from optiq.paths import PathSet
from optiq.runtime import Executor, fill_send_buffers, find_mismatches, predicted_time


def topologies(n: int) -> list[str]:
    """Networks with exactly ``n`` endpoints, one rank each: rings and lines always, 2-D tori
    and meshes when ``n`` factors, a binary fat-tree when ``n`` is a power of two."""
    specs = [f"torus:{n}", f"mesh:{n}"] if n > 2 else [f"mesh:{n}"]
    a = next((f for f in range(2, int(n**0.5) + 1) if n % f == 0), None)
    if a is not None:
        specs += [f"torus:{a}x{n // a}", f"mesh:{a}x{n // a}"]
    if n >= 4 and n & (n - 1) == 0:
        specs.append(f"fattree:k=2,n={n.bit_length() - 1}")
    return specs


def random_plan(spec: str, rng: np.random.Generator) -> Plan:
    topo = from_spec(spec)
    n = topo.num_endpoints
    g = topo.to_networkx()
    jobs = int(rng.integers(n, 2 * n))
    pair = rng.choice(n * (n - 1), size=jobs, replace=False)
    src = pair // (n - 1)
    dst = (src + 1 + pair % (n - 1)) % n
    sizes = rng.integers(1, 300_000, jobs)
    sizes[rng.random(jobs) < 0.2] = int(rng.integers(1, 50))  # some jobs smaller than one chunk
    paths, owners, path_bytes, stops = [], [], [], []
    for j, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
        options = list(itertools.islice(nx.all_simple_edge_paths(g, s, d, cutoff=topo.diameter + 2), 40))
        chosen = rng.choice(len(options), size=min(len(options), int(rng.integers(1, 5))), replace=False)
        weights = rng.random(chosen.size)
        weights[rng.random(chosen.size) < 0.3] = 0.0  # zero-byte paths
        weights[0] += 1e-3
        share = np.floor(weights / weights.sum() * sizes[j]).astype(np.int64)
        share[0] += sizes[j] - share.sum()
        for c, b in zip(chosen, share):
            paths.append([key for _, _, key in options[c]])
            owners.append(j)
            path_bytes.append(int(b))
            stop = rng.random(len(options[c])) < 0.5  # a random subset of the ranks on the way
            stop[-1] = True
            stops.append(stop & (topo.link_dst[paths[-1]] < n))
    ps = PathSet.from_lists(paths, owners, jobs, stops)
    order = np.argsort(owners, kind="stable")
    chunk = int(rng.choice([1000, 4096 + 7, 65536]))
    return Plan(topo, Demands(src, dst, sizes), ps, np.asarray(path_bytes)[order], chunk_size=chunk, method="random",
                routing="free")


def cyclic_plan(n: int, chunk: int) -> Plan:
    """Every rank i sends to i + 2 through i + 1 on a ring: each link carries one path's first
    hop and another's second, so the waits between ranks form a cycle."""
    topo = from_spec(f"torus:{n}")
    link = {(int(u), int(v)): e for e, (u, v) in enumerate(zip(topo.link_src, topo.link_dst))}
    src = np.arange(n)
    paths = [[link[i, (i + 1) % n], link[(i + 1) % n, (i + 2) % n]] for i in range(n)]
    sizes = np.full(n, 40 * chunk + 123)
    every_rank = [[True, True]] * n
    return Plan(topo, Demands(src, (src + 2) % n, sizes), PathSet.from_lists(paths, list(range(n)), n, every_rank),
                sizes, chunk_size=chunk, method="cyclic", routing="free")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plans-per-topology", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng([args.seed, size])
    failures, roles_seen, checked = [], 0, 0
    for spec in topologies(size):
        for i in range(args.plans_per_topology):
            plan = random_plan(spec, rng)
            window = int(rng.integers(1, 5))
            link_bw = 2e8 if i == 0 else None  # pace one plan per topology
            with Executor(comm, plan, window=window, link_bw=link_bw, routes_as_planned=True) as ex:
                streams = ex.schedule.streams
                if any(s.prev < 0 for s in streams) and any(s.next < 0 for s in streams) and \
                        any(s.prev >= 0 and s.next >= 0 for s in streams):
                    roles_seen += 1
                send = fill_send_buffers(ex.schedule.send_jobs, seed=i)
                comm.Barrier()
                result = ex.run(send, timeout=60)
                recv_jobs = set(ex.schedule.recv_jobs)
            elapsed = comm.allreduce(result.elapsed_s, op=MPI.MAX)
            bad = [f"{spec} plan {i} (chunk {plan.chunk_size}, window {window}), rank {rank}: {m}"
                   for m in find_mismatches(result.recv, seed=i)]
            if set(result.recv) != recv_jobs:
                bad.append(f"{spec} plan {i}, rank {rank}: received jobs {sorted(result.recv)}")
            if link_bw is not None and elapsed < predicted_time(plan, link_bw)[0]:
                bad.append(f"{spec} plan {i}: paced run took {elapsed:.4f} s, less than the "
                           f"{predicted_time(plan, link_bw)[0]:.4f} s its links need at {link_bw:g} B/s")
            failures.extend(bad)
            checked += 1
    for window, link_bw in ((1, None), (2, None), (3, "1.6Gb/s"), (None, None)) if size > 2 else ():
        plan = cyclic_plan(size, 4096)
        with Executor(comm, plan, window=window, link_bw=link_bw, routes_as_planned=True) as ex:
            result = ex.run(fill_send_buffers(ex.schedule.send_jobs, seed=7), timeout=60)
            if link_bw is not None and ex.link_bw != 2e8:
                failures.append(f"rank {rank}: link_bw={link_bw!r} paced at {ex.link_bw!r} B/s, not 2e8")
        failures.extend(f"cyclic plan, window {window}, rank {rank}: {m}" for m in find_mismatches(result.recv, seed=7))
        chunks = result.chunks_sent + result.chunks_forwarded
        if window is None and not result.messages < chunks:
            failures.append(f"cyclic plan, rank {rank}: {result.messages} messages for {chunks} chunks, "
                            "chunks ready together were not sent together")
        checked += 1
    if size > 2:
        try:
            Executor(comm, cyclic_plan(size, 4096), window=None if rank == 0 else 2, routes_as_planned=True).close()
            failures.append(f"rank {rank}: different windows on different ranks were accepted")
        except PlanError as e:
            if "same on every rank" not in str(e):
                failures.append(f"rank {rank}: unexpected error for different windows: {e}")
    for bad in ("fast", "25", 0, -1.0, float("nan"), True):
        try:
            Executor(comm, cyclic_plan(size, 4096), link_bw=bad, routes_as_planned=True).close()
            failures.append(f"rank {rank}: link_bw={bad!r} was accepted")
        except PlanError as e:
            if "link bandwidth" not in str(e):
                failures.append(f"rank {rank}: unexpected error for link_bw={bad!r}: {e}")
    failures = [f for fs in comm.gather(failures, root=0) or [] for f in fs]
    roles_seen = comm.reduce(roles_seen, op=MPI.SUM, root=0)
    if rank == 0:
        print(f"{checked} random plans on {size} ranks; a rank was source, forwarder and destination "
              f"at once in {roles_seen} (rank, plan) cases; {len(failures)} failure(s)")
        for f in failures[:20]:
            print("FAIL", f)
        if roles_seen == 0:
            print("FAIL no rank was source, forwarder and destination in the same plan")
    ok = comm.bcast(not failures and roles_seen > 0 if rank == 0 else None, root=0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
