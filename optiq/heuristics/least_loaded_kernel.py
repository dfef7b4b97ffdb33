"""The compiled kernel of :func:`optiq.heuristics.common.least_loaded`: every job's candidates
scanned in place, without the arrays of (path, link) entries and the sort numpy would build
(imported the first time :func:`optiq.heuristics.common.compiled_pays` says so)."""

from __future__ import annotations

import numpy as np

from ..utils.compiled import compiled, interrupts_held

__all__ = ["least_loaded_paths"]


@compiled
def _least_loaded(job_offsets: np.ndarray, offsets: np.ndarray, links: np.ndarray, jobs: np.ndarray,
                  amount: np.ndarray, load: np.ndarray, cap: np.ndarray, best: np.ndarray,
                  worst: np.ndarray) -> None:  # pragma: no cover - compiled
    for i in range(jobs.size):
        j = jobs[i]
        chosen, chosen_worst, chosen_hops = -1, np.inf, 0
        for p in range(job_offsets[j], job_offsets[j + 1]):
            busiest = -np.inf
            for e in range(offsets[p], offsets[p + 1]):
                link = links[e]
                t = (load[link] + amount[i]) / cap[link]
                if t > busiest:
                    busiest = t
            hops = offsets[p + 1] - offsets[p]
            # the least busiest link; ties: fewer hops, then the earlier path
            if chosen < 0 or busiest < chosen_worst or (busiest == chosen_worst and hops < chosen_hops):
                chosen, chosen_worst, chosen_hops = p, busiest, hops
        best[i] = chosen
        worst[i] = chosen_worst


def least_loaded_paths(job_offsets: np.ndarray, offsets: np.ndarray, links: np.ndarray, jobs: np.ndarray,
                       amount: np.ndarray, load: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per job of ``jobs`` (each with a candidate), the candidate path (CSR ``job_offsets``,
    ``offsets``, ``links``) whose busiest link, in time, is least with ``amount[i]`` more bytes
    on each of its links, and that time; ties to fewer hops, then the earlier path."""
    best = np.empty(jobs.size, dtype=np.int64)
    worst = np.empty(jobs.size, dtype=np.float64)
    with interrupts_held():
        _least_loaded(*(np.asarray(a, dtype=np.int64) for a in (job_offsets, offsets, links, jobs)),
                      *(np.ascontiguousarray(a, dtype=np.float64) for a in (amount, load, cap)), best, worst)
    return best, worst
