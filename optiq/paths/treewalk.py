"""Walk many jobs back through their shortest-path trees at once, one vectorised step per hop."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..errors import PathError

__all__ = ["walk_back"]


def walk_back(pred: np.ndarray, rows: np.ndarray, cur: np.ndarray, home: np.ndarray, jobs: np.ndarray,
              sources: np.ndarray, targets: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Step every walk from its target towards its tree's root, all walks in one step per hop.

    Walk ``i`` follows row ``rows[i]`` of the predecessor table ``pred`` from node
    ``cur[i]`` until it reaches ``home[i]``; ``cur`` is updated in place. Each step yields
    the walks still going, their predecessor nodes and their current nodes (the hop
    ``prev -> here`` of each), so the caller records the links in whatever form it keeps.

    Raises
    ------
    PathError
        When a walk meets a node without a predecessor: ``targets[jobs[i]]`` cannot be
        reached from ``sources[jobs[i]]``.

    Examples
    --------
    >>> pred = np.array([[-9999, 0, 1]])          # the tree 0 -> 1 -> 2
    >>> cur = np.array([2])
    >>> [(prev.tolist(), here.tolist()) for _, prev, here in walk_back(pred, np.array([0]), cur, np.array([0]),
    ...                                                                   np.array([0]), [0], [2])]
    [([1], [2]), ([0], [1])]
    """
    live = np.flatnonzero(cur != home)
    while live.size:
        here = cur[live]
        prev = pred[rows[live], here]
        if (prev < 0).any():
            j = jobs[live[prev < 0][0]]
            raise PathError(f"node {targets[j]} cannot be reached from node {sources[j]}")
        yield live, prev, here
        cur[live] = prev
        live = live[prev != home[live]]
