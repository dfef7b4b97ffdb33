"""Gains over ECMP measured on the emulated network: the same jobs on a fabric that hashes its
flows and on its D-mod-K tables, every row predicted for the paths its connections took.

    python benchmarks/testbed_ecmp.py [--repeat 5] [--rate 20Mb/s]

Cases: two random permutations on ``fattree:k=4,n=2`` and 16 random pairs on a 32-host
leaf-spine (``cluster:hosts=32,edges=4,cores=4``: 4 leaves of 8 hosts, 4 spines). Each case
is two testbed runs (:func:`optiq.testbed.run_testbed`), one after the other: on ECMP
(``routes=ecmp``) the rows ECMP (the network's own routes: its prediction is that of the
paths its connections took, read back), ``dynamic`` (per-pair rules) and forwarded ``opt``;
then D-mod-K (the same fabric's static routes). Every time is a median of ``--repeat``
rounds. Job tables are InfiniBand's (``ibnet:``): these Ethernet fabrics have none. Needs root.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from optiq import Demands, from_spec
from optiq.testbed import run_testbed
from optiq.utils.units import parse_rate
from optiq.workloads import permutation


def cases() -> list[tuple[str, str, Demands]]:
    rng = np.random.default_rng(7)
    pairs = rng.permutation(32)[:32].reshape(16, 2)
    return [("fattree:k=4,n=2", "permutation seed 1", permutation(16, nbytes=2**20, seed=1)),
            ("fattree:k=4,n=2", "permutation seed 2", permutation(16, nbytes=2**20, seed=2)),
            ("cluster:hosts=32,edges=4,cores=4", "16 random pairs", Demands(pairs[:, 0], pairs[:, 1], [2**20] * 16))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rate", default="20Mb/s")
    args = ap.parse_args()
    rate = parse_rate(args.rate)
    print(f"load before: {os.getloadavg()[0]:.2f}; {args.repeat} rounds a method, medians")
    for spec, label, demands in cases():
        hashed = run_testbed(from_spec(f"{spec},routes=ecmp:0"), demands, methods="default,dynamic,opt", rate=rate,
                             repeat=args.repeat, name="optiq-becmp")
        static = run_testbed(from_spec(spec), demands, methods="default", rate=rate, repeat=args.repeat,
                             name="optiq-bdmodk")
        rows = [(r.method if r.method != "default" else "ECMP", r) for r in hashed.rows] + \
               [("D-mod-K", static.rows[0])]
        ecmp = hashed.rows[0]
        print(f"== {spec}, {label}: ECMP's model over hash draws {ecmp.model_mean_s:.3f} s "
              f"({ecmp.model_p05_s:.3f} to {ecmp.model_p95_s:.3f} s, 5th to 95th percentile)")
        print(f"  {'row':10} {'pred s':>7} {'meas s':>7} {'meas/pred':>9} {'pred gain':>9} {'meas gain':>9} "
              f"{'meas/pred gain':>14} {'links':>6}")
        for name, r in rows:
            pred_gain, meas_gain = ecmp.predicted_time_s / r.predicted_time_s, ecmp.measured_time_s / r.measured_time_s
            print(f"  {name:10} {r.predicted_time_s:7.3f} {r.measured_time_s:7.3f} {r.measured_over_predicted:9.2f} "
                  f"{pred_gain:9.2f} {meas_gain:9.2f} {meas_gain / pred_gain:14.2f} {r.link_bytes_deviation:6.1%}")
        print(f"  CPU idle {hashed.cpu_idle:.0%} and {static.cpu_idle:.0%} during the runs; every byte verified: "
              f"{all(r.verified for _, r in rows)}")


if __name__ == "__main__":
    main()
