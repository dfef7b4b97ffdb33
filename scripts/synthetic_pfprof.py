"""Write a synthetic PFProf trace (one JSON file per rank) of a modelled application.

    python scripts/synthetic_pfprof.py cg trace_dir/            # 128-rank CG-like exchange
    python scripts/synthetic_pfprof.py milc trace.tgz --volume 4MiB

The files follow PFProf's per-rank format (rank, n_procs, tx_bytes, tx_messages, rx_bytes,
rx_messages), so the trace can be planned like a measured one:
``optiq plan -t fattree:k=8 --traffic trace.tgz --ranks-per-node 8 -m opt -o plan.json``.
"""

from __future__ import annotations

import argparse

from optiq.utils.units import parse_size
from optiq.workloads.traffic import milc_traffic, nas_cg_traffic, write_pfprof


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("app", choices=("cg", "milc"))
    ap.add_argument("out", help="a directory, or a .tar.gz/.tgz file")
    ap.add_argument("--ranks", type=int, default=128, help="cg: ranks (a multiple of --rows; default 128)")
    ap.add_argument("--rows", type=int, default=8, help="cg: rows of the process grid (default 8)")
    ap.add_argument("--volume", default="1MiB", help="bytes per exchange (default 1MiB)")
    args = ap.parse_args()
    volume = parse_size(args.volume)
    traffic = nas_cg_traffic(args.ranks, args.rows, volume) if args.app == "cg" else milc_traffic(volume=volume)
    path = write_pfprof(traffic, args.out)
    print(f"wrote {path}: {traffic.shape[0]} ranks, {int(traffic.sum()):,} bytes")


if __name__ == "__main__":
    main()
