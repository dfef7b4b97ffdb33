"""The allreduce cost model on an emulated switch, as the seed evaluates it.

    python benchmarks/testbed_collectives.py [--cases 12:4MiB,15:4MiB,12:32KiB,12:4MiB:TREE]
        [--rate 20Mb/s] [--size 256KiB] [--repeat 3]

Each case ``RANKS:QUEUE[:SPEC]`` runs ``optiq testbed collectives --ranks RANKS --queue QUEUE
[-t SPEC]``: a star of RANKS hosts (or the network SPEC; ``TREE`` is a two-level tree,
``cluster:hosts=12,edges=2,cores=1``: two switches of 6 hosts joined through a third by one
cable each) with links at ``--rate`` and tail-drop queues of QUEUE bytes, both
models fitted there from the micro-benchmarks and every algorithm measured (``--size``
bytes per rank, medians of ``--repeat``) beside their predictions, with the packets the
queues dropped. Printed: each case's table, then one line per case: both models' mean and
largest error, the model's choice against the fastest measured. Needs root.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

OPTIQ = str(Path(sys.executable).parent / "optiq")  # the command installed beside this Python
TREE = "cluster:hosts=12,edges=2,cores=1"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="12:4MiB,15:4MiB,12:32KiB,12:4MiB:TREE",
                    help="RANKS:QUEUE[:SPEC], comma-separated (SPEC TREE: the two-level tree)")
    ap.add_argument("--rate", default="20Mb/s")
    ap.add_argument("--size", default="256KiB")
    ap.add_argument("--repeat", default="3")
    args = ap.parse_args()
    summary = []
    with tempfile.TemporaryDirectory(prefix="optiq-tbc-") as tmp:
        for case in args.cases.split(","):
            ranks, queue, *spec = case.split(":", 2)
            network = ["-t", TREE if spec == ["TREE"] else spec[0]] if spec else []
            out = Path(tmp) / f"{ranks}-{queue}-{len(summary)}.json"
            run = subprocess.run([OPTIQ, "testbed", "collectives", "--ranks", ranks, "--queue", queue, *network,
                                  "--rate", args.rate, "--size", args.size, "--repeat", args.repeat, "--json",
                                  str(out), "-q"], capture_output=True, text=True)
            if run.returncode != 0:
                raise SystemExit(f"case {case} failed:\n{run.stderr[-2000:]}")
            print(f"== {ranks} ranks, queues of {queue}" + (f", {network[1]}" if network else ", a star"))
            print(run.stdout.strip(), flush=True)
            r = json.loads(out.read_text())
            summary.append(f"{ranks:>5} {queue:>7} {'tree' if network else 'star':>5} {r['model_error_mean']:8.1%} {r['model_error_max']:8.1%} "
                           f"{r['abg_error_mean']:8.1%} {r['abg_error_max']:8.1%} {r['model_choice']:>10} "
                           f"{r['abg_choice']:>10} {r['measured_best']:>10} {r['drops']:7,}")
    print("== summary: relative errors of the contention model and of alpha-beta-gamma, the algorithm each picks, "
          "the fastest measured")
    print(f"{'ranks':>5} {'queue':>7} {'net':>5} {'model':>8} {'max':>8} {'abg':>8} {'max':>8} {'model':>10} {'abg':>10} "
          f"{'measured':>10} {'drops':>7}")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
