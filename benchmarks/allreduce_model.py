"""Allreduce cost model against measurement: fit on this machine, then predict and measure.

For each rank count: ``mpiexec -n N optiq collectives fit``, then ``optiq collectives bench``
at several sizes with the fitted parameters. Prints measured vs predicted time of every
algorithm under both models, each model's mean and max relative error, and whether each
model picks the algorithm that measured fastest.

    python benchmarks/allreduce_model.py [--ranks 6,8,12] [--sizes 64KiB,1MiB,8MiB] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from optiq.utils.units import parse_size


def mpiexec() -> str:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else "mpiexec"


def optiq_mpi(n: int, *args: str) -> None:
    cmd = [mpiexec(), "-n", str(n), sys.executable, "-m", "optiq", "collectives", *args, "-q"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="6,8,12")
    ap.add_argument("--sizes", default="64KiB,1MiB,8MiB")
    ap.add_argument("--fit-sizes", default="16KiB,128KiB,1MiB")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    ranks = [int(x) for x in args.ranks.split(",")]
    sizes = [parse_size(x) for x in args.sizes.split(",")]
    errors = {"contention": [], "abg": []}
    picks = {"contention": 0, "abg": 0}
    cases = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in ranks:
            params, bench = Path(tmp) / f"p{n}.json", Path(tmp) / f"b{n}.json"
            optiq_mpi(n, "fit", "-o", str(params), "--sizes", args.fit_sizes, "--repeat", str(args.repeat))
            fitted = json.loads(params.read_text())
            print(f"\n== N = {n} ranks ({n} processes on this machine's cores)")
            for model, p in fitted["models"].items():
                print(f"   {model:10} alpha {p['alpha'] * 1e6:8.1f} us  beta {p['beta'] * 1e9:6.3f}  gamma "
                      f"{p['gamma'] * 1e9:6.3f}  delta {p['delta'] * 1e9:6.3f}  epsilon {p['epsilon'] * 1e9:6.3f} "
                      f"ns/B  w {p['threshold']}   fit error mean/max {fitted['fit_error'][model][0]:.1%}/"
                      f"{fitted['fit_error'][model][1]:.1%}")
            optiq_mpi(n, "bench", "--size", ",".join(f"{s}B" for s in sizes), "--params", str(params), "--json", str(bench),
                      "--repeat", str(args.repeat))
            reports = json.loads(bench.read_text())
            for rep in reports if isinstance(reports, list) else [reports]:
                algs = rep["algorithms"]
                print(f"   size {rep['size_bytes']} B (MPI_Allreduce {rep['mpi_allreduce_s'] * 1e3:.3f} ms)")
                print(f"   {'algorithm':10}{'measured':>11}{'contention':>12}{'err':>7}{'abg':>11}{'err':>7}  ok")
                for name, e in algs.items():
                    row = f"   {name:10}{e['time_s'] * 1e3:8.3f} ms"
                    for model in ("contention", "abg"):
                        pred = e["predicted_s"][model]
                        err = pred / e["time_s"] - 1
                        errors[model].append(abs(err))
                        row += f"{pred * 1e3:9.3f} ms{err:+7.0%}"
                    print(row + f"  {'yes' if e['correct'] else 'NO'}")
                fastest = rep["fastest"]
                cases += 1
                chosen = {m: min(algs, key=lambda a: algs[a]["predicted_s"][m]) for m in ("contention", "abg")}
                for m in chosen:
                    picks[m] += chosen[m] == fastest
                print(f"   fastest measured: {fastest}; contention model picks {chosen['contention']}, "
                      f"abg picks {chosen['abg']}")
    print("\n== summary over every (N, size, algorithm)")
    for model in ("contention", "abg"):
        e = np.array(errors[model])
        print(f"   {model:10} relative error mean {e.mean():.1%}, max {e.max():.1%}; picked the fastest in "
              f"{picks[model]} of {cases} cases")
    ratio = np.mean(errors["contention"]) / np.mean(errors["abg"])
    print(f"   mean error, contention model / alpha-beta-gamma = {ratio:.2f}")


if __name__ == "__main__":
    main()
