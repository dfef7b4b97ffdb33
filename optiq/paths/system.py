"""The system's own routes, one path per job: what MPI does today.

* Tori: Blue Gene/Q deterministic dimension-order routing. Dimensions are routed in the
  order given by a selection sort on length, descending, starting from A, B, C, D, E and
  swapping the first longest remaining dimension into place (4x4x4x8x2 routes D, B, C, A,
  E). Along a dimension the packet goes the shorter way round; when the distance is
  exactly half the ring, a source coordinate that is even goes the way that does not
  cross the wrap-around link and an odd one goes the way that does. On a length-2
  dimension this always picks the ``+`` link.
* Other graphs (fat-trees included): D-mod-K. The packet follows shortest paths; at each
  node where several next links lie on a shortest path, they are sorted by (next node,
  link id) and candidate number ``(t // M) mod m`` is taken, where ``t`` is the
  destination's endpoint index, ``m`` the number of candidates and ``M`` the product of
  the candidate counts of the earlier such choices on the path (so the first choice is
  ``t mod m``, as in D-mod-K).
"""

from __future__ import annotations

import numpy as np

from ..errors import PathError
from .pathset import PathSet

__all__ = ["system_routes", "bgq_dimension_order", "torus_routes", "dmodk_routes"]


def bgq_dimension_order(dims) -> list[int]:
    """The order in which Blue Gene/Q routes the dimensions of a torus of shape ``dims``.

    Examples
    --------
    >>> bgq_dimension_order((4, 4, 4, 8, 2))   # D, B, C, A, E
    [3, 1, 2, 0, 4]
    >>> bgq_dimension_order((8, 12, 16, 16, 2))   # C, D, B, A, E
    [2, 3, 1, 0, 4]
    """
    order = list(range(len(dims)))
    for i in range(len(order)):
        best = i
        for j in range(i + 1, len(order)):
            if dims[order[j]] > dims[order[best]]:
                best = j
        order[i], order[best] = order[best], order[i]
    return order


def _link_table(topology) -> np.ndarray:
    """``table[node, dim, 0 or 1]`` = id of the ``+`` or ``-`` link of ``node`` in ``dim`` (-1 if none)."""
    table = np.full((topology.num_nodes, len(topology.dims), 2), -1, dtype=np.int64)
    table[topology.link_src, topology.link_dim, (topology.link_sign < 0).astype(int)] = np.arange(topology.num_links)
    return table


def torus_routes(topology, demands) -> PathSet:
    """Dimension-order routes on a torus or mesh, by the Blue Gene/Q rule (module docstring).

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> t = torus((4, 2))
    >>> ps = torus_routes(t, Demands([0, 2], [4, 6], [1, 1]))   # distance 2 = half of 4
    >>> [ps.nodes(p, t) for p in range(2)]   # coordinate 0 (even): 0->1->2; 1 (odd) wraps: 1->0->3
    [[0, 2, 4], [2, 0, 6]]
    """
    demands.check_against(topology)
    dims, wrap = np.array(topology.dims), topology.wrap
    coords = topology.coords
    table = _link_table(topology)
    cur = demands.src.copy()
    steps: list[np.ndarray] = []
    for dim in bgq_dimension_order(topology.dims):
        length = int(dims[dim])
        s, t = coords[cur, dim], coords[demands.dst, dim]
        if wrap[dim]:
            fwd = (t - s) % length
            back = (s - t) % length
            plus = fwd < back
            tie = (fwd == back) & (fwd > 0)
            no_wrap_plus = s < t
            plus = np.where(tie, np.where(s % 2 == 0, no_wrap_plus, ~no_wrap_plus), plus)
            count = np.minimum(fwd, back)
        else:
            plus = t > s
            count = np.abs(t - s)
        side = np.where(plus, 0, 1)
        for step in range(int(count.max(initial=0))):
            moving = count > step
            link = np.where(moving, table[cur, dim, side], -1)
            cur = np.where(moving, topology.link_dst[np.maximum(link, 0)], cur)
            steps.append(link)
    if not np.array_equal(cur, demands.dst):  # cannot happen on a valid torus; guards the rule
        raise PathError("dimension-order routing did not reach every destination")
    hops = np.stack(steps, axis=1) if steps else np.zeros((demands.num_jobs, 0), np.int64)
    paths = [row[row >= 0] for row in hops]
    return PathSet.from_lists(paths, np.arange(demands.num_jobs), demands.num_jobs)


def dmodk_routes(topology, demands) -> PathSet:
    """D-mod-K shortest-path routes (module docstring) for any topology.

    Examples
    --------
    >>> from optiq.topology import cluster
    >>> from optiq.workloads import Demands
    >>> t = cluster()                       # hosts 0..19, edges 20..23, cores 24, 25
    >>> ps = dmodk_routes(t, Demands([0, 0], [6, 7], [1, 1]))
    >>> [ps.nodes(p, t) for p in range(2)]  # 6 mod 2 = 0 -> core 24, 7 mod 2 = 1 -> core 25
    [[0, 20, 24, 21, 6], [0, 20, 25, 21, 7]]
    """
    from scipy.sparse.csgraph import shortest_path

    demands.check_against(topology)
    targets, inverse = np.unique(demands.dst, return_inverse=True)
    to_target = shortest_path(topology.adjacency().T.tocsr(), unweighted=True, indices=targets)
    to_target = np.atleast_2d(to_target)
    out_order = topology.out_links
    offsets = topology.out_offsets
    heads = topology.link_dst
    paths = []
    for j in range(demands.num_jobs):
        dist = to_target[inverse[j]]
        v, t = int(demands.src[j]), int(demands.dst[j])
        if not np.isfinite(dist[v]):
            raise PathError(f"job {j}: destination {t} is unreachable from {v}")
        path, divisor = [], 1
        while v != t:
            out = out_order[offsets[v]:offsets[v + 1]]
            cand = out[dist[heads[out]] == dist[v] - 1]
            cand = cand[np.lexsort((cand, heads[cand]))]
            e = int(cand[(t // divisor) % cand.size])
            divisor *= cand.size
            path.append(e)
            v = int(heads[e])
        paths.append(path)
    return PathSet.from_lists(paths, np.arange(demands.num_jobs), demands.num_jobs)


def system_routes(topology, demands) -> PathSet:
    """The default route of every job: dimension order on tori and meshes, D-mod-K elsewhere."""
    return torus_routes(topology, demands) if topology.is_torus else dmodk_routes(topology, demands)
