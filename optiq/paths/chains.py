"""Chains: forwarded paths on networks whose switches are not ranks (fat-trees, fabrics, dragonflies).

Between two ranks such a network routes every message by its own rule, so the only choice a
plan has is where to stop: a path is the direct route of its job, or a *chain* of the
network's routes through intermediate ranks (``s -> h -> d``, or ``s -> a -> b -> d``), the
bytes received and sent on at each (:mod:`optiq.paths.routing`). An intermediate rank's own
links carry the bytes it forwards, in and out.

:class:`ChainSpace` holds, for the distinct sources and destinations of a demand set and a
set of intermediate ranks, the network's route of every leg a chain may take (as one CSR
array: sources to intermediates, intermediates to destinations, and between intermediates
for two-stop chains). A leg's cost under link costs is then a sum over its links, and the
cheapest chain of every job a minimum over its intermediates, all in numpy:

* :meth:`ChainSpace.cheapest` prices every job's cheapest chain (column generation's
  pricing; a per-link epsilon prefers fewer links, so the direct route wins ties), with the
  cost of the cheapest chain of any job: what a Lagrangian bound over chains needs;
* :meth:`ChainSpace.spread` makes ``k`` candidates per job, the direct route and then, round
  by round, the chain through the intermediate whose legs cost least under weights that
  grow with the load earlier rounds put on each link (like :func:`optiq.paths.spread_paths`);
  on large demand sets each round offers every job a different slice of the intermediates
  (:data:`SPREAD_FULL_ENTRIES`), so the rounds together cost one look at each.

:func:`valiant_chains` is the dragonfly's version: chains through a random host of each of a few
random intermediate groups.

The intermediates are every rank but the job's own two, unless the legs would need more than
:data:`MAX_LEG_ROUTES` routes: then a seeded sample of the ranks, which ``note`` names.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PathError
from ..utils.progress import Progress, Ticker
from .dragonfly import dragonfly_routes, dragonfly_shape
from .pathset import PathSet, csr_positions
from .system import network_routes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["ChainSpace", "valiant_chains", "MAX_INTERMEDIATES", "MAX_LEG_ROUTES"]

#: Intermediate ranks a chain may stop at, at most (1: ``s -> h -> d``; 2: ``s -> a -> b -> d``).
MAX_INTERMEDIATES = 2
#: Routes the legs of one chain space may hold; beyond, the intermediates are a sample.
MAX_LEG_ROUTES = 6_000_000
#: Jobs priced together (a block of jobs x intermediates costs at a time).
_JOB_BLOCK = 2048
#: :meth:`ChainSpace.spread` prices every intermediate for every job and round while that is
#: at most this many (job, intermediate, round) entries; beyond, a slice of them per round.
SPREAD_FULL_ENTRIES = 50_000_000


def _slices(M: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` disjoint slices of the ``M`` intermediates (a seeded permutation dealt out), as
    rows of positions padded with -1."""
    width = -(-M // count)
    table = np.full(count * width, -1, dtype=np.int64)
    table[:M] = rng.permutation(M)
    return table.reshape(width, count).T.copy()


class _Legs:
    """The network's routes of many (tail, head) pairs as one CSR array; a leg's cost is one bincount."""

    def __init__(self, tail: np.ndarray, head: np.ndarray, routes: PathSet) -> None:
        ok = tail != head
        hops = np.zeros(tail.size, dtype=np.int64)
        hops[ok] = routes.hops
        self.offsets = np.concatenate(([0], np.cumsum(hops)))
        self.links = routes.links.astype(np.int32)
        self.owner = np.repeat(np.arange(tail.size, dtype=np.int32), hops)
        self.missing = ~ok  # a "leg" from a rank to itself: no chain takes it
        self.hops = hops

    @classmethod
    def routed(cls, topology: Topology, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[_Legs]:
        """The legs of every (tails, heads) of ``pairs``, routed in one call: a pair that
        several tables share (on a full all-to-all, every leg is also a direct route) is
        routed once."""
        ok = [tail != head for tail, head in pairs]
        routes = network_routes(topology, np.concatenate([t[o] for (t, _), o in zip(pairs, ok)]),
                                np.concatenate([h[o] for (_, h), o in zip(pairs, ok)]))
        legs, first = [], 0
        for (tail, head), o in zip(pairs, ok):
            count = int(o.sum())
            part = PathSet(np.arange(count), routes.offsets[first:first + count + 1] - routes.offsets[first],
                           routes.links[routes.offsets[first]:routes.offsets[first + count]], count)
            legs.append(cls(tail, head, part))
            first += count
        return legs

    def costs(self, link_cost: np.ndarray, per_hop: float = 0.0) -> np.ndarray:
        """Every leg's cost: its links' costs summed, plus ``per_hop`` per link."""
        out: np.ndarray = np.bincount(self.owner, weights=link_cost[self.links], minlength=self.missing.size)
        if per_hop:
            out = out + per_hop * self.hops
        out[self.missing] = np.inf
        return out

    def path(self, i: int) -> np.ndarray:
        return self.links[self.offsets[i]:self.offsets[i + 1]].astype(np.int64)


class ChainSpace:
    """The chains of a demand set's jobs through intermediate ranks (module docstring).

    Parameters
    ----------
    topology : Topology
    demands : Demands
    max_intermediates : int
        1 (default): chains ``s -> h -> d``; 2: also ``s -> a -> b -> d``.
    seed : int
        Seed of the sample of intermediates, when one is needed.
    forwarders : array of int, optional
        The ranks a chain may stop at (default every endpoint): e.g. only the hosts that run
        an MPI rank.
    progress : callable, optional

    Raises
    ------
    PathError
        If ``max_intermediates`` is not 1 or 2, or the network cannot route a leg.

    Examples
    --------
    >>> from optiq.topology import kary_ntree
    >>> from optiq.workloads import Demands
    >>> t = kary_ntree(2, 2)                         # 4 hosts, 2 leaves, 2 spines
    >>> space = ChainSpace(t, Demands([0, 1], [2, 3], [8, 8]))
    >>> cands = space.spread(3)
    >>> [cands.stop_nodes(p, t) for p in range(cands.num_paths) if cands.job[p] == 0]  # direct, then via 1, via 3
    [[0, 2], [0, 1, 2], [0, 3, 2]]
    """

    def __init__(self, topology: Topology, demands: Demands, *, max_intermediates: int = 1, seed: int = 0,
                 forwarders: np.ndarray | None = None, progress: Progress | None = None) -> None:
        if max_intermediates not in range(1, MAX_INTERMEDIATES + 1):
            raise PathError(f"chains stop at 1 to {MAX_INTERMEDIATES} intermediate ranks, not {max_intermediates}")
        self.topology, self.demands, self.max_intermediates = topology, demands, max_intermediates
        self.sources, self.src_index = np.unique(demands.src, return_inverse=True)
        self.targets, self.dst_index = np.unique(demands.dst, return_inverse=True)
        ranks = np.arange(topology.num_endpoints) if forwarders is None else np.unique(forwarders)
        H = ranks.size
        per_rank = self.sources.size + self.targets.size
        fit = MAX_LEG_ROUTES // per_rank
        if max_intermediates == 2:
            fit = min(fit, int(np.sqrt(MAX_LEG_ROUTES)))
        if fit >= H:
            self.via = ranks
            self.note = ""
        else:
            self.via = np.sort(np.random.default_rng(seed).choice(ranks, size=max(fit, 1), replace=False))
            self.note = (f"chains through {self.via.size:,} of {H:,} ranks (a sample drawn with seed {seed}: all "
                         f"would need {per_rank * H:,} leg routes)")
        M = self.via.size
        if progress:
            progress(f"chains: routing {per_rank * M + demands.num_jobs:,} legs through {M:,} intermediate ranks")
        S, D = self.sources.size, self.targets.size
        pairs = [(np.repeat(self.sources, M), np.tile(self.via, S)),          # out: (S, M)
                 (np.repeat(self.via, D), np.tile(self.targets, M)),          # into: (M, D)
                 (demands.src, demands.dst)]                                  # direct: (J,)
        if max_intermediates == 2:
            pairs.append((np.repeat(self.via, M), np.tile(self.via, M)))      # between: (M, M)
        legs = _Legs.routed(topology, pairs)
        self.out, self.into, self.direct = legs[:3]
        self.between = legs[3] if max_intermediates == 2 else None

    def __repr__(self) -> str:
        return (f"ChainSpace({self.topology.name!r}, jobs={self.demands.num_jobs}, intermediates={self.via.size}, "
                f"max_intermediates={self.max_intermediates})")

    # -- costs --------------------------------------------------------------------------
    def _tables(self, link_cost: np.ndarray, per_hop: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                            np.ndarray | None]:
        M = self.via.size
        out = self.out.costs(link_cost, per_hop).reshape(self.sources.size, M)
        into = self.into.costs(link_cost, per_hop).reshape(M, self.targets.size)
        direct = self.direct.costs(link_cost, per_hop)
        two = None
        if self.between is not None:  # two[a, t]: the cheapest a -> b -> targets[t]
            between = self.between.costs(link_cost, per_hop).reshape(M, M)
            two = np.empty((M, self.targets.size))
            for start in range(0, M, 256):
                part = between[start:start + 256, :, None] + into[None, :, :]
                two[start:start + 256] = part.min(axis=1)
        return out, into, direct, two

    def _best(self, jobs: np.ndarray, out: np.ndarray, into: np.ndarray, direct: np.ndarray,
              two: np.ndarray | None, banned: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Per job: the cost of its cheapest option and which (0: direct, 1 + m: via ``via[m]``,
        1 + M + m: via ``via[m]`` then its cheapest second intermediate)."""
        M = self.via.size
        via = out[self.src_index[jobs]] + into[:, self.dst_index[jobs]].T  # (jobs, M)
        options = [direct[jobs, None], via]
        if two is not None:
            options.append(out[self.src_index[jobs]] + two[:, self.dst_index[jobs]].T)
        cost = np.concatenate(options, axis=1)
        self._exclude_own(jobs, cost)
        if banned is not None:
            cost[:, :1 + M][banned] = np.inf
        pick = np.argmin(cost, axis=1)
        return cost[np.arange(jobs.size), pick], pick

    def _exclude_own(self, jobs: np.ndarray, cost: np.ndarray) -> None:
        """No chain stops at the job's own source or destination."""
        M = self.via.size
        rows = np.arange(jobs.size)
        for ends in (self.demands.src[jobs], self.demands.dst[jobs]):
            m = self._via_position[ends]
            on = m >= 0
            cost[rows[on], 1 + m[on]] = np.inf
            if cost.shape[1] > 1 + M:
                cost[rows[on], 1 + M + m[on]] = np.inf

    def cheapest(self, link_cost: np.ndarray, *, progress: Progress | None = None,
                 what: str = "chains") -> tuple[PathSet, np.ndarray, np.ndarray]:
        """Every job's cheapest chain under ``link_cost`` (non-negative, per link).

        Returns
        -------
        paths : PathSet
            One path per job, with its stops.
        cost : ndarray
            Its cost under ``link_cost``.
        least : ndarray
            The least cost of any chain of the job in this space (without the tie-breaking
            epsilon): a Lagrangian bound over chains sums ``D_j * least_j``.
        """
        cost = np.asarray(link_cost, dtype=float)
        eps = 1e-9 * max(float(cost.max(initial=0.0)), 1e-300)  # per link: fewer links win ties
        J = self.demands.num_jobs
        tables = self._tables(cost, eps)
        picks = np.empty(J, dtype=np.int64)
        tick = Ticker(progress, f"{what}: jobs priced", J)
        for start in range(0, J, _JOB_BLOCK):
            jobs = np.arange(start, min(start + _JOB_BLOCK, J))
            picks[jobs] = self._best(jobs, *tables)[1]
            tick(jobs[-1] + 1)
        paths = self._chains(np.arange(J), picks, cost, eps)
        path_cost = np.bincount(paths.path_of_link_entry, weights=cost[paths.links], minlength=J)
        # the epsilon adds at most eps per link: less that, the cheapest chain's cost bounds every chain's
        least = np.maximum(path_cost + eps * paths.hops - eps * self.max_links, 0.0)
        return paths, path_cost, least

    def spread(self, k: int, *, penalty: float = 2.0, seed: int = 0, progress: Progress | None = None) -> PathSet:
        """Up to ``k`` paths per job: its direct route, then ``k - 1`` rounds in which every job
        takes the chain through a new intermediate whose legs cost least under the weights
        ``1 + penalty * (use by earlier rounds) / (mean use) + jitter`` (module docstring)."""
        if k < 1:
            raise PathError(f"k (paths per job) must be at least 1, got {k}")
        rng = np.random.default_rng(seed)
        J, M, L = self.demands.num_jobs, self.via.size, self.topology.num_links
        uses = np.zeros(L)
        direct = PathSet(np.arange(J), self.direct.offsets, self.direct.links, J)
        uses += np.bincount(direct.links, minlength=L)
        # every round, every job looks at all M intermediates while that is cheap; beyond, at a
        # slice of them, a different one each round (k - 1 slices of a seeded permutation)
        sliced = J * M * (k - 1) > SPREAD_FULL_ENTRIES
        slices = _slices(M, max(1, min(k - 1, M)), rng) if sliced else None
        taken = None if sliced else np.zeros((J, M), dtype=bool)  # the intermediates a job has had
        parts = [direct]
        tick = Ticker(progress, "chain candidates: rounds", k)
        for rnd in range(1, k if slices is None else min(k, slices.shape[0] + 1)):
            tick(rnd)
            mean = uses[uses > 0].mean() if (uses > 0).any() else 1.0
            weight = 1.0 + penalty * uses / mean + rng.random(L) * 0.01
            out, into, _, _ = self._tables(weight)
            if slices is not None:
                jobs, picks = self._slice_picks(slices, rnd, out, into)
            else:
                assert taken is not None
                jobs, picks = self._untaken_picks(taken, out, into)
                taken[jobs, picks - 1] = True
            if not jobs.size:
                break
            chains = self._chains(jobs, picks, weight)
            uses += np.bincount(chains.links, minlength=L)
            parts.append(chains)
        tick(k)
        merged, _ = PathSet.concat(parts)
        return merged

    def _untaken_picks(self, taken: np.ndarray, out: np.ndarray, into: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every job's pick that has one, in job order: the cheapest intermediate it has not
        taken (``taken``, jobs x ``via``) other than its own two ends, as option ``1 + m``."""
        jobs_all, picks_all = [], []
        for start in range(0, self.demands.num_jobs, _JOB_BLOCK):
            jobs = np.arange(start, min(start + _JOB_BLOCK, self.demands.num_jobs))
            via = out[self.src_index[jobs]] + into[:, self.dst_index[jobs]].T
            cost = np.concatenate([np.full((jobs.size, 1), np.inf), via], axis=1)
            self._exclude_own(jobs, cost)
            cost[:, 1:][taken[jobs]] = np.inf
            pick = np.argmin(cost, axis=1)
            fine = np.isfinite(cost[np.arange(jobs.size), pick])
            jobs_all.append(jobs[fine])
            picks_all.append(pick[fine])
        return np.concatenate(jobs_all), np.concatenate(picks_all)

    def _slice_picks(self, slices: np.ndarray, rnd: int, out: np.ndarray, into: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """Round ``rnd``'s pick of every job that has one, in job order: the cheapest of the
        intermediates of its slice (row ``(job + rnd - 1) mod count`` of ``slices``, positions
        in ``via``, -1 for none) other than its own two ends, as option ``1 + m``. Jobs are
        taken slice by slice, so that a block's costs are whole rows of the slice's columns."""
        from .chain_picks import cheapest_columns

        J, count = self.demands.num_jobs, slices.shape[0]
        pick = np.zeros(J, dtype=np.int64)
        fine = np.zeros(J, dtype=bool)
        column = np.full(self.via.size + 1, -1, dtype=np.int64)  # a via position's column in the slice
        for c in range(count):
            offered = slices[c]
            valid = offered >= 0
            m = np.where(valid, offered, 0)
            out_c, into_c = out[:, m], np.ascontiguousarray(into[m].T)   # (sources, offered), (targets, offered)
            out_c[:, ~valid] = np.inf
            column[:] = -1
            column[offered[valid]] = np.flatnonzero(valid)
            jobs = np.arange((c - rnd + 1) % count, J, count)   # the jobs offered slice c
            # not through its own ends: a position -1 (no intermediate) reads column[-1] = -1
            best, fine[jobs] = cheapest_columns(out_c, into_c, self.src_index[jobs], self.dst_index[jobs],
                                                column[self._via_position[self.demands.src[jobs]]],
                                                column[self._via_position[self.demands.dst[jobs]]])
            pick[jobs] = 1 + m[best]
        return np.flatnonzero(fine), pick[fine]

    @cached_property
    def _via_position(self) -> np.ndarray:
        """Per endpoint, its position in ``via`` (-1 where it is none)."""
        position = np.full(self.topology.num_endpoints, -1, dtype=np.int64)
        position[self.via] = np.arange(self.via.size)
        return position

    @cached_property
    def max_links(self) -> int:
        """The most links a chain of this space can cross."""
        longest = int(self.out.hops.max(initial=0)) + int(self.into.hops.max(initial=0))
        if self.between is not None:
            longest += int(self.between.hops.max(initial=0))
        return max(longest, int(self.direct.hops.max(initial=0)))

    def _chains(self, jobs: np.ndarray, picks: np.ndarray, link_cost: np.ndarray, per_hop: float = 0.0) -> PathSet:
        """The paths of option ``picks[i]`` of job ``jobs[i]`` (see :meth:`_best`), grouped by job."""
        M, D = self.via.size, self.targets.size
        s, t = self.src_index[jobs], self.dst_index[jobs]
        m = np.where(picks > M, picks - 1 - M, picks - 1)
        second = np.zeros(jobs.size, dtype=np.int64)
        two = picks > M
        if two.any():  # which second intermediate the cheapest a -> b -> t took
            assert self.between is not None
            between = self.between.costs(link_cost, per_hop).reshape(M, M)
            into = self.into.costs(link_cost, per_hop).reshape(M, D)
            second[two] = np.argmin(between[m[two]] + into[:, t[two]].T, axis=1)
        # every leg: (job position, order in its chain, table, row)
        i = np.arange(jobs.size)
        direct, one = picks == 0, (picks >= 1) & (picks <= M)
        legs = [(i[direct], 0, self.direct, jobs[direct]),
                (i[~direct], 0, self.out, s[~direct] * M + m[~direct]),
                (i[one], 1, self.into, m[one] * D + t[one]),
                (i[two], 1, self.between, m[two] * M + second[two]),
                (i[two], 2, self.into, second[two] * D + t[two])]
        order = np.concatenate([np.full(at.size, k) for at, k, _, _ in legs])
        owner = np.concatenate([at for at, _, _, _ in legs])
        hops = np.concatenate([np.diff(table.offsets)[row] if at.size else np.zeros(0, np.int64)  # type: ignore[union-attr]
                               for at, _, table, row in legs])
        rank = np.lexsort((order, owner))              # legs in chain order
        begin = np.empty(hops.size, dtype=np.int64)
        begin[rank] = np.cumsum(hops[rank]) - hops[rank]
        total = np.bincount(owner, weights=hops, minlength=jobs.size).astype(np.int64)
        links = np.empty(int(total.sum()), dtype=np.int64)
        stops = np.zeros(links.size, dtype=bool)
        first = 0
        for at, _, table, row in legs:
            n = at.size
            if n:
                assert table is not None
                h = hops[first:first + n]
                links[csr_positions(begin[first:first + n], h)] = table.links[csr_positions(table.offsets[row], h)]
                stops[begin[first:first + n] + h - 1] = True
            first += n
        ps, _ = PathSet.from_csr(links, np.concatenate(([0], np.cumsum(total))), jobs, self.demands.num_jobs, stops)
        return ps


def valiant_chains(topology: Topology, demands: Demands, k: int = 8, *, seed: int = 0) -> PathSet:
    """Up to ``k`` forwarded paths per job: its minimal route, then chains of minimal routes
    through a random host of each of ``k - 1`` random intermediate groups (Valiant's idea with
    the turn made at a rank, which can forward, instead of at a router, which cannot; see
    :mod:`optiq.paths.routing`). Groups as in :func:`optiq.paths.valiant_paths`.

    Examples
    --------
    >>> from optiq.topology.dragonfly import dragonfly
    >>> from optiq.workloads import Demands
    >>> t = dragonfly(2, 4, 2)
    >>> ps = valiant_chains(t, Demands([0], [40], [1]), k=3, seed=1)
    >>> ps.num_paths, ps.copies.tolist()
    (3, [0, 1, 1])
    """
    demands.check_against(topology)
    shape = dragonfly_shape(topology)
    minimal = dragonfly_routes(topology, demands)
    s, t = demands.src, demands.dst
    Gs, Gt = s // shape.p // shape.a, t // shape.p // shape.a
    detours = min(k - 1, shape.g - 2)
    if detours <= 0:
        return minimal
    rng = np.random.default_rng(seed)
    keys = rng.random((s.size, shape.g))
    rows = np.arange(s.size)
    keys[rows, Gs] = keys[rows, Gt] = np.inf
    via = np.argsort(keys, axis=1)[:, :detours]
    per_group = shape.a * shape.p
    host = via * per_group + rng.integers(0, per_group, via.shape)  # a random host of each group
    J = np.repeat(rows, detours)
    first = network_routes(topology, s[J], host.ravel())
    second = network_routes(topology, host.ravel(), t[J])
    links = np.concatenate([np.concatenate([first.path(i), second.path(i)]) for i in range(J.size)])
    stops = np.concatenate([np.concatenate([np.arange(first.hops[i]) == first.hops[i] - 1,
                                            np.arange(second.hops[i]) == second.hops[i] - 1]) for i in range(J.size)])
    hops = first.hops + second.hops
    chains, _ = PathSet.from_csr(links, np.concatenate(([0], np.cumsum(hops))), J, demands.num_jobs, stops)
    both, _ = PathSet.concat([minimal, chains])
    return both
