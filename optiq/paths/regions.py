"""Least-cost paths on tori and meshes, searched only where a hop-limited path can go.

A path from ``s`` to ``t`` of at most ``hops(s, t) + slack`` links only visits nodes ``v``
with ``hops(s, v) + hops(v, t) <= hops(s, t) + slack``. On a torus or mesh that sum splits
by dimension: every coordinate ``x`` of dimension ``i`` has an *excess*
``d_i(s_i, x) + d_i(x, t_i) - d_i(s_i, t_i) >= 0`` (0 on a shortest arc, growing off it), and
``v`` is in the region when its excesses add up to at most ``slack``. The region of a job
is a thin shell around the box of its shortest routes: on a whole Blue Gene/Q a few
thousand of the 49,152 nodes. One Dijkstra per source over the union of its jobs' regions
(:mod:`optiq.paths.dijkstra`, which applies this test to each node it reaches) then finds
every cheapest hop-limited path exactly (a path found may still be longer than the limit
when the cheapest one wanders inside the region; the caller handles those, as for a search
over the whole graph). The costs it finds are not lower bounds over paths of any length, so
they prove nothing on their own. :func:`region_nodes` lists a region, for checks and plots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["region_nodes"]


def _excess_tables(topology: Topology) -> list[np.ndarray]:
    """Per dimension, ``table[s, t, x]``: the excess of coordinate ``x`` on the way from ``s`` to ``t``."""
    tables = []
    for length, wrap in zip(topology.dims or (), topology.wrap or ()):
        x = np.arange(length)
        d = np.abs(x[:, None] - x[None, :])
        if wrap:
            d = np.minimum(d, length - d)
        tables.append(d[:, None, :] + d.T[None, :, :] - d[:, :, None])
    return tables


def region_nodes(topology: Topology, source: int, targets: np.ndarray, slack: np.ndarray,
                 tables: list[np.ndarray] | None = None, mask: np.ndarray | None = None) -> np.ndarray:
    """The nodes a path from ``source`` to any of ``targets`` within its ``slack`` may visit, sorted.

    ``mask`` (all false, one entry per node) is scratch memory, left all false again.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> t = torus((4, 4))
    >>> region_nodes(t, 0, np.array([5]), np.array([0])).tolist()     # the 2 x 2 box of shortest routes
    [0, 1, 4, 5]
    >>> region_nodes(t, 0, np.array([5]), np.array([2])).size          # one detour allowed: 4 + 8 nodes
    12
    """
    tables = tables if tables is not None else _excess_tables(topology)
    mask = np.zeros(topology.num_nodes, dtype=bool) if mask is None else mask
    dims = topology.dims or ()
    s = np.unravel_index(int(source), dims)
    for t_node, allowed in zip(np.asarray(targets).tolist(), np.asarray(slack).tolist()):
        t = np.unravel_index(int(t_node), dims)
        excess = [table[s[i], t[i]] for i, table in enumerate(tables)]
        keep = [np.flatnonzero(e <= allowed) for e in excess]
        total = np.zeros([k.size for k in keep], dtype=np.int64)
        for i, k in enumerate(keep):
            shape = [1] * len(keep)
            shape[i] = k.size
            total = total + excess[i][k].reshape(shape)
        inside = np.nonzero(total <= allowed)
        mask[np.ravel_multi_index(tuple(k[c] for k, c in zip(keep, inside)), dims)] = True
    nodes = np.flatnonzero(mask)
    mask[nodes] = False
    return nodes
