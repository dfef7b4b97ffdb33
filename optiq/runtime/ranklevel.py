"""From a plan between hosts to a plan between MPI ranks, for several ranks per host.

A plan is made per host pair (traffic within a host is not routed). To run it, every rank
needs its own jobs: rank ``a`` on host ``A`` sending ``n`` bytes to rank ``b`` on host ``B``
takes the paths of the job ``A -> B``, with the bytes split as that job splits its bytes
(whole bytes, the remainder to the largest fractions).

The executor forwards at ranks, one per endpoint. The plan runs on a *rank network*: the
hosts that hold ranks are its first endpoints, each standing for its lowest rank (the
host's leader, which forwards the host's share of others' paths); every other rank is an
endpoint of its own, cabled to its host's leader and to the other ranks of its host by
links of :data:`WITHIN_HOST` bytes/s; hosts without a rank and switches follow, as nodes
that forward in hardware. So a rank that is not its host's leader reaches the network
through the leader (one more copy), and two ranks of one host exchange directly.
"""

from __future__ import annotations

import numpy as np

from ..errors import PlanError
from ..paths import PathSet
from ..paths.pathset import csr_positions
from ..plan import Plan
from ..topology import Topology
from ..workloads import Demands

__all__ = ["RankNetwork", "rank_network", "host_demands_of", "rank_plan", "WITHIN_HOST"]

#: Capacity of the links between the ranks of one host, bytes/s: copies in memory, far
#: faster than the network, so the rank network's busiest link is a network link.
WITHIN_HOST = 1e15


class RankNetwork:
    """The rank network of ranks placed on ``topology``'s endpoints (module docstring).

    Attributes
    ----------
    topology : Topology
        The rank network.
    node_of : ndarray of int
        For every node of the original topology, its node in the rank network.
    endpoint_of_rank : ndarray of int
        The rank network's endpoint of every rank.
    rank_of_endpoint : ndarray of int
        The rank of every endpoint of the rank network (a host's leader for a host).
    host_of : ndarray of int
        The original topology's endpoint of every rank.
    """

    def __init__(self, topology: Topology, host_of: np.ndarray) -> None:
        host_of = np.asarray(host_of, dtype=np.int64)
        n, N = topology.num_nodes, host_of.size
        used = np.unique(host_of)
        leader = np.full(topology.num_endpoints, N, dtype=np.int64)
        np.minimum.at(leader, host_of, np.arange(N))  # a host's lowest rank
        extras = np.flatnonzero(leader[host_of] != np.arange(N))
        others = np.setdiff1d(np.arange(n), used)
        k, K = used.size, extras.size
        node_of = np.empty(n, dtype=np.int64)
        node_of[used] = np.arange(k)
        node_of[others] = k + K + np.arange(others.size)
        endpoint_of_rank = node_of[host_of].copy()
        endpoint_of_rank[extras] = k + np.arange(K)
        tails, heads = [node_of[topology.link_src]], [node_of[topology.link_dst]]
        for h in used:  # every rank of a host cabled to every other (the leader is the host's node)
            members = endpoint_of_rank[np.flatnonzero(host_of == h)]
            if members.size > 1:
                a, b = np.nonzero(~np.eye(members.size, dtype=bool))
                tails.append(members[a])
                heads.append(members[b])
        src, dst = np.concatenate(tails), np.concatenate(heads)
        capacity = np.concatenate((topology.capacity, np.full(src.size - topology.num_links, WITHIN_HOST)))
        names = topology.node_names
        node_names = ([names[h] for h in used] + [f"rank{r}@{names[host_of[r]]}" for r in extras]
                      + [names[v] for v in others])
        self.topology = Topology(name=f"{topology.name}, {N} ranks on {k} hosts", num_nodes=n + K, link_src=src,
                                 link_dst=dst, capacity=capacity, num_endpoints=k + K, names=node_names)
        self.node_of, self.endpoint_of_rank, self.host_of = node_of, endpoint_of_rank, host_of
        self.rank_of_endpoint = np.concatenate((leader[used], extras))
        self.num_links_of_topology = topology.num_links

    def link_between(self) -> dict[tuple[int, int], int]:
        """Link id of every (tail, head) pair of rank-network endpoints on one host."""
        t = self.topology
        first = self.num_links_of_topology
        return {(int(u), int(v)): first + i for i, (u, v) in
                enumerate(zip(t.link_src[first:].tolist(), t.link_dst[first:].tolist()))}


def rank_network(topology: Topology, host_of: np.ndarray) -> RankNetwork:
    """The :class:`RankNetwork` of ranks placed on endpoints ``host_of``."""
    return RankNetwork(topology, host_of)


def host_demands_of(matrix: np.ndarray, host_of: np.ndarray) -> Demands | None:
    """The bytes between every pair of distinct hosts, from a rank-to-rank byte matrix.

    Returns None when every byte stays within hosts.

    Examples
    --------
    >>> m = np.array([[0, 5, 7], [1, 0, 0], [0, 2, 0]])
    >>> host_demands_of(m, np.array([4, 4, 9])).to_rows()   # ranks 0 and 1 share host 4
    [(4, 9, 7), (9, 4, 2)]
    """
    a, b = np.nonzero(matrix)
    apart = host_of[a] != host_of[b]
    if not apart.any():
        return None
    top = int(host_of.max()) + 1
    keys, inverse = np.unique(host_of[a[apart]] * top + host_of[b[apart]], return_inverse=True)
    sizes = np.bincount(inverse, weights=matrix[a[apart], b[apart]].astype(float)).astype(np.int64)
    return Demands(keys // top, keys % top, sizes, name="host pairs")


def rank_plan(net: RankNetwork, matrix: np.ndarray, host_plan: Plan | None) -> Plan:
    """The plan of every rank pair with bytes (``matrix[a, b]``, ``a != b``) on the rank network.

    Pairs on different hosts take their host pair's paths in ``host_plan`` with its byte
    split; pairs on one host take the link between them.

    Examples
    --------
    >>> from optiq import from_spec, make_plan
    >>> t = from_spec("torus:4")
    >>> m = np.zeros((3, 3), dtype=np.int64); m[0, 2] = 100; m[1, 2] = 50; m[0, 1] = 8
    >>> net = rank_network(t, np.array([0, 0, 2]))           # ranks 0 and 1 on endpoint 0
    >>> host = make_plan(t, host_demands_of(m, net.host_of), "default")
    >>> p = rank_plan(net, m, host)
    >>> [(p.topology.label(int(s)), p.topology.label(int(d))) for s, d in zip(p.demands.src, p.demands.dst)]
    [('H0', 'rank1@H0'), ('H0', 'H2'), ('rank1@H0', 'H2')]
    >>> p.paths.hops.tolist(), p.paths.copies.tolist(), p.ranks.tolist()   # rank 1 goes through rank 0, its host's leader
    ([1, 2, 3], [0, 0, 1], [0, 2, 1])
    """
    a, b = np.nonzero(matrix)
    keep = a != b
    a, b = a[keep], b[keep]
    nbytes = matrix[a, b].astype(np.int64)
    ep = net.endpoint_of_rank
    host = net.host_of
    same = host[a] == host[b]
    within = net.link_between()
    pair_links = [np.array([within[(int(ep[x]), int(ep[y]))]]) for x, y in zip(a[same], b[same])]
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # jobs, offsets, links, bytes, stops
    if same.any():
        jobs = np.flatnonzero(same)
        pieces.append((jobs, np.arange(jobs.size + 1), np.concatenate(pair_links), nbytes[same],
                       np.ones(jobs.size, dtype=bool)))
    apart = np.flatnonzero(~same)
    if apart.size:
        if host_plan is None:
            raise ValueError("rank pairs on different hosts need a host plan")
        _check_stops(net, host_plan)
        pieces.append(_network_paths(net, host_plan, a[apart], b[apart], nbytes[apart], apart))
    jobs = np.concatenate([p[0] for p in pieces])
    links = np.concatenate([p[2] for p in pieces])
    offsets, shift = [np.zeros(1, np.int64)], 0
    for p in pieces:
        offsets.append(p[1][1:] + shift)
        shift += int(p[1][-1])
    path_bytes = np.concatenate([p[3] for p in pieces])
    stops = np.concatenate([p[4] for p in pieces])
    demands = Demands(ep[a], ep[b], nbytes, name="rank pairs")
    paths, order = PathSet.from_csr(links, np.concatenate(offsets), jobs, demands.num_jobs, stops)
    chunk = host_plan.chunk_size if host_plan is not None else 65536
    # the legs between hosts are the host plan's (checked there); the rank network only models them
    plan = Plan(net.topology, demands, paths, path_bytes[order], chunk_size=chunk,
                method=host_plan.method if host_plan is not None else "direct", ranks=net.rank_of_endpoint,
                routing=host_plan.routing if host_plan is not None else "forwarded", check_legs=False)
    return plan.used()


def _check_stops(net: RankNetwork, host_plan: Plan) -> None:
    """Refuse a host plan that stops at a host no rank runs on: nothing could forward there."""
    ps, topo = host_plan.paths, host_plan.topology
    stop_hosts = np.unique(topo.link_dst[ps.links[ps.stops]])
    idle = np.setdiff1d(stop_hosts, net.host_of)
    if idle.size:
        raise PlanError(f"the host plan stops at {topo.label(int(idle[0]))}, where no rank runs to forward its chunks: "
                        f"plan it with make_plan(..., forwarders=<the hosts that run ranks>)")


def _network_paths(net: RankNetwork, host_plan: Plan, a: np.ndarray, b: np.ndarray, nbytes: np.ndarray,
                   jobs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every inter-host rank pair on its host pair's paths: (job per path, offsets, links, bytes,
    stops): the host path's stops, and a stop at the leader of each end's host that is not
    the rank itself."""
    hp, dem = host_plan.paths, host_plan.demands
    top = int(max(dem.src.max(), dem.dst.max(), net.host_of.max())) + 1
    keys = dem.src * top + dem.dst
    order = np.argsort(keys)
    job = order[np.searchsorted(keys[order], net.host_of[a] * top + net.host_of[b])]
    first, count = hp.job_offsets[job], np.diff(hp.job_offsets)[job]
    pair = np.repeat(np.arange(a.size), count)                     # one row per (rank pair, path)
    path = first[pair] + (np.arange(pair.size) - np.repeat(np.cumsum(count) - count, count))
    share = host_plan.path_bytes[path] / dem.nbytes[job[pair]]
    exact = nbytes[pair] * share
    whole = np.floor(exact).astype(np.int64)
    short = nbytes - np.bincount(pair, weights=whole, minlength=a.size).astype(np.int64)
    rank_in_pair = np.empty(pair.size, dtype=np.int64)             # by largest fraction first, per pair
    by = np.lexsort((-(exact - whole), pair))
    rank_in_pair[by] = np.arange(pair.size) - np.repeat(np.cumsum(count) - count, count)
    path_bytes = whole + (rank_in_pair < short[pair])
    ep, leader_of = net.endpoint_of_rank, net.node_of[net.host_of]
    within = net.link_between()
    head = np.array([within.get((int(ep[x]), int(leader_of[x])), -1) for x in a])   # a -> its leader
    tail = np.array([within.get((int(leader_of[y]), int(ep[y])), -1) for y in b])   # leader -> b
    hops = hp.hops[path]
    lengths = hops + (head[pair] >= 0) + (tail[pair] >= 0)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    links = np.empty(int(offsets[-1]), dtype=np.int64)
    stops = np.ones(int(offsets[-1]), dtype=bool)  # the links to and from a leader end at a stop
    starts = offsets[:-1] + (head[pair] >= 0)
    inner = csr_positions(starts, hops)
    links[inner] = hp.links[csr_positions(hp.offsets[path], hops)]  # link ids kept
    stops[inner] = hp.stops[csr_positions(hp.offsets[path], hops)]
    has_head = head[pair] >= 0
    links[offsets[:-1][has_head]] = head[pair][has_head]
    has_tail = tail[pair] >= 0
    links[offsets[1:][has_tail] - 1] = tail[pair][has_tail]
    return jobs[pair], offsets, links, path_bytes, stops
