"""No replay hangs: the testbed's cases at several link rates, the executor paced and unpaced.

Every case of ``benchmarks/testbed.py`` once per rate, one measured round after a warm-up,
with the executor's paths paced (the default) and unpaced. Every row must end, verified; the
times are printed beside the predictions (unpaced paths are expected to lose some of the gain:
flows alone on their links run ahead and the others fall behind).

    python benchmarks/testbed_rates.py [--rates 5,20,100] [--cases fattree,torus]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from testbed import CASES, run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="5,20,100", help="Mbit/s of the fastest link")
    ap.add_argument("--cases", default="fattree,torus", help=f"from {','.join(CASES)}")
    args = ap.parse_args()
    print(f"{'case':10} {'Mbit/s':>6}  {'paced':5}  {'seconds':>7}  every method: measured s (predicted s)")
    with tempfile.TemporaryDirectory() as tmp:
        for name in (c.strip() for c in args.cases.split(",") if c.strip()):
            for rate in (float(r) for r in args.rates.split(",")):
                for pace in (True, False):
                    start = time.perf_counter()
                    report = run(name, rate, 1, pace, Path(tmp))
                    cells = ", ".join(f"{r.method} {r.measured_time_s:.2f} ({r.predicted_time_s:.2f})"
                                      f"{'' if r.verified else ' NOT VERIFIED'}" for r in report.rows)
                    print(f"{name:10} {rate:>6g}  {'yes' if pace else 'no':5}  {time.perf_counter() - start:>7.0f}  "
                          f"{cells}", flush=True)


if __name__ == "__main__":
    main()
