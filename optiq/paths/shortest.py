"""Hop-limited shortest paths under per-job link weights, for many jobs at once.

A layered Bellman-Ford: layer ``h`` holds, for every job and node, the least weight of a
walk of at most ``h`` links from the job's source (compiled, one job at a time:
:mod:`optiq.paths.layered`). With positive weights the least walk is a simple path.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..topology import Topology

__all__ = ["hop_limited_shortest_paths", "hop_limited_shortest_records"]


#: Jobs x layers x (nodes x in-degree) up to which the layers are computed with numpy rather
#: than by the compiled kernel, whose first use in a process loads numba.
DENSE_WORK = 1_000_000


class _InLinks:
    """A padded ``(nodes, max in-degree)`` table of the links entering each node (missing
    entries point at a sentinel link ``num_links``, tail node 0, infinite weight), and the
    links leaving each node as CSR."""

    def __init__(self, link_src: np.ndarray, link_dst: np.ndarray, num_nodes: int) -> None:
        order = np.argsort(link_dst, kind="stable")
        counts = np.bincount(link_dst, minlength=num_nodes)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        num_links = link_src.size
        self.padded = np.full((num_nodes, int(counts.max())), num_links, dtype=np.int64)
        col = np.arange(num_links) - np.repeat(starts, counts)
        self.padded[link_dst[order], col] = order
        self.src_ext = np.append(link_src, 0)
        self.out_links = np.argsort(link_src, kind="stable")  # the links leaving each node, CSR
        self.out_start = np.searchsorted(link_src[self.out_links], np.arange(num_nodes + 1))


@lru_cache(maxsize=8)
def _in_links(topology) -> _InLinks:
    return _InLinks(topology.link_src, topology.link_dst, topology.num_nodes)


def hop_limited_shortest_paths(topology: Topology, sources: ArrayLike, targets: ArrayLike, weights: np.ndarray,
                               hop_limit: int) -> tuple[list, np.ndarray]:
    """Least-weight paths of at most ``hop_limit`` links, one per (source, target, weight row).

    Parameters
    ----------
    topology : Topology
    sources, targets : array of int, shape (B,)
    weights : array of float, shape (B, num_links)
        Positive link weights, one row per job.
    hop_limit : int

    Returns
    -------
    paths : list
        For every job an array of link ids from source to target, or None when the target
        is not reachable within ``hop_limit`` links.
    cost : ndarray, shape (B,)
        The weight of each path (inf where there is none).

    Examples
    --------
    >>> from optiq.topology import torus
    >>> t = torus((5,), wrap=False)
    >>> w = np.ones((1, t.num_links))
    >>> paths, cost = hop_limited_shortest_paths(t, [0], [3], w, 4)
    >>> t.link_dst[paths[0]].tolist(), cost.tolist()
    ([1, 2, 3], [3.0])
    """
    record, cost = _records(topology, sources, targets, weights, hop_limit)
    paths = [row[row >= 0] if np.isfinite(c) else None for row, c in zip(record, cost)]
    return paths, cost


def hop_limited_shortest_records(topology: Topology, sources: ArrayLike, targets: ArrayLike, weights: np.ndarray,
                                 hop_limit: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`hop_limited_shortest_paths` as one array: row ``b`` holds job ``b``'s links in
    order where they are not -1 (all -1 where there is no path), and the costs."""
    return _records(topology, sources, targets, weights, hop_limit)


def _records(topology: Topology, sources: ArrayLike, targets: ArrayLike, weights: np.ndarray,
             hop_limit: int) -> tuple[np.ndarray, np.ndarray]:
    inl = _in_links(topology)
    sources = np.asarray(sources, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    if sources.size * hop_limit * inl.padded.size <= DENSE_WORK:
        return _dense_records(inl, sources, targets, weights, hop_limit)
    from ..utils.compiled import interrupts_held
    from .layered import layered_records  # numba: imported when a search runs, not with optiq

    record = np.empty((sources.size, hop_limit), dtype=np.int64)  # the kernel fills every row
    cost = np.zeros(sources.size)
    with interrupts_held():
        layered_records(inl.out_start, inl.out_links, topology.link_dst, inl.padded, inl.src_ext, sources, targets,
                        weights, int(hop_limit), record, cost)
    return record, cost


def _dense_records(inl: _InLinks, sources: np.ndarray, targets: np.ndarray, weights: np.ndarray,
                   hop_limit: int) -> tuple[np.ndarray, np.ndarray]:
    """The compiled kernel's layers and paths (:mod:`optiq.paths.layered`), every job at once
    with numpy: each layer is the last one lowered by a pass over every node's entering links,
    and of equally cheap last links into a node the first in its row of ``inl.padded`` is
    taken, as the kernel takes it. The same sums in the same order, so the same paths."""
    jobs = np.arange(sources.size)
    padded, tails = inl.padded, inl.src_ext[inl.padded]
    entering = np.concatenate((weights, np.full((sources.size, 1), np.inf, weights.dtype)), axis=1)[:, padded]
    layers = np.full((hop_limit + 1, sources.size, padded.shape[0]), np.inf, dtype=weights.dtype)
    layers[0, jobs, sources] = 0.0
    for h in range(1, hop_limit + 1):
        np.minimum(layers[h - 1], (layers[h - 1][:, tails] + entering).min(axis=2), out=layers[h])
        if np.array_equal(layers[h], layers[h - 1]):
            layers[h + 1:] = layers[h]
            break
    cost = layers[hop_limit, jobs, targets].astype(np.float64)  # as the kernel's caller keeps it
    record = np.full((sources.size, hop_limit), -1, dtype=np.int64)
    at = targets.copy()
    reached = np.isfinite(cost)
    for h in range(hop_limit, 0, -1):
        step = reached & (at != sources) & (layers[h, jobs, at] < layers[h - 1, jobs, at])
        if not step.any():
            continue
        b, links = jobs[step], padded[at[step]]
        via = layers[h - 1][b[:, None], inl.src_ext[links]] + entering[b, at[step]]
        chosen = links[np.arange(b.size), via.argmin(axis=1)]
        record[b, h - 1] = chosen
        at[step] = inl.src_ext[chosen]
    return record, cost
