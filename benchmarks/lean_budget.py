"""The default plan's lean step against its budget: ``optiq plan -m opt`` with and without it.

For every machine size, the command ``optiq plan -t bgq:N --pattern disjoint -m opt`` runs
with the lean step (the default) and with ``--no-lean``, in turn, ``--repeat`` times each
(the median is printed): the whole command's wall time, the ratio of the two, the hop-bytes
each plan moves and the fraction the lean step saved, and what the step said (its rounds,
or why it was skipped). The issue's mark is a ratio of at most 3.

    python benchmarks/lean_budget.py [--sizes 1024,2048,4096,8192] [--repeat 1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def run(size: int, lean: bool, out: Path) -> tuple[float, float, str]:
    """One command: its wall time, the plan's hop-bytes, and the lean step's last line."""
    argv = [sys.executable, "-m", "optiq.cli.main", "plan", "-t", f"bgq:{size}", "--pattern", "disjoint", "-m", "opt",
            "-o", str(out)] + ([] if lean else ["--no-lean"])
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"bgq:{size}: {proc.stderr.strip().splitlines()[-1]}")
    from optiq import load_plan

    plan = load_plan(out)
    hop_bytes = float((plan.path_bytes * plan.paths.hops).sum())
    said = [line.split("] ", 1)[-1] for line in proc.stderr.splitlines() if "lean step:" in line]
    return seconds, hop_bytes, said[-1] if said else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,2048,4096,8192")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    print(f"{'machine':11} {'lean s':>7} {'no-lean s':>9} {'ratio':>6} {'hop-bytes lean':>15} {'no-lean':>12} "
          f"{'saved':>6}  lean step")
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            times: dict[bool, list[float]] = {True: [], False: []}
            hops: dict[bool, float] = {}
            said = ""
            for _ in range(args.repeat):
                for lean in (True, False):
                    seconds, hops[lean], line = run(size, lean, Path(tmp) / f"p{size}{lean}.json")
                    times[lean].append(seconds)
                    said = line if lean else said
            on, off = float(np.median(times[True])), float(np.median(times[False]))
            print(f"{'bgq:' + str(size):11} {on:7.2f} {off:9.2f} {on / off:6.2f} {hops[True]:15.4e} "
                  f"{hops[False]:12.4e} {1 - hops[True] / hops[False]:6.2%}  {said}", flush=True)


if __name__ == "__main__":
    main()
