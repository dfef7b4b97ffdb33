"""The application's loop: many calls of optiq.alltoallv against comm.Alltoallv, as counts change or repeat.

An application calls its all-to-all-v again and again. Three ways the counts go, ``--calls``
calls each, float64 elements drawn at random up to ``--max-elements`` per pair (seeded):

- ``changing``: a fresh draw every call (a sample sort, a mixture-of-experts layer);
- ``same``: one draw, every call;
- ``shape``: one draw, every call's counts that draw times a factor in [0.9, 1.1] per pair
  (the same pairs, the amounts drifting).

For each, ``comm.Alltoallv``, ``optiq.alltoallv(method="auto")`` and ``method="heu2"`` (on
``network=torus:4x4``, or the smallest torus that holds the ranks) run the same calls in
turn, every call's bytes checked against ``comm.Alltoallv``'s. Printed per regime and method:
the whole loop's time on the slowest rank (planning included; the median of ``--repeat`` loops
run in turn with the other methods), over ``comm.Alltoallv``'s, the time it adds per call, the
plans made and the seconds spent planning, the calls the ranks agreed on (the rest went to
``comm.Alltoallv`` unchecked; all three the last loop's), and what the method chose on its
last call. By default on 2 ranks (a core each on this machine) and on 16 (8 to a core: every
rank's Python time per call then counts about eight times over).

    python benchmarks/alltoallv_loop.py [--ranks 2,16] [--calls 20] [--max-elements 65536] [--repeat 5] \
        [--methods auto,heu2] [--against ../old-checkout]

On the emulated network (one rank per host namespace, ``optiq testbed exec`` starts them;
``--worker`` runs the loop in the ranks it is given, ``--network`` names the machine):

    optiq testbed exec -t torus:4x4 --rate 20Mb/s -- python benchmarks/alltoallv_loop.py --worker \
        --network torus:4x4,bw=20Mb/s --regimes same --repeat 1 --max-elements 8192
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REGIMES = ("changing", "same", "shape")
METHODS = ("mpi", "auto", "heu2")


def network_for(ranks: int) -> str:
    side = 2
    while side * side < ranks:
        side += 1
    return f"torus:{side}x{side}" if side * side == ranks else f"torus:{ranks}"


def counts_for(regime: str, call: int, ranks: int, max_elements: int, seed: int) -> np.ndarray:
    """The ``ranks x ranks`` element counts of one call (the same on every rank)."""
    base = np.random.default_rng([seed, 0]).integers(0, max_elements + 1, (ranks, ranks))
    np.fill_diagonal(base, 0)
    if regime == "same":
        return base
    if regime == "shape":
        factor = np.random.default_rng([seed, call + 1]).uniform(0.9, 1.1, (ranks, ranks))
        return np.round(base * factor).astype(np.int64)
    fresh = np.random.default_rng([seed, call + 1]).integers(0, max_elements + 1, (ranks, ranks))
    np.fill_diagonal(fresh, 0)
    return fresh


def one_call(comm, method: str, counts: np.ndarray, network: str, c: int):
    """One call of ``method`` with ``counts``: the received array and optiq's result (None for MPI)."""
    import optiq

    rank = comm.Get_rank()
    scounts, rcounts = counts[rank], counts[:, rank]
    sdispls = np.concatenate(([0], np.cumsum(scounts)[:-1]))
    rdispls = np.concatenate(([0], np.cumsum(rcounts)[:-1]))
    send = np.arange(int(scounts.sum()), dtype=np.float64) + rank * 1e6 + c
    recv = np.zeros(int(rcounts.sum()), dtype=np.float64)
    if method == "mpi":
        comm.Alltoallv([send, (scounts, sdispls)], [recv, (rcounts, rdispls)])
        return recv, None
    result = optiq.alltoallv(comm, [send, (scounts, sdispls)], [recv, (rcounts, rdispls)], network=network,
                             method=method)
    return recv, result


def worker(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from optiq.runtime import clear_cache

    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    network = args.network or network_for(ranks)
    if rank == 0:
        where = "the network it names" if args.network else "this machine's shared memory"
        label = f"[{args.label}] " if args.label else ""
        print(f"{label}{ranks} ranks on {network} ({where}), {args.calls} calls per loop, float64 "
              f"counts up to {args.max_elements:,} per pair, bytes checked every call", flush=True)
        print(f"{'counts':9} {'call':15} {'loop s':>7} {'/ MPI':>6} {'+ms/call':>8} {'plans':>5} {'plan s':>7} "
              f"{'agreed':>6}  the last call")
    methods = args.methods.split(",")
    warm = counts_for("same", 0, ranks, args.max_elements, args.seed + 1)  # MPI's connections and buffers, once
    for method in methods:
        one_call(comm, method, warm, network, 0)
    for regime in args.regimes.split(","):
        calls = [counts_for(regime, c, ranks, args.max_elements, args.seed) for c in range(args.calls)]
        wants: list[np.ndarray] = []
        loops: dict[str, list[float]] = {method: [] for method in methods}
        said: dict[str, tuple[int, float, object, int]] = {}
        for _ in range(args.repeat):  # the methods in turn, so a busy moment of the machine hits each alike
            for method in methods:
                clear_cache(comm)
                comm.Barrier()
                start = time.perf_counter()
                plans, planning, last, planned_from, agreed = 0, 0.0, None, None, 0
                for c, counts in enumerate(calls):
                    recv, result = one_call(comm, method, counts, network, c)
                    if len(wants) < len(calls):  # comm.Alltoallv's, the first time round
                        wants.append(recv)
                    if result is not None:
                        if hasattr(result, "plans_made"):
                            plans, planning = result.plans_made, result.planning_s
                        else:   # a checkout from before the counters: the calls' own planning
                            plans, planning = plans + (result.plan_s > 0), planning + result.plan_s
                        last = result
                        agreed += getattr(result, "checked", True)  # a checkout from before unchecked calls
                        if planned_from is None and result.method not in ("mpi", "local"):
                            planned_from = c + 1
                    # every method's loop does the same check (comm.Alltoallv's against itself at first)
                    if not np.array_equal(recv, wants[c]):
                        raise SystemExit(f"rank {rank}: {regime} call {c}: {method} delivered other bytes")
                loops[method].append(comm.allreduce(time.perf_counter() - start, op=MPI.MAX))
                planning = comm.allreduce(planning, op=MPI.MAX)
                said[method] = (plans, planning, last, agreed)
                if method == "auto":
                    auto_from = planned_from
        if rank == 0:
            mpi = float(np.median(loops["mpi"]))
            for method in methods:
                loop = float(np.median(loops[method]))
                plans, planning, last, agreed = said[method]
                what = "" if last is None else f"{last.method}: {last.reason}"
                if method == "auto" and auto_from is not None:
                    what = f"a plan from call {auto_from}; last: {what}"
                extra = (loop - mpi) / len(calls) * 1e3
                agreed_on = "-" if method == "mpi" else str(agreed)
                print(f"{regime:9} {method:15} {loop:7.3f} {loop / mpi:6.2f} {extra:+8.3f} {plans:5d} {planning:7.3f} "
                      f"{agreed_on:>6}  {what[:90]}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,16", help="ranks per launch; several, comma-separated, run one after another")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--max-elements", type=int, default=65536)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5, help="loops per method, in turn (the median is printed)")
    ap.add_argument("--network", help="the machine optiq plans on (default: the smallest torus that holds the ranks)")
    ap.add_argument("--regimes", default=",".join(REGIMES))
    ap.add_argument("--methods", default=",".join(METHODS), help="mpi (always run) and any of auto, heu2")
    ap.add_argument("--against", help="another checkout: its optiq runs the same loops first, at each rank count")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--label", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    methods = ",".join(["mpi"] + [m for m in args.methods.split(",") if m != "mpi"])
    if any(m not in METHODS for m in methods.split(",")):
        ap.error(f"--methods takes some of {', '.join(METHODS)}, got {args.methods!r}")
    mpiexec = Path(sys.executable).parent / "mpiexec"
    try:
        counts = [int(n) for n in args.ranks.split(",")]
    except ValueError:
        ap.error(f"--ranks takes rank counts separated by commas, got {args.ranks!r}")
    here = str(Path(__file__).resolve().parent.parent)
    trees = ({"other": str(Path(args.against).resolve())} if args.against else {}) | {"this": here}
    for ranks in counts:
        for label, tree in trees.items():
            argv = [str(mpiexec), "-n", str(ranks), sys.executable, __file__, "--worker", "--calls", str(args.calls),
                    "--max-elements", str(args.max_elements), "--seed", str(args.seed), "--repeat", str(args.repeat),
                    "--regimes", args.regimes, "--methods", methods, "--label", label if args.against else ""] + \
                (["--network", args.network] if args.network else [])
            code = subprocess.run(argv, env=dict(os.environ, PYTHONPATH=tree), cwd=tree).returncode
            if code:
                raise SystemExit(code)


if __name__ == "__main__":
    main()
