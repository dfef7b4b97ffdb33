"""Cluster tables installed as the switches' routes of the emulated network, against minhop's.

    python benchmarks/testbed_tables.py [--rate 20Mb/s] [--size 4MiB] [--repeat 3]

A synthetic 4-ary 2-tree (``scripts/synthetic_fabric.py``: 16 hosts, 8 switches) and two jobs
on disjoint random halves of its hosts: a random permutation of 8 and a shift by 3. ``optiq
tables --jobs`` writes the cluster's tables (the given tables: OpenSM minhop, emulated);
then ``optiq testbed run`` measures each job alone and both at once, with the network's
routes (``--methods default``) first minhop's, then the cluster's tables (``--routes``): the
kernel forwards by those tables, MPI moves the bytes (``MPI_Ialltoallv``). Printed: each
run's predicted and measured seconds, and minhop's over the tables' (measured and
predicted). Needs root (network namespaces); every run is ``optiq testbed run``'s own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from children import run_cleanly

ROOT = Path(__file__).resolve().parent.parent
OPTIQ = [str(Path(sys.executable).parent / "optiq")]  # the command installed beside this Python


def run(*argv: str) -> str:
    out = run_cleanly([*OPTIQ, *argv])
    if out.returncode != 0:
        raise SystemExit(f"optiq {' '.join(argv)} failed:\n{out.stderr[-2000:]}")
    return out.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="20Mb/s")
    ap.add_argument("--size", default=4 << 20, type=int, help="bytes per pair (default 4 MiB)")
    ap.add_argument("--repeat", default=3, type=int)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="optiq-tbt-") as tmp:
        work = Path(tmp)
        subprocess.run([sys.executable, str(ROOT / "scripts" / "synthetic_fabric.py"), str(work / "f.txt"), "--k", "4",
                        "--levels", "2"], check=True, capture_output=True)
        names = [f"node{i:03d}" for i in range(1, 17)]
        hosts = np.random.default_rng(5).permutation(16)
        lists = {"perm": hosts[:8], "shift": hosts[8:]}
        rng = np.random.default_rng(2)
        perm = rng.permutation(8)
        while (perm == np.arange(8)).any():
            perm = rng.permutation(8)
        pairs = {"perm": list(enumerate(perm.tolist())), "shift": [(i, (i + 3) % 8) for i in range(8)]}
        union = []
        for job, h in lists.items():
            (work / f"{job}.csv").write_text("src,dst,bytes\n" + "".join(f"{a},{b},{args.size}\n" for a, b in pairs[job]))
            (work / f"{job}.hosts").write_text(",".join(names[x] for x in h))
            union += [(int(h[a]), int(h[b])) for a, b in pairs[job]]
        (work / "both.csv").write_text("src,dst,bytes\n" + "".join(f"{a},{b},{args.size}\n" for a, b in sorted(union)))
        (work / "jobs.txt").write_text("".join(f"{job} {(work / f'{job}.hosts').read_text()} {job}.csv\n" for job in lists))
        fabric = f"ibnet:{work / 'f.txt'}"
        print(run("tables", "-t", fabric, "--jobs", str(work / "jobs.txt"), "-o", str(work / "cluster.lfts"), "-q"),
              flush=True)
        print(f"each job alone and both at once, links at {args.rate}, medians of {args.repeat} rounds:")
        print(f"{'job':6} {'routes':14} {'pred s':>7} {'meas s':>7}")
        for job in ("perm", "shift", "both"):
            workload = ["--demands", str(work / f"{job}.csv")]
            if job != "both":
                workload += ["--hosts", f"@{work / f'{job}.hosts'}"]
            seconds = {}
            for routes in ("minhop", "cluster tables"):
                extra = ["--routes", str(work / "cluster.lfts")] if routes != "minhop" else []
                report = work / f"{job}-{routes[0]}.json"
                run("testbed", "run", "-t", fabric, *extra, *workload, "--methods", "default", "--rate", args.rate,
                    "--repeat", str(args.repeat), "--json", str(report), "-q")
                row = json.loads(report.read_text())["rows"][0]
                seconds[routes] = (row["predicted_time_s"], row["measured_time_s"])
                print(f"{job:6} {routes:14} {row['predicted_time_s']:7.3f} {row['measured_time_s']:7.3f}", flush=True)
            (pm, mm), (pt, mt) = seconds["minhop"], seconds["cluster tables"]
            print(f"{'':6} minhop / tables: measured {mm / mt:.2f}x, predicted {pm / pt:.2f}x", flush=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the testbed has removed itself (children.run_cleanly)
        raise SystemExit("interrupted") from None
