"""Lower bounds on the completion time of any plan, over all paths: cut bounds."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CutBound", "cut_lower_bound"]


@dataclass(frozen=True)
class CutBound:
    """A proven lower bound: ``bytes`` must cross from a node set through links of total
    capacity ``capacity``, so no plan finishes before ``time_s = bytes / capacity``."""

    time_s: float
    bytes: float
    capacity: float
    cut: str


def _interval_masks(coord: np.ndarray, length: int, wrap: bool) -> list[tuple[str, np.ndarray]]:
    sets = []
    for start in range(length if wrap else 1):
        for size in range(1, length):
            members = (coord - start) % length < size if wrap else coord < size
            sets.append((f"[{start}..{(start + size - 1) % length}]", members))
    return sets


def _node_sets(topology, demands) -> list[tuple[str, np.ndarray]]:
    n = topology.num_nodes
    sets = []
    for name, nodes in (("sources", np.unique(demands.src)), ("destinations", np.unique(demands.dst))):
        mask = np.zeros(n, bool)
        mask[nodes] = True
        sets.append((f"the {name}", mask))
    if topology.is_torus:
        coords = topology.coords
        for d, (length, wrap) in enumerate(zip(topology.dims, topology.wrap)):
            for label, mask in _interval_masks(coords[:, d], length, wrap):
                sets.append((f"slab dim {d} in {label}", mask))
        for name, nodes in (("sources", np.unique(demands.src)), ("destinations", np.unique(demands.dst))):
            box = np.ones(n, bool)
            for d, length in enumerate(topology.dims):
                used = np.unique(coords[nodes, d])
                if used.size < length:
                    box &= np.isin(coords[:, d], used)
            sets.append((f"the box around the {name}", box))
    else:
        # every switch with the endpoints hanging off it (a fat-tree edge switch and its hosts)
        ends = topology.num_endpoints
        for v in range(ends, n):
            mask = np.zeros(n, bool)
            mask[v] = True
            ls = topology.links_from(v)
            mask[topology.link_dst[ls][topology.link_dst[ls] < ends]] = True
            if mask.sum() > 1:
                sets.append((f"switch {v} and its endpoints", mask))
    return sets


def cut_lower_bound(topology, demands) -> CutBound:
    """The largest cut bound over a family of node sets.

    For a node set ``S``, all bytes of jobs from ``S`` to outside ``S`` leave through the
    links from ``S`` to its complement, so any plan needs at least
    ``bytes(S -> not S) / capacity(S -> not S)`` seconds; likewise into ``S``. The sets
    tried: every single endpoint (its injection and ejection links), the set of sources,
    the set of destinations, and, on tori, every slab (a cyclic interval of one coordinate)
    and the bounding boxes of the sources and of the destinations; on other graphs, every
    switch together with its endpoints.

    Returns
    -------
    CutBound
        The tightest bound found, with a description of its cut.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> b = cut_lower_bound(torus((4,), bandwidth=1.0), Demands([0], [2], [10]))
    >>> b.time_s, b.cut
    (5.0, 'out of node 0')
    """
    n, src, dst, size = topology.num_nodes, demands.src, demands.dst, demands.nbytes.astype(float)
    out_cap = np.bincount(topology.link_src, weights=topology.capacity, minlength=n)
    in_cap = np.bincount(topology.link_dst, weights=topology.capacity, minlength=n)
    sent = np.bincount(src, weights=size, minlength=n)
    recv = np.bincount(dst, weights=size, minlength=n)
    candidates = []
    v = int(np.argmax(sent / out_cap))
    candidates.append(CutBound(float(sent[v] / out_cap[v]), float(sent[v]), float(out_cap[v]), f"out of node {v}"))
    v = int(np.argmax(recv / in_cap))
    candidates.append(CutBound(float(recv[v] / in_cap[v]), float(recv[v]), float(in_cap[v]), f"into node {v}"))
    sets = _node_sets(topology, demands)
    if sets:
        names = [name for name, _ in sets]
        m = np.stack([mask for _, mask in sets])
        ls, ld = topology.link_src, topology.link_dst
        cap_out = (m[:, ls] & ~m[:, ld]).astype(float) @ topology.capacity
        cap_in = (~m[:, ls] & m[:, ld]).astype(float) @ topology.capacity
        bytes_out = (m[:, src] & ~m[:, dst]).astype(float) @ size
        bytes_in = (~m[:, src] & m[:, dst]).astype(float) @ size
        with np.errstate(divide="ignore", invalid="ignore"):
            for b, c, way in ((bytes_out, cap_out, "out of"), (bytes_in, cap_in, "into")):
                t = np.where(c > 0, b / np.where(c > 0, c, 1), 0.0)
                i = int(np.argmax(t))
                candidates.append(CutBound(float(t[i]), float(b[i]), float(c[i]), f"{way} {names[i]}"))
    return max(candidates, key=lambda b: b.time_s)
