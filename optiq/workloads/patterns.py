"""The communication patterns of the OPTIQ evaluation.

Notation: ``P`` endpoints, ``S`` sources, ``R`` destinations per source (the ratio), so the
destination block holds ``S * R`` consecutive endpoints. Source ``i`` always sends to the
``R`` consecutive endpoints ``start + R*i .. start + R*i + R-1`` of the block, so every
block member receives from exactly one source.

==========  ================================  ===========================================
pattern     sources                           destination block
==========  ================================  ===========================================
disjoint    ``0 .. S-1``                      the last ``S*R`` endpoints (``P/2 .. P-1``
                                              in the constant-ratio experiment)
overlap     ``0 .. S-1``                      starts at ``S//2``: the second half of the
                                              sources also receive
subset      ``start + R*j``, ``j < S``        the last ``S*R`` endpoints; every source is
                                              itself a member of the block, and source
                                              ``j`` sends to the ``R`` block members that
                                              follow it, cyclically within the block
==========  ================================  ===========================================

The defaults are the constant-ratio experiment: ``S = P/16``, ``R = 8``.
"""

from __future__ import annotations

import numpy as np

from ..errors import WorkloadError
from .demands import Demands

__all__ = ["constant_ratio", "distance_sweep", "destination_sweep", "random_pairing", "permutation", "PATTERNS"]

PATTERNS = ("disjoint", "overlap", "subset")


def _block_pairs(sources: np.ndarray, start: int, ratio: int) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(sources.size)
    dst = start + ratio * i[:, None] + np.arange(ratio)[None, :]
    return np.repeat(sources, ratio), dst.ravel()


def constant_ratio(num_endpoints: int, pattern: str = "disjoint", *, nbytes: int = 8 * 2**20,
                   num_sources: int | None = None, ratio: int = 8) -> Demands:
    """The disjoint / overlap / subset patterns (see the module docstring for definitions).

    Parameters
    ----------
    num_endpoints : int
        ``P``, the number of endpoints of the topology.
    pattern : {"disjoint", "overlap", "subset"}
    nbytes : int
        Bytes per pair.
    num_sources : int, optional
        ``S``; default ``P // 16``.
    ratio : int
        ``R``, destinations per source; default 8.

    Raises
    ------
    WorkloadError
        For an unknown pattern, or if the sources and block do not fit in ``P`` endpoints.

    Examples
    --------
    >>> d = constant_ratio(64, "disjoint")
    >>> d.num_jobs, d.src[:9].tolist(), d.dst[:9].tolist()
    (32, [0, 0, 0, 0, 0, 0, 0, 0, 1], [32, 33, 34, 35, 36, 37, 38, 39, 40])
    """
    P = int(num_endpoints)
    S = P // 16 if num_sources is None else int(num_sources)
    if S < 1 or ratio < 1:
        raise WorkloadError(f"pattern {pattern!r} on {P} endpoints needs at least 1 source and ratio >= 1 "
                            f"(got {S} sources, ratio {ratio}); with P/16 sources it needs at least 16 endpoints, "
                            f"or give --sources")
    block = S * ratio
    if pattern == "disjoint":
        if S + block > P:
            raise WorkloadError(f"disjoint: {S} sources + {S} x {ratio} destinations = {S + block} endpoints, but "
                                f"there are {P}: it needs sources x (ratio + 1) <= endpoints")
        src, dst = _block_pairs(np.arange(S), P - block, ratio)
    elif pattern == "overlap":
        if S < 2:
            raise WorkloadError(f"overlap: needs at least 2 sources (a lone source would send to itself), got {S} "
                                f"on {P} endpoints: give --sources 2 or more, or use at least 32 endpoints")
        if S // 2 + block > P:
            raise WorkloadError(f"overlap: the {S} x {ratio} destinations start at endpoint {S // 2}, so it needs "
                                f"{S // 2 + block} endpoints, but there are {P}")
        src, dst = _block_pairs(np.arange(S), S // 2, ratio)
    elif pattern == "subset":
        if block > P or ratio < 2 or S < 2:
            raise WorkloadError(f"subset: needs at least 2 sources (a lone source would send to itself), ratio >= 2 "
                                f"and sources x ratio <= {P} endpoints; got {S} source(s) x ratio {ratio} "
                                f"(set --sources and --ratio, or use at least 32 endpoints)")
        start = P - block
        sources = start + ratio * np.arange(S)
        src = np.repeat(sources, ratio)
        dst = start + (np.repeat(ratio * np.arange(S), ratio) + np.tile(np.arange(1, ratio + 1), S)) % block
    else:
        raise WorkloadError(f"unknown pattern {pattern!r}; expected one of {', '.join(PATTERNS)}")
    return Demands(src, dst, np.full(src.size, nbytes), name=f"{pattern} {S}x{ratio} on {P}")


def distance_sweep(num_endpoints: int, position: int, *, nbytes: int = 8 * 2**20,
                   num_sources: int | None = None, ratio: int = 2) -> Demands:
    """Sources fixed at ``0..S-1``; the destination block starts at ``position * S``.

    The seed experiment on 2,048 nodes: ``S = 256`` (default ``P // 8``), 512 destinations
    (``ratio = 2``) at ``[256, 767]``, ``[512, 1023]``, ``[768, 1279]``, ``[1024, 1535]`` for
    positions 1..4. Raising the position moves the destinations further away.

    Raises
    ------
    WorkloadError
        If the block overlaps the sources or runs past the last endpoint.

    Examples
    --------
    >>> d = distance_sweep(2048, 2)
    >>> int(d.dst.min()), int(d.dst.max())
    (512, 1023)
    """
    P = int(num_endpoints)
    S = P // 8 if num_sources is None else int(num_sources)
    start, block = int(position) * S, S * ratio
    if S < 1:
        raise WorkloadError(f"distance sweep on {P} endpoints: P/8 = {S} sources; it needs at least 8 endpoints, or "
                            f"give --sources")
    if position < 1 or start + block > P:
        raise WorkloadError(f"distance sweep position {position}: block [{start}, {start + block - 1}] "
                            f"does not fit after {S} sources in {P} endpoints: it needs (position + ratio) x sources "
                            f"<= endpoints")
    src, dst = _block_pairs(np.arange(S), start, ratio)
    return Demands(src, dst, np.full(src.size, nbytes), name=f"distance position {position} on {P}")


def destination_sweep(num_endpoints: int, per_source: int, *, nbytes: int = 8 * 2**20,
                      num_sources: int = 64) -> Demands:
    """Sources ``0..S-1``; source ``x`` sends to ``start + k*x .. start + k*x + k-1`` with ``k = per_source``.

    The destination block of ``S*k`` endpoints ends at ``25*P/32`` (endpoint 1599 on 2,048
    nodes, as in the seed experiment: 512 destinations at 1088..1599, 1024 at 576..1599).

    Examples
    --------
    >>> d = destination_sweep(2048, 16)
    >>> d.num_jobs, int(d.dst.min()), int(d.dst.max())
    (1024, 576, 1599)
    """
    P, S, k = int(num_endpoints), int(num_sources), int(per_source)
    end = (25 * P) // 32
    start = end - S * k
    if S < 1 or k < 1 or start < S:
        raise WorkloadError(f"destination sweep: {S} sources x {k} destinations do not fit between the sources and "
                            f"endpoint {end} (25/32 of {P}): it needs sources x (destinations + 1) <= 25/32 of the "
                            f"endpoints; give fewer --sources or --per-source")
    src, dst = _block_pairs(np.arange(S), start, k)
    return Demands(src, dst, np.full(src.size, nbytes), name=f"{S} sources x {k} destinations on {P}")


def permutation(num_endpoints: int, *, nbytes: int = 8 * 2**20, seed: int = 0) -> Demands:
    """A random permutation: every endpoint sends to one other and receives from one other.

    A uniformly random derangement (no endpoint sends to itself), drawn from ``seed``: the
    permutation traffic of the fat-tree literature, which a full-bisection tree can carry
    with no link shared when routed for it.

    Raises
    ------
    WorkloadError
        With fewer than 2 endpoints.

    Examples
    --------
    >>> d = permutation(8, nbytes=100, seed=3)
    >>> sorted(d.src.tolist()) == sorted(d.dst.tolist()) == list(range(8)), bool((d.src != d.dst).all())
    (True, True)
    """
    if num_endpoints < 2:
        raise WorkloadError(f"a permutation needs at least 2 endpoints, got {num_endpoints}")
    rng = np.random.default_rng(seed)
    while True:  # rejection: a random permutation is a derangement with probability about 1/e
        dst = rng.permutation(num_endpoints)
        if (dst != np.arange(num_endpoints)).all():
            break
    src = np.arange(num_endpoints)
    return Demands(src, dst, np.full(num_endpoints, nbytes), name=f"random permutation of {num_endpoints}, seed {seed}")


def random_pairing(demands: Demands, *, seed: int = 0) -> Demands:
    """Shuffle which destination each job goes to, keeping the sets of sources and destinations.

    Every source keeps its number of destinations and every destination its number of
    senders; pairs that would send to themselves or repeat a pair are re-drawn.

    Raises
    ------
    WorkloadError
        If no valid shuffle is found (e.g. a single source sending to itself only).

    Examples
    --------
    >>> base = constant_ratio(64, "overlap")
    >>> shuffled = random_pairing(base, seed=1)
    >>> sorted(shuffled.dst.tolist()) == sorted(base.dst.tolist())
    True
    """
    rng = np.random.default_rng(seed)
    for _ in range(100):
        dst = rng.permutation(demands.dst)
        key = demands.src * (int(dst.max()) + 1) + dst
        if not (demands.src == dst).any() and np.unique(key).size == key.size:
            return Demands(demands.src, dst, demands.nbytes, name=f"{demands.name}, random pairing seed {seed}")
    raise WorkloadError(f"no random pairing of {demands.name!r} without self-pairs or repeats found")
