"""Least-squares fit of the allreduce cost model to micro-benchmark timings.

Four micro-benchmarks pin the five parameters down (``optiq collectives fit`` runs them):

=============  ==============================================  =================================
kind           what is timed                                    its counts (one step)
=============  ==============================================  =================================
``p2p``        ranks exchange ``m`` bytes in pairs, both ways   1 round, ``m`` bytes sent
``fullmesh``   groups of ``f + 1`` ranks, each sending ``m``    1 round, ``f m`` bytes sent,
               bytes to every other member at once (fan-in      fan-in ``f`` of ``m``-byte messages,
               ``f``), then summing the ``f + 1`` blocks        ``f m`` reduced, ``(f+2) m`` memory
``reduce``     sum of ``k`` local arrays of ``m`` bytes         ``(k-1) m`` reduced, ``(k+1) m`` memory
``copy``       copy of ``m`` bytes                              ``2 m`` memory
=============  ==============================================  =================================

Both models are fitted by non-negative least squares on relative errors (each row is
divided by its measured time, so small and large timings weigh alike). The contention
model also chooses the threshold ``w`` (the fan-in a receiver absorbs) with the smallest
residual among ``0 .. max fan-in``; the alpha-beta-gamma model has only the columns
``rounds, bytes sent, bytes reduced`` and is fitted to (and judged on) the timings those
can explain, i.e. all but ``copy``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import OptiqError
from .cost import AllreduceParams, Routes, Step, feature_row, incast_volume, pairs_within

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Sample", "FitResult", "fit_allreduce_model", "SAMPLE_KINDS"]

SAMPLE_KINDS = ("p2p", "fullmesh", "reduce", "copy")


@dataclass(frozen=True)
class Sample:
    """One timing: ``kind`` (see the module docstring), ``count`` (fan-in ``f`` for
    ``fullmesh``, operands ``k`` for ``reduce``, else 1), ``nbytes`` (``m``) and ``time_s``."""

    kind: str
    count: int
    nbytes: int
    time_s: float

    def __post_init__(self) -> None:
        if self.kind not in SAMPLE_KINDS:
            raise OptiqError(f"unknown micro-benchmark kind {self.kind!r}; expected one of {', '.join(SAMPLE_KINDS)}")
        if self.count < 1 or self.nbytes < 0 or not self.time_s > 0:
            raise OptiqError(f"a timing needs count >= 1, nbytes >= 0 and a positive time: {self}")

    def steps(self) -> list[Step]:
        m, n = float(self.nbytes), self.count
        if self.kind == "p2p":
            return [Step(1, m, 0.0, 0.0, 1, m)]
        if self.kind == "fullmesh":
            return [Step(1, n * m, n * m, (n + 2) * m, n, m)]
        if self.kind == "reduce":
            return [Step(0, 0.0, (n - 1) * m, (n + 1) * m, 0, 0.0)]
        return [Step(0, 0.0, 0.0, 2 * m, 0, 0.0)]


    def routed_steps(self, routes: Routes | None) -> list[Step]:
        """:meth:`steps`, the step's bytes those of its busiest link when every rank runs the
        micro-benchmark at once, as :func:`~optiq.collectives.bench.run_microbenchmarks` runs it
        (pairs ``r, r xor 1``; every full group of ``f + 1`` consecutive ranks)."""
        steps = self.steps()
        if routes is None or self.kind not in ("p2p", "fullmesh"):
            return steps
        N, m = routes.ranks, float(self.nbytes)
        if self.kind == "p2p":
            src = np.arange(N)
            src = src[(src ^ 1) < N]
            busiest = routes.busiest(src, src ^ 1, np.full(src.size, m))
        else:
            size = self.count + 1
            busiest = routes.busiest(*pairs_within([list(range(g * size, (g + 1) * size)) for g in range(N // size)],
                                                    m))
        return [replace(steps[0], bytes_sent=busiest)]


@dataclass(frozen=True)
class FitResult:
    """Fitted parameters of both models and their relative errors on the samples."""

    contention: AllreduceParams
    abg: AllreduceParams
    contention_error: tuple[float, float]   # mean, max relative error
    abg_error: tuple[float, float]
    samples: int


def _nnls_relative(X: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from scipy.optimize import nnls

    scale = np.where(X.max(axis=0) > 0, X.max(axis=0), 1.0)  # columns to O(1) for nnls
    coef, _ = nnls((X / scale) / t[:, None], np.ones_like(t))
    coef = coef / scale
    return coef, np.abs(X @ coef / t - 1.0)


def fit_allreduce_model(samples: Sequence[Sample], routes: Routes | None = None) -> FitResult:
    """Fit both models to ``samples`` (see the module docstring); with ``routes`` (where the
    ranks that took them are on the network), the contention model counts each timing's bytes
    on its busiest link (:meth:`Sample.routed_steps`), as its predictions do. The
    alpha-beta-gamma model stays the classic one, blind to the network.

    Raises
    ------
    OptiqError
        If a kind of micro-benchmark is missing (then a parameter is not determined).

    Examples
    --------
    Timings made from known parameters are fitted back to them.

    >>> true = AllreduceParams(2e-6, 1e-9, 3e-10, 2e-10, 5e-10, threshold=2)
    >>> from optiq.collectives.cost import step_terms
    >>> def time(kind, count, m):
    ...     return sum(step_terms(s, true).total for s in Sample(kind, count, m, 1.0).steps())
    >>> samples = [Sample(k, c, m, time(k, c, m)) for k, cs in
    ...            (("p2p", [1]), ("fullmesh", [1, 2, 3, 5, 7]), ("reduce", [2, 4]), ("copy", [1]))
    ...            for c in cs for m in (1024, 65536, 2**20)]
    >>> fit = fit_allreduce_model(samples)
    >>> fit.contention.threshold, round(fit.contention.epsilon / 5e-10, 4), fit.contention_error[1] < 1e-9
    (2, 1.0, True)
    """
    samples = list(samples)
    kinds = {s.kind for s in samples}
    missing = [k for k in SAMPLE_KINDS if k not in kinds]
    if missing:
        raise OptiqError(f"fitting needs every micro-benchmark kind; missing {', '.join(missing)}")
    steps = [s.routed_steps(routes) for s in samples]
    base = np.array([feature_row(st) for st in steps])
    plain = base if routes is None else np.array([feature_row(s.steps()) for s in samples])
    t = np.array([s.time_s for s in samples])
    best: tuple[float, int, np.ndarray, np.ndarray] | None = None
    for w in range(0, max(s.fan_in for st in steps for s in st) + 1):
        X = np.column_stack([base, [incast_volume(st, w) for st in steps]])
        coef, err = _nnls_relative(X, t)
        if best is None or float(err @ err) < best[0] - 1e-15:
            best = (float(err @ err), w, coef, err)
    assert best is not None
    _, w, coef, err = best
    contention = AllreduceParams(*map(float, coef), threshold=w)  # type: ignore[arg-type, misc]
    explained = plain[:, :3].any(axis=1)  # the copy timings have no alpha-beta-gamma term
    coef3, err3 = _nnls_relative(plain[explained, :3], t[explained])
    abg = AllreduceParams(*map(float, coef3))  # type: ignore[arg-type]
    return FitResult(contention, abg, (float(err.mean()), float(err.max())), (float(err3.mean()), float(err3.max())),
                     len(samples))
