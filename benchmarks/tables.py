"""Forwarding tables written for a job, against the tables they replace and the plans beside them.

    python benchmarks/tables.py [--quick]

Three parts, every figure a busiest link (ms) measured side by side in one run:

1. The synthetic 512-host fabric (``scripts/synthetic_fabric.py --k 8 --levels 3 --hosts 512
   --parallel 2 --seed 3 --drop 8 --slow 0.1 --slow-speed FDR``) with its D-mod-K tables, 256
   random pairs: ``default`` (its tables), ``tables`` (written for the job), ``dynamic`` (the
   fat-tree study's per-pair rules, free) and free ``opt``; the same fabric routed with LMC 2
   and tables with ``--lmc``. Time and peak memory to write the tables, and their check.
2. The fat-tree study's CG and MILC traffic (one rank per host) on a 128-host leaf-spine
   simulated by ibsim and routed by the real OpenSM (minhop); then three jobs on disjoint
   host lists of it (CG, MILC and a permutation) under tables made for each alone, under
   the cluster's tables (``cluster_tables``) and under minhop's.
3. The ibsim fabrics of the tests routed by each real OpenSM engine (minhop, updn, ftree,
   dfsssp), a random permutation: each engine's tables, tables written from them, and the
   check of the engine's; optiq's minhop emulation against the real minhop (entries equal,
   busiest link); and the round trip (written, loaded by ``opensm -R file,no_fallback -U``, dumped, equal).

Parts 2 and 3 need Debian's opensm, ibsim-utils and infiniband-diags (skipped, saying so,
without them). ibsim simulates SDR, DDR and QDR links only: those fabrics run at QDR and DDR.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from optiq import Demands, from_spec
from optiq.paths import forwarding_routes, minhop_tables
from optiq.paths.tablecheck import check_tables
from optiq.planner import cluster_tables, compare_methods, job_tables
from optiq.topology import read_ibnetdiscover
from optiq.topology.lft import read_forwarding_tables
from optiq.workloads import constant_ratio, host_demands, milc_traffic, nas_cg_traffic, random_pairing
from optiq.workloads.jobs import ClusterJob

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"


def _ibsim():
    spec = importlib.util.spec_from_file_location("ibsim_fabrics", SCRIPTS / "ibsim_fabrics.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["ibsim_fabrics"] = module
    spec.loader.exec_module(module)
    return module


def row(name: str, t_ms: float, base_ms: float, note: str = "") -> str:
    return f"  {name:22} {t_ms:9.4f} ms  {base_ms / t_ms:5.2f}x" + (f"  {note}" if note else "")


def methods(topology, demands, label: str) -> None:
    """default, tables, dynamic and free opt on one workload."""
    runs = {r.method: r for r in compare_methods(topology, demands, ["default", "tables", "dynamic"])}
    free = compare_methods(topology, demands, ["opt"], routing="free")[0]
    base = runs["default"].plan.predicted_time_s * 1e3
    print(f"{label}")
    for name, run in (*runs.items(), ("opt (free)", free)):
        p = run.plan
        note = f"real {p.realized_time_s * 1e3:.4f} ms" if p.routing == "free" else ""
        if name == "tables":
            note = f"bound for one-LID tables {p.lower_bound_time_s * 1e3:.4f} ms"
        print(row(name, p.predicted_time_s * 1e3, base, note))
    print(f"  tables / free opt: {runs['tables'].plan.predicted_time_s / free.plan.predicted_time_s:.3f}")


def part1(work: Path, quick: bool) -> None:
    print("== 1. synthetic 512-host fabric, D-mod-K tables, 256 random pairs (8 MiB)")
    args = ["--k", "8", "--levels", "3", "--hosts", "512", "--parallel", "2", "--seed", "3", "--drop", "8",
            "--slow", "0.1", "--slow-speed", "FDR"]
    for lmc in (0, 2):
        out = work / f"f512-{lmc}"
        out.mkdir()
        subprocess.run([sys.executable, SCRIPTS / "synthetic_fabric.py", out / "fabric.txt", "--lfts", out / "lfts.txt",
                        "--lmc", str(lmc), *args], check=True, capture_output=True)
        topo = from_spec(f"ibnet:{out / 'fabric.txt'},routes={out / 'lfts.txt'}")
        d = random_pairing(constant_ratio(topo.num_endpoints, "disjoint", num_sources=256, ratio=1), seed=1)
        if lmc == 0:
            methods(topo, d, "  LMC 0:")
        start = time.perf_counter()
        made = job_tables(topo, d, lmc=bool(lmc))
        made.write(out / "job.lfts")
        seconds = time.perf_counter() - start
        free = compare_methods(topo, d, ["opt"], routing="free")[0].plan.predicted_time_s
        print(f"  LMC {lmc}, optiq tables{' --lmc' if lmc else ''}: {made.time_s * 1e3:.4f} ms (given "
              f"{made.given_time_s * 1e3:.4f} ms, {made.gain:.2f}x; free opt {free * 1e3:.4f} ms, tables / free opt "
              f"{made.time_s / free:.3f}); written in {seconds:.1f} s, peak memory {made.memory_mib:.0f} MiB; "
              f"{made.tables.table.shape[0]} switches x {made.tables.lids.size:,} LIDs, {made.changed:,} entries "
              f"changed")
        print(f"    check: {made.report}")
        print(f"    given tables: {'; '.join(made.given_report.problems()) or 'ok'}"[:300])
        if quick:
            break


def part2(work: Path, sim_cls) -> None:
    print("== 2. CG and MILC (one rank per host, linear/block, 1 MiB per exchange), 128-host leaf-spine, "
          "OpenSM minhop")
    net = work / "ls.net"
    subprocess.run([sys.executable, SCRIPTS / "ibsim_fabrics.py", "leaf-spine", net], check=True, capture_output=True)
    with sim_cls(net, work / "ls") as sim:
        sim.route("minhop")
        fabric, lfts = sim.discover()
    topo = read_ibnetdiscover(fabric, routes=lfts)
    for app, traffic in (("CG", nas_cg_traffic()), ("MILC", milc_traffic())):
        d = host_demands(traffic, topo.num_endpoints, ranks_per_node=1).demands
        methods(topo, d, f"  {app}: {d.num_jobs} host pairs")
    print("  three jobs on disjoint random host lists: CG (32 ranks), MILC (4x4x2x2, 64 ranks), a random "
          "permutation of 32; busiest link of each (ms)")
    hosts = np.random.default_rng(4).permutation(topo.num_endpoints)
    lists = {"CG": hosts[:32], "MILC": hosts[32:96], "perm": hosts[96:]}
    jobs = [ClusterJob("CG", lists["CG"], host_demands(nas_cg_traffic(32, rows=4), topo.num_endpoints,
                                                        hosts=lists["CG"]).demands),
            ClusterJob("MILC", lists["MILC"], host_demands(milc_traffic((4, 4, 2, 2)), topo.num_endpoints,
                                                            hosts=lists["MILC"]).demands)]
    perm = np.random.default_rng(9).permutation(32)
    moved = perm != np.arange(32)
    h = lists["perm"]
    jobs.append(ClusterJob("perm", h, Demands(h[np.flatnonzero(moved)], h[perm[moved]],
                                              np.full(int(moved.sum()), 1 << 20))))
    result = cluster_tables(topo, jobs)
    print("\n".join("    " + line.replace("given ms", "minhop ms") for line in str(result).splitlines()))


def part3(work: Path, sim_cls) -> None:
    print("== 3. the tests' ibsim fabrics, every OpenSM engine, a random permutation (1 MiB)")
    print(f"  {'fabric':10} {'engine':7} {'engine ms':>10} {'tables ms':>10} {'gain':>5}  engine's tables checked")
    for kind in ("leaf-spine", "tree", "irregular"):
        net = work / f"{kind}.net"
        subprocess.run([sys.executable, SCRIPTS / "ibsim_fabrics.py", kind, net], check=True, capture_output=True)
        for engine in ("minhop", "updn", "ftree", "dfsssp"):
            if engine == "ftree" and kind == "irregular":
                continue  # ftree refuses an irregular tree (OpenSM falls back to minhop)
            with sim_cls(net, work / f"{kind}-{engine}") as sim:
                sim.route(engine)
                fabric, lfts = sim.discover()
                topo = read_ibnetdiscover(fabric, routes=lfts)
                perm = np.random.default_rng(1).permutation(topo.num_endpoints)
                moved = perm != np.arange(topo.num_endpoints)
                d = Demands(np.flatnonzero(moved), perm[moved], np.full(int(moved.sum()), 1 << 20))
                made = job_tables(topo, d)
                report = check_tables(topo)
                print(f"  {kind:10} {engine:7} {made.given_time_s * 1e3:10.4f} {made.time_s * 1e3:10.4f} "
                      f"{made.gain:5.2f}  {'ok' if report.ok else '; '.join(report.problems())[:80]}")
                if engine == "minhop":
                    emulated = minhop_tables(read_ibnetdiscover(fabric))
                    equal = int((emulated.table == topo.fabric.forwarding.table).sum())
                    t_emu = forwarding_routes(topo, d, emulated).busiest_link_time(d.nbytes.astype(float),
                                                                                    topo.capacity)
                    print(f"  {'':10} minhop emulated: {equal:,} of {emulated.table.size:,} entries equal to OpenSM's; "
                          f"busiest link {t_emu * 1e3:.4f} ms (OpenSM's {made.given_time_s * 1e3:.4f} ms)")
                    made.write(work / f"{kind}.job.lfts")
                    sim.route("file", tables=work / f"{kind}.job.lfts", fallback=False)
                    _, dumped = sim.discover("-loaded")
                    loaded = read_forwarding_tables(dumped, topo)
                    same = int((loaded.table == made.tables.table).sum())
                    walked = forwarding_routes(topo, d, loaded).busiest_link_time(d.nbytes.astype(float), topo.capacity)
                    print(f"  {'':10} round trip: loaded by opensm -R file,no_fallback, dumped: {same:,} of "
                          f"{loaded.table.size:,} entries as written; the job on them {walked * 1e3:.4f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="part 1 at LMC 0 only")
    args = ap.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="optiq-tables-") as tmp:
        work = Path(tmp)
        part1(work, args.quick)
        ibsim = _ibsim()
        missing = ibsim.missing_tools()
        if missing:
            print(f"== parts 2 and 3 skipped: {', '.join(missing)} not installed "
                  f"(apt-get install opensm ibsim-utils infiniband-diags)")
        else:
            part2(work, ibsim.Simulator)
            part3(work, ibsim.Simulator)
    print(f"({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main()
