"""Quality-of-service routing classes: class ``i`` gets throughput ``alpha_i * T``, maximise ``T``.

Every job belongs to a class; the shares ``alpha_i`` sum to 1. If class ``i`` moves
``B_i`` bytes at rate ``alpha_i T`` and its jobs finish together, job ``j`` runs at
``alpha_i T D_j / B_i``. Scaling every job's bytes to ``D'_j = D_j * alpha_i * B / B_i``
(``B`` all bytes) turns that into the plain multipath LP: its completion time ``t'`` is
``B / T``. Without QoS (``alpha_i = B_i / B``) nothing changes. So the LP, the Pyomo model
and column generation take these effective sizes and need nothing else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import WorkloadError

if TYPE_CHECKING:
    from .demands import Demands

__all__ = ["QoSClasses", "read_qos"]


@dataclass(frozen=True)
class QoSClasses:
    """Class shares and the class of every job.

    Parameters
    ----------
    shares : dict
        Class name -> share ``alpha`` (positive, summing to 1).
    job_class : sequence of str
        The class of every job.

    Raises
    ------
    WorkloadError
        If a share is not positive, the shares do not sum to 1, or a job names an unknown
        class.

    Examples
    --------
    >>> from optiq.workloads import Demands
    >>> q = QoSClasses({"gold": 0.75, "bronze": 0.25}, ["gold", "bronze"])
    >>> q.effective_sizes(Demands([0, 1], [2, 3], [100, 100])).tolist()
    [150.0, 50.0]
    """

    shares: dict[str, float]
    job_class: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "job_class", tuple(str(c) for c in self.job_class))
        for name, alpha in self.shares.items():
            if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0:
                raise WorkloadError(f"QoS class {name!r} must have a positive share, got {alpha!r}")
        total = sum(self.shares.values())
        if abs(total - 1.0) > 1e-6:
            raise WorkloadError(f"QoS shares must sum to 1, they sum to {total:g}")
        unknown = sorted(set(self.job_class) - set(self.shares))
        if unknown:
            raise WorkloadError(f"job class {unknown[0]!r} has no share (classes: {', '.join(self.shares)})")
        missing = sorted(set(self.shares) - set(self.job_class))
        if missing:
            raise WorkloadError(f"QoS class {missing[0]!r} has no jobs")

    def class_index(self) -> tuple[list[str], np.ndarray]:
        names = list(self.shares)
        return names, np.array([names.index(c) for c in self.job_class], dtype=np.int64)

    def effective_sizes(self, demands: Demands) -> np.ndarray:
        """``D_j * alpha_i * B / B_i`` for every job (see the module docstring)."""
        if len(self.job_class) != demands.num_jobs:
            raise WorkloadError(f"QoS gives classes for {len(self.job_class)} jobs, the demands have "
                                f"{demands.num_jobs}")
        names, idx = self.class_index()
        nbytes = demands.nbytes.astype(float)
        class_bytes = np.bincount(idx, weights=nbytes, minlength=len(names))
        alpha = np.array([self.shares[n] for n in names])
        return np.asarray(nbytes * alpha[idx] * nbytes.sum() / class_bytes[idx], dtype=float)

    def class_throughputs(self, demands: Demands, lp_time_s: float) -> dict[str, float]:
        """Bytes/s of every class when the QoS LP's completion time is ``lp_time_s`` (``T = B / t'``)."""
        total = float(demands.nbytes.sum())
        return {name: alpha * total / lp_time_s for name, alpha in self.shares.items()}


def read_qos(path: str | Path, num_jobs: int) -> QoSClasses:
    """Read ``{"shares": {"gold": 0.7, ...}, "classes": ["gold", ...]}`` (one class per job).

    Raises
    ------
    WorkloadError
        If the file is missing, not JSON, or inconsistent.
    """
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"QoS file {str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"QoS file {str(path)!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("shares"), dict) or \
            not isinstance(data.get("classes"), list):
        raise WorkloadError(f"QoS file {str(path)!r} needs \"shares\" (class -> share) and \"classes\" (one per job)")
    if len(data["classes"]) != num_jobs:
        raise WorkloadError(f"QoS file {str(path)!r} names {len(data['classes'])} classes for {num_jobs} jobs")
    return QoSClasses(data["shares"], data["classes"])
