"""``optiq tables`` at cluster scale: seconds and peak resident memory of the fabric writer and of
the tables for a job, each in a process of its own.

    python benchmarks/tables_scale.py [--sizes 4096,10000] [--old-writer PATH]

For each size: ``scripts/synthetic_fabric.py`` writes a fat-tree fabric and its tables (4,096
hosts: ``--k 16 --levels 3``; 10,000: ``--k 22 --levels 3 --hosts 10000``, 1,452 switches), then
``optiq tables -t ibnet:FABRIC --routes TABLES`` writes job tables for random pairs (half the
hosts send, each to one other host, 8 MiB: 5,000 pairs at 10,000 hosts), then ``--jobs`` for
four jobs of a quarter of the hosts each (two permutations, two of random pairs of 1-3 MiB).
``--old-writer`` times
another version of the writer on the same fabric (e.g. the one before a change), side by side.
Peak memory is each process's own maximum resident set (``getrusage`` as it exits).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHAPES = {4096: ["--k", "16", "--levels", "3"], 10000: ["--k", "22", "--levels", "3", "--hosts", "10000"]}


#: Runs a script or module and prints its own peak resident memory (KiB) last on stderr.
PEAK = ("import atexit, resource, runpy, sys\n"
        "atexit.register(lambda: print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr))\n"
        "what, sys.argv = sys.argv[1], sys.argv[1:]\n"
        "runpy.run_module(what[3:], run_name='__main__', alter_sys=True) if what.startswith('-m:') else "
        "runpy.run_path(what, run_name='__main__')\n")


def measured(target: str, argv: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak resident MiB and the first line of output of ``target`` (a script, or
    ``-m:MODULE``) with ``argv``, in a process of its own."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PEAK, target, *argv], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{target} {' '.join(argv)} failed: {done.stderr.strip()[-500:]}")
    peak = next(int(line.split()[1]) for line in reversed(done.stderr.splitlines()) if line.startswith("PEAK"))
    return seconds, peak / 1024, (done.stdout.strip().splitlines() or [""])[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4096,10000")
    ap.add_argument("--old-writer", help="another synthetic_fabric.py to time beside this one")
    args = ap.parse_args()
    print(f"load before: {os.getloadavg()[0]:.2f}; each step a process of its own, its peak resident memory")
    with tempfile.TemporaryDirectory(prefix="optiq-scale-") as tmp:
        work = Path(tmp)
        for hosts in (int(h) for h in args.sizes.split(",")):
            fabric, lfts = work / f"f{hosts}.txt", work / f"f{hosts}.lfts"
            writers = [("writer", ROOT / "scripts" / "synthetic_fabric.py")]
            if args.old_writer:
                writers.insert(0, ("old writer", Path(args.old_writer)))
            for name, script in writers:
                s, mib, _ = measured(str(script), [str(fabric), "--lfts", str(lfts), *SHAPES[hosts]])
                print(f"  {hosts:,} hosts: {name} {s:.1f} s, peak {mib:,.0f} MiB, tables file "
                      f"{lfts.stat().st_size / 2**20:,.0f} MiB", flush=True)
            demands = work / f"pairs{hosts}.csv"
            rng = np.random.default_rng(1)
            perm = rng.permutation(hosts)
            half = hosts // 2
            demands.write_text("src,dst,bytes\n" + "".join(f"{a},{b},{8 << 20}\n" for a, b in
                                                          zip(perm[:half], perm[half:2 * half])))
            s, mib, first = measured("-m:optiq", ["tables", "-t", f"ibnet:{fabric}", "--routes", str(lfts),
                                                  "--demands", str(demands), "-o", str(work / "job.lfts"), "-q"])
            print(f"  {hosts:,} hosts, {half:,} random pairs: optiq tables {s:.1f} s, peak {mib:,.0f} MiB; {first}",
                  flush=True)
            jobs = write_jobs(work, hosts)
            s, mib, first = measured("-m:optiq", ["tables", "-t", f"ibnet:{fabric}", "--routes", str(lfts),
                                                  "--jobs", str(jobs), "-o", str(work / "jobs.lfts"), "-q"])
            print(f"  {hosts:,} hosts, 4 jobs of {hosts // 4:,}: optiq tables --jobs {s:.1f} s, peak {mib:,.0f} MiB; "
                  f"{first}", flush=True)


def write_jobs(work: Path, hosts: int) -> Path:
    """Four jobs on consecutive quarters of the hosts (named as the writer names them): two
    permutations and two of random pairs."""
    width = max(3, len(str(hosts)))
    quarter = hosts // 4
    lines = []
    for i in range(4):
        first, last = i * quarter + 1, (i + 1) * quarter
        traffic = "pattern:permutation:8MiB"
        if i % 2:
            rng = np.random.default_rng(i)
            pairs = rng.permutation(quarter)[:quarter - quarter % 2].reshape(-1, 2)
            traffic = str(work / f"job{i}.csv")
            Path(traffic).write_text("src,dst,bytes\n" + "".join(f"{a},{b},{int(rng.integers(1, 4)) << 20}\n"
                                                                for a, b in pairs))
        lines.append(f"job{i} node[{first:0{width}d}-{last:0{width}d}] {traffic}\n")
    path = work / "jobs.txt"
    path.write_text("".join(lines))
    return path


if __name__ == "__main__":
    main()
