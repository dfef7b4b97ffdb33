"""Where the machine's cores, not the links, set the pace of the emulated network.

The fattree case of ``benchmarks/testbed.py`` (fattree:k=4,n=2, a random permutation of
4 MiB pairs) on its default routes and with dynamic routing's per-pair rules (every flow
alone on its path, all at the link rate at once), at rising link rates. The link traffic is
what the kernel forwarded: every link's counted bytes over the measured time. Measured
times stay with the links' while the cores keep up; MPI_Ialltoallv's ranks sleep between
tests, so CPU idle says how much the kernel's forwarding left.

    python benchmarks/testbed_budget.py [--rates 10,20,40,80,160]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from testbed import case

from optiq.testbed import run_testbed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="10,20,40,80,160", help="Mbit/s of every link")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        topology, demands, _ = case("fattree", Path(tmp))
    print(f"{topology.name}, {demands.name}")
    print(f"{'Mbit/s':>7}  {'method':8}  {'link traffic Gbit/s':>19}  {'pred s':>7}  {'meas s':>7}  {'meas/pred':>9}  "
          f"{'CPU idle':>8}")
    for rate in (float(r) for r in args.rates.split(",")):
        report = run_testbed(topology, demands, methods="default,dynamic", rate=rate * 1e6 / 8, repeat=2, warmup=1,
                             name="optiq-budget")
        for r in report.rows:
            traffic = float(np.sum(report.links[r.method]["counted"])) * 8 / r.measured_time_s / 1e9
            print(f"{rate:>7g}  {r.method:8}  {traffic:>19.2f}  {r.predicted_time_s:>7.3f}  {r.measured_time_s:>7.3f}  "
                  f"{r.measured_over_predicted:>9.2f}  {r.cpu_idle:>8.0%}", flush=True)


if __name__ == "__main__":
    main()
