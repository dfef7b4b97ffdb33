"""How the studies draw: axis labels with units, readable ticks, titles that say what is shown.

Every study's figure is drawn by a function ``plot(rows, ax)`` built here. The title is
made from the rows that were run (the machine, the bytes, how many seeds), so a quick run
says it is one. An axis of sizes in bytes is labelled in KiB/MiB; an axis of a few
distinct values (seeds, positions, machine sizes) gets a tick at each value and nothing
between; seeds, which have no order, are drawn as points, not joined by lines; a study
that ran at a single point is drawn as bars by method.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["LABELS", "methods_plot", "bytes_label", "method_bars", "set_title"]

#: Axis label of every column a figure draws.
LABELS = {
    "throughput_GBps": "throughput (GB/s)",
    "time_over_bound": "completion time / lower bound",
    "nodes": "nodes",
    "message_bytes": "message size",
    "chunk_bytes": "chunk size",
    "per_source": "destinations per source",
    "position": "position of the destination block",
    "seed": "seed of the random draw",
    "k": "candidate paths per pair",
    "maxload": "maxload (paths per link)",
    "efficiency": "fraction of the link rate",
    "coupling": "coupling exchange",
}

#: Columns whose values name draws, not amounts: drawn as points, not joined.
UNORDERED = {"seed"}
#: Columns of byte counts: ticks in B, KiB, MiB.
BYTE_COLUMNS = {"message_bytes", "chunk_bytes"}


def bytes_label(n: float) -> str:
    """``4096`` -> ``'4 KiB'``; whole multiples of 1,024 get the largest unit that divides them.

    Examples
    --------
    >>> bytes_label(4096), bytes_label(1 << 20), bytes_label(8192 * 3), bytes_label(1000)
    ('4 KiB', '1 MiB', '24 KiB', '1000 B')
    """
    n = int(n)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def set_title(ax: Any, text: str) -> None:
    """``text`` as the axis' title, wrapped to lines of at most 70 characters."""
    ax.set_title(textwrap.fill(text, 70), fontsize=9)


def _ticks(ax: Any, column: str, values: Sequence[float]) -> None:
    """A tick at every value drawn, labelled in the column's unit."""
    values = sorted(set(values))
    labels = [bytes_label(v) if column in BYTE_COLUMNS else f"{v:g}" for v in values]
    ax.set_xticks(values, labels)
    ax.minorticks_off()


def method_bars(rows: list[dict], ax: Any, group: str, y: str, methods: Sequence[str]) -> None:
    """Bars of ``y`` per method, one group of bars per value of ``group``."""
    groups = list(dict.fromkeys(r[group] for r in rows))
    drawn = [m for m in methods if any(r["method"] == m for r in rows)]
    x = np.arange(len(groups))
    width = 0.8 / max(len(drawn), 1)
    for i, method in enumerate(drawn):
        vals = [next((r[y] for r in rows if r[group] == g and r["method"] == method), np.nan) for g in groups]
        ax.bar(x + (i - (len(drawn) - 1) / 2) * width, vals, width=width, label=method)
    ax.set_xticks(x, [bytes_label(g) if group in BYTE_COLUMNS else str(g) for g in groups])
    ax.set_xlabel(LABELS.get(group, group))
    ax.set_ylabel(LABELS.get(y, y))
    ax.legend(fontsize=8)


def methods_plot(x: str, y: str, methods: Sequence[str], *, title: Callable[[list[dict]], str],
                 log: bool = False) -> Callable[[list[dict], Any], None]:
    """A figure of ``y`` against ``x``, one curve per method.

    Its title is ``title(rows)`` (what was run: the machine, the pattern) followed by what
    is drawn: ``y`` by ``x``, or ``y`` at the one value of ``x`` a study ran, drawn as bars
    by method. ``log`` puts ``x`` on a base-2 scale (sizes that double); an unordered ``x``
    (a seed) is drawn as points only.
    """
    def plot(rows: list[dict], ax: Any) -> None:
        xs = sorted({r[x] for r in rows})
        what, across = LABELS.get(y, y), LABELS.get(x, x)
        if len(xs) == 1:
            at = bytes_label(xs[0]) if x in BYTE_COLUMNS else f"{xs[0]:g}"
            set_title(ax, f"{title(rows)}: {what}, {across} {at}")
            drawn = [m for m in methods if any(r["method"] == m for r in rows)]
            ax.bar(drawn, [next(r[y] for r in rows if r["method"] == m) for m in drawn],
                   color=[f"C{i}" for i in range(len(drawn))])
            ax.set_xlabel("method")
            ax.set_ylabel(what)
            return
        set_title(ax, f"{title(rows)}: {what} by {across}")
        style = dict(marker="o", linestyle="none" if x in UNORDERED else "-")
        for m in methods:
            pts = sorted((r[x], r[y]) for r in rows if r["method"] == m)
            if pts:
                ax.plot(*zip(*pts), label=m, **style)
        if log:
            ax.set_xscale("log", base=2)
        _ticks(ax, x, xs)
        ax.set_xlabel(across)
        ax.set_ylabel(what)
        ax.legend(fontsize=8)
    return plot
