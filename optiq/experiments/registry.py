"""The studies ``optiq experiment`` runs: each makes a table (CSV) and a figure (PNG)."""

from __future__ import annotations

import csv
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import OptiqError

if TYPE_CHECKING:
    from typing import Any

__all__ = ["Study", "STUDIES", "register", "run_study"]


@dataclass(frozen=True)
class Study:
    """A named experiment.

    Attributes
    ----------
    name, description : str
    run : callable
        ``run(quick: bool, say, **options) -> list[dict]``: the rows of the results table.
    plot : callable
        ``plot(rows, ax)``: draws the figure on a matplotlib axis, titled by what the rows
        show (:mod:`optiq.experiments.figures`).
    """

    name: str
    description: str
    run: Callable
    plot: Callable


STUDIES: dict[str, Study] = {}


def register(name: str, description: str, plot: Callable) -> Callable[[Callable], Callable]:
    """Decorator: register ``run`` as the study ``name``, drawn by ``plot``."""
    def wrap(run):
        STUDIES[name] = Study(name, description, run, plot)
        return run
    return wrap


def run_study(name: str, out_dir: str | Path, *, quick: bool = False,
              say: Callable[[str], None] | None = None, **options: dict[str, Any]) -> tuple[Path, Path]:
    """Run a study; write ``OUT/NAME.csv`` and ``OUT/NAME.png``.

    ``options`` (such as ``traffic`` of the fat-tree study) go to the study's ``run``.

    Raises
    ------
    OptiqError
        For an unknown study, an option the study does not take, or an output
        directory that cannot be made.
    """
    if name not in STUDIES:
        raise OptiqError(f"unknown experiment {name!r}; optiq experiment --list names them")
    takes = inspect.signature(STUDIES[name].run).parameters
    for option in options:
        if option not in takes:
            raise OptiqError(f"experiment {name!r} takes no --{option} option")
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OptiqError(f"cannot create output directory {str(out)!r}: {exc}") from None
    study = STUDIES[name]
    rows = study.run(quick, say or (lambda msg: None), **options)
    csv_path, png_path = out / f"{name}.csv", out / f"{name}.png"
    with open(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    study.plot(rows, ax)
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    plt.close(fig)
    return csv_path, png_path
