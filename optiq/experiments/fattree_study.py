"""The fat-tree routing study of seed 001: node selection × process placement × routing.

128 ranks of an application run on 16 of the 20 hosts of a two-level fat-tree (8 ranks a
host). Node selection is *linear* (hosts 0..15) or *random* (16 of 20, seeded); process
placement is *block* (rank ``i`` on the ``i // 8``-th selected host) or *cyclic* (on the
``i % 16``-th). The ranks' traffic is summed per host pair and routed by D-mod-K or by
dynamic routing (heaviest pair first, least-loaded path). The result is the maximum link
load, normalised to linear / block / D-mod-K, as in the paper's figures.

Traffic matrices follow the applications' known structure:

- NAS CG: a 2-D process grid of 8 rows × 16 columns; every rank exchanges with the
  ranks ``r xor 2^k`` of its row (the recursive-doubling sums, ``k = 0..3``) and with
  its transpose partner, equal volumes.
- MILC: a 4-D lattice of 4×4×4×2 ranks; every rank exchanges halos with its ±1
  neighbours in every dimension (periodic), equal volumes.

``optiq experiment fattree --traffic FILE`` studies a measured matrix instead (see
:func:`read_traffic_matrix`).
"""

from __future__ import annotations

import numpy as np

from pathlib import Path

from ..errors import WorkloadError
from ..planner import make_plan
from ..topology import cluster
from ..workloads import Demands
from .registry import register

RANKS, CORES, HOSTS_USED = 128, 8, 16


def nas_cg_traffic(ranks: int = RANKS, rows: int = 8, volume: float = 1.0) -> np.ndarray:
    """Rank-to-rank bytes of a NAS CG-like run (see the module docstring)."""
    cols = ranks // rows
    t = np.zeros((ranks, ranks))
    for r in range(ranks):
        row, col = divmod(r, cols)
        for k in range(int(np.log2(cols))):
            t[r, row * cols + (col ^ (1 << k))] += volume
        partner = (col % rows) * cols + (row + rows * (col // rows))  # transpose exchange
        if partner != r and partner < ranks:
            t[r, partner] += volume
    return t


def milc_traffic(shape=(4, 4, 4, 2), volume: float = 1.0) -> np.ndarray:
    """Rank-to-rank bytes of a MILC-like 4-D halo exchange (see the module docstring)."""
    n = int(np.prod(shape))
    t = np.zeros((n, n))
    coords = np.array(np.unravel_index(np.arange(n), shape)).T
    for d, size in enumerate(shape):
        for step in (-1, 1):
            nb = coords.copy()
            nb[:, d] = (nb[:, d] + step) % size
            other = np.ravel_multi_index(nb.T, shape)
            np.add.at(t, (np.arange(n), other), volume)
    np.fill_diagonal(t, 0.0)
    return t


def read_traffic_matrix(path: str | Path) -> np.ndarray:
    """Read a rank-to-rank traffic matrix: ``N`` lines of ``N`` numbers (spaces or commas).

    Entry ``[i, j]`` is what rank ``i`` sends rank ``j`` (any unit; the study normalises);
    ``#`` starts a comment. ``N`` may be at most 128 (16 hosts × 8 ranks).

    Raises
    ------
    WorkloadError
        For an unreadable file, a matrix that is not square, a negative, non-finite or
        all-zero entry set, or more than 128 ranks, naming the file.
    """
    name = str(path)
    try:
        text = Path(path).read_text()
        rows = [line.split("#")[0].replace(",", " ").split() for line in text.splitlines()]
        rows = [[float(x) for x in r] for r in rows if r]
    except (OSError, ValueError) as exc:
        raise WorkloadError(f"cannot read traffic matrix {name!r}: {exc}") from None
    lengths = sorted({len(r) for r in rows})
    if len(rows) < 2 or lengths != [len(rows)]:
        raise WorkloadError(f"traffic matrix {name!r} must be N lines of N numbers, N >= 2; got "
                            f"{len(rows)} lines of {'/'.join(map(str, lengths)) or 0} numbers")
    matrix = np.array(rows)
    if matrix.shape[0] > RANKS:
        raise WorkloadError(f"traffic matrix {name!r} has {matrix.shape[0]} ranks; the study places at most "
                            f"{RANKS} ({HOSTS_USED} hosts x {CORES})")
    bad = np.argwhere(~np.isfinite(matrix) | (matrix < 0))
    if bad.size:
        i, j = bad[0]
        raise WorkloadError(f"traffic matrix {name!r}: entry [{i}, {j}] = {matrix[i, j]} is not a finite number >= 0")
    off = matrix.copy()
    np.fill_diagonal(off, 0.0)
    if not off.any():
        raise WorkloadError(f"traffic matrix {name!r} has no traffic between different ranks")
    return matrix


def host_demands(traffic: np.ndarray, selection: str, placement: str, seed: int = 0,
                 unit_bytes: int = 2**20) -> Demands:
    """Sum rank traffic per host pair for a node selection and process placement."""
    hosts = np.arange(HOSTS_USED) if selection == "linear" else \
        np.sort(np.random.default_rng(seed).choice(20, HOSTS_USED, replace=False))
    ranks = np.arange(traffic.shape[0])
    slot = ranks // CORES if placement == "block" else ranks % HOSTS_USED
    host_of = hosts[slot]
    matrix = np.zeros((20, 20))
    np.add.at(matrix, (host_of[:, None].repeat(len(ranks), 1), host_of[None, :].repeat(len(ranks), 0)), traffic)
    np.fill_diagonal(matrix, 0.0)
    src, dst = np.nonzero(matrix)
    return Demands(src, dst, np.rint(matrix[src, dst] * unit_bytes).astype(np.int64))


def _plot(rows, ax):
    labels = sorted({(r["app"], r["selection"], r["placement"]) for r in rows})
    x = np.arange(len(labels))
    for i, routing in enumerate(("dmodk", "dynamic")):
        vals = [next(r["normalised_max_load"] for r in rows if (r["app"], r["selection"], r["placement"]) == lab
                     and r["routing"] == routing) for lab in labels]
        ax.bar(x + (i - 0.5) * 0.4, vals, width=0.4, label=routing)
    ax.set_xticks(x, [f"{a}\n{s}/{p}" for a, s, p in labels], fontsize=7)
    ax.set_ylabel("max link load / linear-block-D-mod-K")
    ax.legend()


@register("fattree", "20-host fat-tree: max link load by node selection, placement and routing (seed 001)",
          _plot)
def fattree_study(quick: bool, say, traffic: str | None = None) -> list[dict]:
    topo = cluster(20, 4, 2)
    apps = [("CG", nas_cg_traffic()), ("MILC", milc_traffic())] if traffic is None else \
        [(Path(traffic).stem, read_traffic_matrix(traffic))]
    rows = []
    for app, traffic in apps:
        base = None
        for selection in ("linear", "random"):
            for placement in ("block", "cyclic"):
                demands = host_demands(traffic, selection, placement)
                for routing, method in (("dmodk", "default"), ("dynamic", "dynamic")):
                    say(f"{app} {selection}/{placement} {routing}")
                    plan = make_plan(topo, demands, method, k=4 if quick else 8)
                    load = float(plan.link_bytes.max())
                    base = load if base is None else base
                    rows.append({"app": app, "selection": selection, "placement": placement, "routing": routing,
                                 "max_link_bytes": load, "normalised_max_load": load / base})
    return rows
