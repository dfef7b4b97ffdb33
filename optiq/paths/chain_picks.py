"""The compiled kernel of :meth:`optiq.paths.chains.ChainSpace.spread`'s sliced rounds: every
job's cheapest intermediate of its slice, without the (jobs x slice) matrix of costs numpy
would build and scan (imported when a sliced round first runs)."""

from __future__ import annotations

import numpy as np

from ..utils.compiled import compiled, interrupts_held

__all__ = ["cheapest_columns"]


@compiled
def _cheapest(out_c: np.ndarray, into_c: np.ndarray, src: np.ndarray, dst: np.ndarray, skip_a: np.ndarray,
              skip_b: np.ndarray, best: np.ndarray, fine: np.ndarray) -> None:  # pragma: no cover - compiled
    width = out_c.shape[1]
    for i in range(src.size):
        a, b = out_c[src[i]], into_c[dst[i]]
        least, at = np.inf, 0
        for w in range(width):
            if w == skip_a[i] or w == skip_b[i]:
                continue
            cost = a[w] + b[w]
            if cost < least:  # the first of equal costs, as numpy's argmin
                least, at = cost, w
        best[i] = at
        fine[i] = least < np.inf


def cheapest_columns(out_c: np.ndarray, into_c: np.ndarray, src: np.ndarray, dst: np.ndarray,
                     skip_a: np.ndarray, skip_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per job ``i``, the column ``w`` of least ``out_c[src[i], w] + into_c[dst[i], w]`` other
    than ``skip_a[i]`` and ``skip_b[i]`` (-1: none), the first of equal ones, and whether it is
    finite: ``argmin`` of the job's row of costs with those columns set to infinity.

    Examples
    --------
    >>> out_c = np.array([[1.0, 2.0, 0.5]]); into_c = np.array([[1.0, 0.0, 1.0]])
    >>> cheapest_columns(out_c, into_c, np.array([0, 0]), np.array([0, 0]), np.array([-1, 2]), np.array([-1, 1]))
    (array([2, 0]), array([ True,  True]))
    """
    best = np.empty(src.size, dtype=np.int64)
    fine = np.empty(src.size, dtype=np.bool_)
    with interrupts_held():
        _cheapest(np.ascontiguousarray(out_c, dtype=np.float64), np.ascontiguousarray(into_c, dtype=np.float64),
                  *(np.asarray(a, dtype=np.int64) for a in (src, dst, skip_a, skip_b)), best, fine)
    return best, fine
