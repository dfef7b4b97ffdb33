"""Routes on a dragonfly (:mod:`optiq.topology.dragonfly`): minimal and Valiant.

**Minimal** (the default routes): from the source's router, at most one local hop, one
global hop and one local hop to the destination's router. Between two groups joined by
several global links, the route takes one that needs the fewest local hops (a global link
of the source's own router, landing on the destination's router, saves a hop each); among
those, the ``(t mod n)``-th in the order of the source group's ports, ``t`` being the
destination host and ``n`` the number of such links, so routes to different hosts spread
over them.

**Valiant**: minimally to an intermediate group, then minimally to the destination: the
path enters the intermediate group by a global link from the source group and leaves it
by a global link to the destination group (one local hop between them when those are on
different routers), each leg choosing its global link by the minimal rule. Intermediate
groups are drawn at random (seeded), distinct, never the source's or the destination's
group; a path that would visit a router twice (source and destination in one group) is
left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import PathError
from .pathset import PathSet

if TYPE_CHECKING:
    from ..topology import Topology
    from ..topology.dragonfly import DragonflyShape
    from ..workloads import Demands

__all__ = ["dragonfly_routes", "valiant_paths"]


def dragonfly_shape(topology: Topology) -> DragonflyShape:
    """The dragonfly's shape, or a :class:`PathError` naming a topology that is not one."""
    if topology.dragonfly is None:
        raise PathError(f"dragonfly routes need a dragonfly, not {topology.name}")
    return topology.dragonfly


def _global_leg(topology: Topology, shape: DragonflyShape, G: np.ndarray, K: np.ndarray, start: np.ndarray,
                end: np.ndarray | None, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The global link from group ``G`` to ``K`` (per job) by the minimal rule, given the router
    the leg starts at and (when known) the router it should end at, as indices in their groups.

    Returns the link and the local indices of its tail and head routers.
    """
    H, a = shape.hosts, shape.a
    cand = shape.between[G, K]  # (jobs, m)
    tail = topology.link_src[cand] - H - G[:, None] * a
    head = topology.link_dst[cand] - H - K[:, None] * a
    hops = (tail != start[:, None]).astype(np.int64)
    if end is not None:
        hops += head != end[:, None]
    tied = hops == hops.min(axis=1, keepdims=True)
    nth = t % tied.sum(axis=1)
    pick = np.argmax(np.cumsum(tied, axis=1) == (nth + 1)[:, None], axis=1)
    rows = np.arange(G.size)
    return cand[rows, pick], tail[rows, pick], head[rows, pick]


def _paths(columns: np.ndarray, jobs: np.ndarray, num_jobs: int) -> PathSet:
    hops = (columns >= 0).sum(axis=1)
    order = np.argsort(jobs, kind="stable")
    columns, hops = columns[order], hops[order]
    return PathSet(jobs[order], np.concatenate(([0], np.cumsum(hops))), columns[columns >= 0], num_jobs)


def dragonfly_routes(topology: Topology, demands: Demands) -> PathSet:
    """Every job's minimal route (module docstring).

    Examples
    --------
    >>> from optiq.topology.dragonfly import dragonfly
    >>> from optiq.workloads import Demands
    >>> t = dragonfly(1, 2, 1)                  # 3 groups of 2 routers, one host each
    >>> ps = dragonfly_routes(t, Demands([0, 0, 0], [1, 2, 5], [1, 1, 1]))
    >>> [t.node_names[v] for v in ps.nodes(2, t)]   # local, global, local
    ['H0', 'G0R0', 'G0R1', 'G2R0', 'G2R1', 'H5']
    """
    demands.check_against(topology)
    shape = dragonfly_shape(topology)
    s, t = demands.src, demands.dst
    Rs, Rt = s // shape.p, t // shape.p
    Gs, Gt, rs, rt = Rs // shape.a, Rt // shape.a, Rs % shape.a, Rt % shape.a
    cols = np.full((s.size, 5), -1, dtype=np.int64)
    cols[:, 0], cols[:, 4] = shape.host_up[s], shape.host_down[t]
    same = Gs == Gt
    local = same & (rs != rt)
    cols[local, 2] = shape.local[Gs[local], rs[local], rt[local]]
    far = np.flatnonzero(~same)
    if far.size:
        link, ra, rb = _global_leg(topology, shape, Gs[far], Gt[far], rs[far], rt[far], t[far])
        cols[far, 2] = link
        first, last = far[ra != rs[far]], far[rb != rt[far]]
        cols[first, 1] = shape.local[Gs[first], rs[first], (ra[ra != rs[far]])]
        cols[last, 3] = shape.local[Gt[last], (rb[rb != rt[far]]), rt[last]]
    return _paths(cols, np.arange(s.size), demands.num_jobs)


def valiant_paths(topology: Topology, demands: Demands, k: int = 8, *, seed: int = 0) -> PathSet:
    """Up to ``k`` paths per job: its minimal route, then Valiant paths through ``k - 1``
    random intermediate groups (module docstring).

    Examples
    --------
    >>> from optiq.topology.dragonfly import dragonfly
    >>> from optiq.workloads import Demands
    >>> t = dragonfly(2, 4, 2)
    >>> ps = valiant_paths(t, Demands([0], [40], [1]), k=4, seed=1)
    >>> ps.num_paths, ps.hops.tolist()[0]
    (4, 5)
    """
    demands.check_against(topology)
    shape = dragonfly_shape(topology)
    minimal = dragonfly_routes(topology, demands)
    s, t = demands.src, demands.dst
    Rs, Rt = s // shape.p, t // shape.p
    Gs, Gt, rs, rt = Rs // shape.a, Rt // shape.a, Rs % shape.a, Rt % shape.a
    detours = min(k - 1, shape.g - 2)
    if detours <= 0:
        return minimal
    keys = np.random.default_rng(seed).random((s.size, shape.g))
    rows = np.arange(s.size)
    keys[rows, Gs] = keys[rows, Gt] = np.inf
    via = np.argsort(keys, axis=1)[:, :detours]  # (jobs, detours) intermediate groups
    J = np.repeat(rows, detours)
    mid = via.ravel()
    cols = np.full((J.size, 7), -1, dtype=np.int64)
    cols[:, 0], cols[:, 6] = shape.host_up[s[J]], shape.host_down[t[J]]
    leg1, ra, rb = _global_leg(topology, shape, Gs[J], mid, rs[J], None, t[J])
    leg2, rc, rd = _global_leg(topology, shape, mid, Gt[J], rb, rt[J], t[J])
    cols[:, 2], cols[:, 4] = leg1, leg2
    for col, G, frm, to in ((1, Gs[J], rs[J], ra), (3, mid, rb, rc), (5, Gt[J], rd, rt[J])):
        hop = frm != to
        cols[hop, col] = shape.local[G[hop], frm[hop], to[hop]]
    nodes = np.where(cols >= 0, topology.link_dst[np.maximum(cols, 0)], -1)
    ordered = np.sort(nodes, axis=1)
    simple = ~((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any(axis=1)
    simple &= ~(nodes == s[J][:, None]).any(axis=1)
    detour = _paths(cols[simple], J[simple], demands.num_jobs)
    both, _ = PathSet.from_csr(np.concatenate((minimal.links, detour.links)),
                               np.concatenate((minimal.offsets, minimal.offsets[-1] + detour.offsets[1:])),
                               np.concatenate((minimal.job, detour.job)), demands.num_jobs)
    return both
