"""Fat-trees: k-ary n-trees and two-level clusters. Only hosts are endpoints."""

from __future__ import annotations

import numpy as np

from ..errors import TopologyError
from .base import Topology, spec_rate

__all__ = ["kary_ntree", "cluster", "FATTREE_LINK_BANDWIDTH"]

#: Default link capacity of fat-trees: 10 Gbit/s, in bytes/s.
FATTREE_LINK_BANDWIDTH = 1.25e9


def _bidirectional(name: str, num_nodes: int, pairs: list[tuple[int, int]], num_endpoints: int,
                   bandwidth: float | np.ndarray, spec: str) -> Topology:
    """Both directions of every cable in ``pairs``, at ``bandwidth`` (one rate, or one per cable)."""
    ends = np.asarray(pairs, dtype=np.int64)
    src = np.concatenate([ends[:, 0], ends[:, 1]])
    dst = np.concatenate([ends[:, 1], ends[:, 0]])
    rate = np.broadcast_to(np.asarray(bandwidth, float), (len(pairs),))
    order = np.lexsort((dst, src))
    return Topology(name=name, num_nodes=num_nodes, link_src=src[order], link_dst=dst[order],
                    capacity=np.concatenate([rate, rate])[order], num_endpoints=num_endpoints, spec=spec)


def kary_ntree(k: int, n: int = 3, *, bandwidth: float = FATTREE_LINK_BANDWIDTH,
               spec: str | None = None) -> Topology:
    """A k-ary n-tree: ``k**n`` hosts and ``n`` levels of ``k**(n-1)`` switches of radix ``2k``.

    Hosts are nodes ``0..k**n-1``; switch ``w`` (an ``n-1`` digit base-``k`` word) of level ``l``
    (0 = edge) is node ``k**n + l * k**(n-1) + w``. Host ``h`` attaches to edge switch ``h // k``;
    switch ``w`` of level ``l`` links to the switches of level ``l+1`` whose words differ from
    ``w`` only in digit ``n-2-l`` (digit 0 being the most significant).

    Raises
    ------
    TopologyError
        If ``k < 2`` or ``n < 1``.

    Examples
    --------
    >>> t = kary_ntree(4, 2)
    >>> t.num_endpoints, t.num_nodes, t.num_links, t.diameter
    (16, 24, 64, 4)
    """
    if k < 2 or n < 1:
        raise TopologyError(f"a k-ary n-tree needs k >= 2 and n >= 1, got k={k}, n={n}")
    hosts, per_level = k**n, k ** (n - 1)

    def base(level: int) -> int:
        return int(hosts + level * per_level)

    pairs = [(h, base(0) + h // k) for h in range(hosts)]
    for level in range(n - 1):
        place = k ** (level)  # weight of digit n-2-level in an (n-1)-digit word
        for w in range(per_level):
            digit = (w // place) % k
            for other in range(k):
                pairs.append((base(level) + w, base(level + 1) + w + (other - digit) * place))
    return _bidirectional(f"{k}-ary {n}-tree", hosts + n * per_level, pairs, hosts, bandwidth,
                          spec or f"fattree:k={k},n={n}" + spec_rate("bw", bandwidth, FATTREE_LINK_BANDWIDTH))


def cluster(hosts: int = 20, edges: int = 4, cores: int = 2, *, bandwidth: float = FATTREE_LINK_BANDWIDTH,
            core_bandwidth: float | None = None, spec: str | None = None) -> Topology:
    """A two-level fat-tree cluster: hosts split evenly over edge switches, every edge to every core.

    The default is the 20-host cluster of the fat-tree routing study (4 edge switches of
    5 hosts, 2 core switches). Hosts are nodes ``0..hosts-1`` (host ``h`` on edge switch
    ``h // (hosts/edges)``), then the edge switches, then the cores.

    Parameters
    ----------
    bandwidth : float
        Bytes/s of every link (the hosts' own, and by default the switches').
    core_bandwidth : float, optional
        Bytes/s of the links between edge and core switches, where they differ: an
        oversubscribed tree's slower uplinks (spec key ``core_bw``).

    Raises
    ------
    TopologyError
        If a count is not positive, hosts do not split evenly over the edge switches, or a
        rate is not positive.

    Examples
    --------
    >>> t = cluster()
    >>> t.num_endpoints, t.num_nodes, t.num_links
    (20, 26, 56)
    >>> sorted(set(cluster(4, 2, 1, bandwidth=4.0, core_bandwidth=1.0).capacity.tolist()))
    [1.0, 4.0]
    """
    if hosts < 2 or edges < 1 or cores < 1:
        raise TopologyError(f"cluster needs hosts >= 2, edges >= 1, cores >= 1; got {hosts}, {edges}, {cores}")
    if hosts % edges:
        raise TopologyError(f"cluster: {hosts} hosts do not split evenly over {edges} edge switches")
    core = float(bandwidth if core_bandwidth is None else core_bandwidth)
    if not (bandwidth > 0 and core > 0):
        raise TopologyError(f"cluster: link rates must be positive, got bw={bandwidth}, core_bw={core}")
    per_edge = hosts // edges
    pairs = [(h, hosts + h // per_edge) for h in range(hosts)]
    pairs += [(hosts + e, hosts + edges + c) for e in range(edges) for c in range(cores)]
    rates = np.concatenate((np.full(hosts, float(bandwidth)), np.full(edges * cores, core)))
    return _bidirectional(f"cluster {hosts} hosts/{edges} edges/{cores} cores", hosts + edges + cores,
                          pairs, hosts, rates, spec or f"cluster:hosts={hosts},edges={edges},cores={cores}"
                          + spec_rate("bw", bandwidth, FATTREE_LINK_BANDWIDTH)
                          + spec_rate("core_bw", core, float(bandwidth)))
