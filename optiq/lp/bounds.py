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

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ..paths.kept import KEPT_LINKS, kept_for_pairs

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


class _Cuts:
    """Every cut tried for one set of pairs, made once and evaluated for any bytes.

    A cut's bytes are a linear map of histograms of the jobs' bytes: every histogram puts
    every job in one bin (its source, its destination, out of a set, into it or neither, its
    source's and destination's coordinates along a torus dimension, the switch set it leaves),
    so the bytes of every cut are a fixed weighted sum of histogram bins: two ``bincount``
    calls whatever the bytes. Where hosts hang off several switches, a switch set's rows
    are over the jobs themselves (``direct``); those come last. Rows keep the order in which
    the families were added, so the first tightest cut is the one named.
    """

    def __init__(self) -> None:
        self._bins: list[np.ndarray] = []
        self._entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []   # (row, bin, weight)
        self._direct: list[Any] = []
        self._capacity: list[np.ndarray] = []
        self._names: list[tuple[int, Callable[[int], str]]] = []
        self._num_bins = self._num_rows = self._hist_rows = 0

    def add(self, bins: np.ndarray, num_bins: int, weights: ArrayLike, capacity: ArrayLike,
            name: Callable[[int], str]) -> None:
        """Cuts whose bytes are read off the histogram of the jobs' bytes by ``bins`` (one per
        job, ``0 .. num_bins - 1``): ``weights`` is a dense (rows x ``num_bins``) array of every
        cut's bins, or an integer array of one bin per cut. ``name(i)`` names cut ``i``."""
        assert not self._direct, "histogram cuts come before the direct ones"
        self._bins.append(np.asarray(bins, dtype=np.int64) + self._num_bins)
        weights = np.asarray(weights)
        if weights.ndim == 1:
            row, col, data = np.arange(weights.size), weights.astype(np.int64), np.ones(weights.size)
        else:
            row, col = np.nonzero(weights)
            data = weights[row, col].astype(float)
        self._entries.append((row + self._num_rows, col + self._num_bins, data))
        self._num_bins += num_bins
        self._rows(capacity, name)
        self._hist_rows = self._num_rows

    def add_direct(self, rows: Any, capacity: ArrayLike, name: Callable[[int], str]) -> None:
        """Cuts whose bytes are ``rows`` (cuts x jobs, sparse) times the jobs' bytes."""
        self._direct.append(rows)
        self._rows(capacity, name)

    def _rows(self, capacity: ArrayLike, name: Callable[[int], str]) -> None:
        capacity = np.asarray(capacity, dtype=float)
        self._capacity.append(capacity)
        self._names.append((self._num_rows, name))
        self._num_rows += capacity.size

    def finish(self) -> _Cuts:
        """Join the families into one histogram and one map (once, after the last ``add``)."""
        self.rows, self.cols, self.data = (np.concatenate(parts) for parts in zip(*self._entries))
        self.bins = np.concatenate(self._bins)
        self.histograms = len(self._bins)
        self.capacity = np.concatenate(self._capacity)
        self._starts = np.array([first for first, _ in self._names])
        del self._bins, self._entries, self._capacity
        return self

    @property
    def entries(self) -> int:
        """Bins held, one per job per histogram (what keeping the cuts costs)."""
        return int(self.bins.size)

    def bytes(self, size: np.ndarray) -> np.ndarray:
        """Bytes across every cut when the jobs carry ``size`` bytes (float)."""
        hist = np.bincount(self.bins, weights=np.tile(size, self.histograms), minlength=self._num_bins)
        by_histogram = np.bincount(self.rows, weights=self.data * hist[self.cols], minlength=self._hist_rows)
        return np.concatenate([by_histogram] + [rows @ size for rows in self._direct])

    def name(self, row: int) -> str:
        """What cut ``row`` is."""
        family = int(np.searchsorted(self._starts, row, side="right")) - 1
        first, name = self._names[family]
        return name(row - first)

    def bound(self, size: np.ndarray) -> CutBound:
        """The tightest cut for bytes ``size`` (the first, where several are as tight)."""
        crossing = self.bytes(size)
        t = np.divide(crossing, self.capacity, out=np.zeros(crossing.shape), where=self.capacity > 0)
        i = int(np.argmax(t))
        return CutBound(float(t[i]), float(crossing[i]), float(self.capacity[i]), self.name(i))


def _out_and_into(cuts: _Cuts, topology, src: np.ndarray, dst: np.ndarray, mask: np.ndarray, name: str) -> None:
    """The cuts out of and into one node set given as a boolean mask over nodes."""
    ls, ld, cap = topology.link_src, topology.link_dst, topology.capacity
    ins, ind = mask[src], mask[dst]
    side = (ins & ~ind) + 2 * (~ins & ind)    # 1: leaves the set, 2: enters it, 0: neither
    cuts.add(side, 3, [[0, 1, 0], [0, 0, 1]], [cap[mask[ls] & ~mask[ld]].sum(), cap[~mask[ls] & mask[ld]].sum()],
             lambda i: f"{('out of', 'into')[i]} {name}")


def _slab_cuts(cuts: _Cuts, topology, src: np.ndarray, dst: np.ndarray) -> None:
    """Every slab ``start <= coordinate < start + size`` (cyclic on wrapped dimensions).

    A slab of dimension ``d`` is left only by links of dimension ``d`` at its two faces: the
    ``+`` links from its last coordinate and the ``-`` links from its first. The jobs' bytes
    are summed by their source's and destination's coordinates along ``d`` (a
    ``length x length`` table), so every slab's bytes are a sum over that table, not the jobs.
    """
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
        sizes, starts = np.arange(1, length), np.arange(length if wrap else 1)
        # every slab by (start, size): which coordinates it holds, then the table's cells that
        # leave it (source inside, destination outside) and enter it
        inside = ((np.arange(length) - starts[:, None, None]) % length < sizes[:, None]).reshape(-1, length)
        leaving = (inside[:, :, None] & ~inside[:, None, :]).reshape(inside.shape[0], -1)
        entering = (~inside[:, :, None] & inside[:, None, :]).reshape(inside.shape[0], -1)
        last, after = (starts[:, None] + sizes - 1) % length, (starts[:, None] + sizes) % length
        # on a mesh there are no "-" links out of coordinate 0 nor "+" links out of the last
        cap_out = (plus[last] + minus[starts][:, None]).ravel()
        cap_in = (minus[after] + plus[(starts - 1) % length][:, None]).ravel()
        slabs = cap_out.size

        def name(i: int, d: int = d, length: int = length, slabs: int = slabs) -> str:
            start, k = divmod(i % slabs, length - 1)
            return f"{'out of' if i < slabs else 'into'} slab dim {d} in [{start}..{(start + k) % length}]"

        cuts.add(src // stride % length * length + dst // stride % length, length * length,
                 np.concatenate([leaving, entering]), np.concatenate([cap_out, cap_in]), name)


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


def _switch_cuts(cuts: _Cuts, topology, src: np.ndarray, dst: np.ndarray) -> None:
    """Every switch together with the endpoints hanging off it, out of it and into it: a label
    per node where every endpoint hangs off one switch, a sparse membership matrix where some
    hang off several."""
    ends, n = topology.num_endpoints, topology.num_nodes
    ls, ld = topology.link_src, topology.link_dst
    switch_to_host = (ls >= ends) & (ld < ends)
    switches = np.arange(ends, n)
    if not switches.size:
        return
    pairs = np.unique((ls[switch_to_host] - ends) * n + ld[switch_to_host])   # (switch set, host), cables once
    set_of, host = pairs // n, pairs % n
    keep = np.flatnonzero(np.bincount(set_of, minlength=switches.size) > 0)     # the switch and at least one host
    if not keep.size:
        return
    label = switches[keep]
    names = (lambda i: f"out of switch {label[i]} and its endpoints",
             lambda i: f"into switch {label[i]} and its endpoints")
    if np.bincount(host, minlength=ends).max(initial=0) <= 1:   # every node in one set at most: a set per node
        group = np.full(n, -1, dtype=np.int64)
        group[switches] = switches - ends
        group[host] = set_of
        none = switches.size   # the bin of jobs that leave no set

        def leaving(tails, heads):
            g = group[tails]
            return (g >= 0) & (g != group[heads]), g

        for (tails, heads), (link_tails, link_heads), name in zip(((src, dst), (dst, src)), ((ls, ld), (ld, ls)), names):
            jobs_leave, g = leaving(tails, heads)
            links_leave, h = leaving(link_tails, link_heads)
            capacity = np.bincount(h[links_leave], weights=topology.capacity[links_leave], minlength=none)[keep]
            cuts.add(np.where(jobs_leave, g, none), none + 1, keep, capacity, name)
    else:   # hosts on several switches: a sparse membership matrix
        rows = np.concatenate([switches - ends, set_of])
        from scipy.sparse import csr_matrix
        member = csr_matrix((np.ones(rows.size), (rows, np.concatenate([switches, host]))), shape=(switches.size, n))
        member.data[:] = 1.0
        member = member[keep]

        def crossing(tails, heads):
            at_tail, at_head = member[:, tails], member[:, heads]
            return (at_tail - at_tail.multiply(at_head)).tocsr()

        for (tails, heads), (link_tails, link_heads), name in zip(((src, dst), (dst, src)), ((ls, ld), (ld, ls)), names):
            cuts.add_direct(crossing(tails, heads), crossing(link_tails, link_heads) @ topology.capacity, name)


def _node_cut(side: str, v: int) -> str:
    return f"{side} node {v}"


def _family(topology, src: np.ndarray, dst: np.ndarray) -> _Cuts:
    """The cuts :func:`cut_lower_bound` tries for jobs from ``src`` to ``dst``."""
    n = topology.num_nodes
    cuts = _Cuts()
    for ends, links, side in ((src, topology.link_src, "out of"), (dst, topology.link_dst, "into")):
        cuts.add(ends, n, np.arange(n), np.bincount(links, weights=topology.capacity, minlength=n),
                 partial(_node_cut, side))
    for name, nodes in (("sources", src), ("destinations", dst)):   # (repeats and all)
        mask = np.zeros(n, bool)
        mask[nodes] = True
        _out_and_into(cuts, topology, src, dst, mask, f"the {name}")
        if topology.is_torus:
            _out_and_into(cuts, topology, src, dst, _bounding_box(topology, nodes), f"the box around the {name}")
    if topology.is_torus:
        _slab_cuts(cuts, topology, src, dst)
    else:
        _switch_cuts(cuts, topology, src, dst)
    return cuts.finish()


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
    kept = kept_for_pairs(topology, demands)
    cuts = kept.get(_KEPT)
    if cuts is None:
        cuts = _family(topology, demands.src, demands.dst)
        if cuts.entries <= KEPT_LINKS:
            kept[_KEPT] = cuts
    return cuts.bound(demands.nbytes.astype(float))


#: The key of the cuts in :func:`optiq.paths.kept.kept_for_pairs`'s dict.
_KEPT = "cut family"
