"""Lower bounds on the completion time of any plan, over all paths: cut bounds.

Every node set ``S`` gives a bound: the bytes of jobs from ``S`` to outside ``S`` must
leave through the links from ``S`` to its complement. The families of sets tried grow
with the problem, never as (sets x links) arrays: single nodes and the set of sources or
destinations are one pass over the links each; a torus slab's crossing capacity is the
sum of two per-coordinate totals, and the bytes crossing every slab that starts at one
coordinate come from one histogram of the jobs; a fat-tree's switch sets (a switch and the
endpoints hanging off it) are one label per node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["CutBound", "cut_lower_bound"]


@dataclass(frozen=True)
class CutBound:
    """A proven lower bound: ``bytes`` must cross from a node set through links of total
    capacity ``capacity``, so no plan finishes before ``time_s = bytes / capacity``."""

    time_s: float
    bytes: float
    capacity: float
    cut: str


def _best(bytes_: ArrayLike, capacity: ArrayLike, names) -> CutBound | None:
    """The tightest of several cuts (``names[i]`` a string or a callable giving it)."""
    bytes_, capacity = np.asarray(bytes_, float), np.asarray(capacity, float)
    if not bytes_.size:
        return None
    t = np.divide(bytes_, capacity, out=np.zeros(bytes_.shape), where=capacity > 0)
    i = int(np.argmax(t))
    name = names(i) if callable(names) else names[i]
    return CutBound(float(t[i]), float(bytes_[i]), float(capacity[i]), name)


def _mask_cut(topology, demands, mask: np.ndarray, name: str) -> list[CutBound | None]:
    """The bounds out of and into one node set given as a boolean mask over nodes."""
    ls, ld, cap = topology.link_src, topology.link_dst, topology.capacity
    size = demands.nbytes.astype(float)
    ins, ind = mask[demands.src], mask[demands.dst]
    out = _best([size[ins & ~ind].sum()], [cap[mask[ls] & ~mask[ld]].sum()], [f"out of {name}"])
    into = _best([size[~ins & ind].sum()], [cap[~mask[ls] & mask[ld]].sum()], [f"into {name}"])
    return [out, into]


def _slab_cuts(topology, demands) -> list[CutBound | None]:
    """Bounds of every slab ``start <= coordinate < start + size`` (cyclic on wrapped dimensions).

    A slab of dimension ``d`` is left only by links of dimension ``d`` at its two faces: the
    ``+`` links from its last coordinate and the ``-`` links from its first. The jobs' bytes
    are first summed by their source's and destination's coordinates along ``d`` (a
    ``length x length`` table), so the slabs are then summed over that table, not the jobs.
    """
    found: list[CutBound | None] = []
    size = demands.nbytes.astype(float)
    for d, (length, wrap) in enumerate(zip(topology.dims, topology.wrap)):
        if length < 2:
            continue
        stride = int(np.prod(topology.dims[d + 1:], dtype=np.int64))
        dim_links = topology.link_dim == d
        coord = topology.link_src // stride % length
        plus = np.bincount(coord[dim_links & (topology.link_sign > 0)],
                           weights=topology.capacity[dim_links & (topology.link_sign > 0)], minlength=length)
        minus = np.bincount(coord[dim_links & (topology.link_sign < 0)],
                            weights=topology.capacity[dim_links & (topology.link_sign < 0)], minlength=length)
        s_coord, t_coord = demands.src // stride % length, demands.dst // stride % length
        table = np.bincount(s_coord * length + t_coord, weights=size, minlength=length * length).reshape(length, length)
        sizes, starts = np.arange(1, length), np.arange(length if wrap else 1)
        # every slab at once, by (start, size, coordinate); the sums are exact (whole bytes)
        inside = ((np.arange(length) - starts[:, None, None]) % length < sizes[:, None]).astype(float)
        leaving = (inside * ((1.0 - inside) @ table.T)).sum(axis=2).ravel()
        entering = ((1.0 - inside) * (inside @ table.T)).sum(axis=2).ravel()
        last, after = (starts[:, None] + sizes - 1) % length, (starts[:, None] + sizes) % length
        # on a mesh there are no "-" links out of coordinate 0 nor "+" links out of the last
        cap_out = (plus[last] + minus[starts][:, None]).ravel()
        cap_in = (minus[after] + plus[(starts - 1) % length][:, None]).ravel()

        def span(i: int, d: int = d, length: int = length) -> str:
            start, k = divmod(i, length - 1)
            return f"slab dim {d} in [{start}..{(start + k) % length}]"

        found.append(_best(leaving, cap_out, lambda i: f"out of {span(i)}"))
        found.append(_best(entering, cap_in, lambda i: f"into {span(i)}"))
    return found


def _bounding_box(topology, nodes: np.ndarray) -> np.ndarray:
    """Boolean mask of the smallest box (per dimension, the coordinates used) around ``nodes``
    (repeats allowed)."""
    box = np.ones(topology.num_nodes, bool)
    for d, length in enumerate(topology.dims):
        stride = int(np.prod(topology.dims[d + 1:], dtype=np.int64))
        used = np.zeros(length, bool)
        used[nodes // stride % length] = True
        if not used.all():
            box &= used[np.arange(topology.num_nodes) // stride % length]
    return box


def _switch_cuts(topology, demands) -> list[CutBound | None]:
    """Bounds of every switch together with the endpoints hanging off it: one pass over the links
    and one over the jobs where every endpoint hangs off one switch, a sparse membership matrix
    where some hang off several."""
    ends, n = topology.num_endpoints, topology.num_nodes
    ls, ld = topology.link_src, topology.link_dst
    switch_to_host = (ls >= ends) & (ld < ends)
    switches = np.arange(ends, n)
    if not switches.size:
        return []
    pairs = np.unique((ls[switch_to_host] - ends) * n + ld[switch_to_host])   # (switch set, host), cables once
    set_of, host = pairs // n, pairs % n
    keep = np.flatnonzero(np.bincount(set_of, minlength=switches.size) > 0)     # the switch and at least one host
    if not keep.size:
        return []
    if np.bincount(host, minlength=ends).max(initial=0) <= 1:   # every node in one set at most: a set per node
        group = np.full(n, -1, dtype=np.int64)
        group[switches] = switches - ends
        group[host] = set_of

        def crossing(tails, heads, weights):
            g = group[tails]
            leaves = (g >= 0) & (g != group[heads])
            return np.bincount(g[leaves], weights=np.asarray(weights, float)[leaves], minlength=switches.size)[keep]
    else:   # hosts on several switches: a sparse membership matrix
        rows = np.concatenate([switches - ends, set_of])
        from scipy.sparse import csr_matrix
        member = csr_matrix((np.ones(rows.size), (rows, np.concatenate([switches, host]))), shape=(switches.size, n))
        member.data[:] = 1.0
        member = member[keep]

        def crossing(tails, heads, weights):
            at_tail, at_head = member[:, tails], member[:, heads]
            return (at_tail - at_tail.multiply(at_head)) @ weights

    size = demands.nbytes.astype(float)
    cap_out = crossing(ls, ld, topology.capacity)
    cap_in = crossing(ld, ls, topology.capacity)
    bytes_out = crossing(demands.src, demands.dst, size)
    bytes_in = crossing(demands.dst, demands.src, size)
    label = switches[keep]
    return [_best(bytes_out, cap_out, lambda i: f"out of switch {label[i]} and its endpoints"),
            _best(bytes_in, cap_in, lambda i: f"into switch {label[i]} and its endpoints")]


def cut_lower_bound(topology: Topology, demands: Demands) -> CutBound:
    """The largest cut bound over a family of node sets.

    For a node set ``S``, all bytes of jobs from ``S`` to outside ``S`` leave through the
    links from ``S`` to its complement, so any plan needs at least
    ``bytes(S -> not S) / capacity(S -> not S)`` seconds; likewise into ``S``. The sets
    tried: every single endpoint (its injection and ejection links), the set of sources,
    the set of destinations, and, on tori, every slab (a cyclic interval of one coordinate)
    and the bounding boxes of the sources and of the destinations; on other graphs, every
    switch together with its endpoints. Time and memory grow with nodes, links and jobs
    times slab starts, never with sets times links.

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
    found = [_best(sent, out_cap, lambda v: f"out of node {v}"), _best(recv, in_cap, lambda v: f"into node {v}")]
    for name, nodes in (("sources", src), ("destinations", dst)):   # (repeats and all)
        mask = np.zeros(n, bool)
        mask[nodes] = True
        found += _mask_cut(topology, demands, mask, f"the {name}")
        if topology.is_torus:
            found += _mask_cut(topology, demands, _bounding_box(topology, nodes), f"the box around the {name}")
    found += _slab_cuts(topology, demands) if topology.is_torus else _switch_cuts(topology, demands)
    return max((b for b in found if b is not None), key=lambda b: b.time_s)
