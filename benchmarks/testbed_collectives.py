"""The allreduce cost model on an emulated switch, as the seed evaluates it.

    python benchmarks/testbed_collectives.py
        [--cases 12:4MiB,12:4MiB@10Mb/s,15:4MiB@10Mb/s,12:32KiB,12:4MiB:TREE,12:4MiB:TAPERED]
        [--rate 20Mb/s] [--size 256KiB] [--repeat 3] [--jobs 1] [--figure breakdown.png]

Each case ``RANKS:QUEUE[:SPEC][@RATE]`` runs ``optiq testbed collectives --ranks RANKS --queue QUEUE
[-t SPEC]``: a star of RANKS hosts (or the network SPEC; ``TREE`` is a two-level tree,
``cluster:hosts=12,edges=2,cores=1``: two switches of 6 hosts joined through a third by one
cable each; ``TAPERED`` the same with those two cables at a quarter of the hosts' rate, a
network where ring, which crosses them in every round, is no longer the fastest) with links
at ``--rate`` and tail-drop queues of QUEUE bytes, both models fitted there from the
micro-benchmarks and every algorithm measured (``--size`` bytes per rank, medians of
``--repeat``) beside their predictions, with the packets the queues dropped (``@RATE``: the
links at RATE instead; 15 ranks run at 10 Mbit/s by default, where the 2 cores that carry
every rank's TCP leave the links to set the time, and 12 at both rates). Printed: each
case's table and break-down, then one line per case: both models' mean and largest error,
the model's choice against the fastest measured. ``--figure`` draws the seed's break-down:
per algorithm, the measured time (the calculation, timed apart, and the rest) beside both
models' terms. Needs root.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from children import run_cleanly

OPTIQ = str(Path(sys.executable).parent / "optiq")  # the command installed beside this Python
TREE = "cluster:hosts=12,edges=2,cores=1"
#: The same tree with its two uplinks at a quarter of the hosts' rate (an oversubscribed tree).
TAPERED = "cluster:hosts=12,edges=2,cores=1,core_bw=2.5Gb/s"
NETWORKS = {"TREE": ("tree", TREE), "TAPERED": ("tapered", TAPERED)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="12:4MiB,12:4MiB@10Mb/s,15:4MiB@10Mb/s,12:32KiB,12:4MiB:TREE,12:4MiB:TAPERED",
                    help="RANKS:QUEUE[:SPEC][@RATE], comma-separated (SPEC TREE: the two-level tree, TAPERED: "
                         "it with uplinks at a quarter of the hosts' rate)")
    ap.add_argument("--rate", default="20Mb/s")
    ap.add_argument("--size", default="256KiB")
    ap.add_argument("--repeat", default="3")
    ap.add_argument("--jobs", default="1", help="MPI jobs per algorithm (optiq testbed collectives --jobs)")
    ap.add_argument("--figure", metavar="PNG", help="also draw the break-down of every case")
    args = ap.parse_args()
    summary, reports = [], []
    with tempfile.TemporaryDirectory(prefix="optiq-tbc-") as tmp:
        for case in args.cases.split(","):
            case, _, rate = case.partition("@")
            rate = rate or args.rate
            ranks, queue, *spec = case.split(":", 2)
            label, named = NETWORKS.get(spec[0], ("tree", spec[0])) if spec else ("star", "")
            network = ["-t", named] if spec else []
            out = Path(tmp) / f"{ranks}-{queue}-{len(summary)}.json"
            run = run_cleanly([OPTIQ, "testbed", "collectives", "--ranks", ranks, "--queue", queue, *network,
                               "--rate", rate, "--size", args.size, "--repeat", args.repeat, "--jobs", args.jobs, "--json", str(out),
                               "-q"])
            if run.returncode != 0:
                raise SystemExit(f"case {case} failed:\n{run.stderr[-2000:]}")
            print(f"== {ranks} ranks, queues of {queue}, links at {rate}" + (f", {network[1]}" if network else ", a star"))
            print(run.stdout.strip(), flush=True)
            r = json.loads(out.read_text())
            print(breakdown(r), flush=True)
            reports.append((f"{ranks} ranks, {label}, {rate}, queue {queue}", r))
            summary.append(f"{ranks:>5} {queue:>7} {label:>7} {rate:>8} {r['model_error_mean']:8.1%} "
                           f"{r['model_error_max']:8.1%} {r['abg_error_mean']:8.1%} {r['abg_error_max']:8.1%} "
                           f"{r['model_choice']:>10} {r['abg_choice']:>10} {r['measured_best']:>10} {r['drops']:7,}")
    print("== summary: relative errors of the contention model and of alpha-beta-gamma, the algorithm each picks, "
          "the fastest measured")
    print(f"{'ranks':>5} {'queue':>7} {'net':>7} {'rate':>8} {'model':>8} {'max':>8} {'abg':>8} {'max':>8} {'model':>10} "
          f"{'abg':>10} {'measured':>10} {'drops':>7}")
    print("\n".join(summary))
    if args.figure:
        draw(reports, args.figure)
        print(f"wrote {args.figure}")


def bars(row: dict) -> list[dict[str, float]]:
    """One algorithm's three bars of the seed's break-down, in seconds: measured (the
    calculation timed apart, the rest communication), the contention model and
    alpha-beta-gamma (their terms; calculation = reduction + memory)."""
    model, abg = row["terms"].get("contention", {}), row["terms"].get("abg", {})
    return [{"calculation": row["compute_s"], "communication (measured)": row["measured_s"] - row["compute_s"]},
            {"calculation": model.get("reduction", 0) + model.get("memory", 0), "latency": model.get("latency", 0),
             "bandwidth": model.get("bandwidth", 0), "contention": model.get("contention", 0)},
            {"calculation": abg.get("reduction", 0) + abg.get("memory", 0), "latency": abg.get("latency", 0),
             "bandwidth": abg.get("bandwidth", 0)}]


def breakdown(report: dict) -> str:
    """The seed's break-down as a table (:func:`bars`), in ms."""
    lines = ["break-down, ms: measured (calculation + communication) | model: latency, bandwidth, calculation "
             "(reduction + memory), contention | alpha-beta-gamma: latency, bandwidth, calculation",
             f"{'algorithm':10} {'measured':>8} {'calc':>6} {'comm':>8} | {'model':>8} {'lat':>6} {'bw':>8} "
             f"{'calc':>6} {'cont':>6} | {'abg':>8} {'lat':>6} {'bw':>8} {'calc':>6}"]
    for row in sorted(report["rows"], key=lambda r: r["measured_s"]):
        measured, model, abg = ({k: v * 1e3 for k, v in bar.items()} for bar in bars(row))
        lines.append(f"{row['algorithm']:10} {row['measured_s'] * 1e3:8.1f} {measured['calculation']:6.1f} "
                     f"{measured['communication (measured)']:8.1f} | {row['model_s'] * 1e3:8.1f} "
                     f"{model['latency']:6.1f} {model['bandwidth']:8.1f} {model['calculation']:6.1f} "
                     f"{model['contention']:6.1f} | {row['abg_s'] * 1e3:8.1f} {abg['latency']:6.1f} "
                     f"{abg['bandwidth']:8.1f} {abg['calculation']:6.1f}")
    return "\n".join(lines)


#: The parts of a bar, bottom to top, and their colours.
PARTS = {"calculation": "#4c72b0", "latency": "#dd8452", "bandwidth": "#55a868", "contention": "#c44e52",
         "communication (measured)": "#8c8c8c"}


def draw(reports: list[tuple[str, dict]], path: str) -> None:
    """The seed's break-down: for every algorithm its three :func:`bars`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(reports), 1, figsize=(11, 3.2 * len(reports)), squeeze=False)
    for ax, (title, report) in zip(axes[:, 0], reports):
        rows = sorted(report["rows"], key=lambda r: r["measured_s"])
        for i, row in enumerate(rows):
            for j, parts in enumerate(bars(row)):
                x, bottom = i * 4 + j, 0.0
                for name, colour in PARTS.items():
                    value = parts.get(name, 0.0) * 1e3
                    if value > 0:
                        ax.bar(x, value, bottom=bottom, color=colour, width=0.9)
                        bottom += value
                ax.text(x, bottom, "MCA"[j], ha="center", va="bottom", fontsize=7)
        ax.set_xticks([i * 4 + 1 for i in range(len(rows))], [r["algorithm"] for r in rows])
        ax.set_ylabel("ms")
        ax.set_title(f"{title}: M measured, C contention model, A alpha-beta-gamma", fontsize=9)
    from matplotlib.patches import Patch

    axes[0, 0].legend(handles=[Patch(color=c, label=n) for n, c in PARTS.items()], fontsize=7, ncol=5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the testbed has removed itself (children.run_cleanly)
        raise SystemExit("interrupted") from None
