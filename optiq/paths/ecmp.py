"""ECMP: the routes of a network that hashes every flow onto one of its equal-cost next hops.

An Ethernet or RoCE switch (and Linux, with multipath routes hashed by addresses and
ports: the emulated network's ``--routes ecmp``) sends each flow, one connection's packets, to
one of the next hops that lie on a shortest path to its destination, chosen by a hash of the
flow's addresses and ports. The choice is fixed for the flow and differs from flow to flow, so the
busiest link of one exchange depends on how its flows hash: it is a random variable.

Here a flow is a pair of endpoints (MPI holds one connection per pair of ranks) and the
hash of a flow at a node is a 64-bit mix of ``(seed, draw, source, destination, node)``,
so each switch chooses independently of the others (switches salt their hash functions) and
the candidates are the node's out-links on a shortest path, sorted by (next node, link id),
the same candidates D-mod-K chooses from (:func:`optiq.paths.dmodk_routes`).

* :func:`ecmp_routes` is one draw: the routes of one hash seed, the network's routes of a
  topology whose spec says ``routes=ecmp:SEED`` (draw 0 of that seed).
* :func:`ecmp_draw_times` gives the busiest link's time of many draws, so
  :func:`ecmp_spread` gives what a user of the network sees from run to run: its mean and
  its 5th and 95th percentiles. Draws are deterministic in ``seed``.
* The time of one set of realized paths (read back from a network, say) is that
  :class:`~optiq.paths.PathSet`'s ``busiest_link_time``.
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .walk import shortest_walk

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..topology import Topology
    from ..workloads import Demands
    from .pathset import PathSet

__all__ = ["ECMP_DRAWS", "EcmpSpread", "ecmp_routes", "ecmp_draw_times", "ecmp_spread", "ecmp_leg_spread", "flow_hash"]

#: Hash draws :func:`ecmp_spread` takes by default: the mean of 200 draws is within about
#: 1% of the true mean on the permutations of ``tests/test_ecmp.py`` (its standard error).
ECMP_DRAWS = 200
#: Pairs x draws routed at once by :func:`ecmp_draw_times` (memory: a few hundred bytes each).
DRAW_BATCH_PAIRS = 200_000
#: The draws :func:`ecmp_draw_times` keeps, for so many exchanges: a comparison asks for the
#: same default routes' spread once per method, and the default row's again.
KEPT_DRAWS = 8
_KEPT: dict[tuple[int, int, int, str], tuple[weakref.ref[Topology], np.ndarray]] = {}

_M1, _M2, _GOLDEN = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on ``uint64`` (wrapping)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def flow_hash(seed: int, draw: ArrayLike, src: ArrayLike, dst: ArrayLike, node: ArrayLike) -> np.ndarray:
    """The 64-bit hash by which flow ``src -> dst`` of draw ``draw`` chooses at ``node``.

    Examples
    --------
    >>> int(flow_hash(0, 0, 1, 2, 3)[0]) == int(flow_hash(0, 0, 1, 2, 3)[0]) != int(flow_hash(1, 0, 1, 2, 3)[0])
    True
    """
    with np.errstate(over="ignore"):
        u = [np.atleast_1d(np.asarray(a, dtype=np.int64)).astype(np.uint64) for a in (draw, src, dst, node)]
        h = _mix(np.full(1, seed, dtype=np.int64).astype(np.uint64) * _GOLDEN + u[0])
        for part in u[1:]:
            h = _mix(h ^ (part * _GOLDEN))
    return h


def _walk(topology: Topology, src: np.ndarray, dst: np.ndarray, draw: np.ndarray, seed: int) -> PathSet:
    """Path ``i`` from ``src[i]`` to ``dst[i]`` as draw ``draw[i]`` of ``seed`` hashes it."""

    def choose(pairs: np.ndarray, at: np.ndarray, m: np.ndarray) -> np.ndarray:
        return (flow_hash(seed, draw[pairs], src[pairs], dst[pairs], at) % m.astype(np.uint64)).astype(np.int64)

    return shortest_walk(topology, src, dst, choose)


def ecmp_routes(topology: Topology, demands: Demands, *, seed: int = 0, draw: int = 0) -> PathSet:
    """Every job's route as ECMP with hash seed ``seed`` routes it (draw ``draw``; module docstring).

    Examples
    --------
    >>> from optiq.topology import kary_ntree
    >>> from optiq.workloads import Demands
    >>> t = kary_ntree(4, 2)                # 16 hosts, 4 leaves, 4 spines
    >>> ps = ecmp_routes(t, Demands([0], [15], [1]), seed=3)
    >>> nodes = ps.nodes(0, t)
    >>> len(nodes), nodes[0], nodes[-1], t.num_endpoints <= nodes[2]   # up to a leaf, a spine, down
    (5, 0, 15, True)
    """
    demands.check_against(topology)
    return _walk(topology, demands.src, demands.dst, np.full(demands.num_jobs, draw, dtype=np.int64), seed)


def ecmp_draw_times(topology: Topology, src: ArrayLike, dst: ArrayLike, nbytes: ArrayLike, *, seed: int = 0,
                    draws: int = ECMP_DRAWS) -> np.ndarray:
    """The busiest link's time (bytes over capacity) of draws ``0 .. draws - 1`` when every
    pair ``src[i] -> dst[i]`` carries ``nbytes[i]`` on its ECMP route (pairs may repeat: each
    is its own flow, hashed alike, as the same pair's connection is).

    Examples
    --------
    Two flows from one leaf to another of a 2-ary 2-tree: half the draws put them on the same
    spine (time 2 at unit rates), half on both (time 1).

    >>> from optiq.topology import kary_ntree
    >>> t = kary_ntree(2, 2, bandwidth=1.0)
    >>> times = ecmp_draw_times(t, [0, 1], [2, 3], [1, 1], draws=2000)
    >>> sorted(set(times.tolist())), 0.45 < float((times == 2).mean()) < 0.55
    ([1.0, 2.0], True)
    """
    src, dst = np.asarray(src, dtype=np.int64).ravel(), np.asarray(dst, dtype=np.int64).ravel()
    weight = np.asarray(nbytes, dtype=float).ravel()
    key = (id(topology), int(seed), int(draws),
           hashlib.sha1(src.tobytes() + dst.tobytes() + weight.tobytes()).hexdigest())
    kept = _KEPT.get(key)
    if kept is not None and kept[0]() is topology:
        return kept[1].copy()
    times = _draw_times(topology, src, dst, weight, seed, draws)
    _KEPT[key] = (weakref.ref(topology), times.copy())
    while len(_KEPT) > KEPT_DRAWS:
        del _KEPT[next(iter(_KEPT))]
    return times


def _draw_times(topology: Topology, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, seed: int,
                draws: int) -> np.ndarray:
    """:func:`ecmp_draw_times`, computed."""
    links = topology.num_links
    times = np.zeros(draws)
    per = max(1, DRAW_BATCH_PAIRS // max(src.size, 1))
    for first in range(0, draws, per):
        count = min(per, draws - first)
        draw = np.repeat(np.arange(first, first + count, dtype=np.int64), src.size)
        paths = _walk(topology, np.tile(src, count), np.tile(dst, count), draw, seed)
        entry = paths.path_of_link_entry  # path i is pair i of the tiled arrays
        loads = np.bincount((draw[entry] - first) * links + paths.links, weights=np.tile(weight, count)[entry],
                            minlength=count * links).reshape(count, links)
        times[first:first + count] = (loads / topology.capacity).max(axis=1, initial=0.0)
    return times


@dataclass(frozen=True)
class EcmpSpread:
    """The busiest link's time of an exchange over ECMP hash draws (seconds)."""

    mean_s: float
    p05_s: float
    p95_s: float
    draws: int
    seed: int

    def __repr__(self) -> str:
        return (f"EcmpSpread(mean {self.mean_s * 1e3:.4g} ms, 5%-95% {self.p05_s * 1e3:.4g}-{self.p95_s * 1e3:.4g} ms, "
                f"{self.draws} draws of seed {self.seed})")


def ecmp_spread(topology: Topology, demands: Demands, *, seed: int = 0, draws: int = ECMP_DRAWS) -> EcmpSpread:
    """The mean and the 5th and 95th percentiles of ``demands``' completion time on ECMP
    routes (the busiest link's time) over ``draws`` hash draws of ``seed``.

    Examples
    --------
    >>> from optiq.topology import kary_ntree
    >>> from optiq.workloads import Demands
    >>> spread = ecmp_spread(kary_ntree(2, 2, bandwidth=1.0), Demands([0, 1], [2, 3], [1, 1]), draws=400)
    >>> spread.p05_s, spread.p95_s, 1.4 < spread.mean_s < 1.6
    (1.0, 2.0, True)
    """
    demands.check_against(topology)
    return _spread(ecmp_draw_times(topology, demands.src, demands.dst, demands.nbytes, seed=seed, draws=draws), seed)


def _spread(times: np.ndarray, seed: int) -> EcmpSpread:
    p05, p95 = np.percentile(times, [5, 95])
    return EcmpSpread(float(times.mean()), float(p05), float(p95), int(times.size), int(seed))


def ecmp_leg_spread(paths: PathSet, path_bytes: ArrayLike, topology: Topology, *, seed: int = 0,
                    draws: int = ECMP_DRAWS) -> EcmpSpread:
    """The busiest link's time over ECMP hash draws when every leg of ``paths`` (each a flow
    from the rank it leaves to the rank it reaches) takes its hashed route: what a plan's
    forwarding costs on a network that hashes.

    Examples
    --------
    >>> from optiq import Demands, make_plan
    >>> from optiq.topology import from_spec
    >>> t = from_spec("fattree:k=2,n=2,bw=1B/s,routes=ecmp")
    >>> plan = make_plan(t, Demands([0, 1], [2, 3], [1, 1]), "default")
    >>> ecmp_leg_spread(plan.paths, plan.path_bytes, t, draws=400).p95_s
    2.0
    """
    nbytes = np.asarray(path_bytes, dtype=float)
    used = np.flatnonzero(nbytes > 0)
    path, tail, head = paths.select(nbytes > 0).leg_ends(topology)
    return _spread(ecmp_draw_times(topology, tail, head, nbytes[used][path], seed=seed, draws=draws), seed)
