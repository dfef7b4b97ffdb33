"""A third-party application through optiq: mpi4py-fft's transforms on an emulated network.

mpi4py-fft's ``PFFT`` transposes its pencils with ``comm.Alltoallw`` on the rows, then the
columns, of its process grid, every row at once. ``optiq.integrations.mpi4py_fft.accelerate``
sends those calls through ``optiq.alltoallw`` with the whole grid as their parent. Every setup
runs one MPI job of 16 ranks under ``optiq testbed exec`` (rank ``i`` on host ``i`` of the
network of namespaces, links at ``--rate``), and in it, for every array size (``--sizes``:
the edge of a complex128 cube):

- forward plus backward with the library's own transfers and accelerated with every method
  of ``--methods``, in turn, ``--repeat`` times (medians), checked bitwise against the
  library's own results; the transposes alone (the transfers' own calls on the transforms'
  arrays) timed the same way;
- the plan's prediction for one transpose with every group at once (every transfer's
  ``predicted_s`` against its ``default_s``, the default routes' time), and what it predicts
  for forward plus backward: the transposes at the library's own time over that gain, the
  rest (the FFTs, the copies, which no plan speeds up) as measured with the library's own;
- ``auto`` first runs ``--loop`` transforms from an empty cache, each in turn with the
  library's own, each of the two first every other time (the application's loop with the
  same counts): the loop's time over the library's, the median of the transforms' own
  ratios, and the transform at which ``auto`` first moved bytes by a plan. The methods'
  rounds rotate which way goes first.

On the torus, the application loop with *drifting* counts follows: every row of the grid an
all-to-all-v at once (``optiq.alltoallv`` with ``parent=``), the counts of each call a seeded
draw within 10% of a base, ``auto`` in turn with ``comm.Alltoallv`` (each first every other
call).

    python benchmarks/application.py [--setups torus,slabs,tree] [--sizes N,N] [--rate 20Mb/s] [--mtu 1500]
        [--repeat 5] [--methods auto,heu2,opt] [--loop 40]

Needs root (the testbed) and mpi4py-fft (``pip install 'optiq[fft]'``, FFTW's headers).
``--worker`` is the MPI program the setups run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

OPTIQ = str(Path(sys.executable).parent / "optiq")  # the command installed beside this Python
#: setup -> (the testbed's topology, the grid of pencils, the array sizes, what it shows); at 20 Mbit/s
#: the first size's transposes last tens of milliseconds, the second's hundreds
SETUPS = {
    "torus": ("torus:4x4", "4x4", "64,128", "a 4 x 4 grid of pencils on a 4 x 4 torus: the rows and columns are its "
              "rings"),
    "slabs": ("torus:4x4", "16x1", "64,128", "16 slabs on a 4 x 4 torus: one all-to-all of 16 ranks"),
    "tree": ("cluster:hosts=16,edges=4,cores=1", "4x4", "32,64", "a 4 x 4 grid on a tapered tree: 4 edge switches of "
             "4 hosts, one core, rows within an edge switch, columns across the core"),
}


def driver(args: argparse.Namespace) -> int:
    from children import run_cleanly

    rows = []
    for name in args.setups.split(","):
        spec, grid, sizes, what = SETUPS[name]
        print(f"== {name}: {what} ({spec}, links at {args.rate}, MTU {args.mtu})", flush=True)
        cmd = [OPTIQ, "testbed", "exec", "-t", spec, "--rate", args.rate, "--mtu", str(args.mtu), "-q", "--",
               sys.executable, "-m", "mpi4py",
               __file__, "--worker", "--network", f"{spec},bw={args.rate}", "--grid", grid,
               "--sizes", args.sizes or sizes, "--repeat", str(args.repeat), "--methods", args.methods,
               "--loop", str(args.loop)]
        if name == "torus":
            cmd += ["--drifting", str(args.loop)]
        run = run_cleanly(cmd)
        if run.returncode != 0:
            sys.stderr.write(run.stdout[-3000:] + run.stderr[-3000:])
            return 1
        for line in run.stdout.splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                row["setup"] = name
                rows.append(row)
                print(describe(row), flush=True)
    print("\n" + table(rows, args.methods.split(",")))
    return 0


def describe(row: dict) -> str:
    if row["kind"] == "drifting":
        return (f"  drifting counts, {row['calls']} calls: auto {row['auto_over_mpi']:.3f}x comm.Alltoallv's loop "
                f"(median call {row['median_over_mpi']:.3f}x), first plan at call {row['first_plan']}, "
                f"{row['plans']} plans")
    loop = row["loop"]
    return (f"  {row['size']}^3: transposes {row['transposes_s']['own'] * 1e3:.1f} ms (own), "
            + ("no loop" if loop is None else
               f"loop of {loop['transforms']} with auto {loop['over_own']:.3f}x the library's "
               f"(median transform {loop['median_over_own']:.3f}x), first plan at transform {loop['first_plan']}"))


def table(rows: list[dict], methods: list[str]) -> str:
    head = (f"{'setup':6} {'array':>6} {'own ms':>8} {'pred':>6} " + " ".join(f"{m + ' gain':>10}" for m in methods)
            + f" {'app pred':>8} {'app gain':>9} {'auto/own':>8} {'same':>5} {'sirq':>5}")
    lines = [head, "-" * len(head)]
    for row in rows:
        if row["kind"] != "fft":
            continue
        own = row["transposes_s"]["own"]
        gains = " ".join(f"{own / row['transposes_s'][m]:>10.3f}" for m in methods)
        # the plan whose prediction is shown: opt's, else the best of those run (ties: the first of --methods)
        shown = "opt" if "opt" in methods else max(methods, key=lambda m: row["predicted_gain"].get(m) or 0.0)
        app = row["total_s"]["own"] / row["total_s"][shown]
        pred = row["predicted_gain"].get(shown) or 1.0
        rest = max(0.0, row["total_s"]["own"] - own)   # the FFTs and copies, which no plan speeds up
        app_pred = row["total_s"]["own"] / (rest + own / pred)
        auto = f"{row['total_s']['auto'] / row['total_s']['own']:8.3f}" if "auto" in methods else f"{'-':>8}"
        cpu = row.get("host_cpu", {}).get(shown, {})
        lines.append(f"{row['setup']:6} {row['size']:>4}^3 {own * 1e3:8.1f} {pred:6.3f} "
                     f"{gains} {app_pred:8.3f} {app:9.3f} {auto} {str(row['identical']):>5} "
                     f"{cpu.get('softirq', float('nan')):5.2f}")
    lines.append("own ms: the transposes of one forward plus backward with the library's own Alltoallw (median); "
                 "pred: the opt plan's gain (without opt: the best plan's) over the default routes for one "
                 "transpose, every group at once; M gain: the transposes' own time over method M's; app pred: "
                 "forward plus backward if its transposes took the library's own over pred and the rest (FFTs, "
                 "copies) what it takes with the library's own; app gain: forward plus backward, FFTs included, "
                 "measured with that plan; auto/own: forward plus backward; same: every result bitwise the "
                 "library's own; sirq: the host's cores' share in softirqs (the links' emulation) over that "
                 "plan's timed transposes.")
    for row in rows:
        if row["kind"] == "drifting":
            lines.append(describe(row).strip())
    return "\n".join(lines)


# --- the MPI program -------------------------------------------------------------------------

def worker(args: argparse.Namespace) -> int:
    import numpy as np
    from mpi4py import MPI
    from mpi4py_fft import PFFT, newDistArray

    from optiq.integrations.mpi4py_fft import AcceleratedComm, accelerate, restore
    from optiq.mpi.connect import connect_in_turn
    from optiq.mpi.grids import grid_comm
    from optiq.mpi.waiting import allreduce_asleep, start_together
    from optiq.runtime import clear_cache

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    grid = tuple(int(g) for g in args.grid.split("x"))
    methods = args.methods.split(",")
    host = comm.Split_type(MPI.COMM_TYPE_SHARED)
    connect_in_turn(comm)

    ticks: dict[str, np.ndarray] = {}  # way -> the host's CPU ticks by kind over its timed transposes (rank 0)

    def timed(step, way: str | None = None) -> float:
        start = start_together(comm, host=host)
        before = host_cpu() if way is not None and rank == 0 else None
        step()
        if before is not None:
            ticks[way] = ticks.get(way, 0) + host_cpu() - before
        return allreduce_asleep(comm, time.perf_counter() - start, MPI.MAX)

    for size in (int(s) for s in args.sizes.split(",")):
        fft = PFFT(comm, (size, size, size), axes=(0, 1, 2), dtype=complex, grid=grid)
        ticks.clear()  # this size's own
        u = newDistArray(fft, False)
        u[:] = np.random.default_rng(rank).random(u.shape) + 1j * np.random.default_rng(rank + 99).random(u.shape)
        u_hat, back = newDistArray(fft, True), newDistArray(fft, False)

        def transform() -> None:
            fft.forward(u, u_hat)
            fft.backward(u_hat, back)

        def transposes() -> None:
            for i, t in enumerate(fft.transfer):  # on the transforms' own arrays, forward then backward
                t.forward(fft.forward._xfftn[i].output_array, fft.forward._xfftn[i + 1].input_array)
            for i, t in enumerate(fft.transfer[::-1]):
                t.backward(fft.backward._xfftn[i].output_array, fft.backward._xfftn[i + 1].input_array)

        transform()
        reference = (u_hat.tobytes(), back.tobytes())

        def optiq_comms() -> list:  # the transfers that go through optiq (one of a single rank keeps MPI's)
            return [t.comm for t in fft.transfer if isinstance(t.comm, AcceleratedComm)]

        # every method plans over a grid of its own: each keeps its own cache and predictions, as one
        # application calling one method would (the methods run in turn in one job)
        base = grid_comm(list(fft.subcomm))
        grids = {way: base.Dup() for way in methods}

        # an application accelerates once: each method's transfers are made once and swapped in
        # (accelerating again before every transform builds the network each time: the transforms
        # after it measured about 3% slower)
        accelerated = {}
        for way in methods:
            accelerate(fft, network=args.network, method=way, parent=grids[way])
            accelerated[way] = [t.comm for t in fft.transfer]
            restore(fft)
        own_comms = [t.comm for t in fft.transfer]

        def use(way: str) -> None:
            for t, c in zip(fft.transfer, own_comms if way == "own" else accelerated[way]):
                t.comm = c

        # the application's loop, auto in turn with the library's own; nothing planned before it (accelerate
        # made the calls' contexts and groups only, as an application's set-up does)
        loop_own, loop_auto, first_plan, identical = [], [], None, True
        for i in range(args.loop):
            for way in ("own", "auto") if i % 2 == 0 else ("auto", "own"):  # in turn, each first every other time
                use(way)
                (loop_own if way == "own" else loop_auto).append(timed(transform))
            identical &= (u_hat.tobytes(), back.tobytes()) == reference
            moved = [c.last.method for c in optiq_comms()]
            if first_plan is None and any(m not in ("mpi", "local") for m in moved):
                first_plan = i
        # every way in turn (auto as the loop left it, the others planned by a warm-up)
        ways = ["own", *methods]
        for way in ways:
            use(way)
            transform()
            identical &= (u_hat.tobytes(), back.tobytes()) == reference
        total = {w: [] for w in ways}
        alone = {w: [] for w in ways}
        for r in range(args.repeat):
            for way in ways[r % len(ways):] + ways[:r % len(ways)]:  # each round begins one way later
                use(way)
                total[way].append(timed(transform))
                alone[way].append(timed(transposes, way))
                identical &= (u_hat.tobytes(), back.tobytes()) == reference
        predicted, opt_last = {}, []
        for way in methods:
            use(way)
            transform()
            lasts = [c.last for c in optiq_comms() if c.last.method != "local"]
            if all(r.predicted_s and r.default_s for r in lasts) and lasts:
                predicted[way] = sum(r.default_s for r in lasts) / sum(r.predicted_s for r in lasts)
            else:
                predicted[way] = None
            if way == "opt":
                opt_last = lasts
        same = bool(comm.allreduce(int(identical), op=MPI.MIN))
        if rank == 0:
            print(json.dumps({
                "kind": "fft", "size": size, "grid": args.grid, "network": args.network,
                "transposes_s": {w: float(np.median(v)) for w, v in alone.items()},
                "host_cpu": {w: softirq_share(t) for w, t in ticks.items()},
                "total_s": {w: float(np.median(v)) for w, v in total.items()},
                "predicted_gain": predicted,
                "opt_transfers": [{"predicted_s": r.predicted_s, "default_s": r.default_s} for r in opt_last],
                "auto_reason": [c.last.reason for c in optiq_comms()],
                "loop": {"transforms": args.loop, "over_own": float(sum(loop_auto) / sum(loop_own)),
                         "median_over_own": float(np.median(np.array(loop_auto) / np.array(loop_own))),
                         "first_plan": first_plan} if args.loop else None,
                "identical": same}), flush=True)
        restore(fft)
        clear_cache()
        for grid_of_way in [*grids.values(), base]:
            grid_of_way.Free()
        fft.destroy()
    if args.drifting:
        drifting(comm, args, host)
    return 0


def host_cpu():
    """The host's CPU time so far, in clock ticks by kind (``/proc/stat``: user, nice, system, idle,
    iowait, irq, softirq, steal); network namespaces share it, so any rank reads the whole host."""
    import numpy as np

    with open("/proc/stat") as f:
        return np.array(f.readline().split()[1:9], dtype=np.int64)


def softirq_share(ticks) -> dict:
    """The share of the host's CPU ticks in softirqs (the links' emulation). The share not idle
    says nothing here: the executor's ranks yield the core while they wait, and so count as busy."""
    total = int(ticks.sum())
    return {"softirq": float(ticks[6]) / total if total else float("nan")}


def drifting(comm, args, host) -> None:
    """Every row of the grid an all-to-all-v at once, counts drifting within 10% of a base."""
    import numpy as np
    from mpi4py import MPI

    import optiq
    from optiq.mpi.waiting import allreduce_asleep, start_together
    from optiq.runtime import clear_cache

    grid = tuple(int(g) for g in args.grid.split("x"))
    cart = comm.Create_cart(list(grid))
    row = cart.Sub([False, True])
    n, me = row.Get_size(), row.Get_rank()
    base = 2**16 // 8  # float64 elements between two ranks of a row: 64 KiB, a transpose of a 64^3 grid
    clear_cache()
    times, first_plan, plans, ok = {"mpi": [], "auto": []}, None, 0, True
    for call in range(args.drifting):
        factor = np.random.default_rng([7, call]).uniform(0.9, 1.1, (grid[0], n, n))[cart.Get_coords(comm.rank)[0]]
        counts = np.round(base * factor).astype(np.int64)
        np.fill_diagonal(counts, 0)
        sc, rc = counts[me], counts[:, me].copy()
        sd, rd = (np.concatenate(([0], np.cumsum(c)[:-1])) for c in (sc, rc))
        send = np.arange(int(sc.sum()), dtype=np.float64) + comm.rank
        want, got = np.zeros(int(rc.sum())), np.zeros(int(rc.sum()))
        for way in ("mpi", "auto") if call % 2 == 0 else ("auto", "mpi"):  # each first every other call
            start = start_together(comm, host=host)
            if way == "mpi":
                row.Alltoallv([send, (sc, sd)], [want, (rc, rd)])
            else:
                result = optiq.alltoallv(row, [send, (sc, sd)], [got, (rc, rd)], network=args.network, parent=comm)
            times[way].append(allreduce_asleep(comm, time.perf_counter() - start, MPI.MAX))
        ok &= bool(np.array_equal(got, want))
        plans = result.plans_made
        if first_plan is None and result.method not in ("mpi", "local"):
            first_plan = call
    same = bool(comm.allreduce(int(ok), op=MPI.MIN))
    if comm.rank == 0:
        print(json.dumps({"kind": "drifting", "calls": args.drifting, "plans": plans, "first_plan": first_plan,
                          "auto_over_mpi": float(sum(times["auto"]) / sum(times["mpi"])),
                          "median_over_mpi": float(np.median(np.array(times["auto"]) / np.array(times["mpi"]))),
                          "identical": same}),
              flush=True)
    row.Free()
    cart.Free()
    clear_cache()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setups", default="torus,slabs,tree", help=f"comma-separated, of {', '.join(SETUPS)}")
    ap.add_argument("--sizes", help="edges of the complex128 cubes (default: the setup's, 64,128 on the torus, "
                                    "32,64 on the tree)")
    ap.add_argument("--rate", default="20Mb/s")
    ap.add_argument("--mtu", type=int, default=1500, help="the data links' MTU (bytes; default 1500, the testbed's)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--methods", default="auto,heu2,opt")
    ap.add_argument("--loop", type=int, default=40, help="transforms of the application's loop with auto")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--network", help=argparse.SUPPRESS)
    ap.add_argument("--grid", default="4x4", help=argparse.SUPPRESS)
    ap.add_argument("--drifting", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    return worker(args) if args.worker else driver(args)


if __name__ == "__main__":
    sys.exit(main())
