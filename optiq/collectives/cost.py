"""Cost model of allreduce algorithms with contention (incast) and memory terms (seed 004).

An allreduce of ``S`` bytes on ``N`` ranks is a sequence of steps. Each step is charged,
on the critical path (the busiest rank),

.. math::

    T = \\alpha\\,r + \\beta\\,B + \\gamma\\,C + \\delta\\,M + \\varepsilon\\,\\max(0, f - w)\\,m

with ``r`` rounds (message latencies), ``B`` bytes sent, ``C`` bytes reduced (one
operand of a binary reduction), ``M`` bytes of memory traffic of the reduction (a
``k``-operand reduction of ``m`` bytes reads ``k m`` and writes ``m``), ``f`` the fan-in
(ranks sending to one rank at once), ``w`` the fan-in the receiver absorbs without
contention and ``m`` the bytes each of the ``f`` senders sends. The classic
alpha-beta-gamma model keeps only the first three terms.

Per-algorithm counts (block size ``S/N``; uneven blocks are counted as even):

=================  ==========================  ==================  ==================  ==================  ========
algorithm          rounds                      bytes sent          bytes reduced       memory traffic      fan-in
=================  ==========================  ==================  ==================  ==================  ========
Ring               ``2(N-1)``                  ``2(N-1)S/N``       ``(N-1)S/N``        ``3(N-1)S/N``       1
RHD                ``2 log2 N' + 2e``          ``2(N'-1)S/N' +``   ``(N'-1)S/N' +``    ``3 C``             1
                                               ``5eS/2``           ``eS``
CPS                ``2``                       ``2(N-1)S/N``       ``(N-1)S/N``        ``(N+1)S/N``        ``N-1``
hier. CPS a×b      ``4``                       ``2(N-1)S/N``       ``(N-1)S/N``        ``(a+1)S/a +``      ``a-1``,
                                                                                       ``(b+1)S/N``        ``b-1``
=================  ==========================  ==================  ==================  ==================  ========

RHD is recursive halving (reduce-scatter) then doubling (allgather) on ``N'`` = the
largest power of two ≤ ``N``; when ``N`` is not a power of two (``e = 1``) the ``N - N'``
extra ranks first hand their whole vector to a partner and get the result back at the
end. The ranks that do not fold start halving at once, so their first halves (``S/2``)
reach the folding partners while those still receive the extra ranks' vectors: the fold's
busiest link carries ``3S/2``. (Where only some folding ranks get such a half, the ranks fall
out of step and more is lost; the model over the network's routes replays the messages as
they travel and counts that too: :func:`routed_steps`.) CPS: every rank reduces the ``1/N``
block it owns from all others in one ``N-1`` fan-in step, then every rank sends its block to
all others. Hierarchical CPS ``a × b``
(``a b = N``): CPS reduce-scatter within groups of ``a``, then among the ``b`` ranks
that own the same ``1/a`` slice, then the two allgathers in reverse; ``a × 1`` and
``1 × b`` are CPS itself.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import OptiqError
from ..utils.jsonfile import read_tagged, write_tagged

if TYPE_CHECKING:
    from typing import Any

__all__ = ["AllreduceParams", "Step", "algorithm_steps", "algorithms", "predict", "rank_algorithms", "choose", "tied",
           "CHOICE_TIE", "max_fan_in", "Routes",
           "algorithm_rounds", "routed_steps", "model_routes", "load_routes", "pairs_within",
           "CostTerms", "step_terms", "load_params", "MODELS"]

MODELS = ("contention", "abg")

#: Predictions within this fraction of the best are a tie (:func:`choose`): an algorithm's
#: measured time moves by more than that from run to run, so they do not say which is faster.
CHOICE_TIE = 0.01


@dataclass(frozen=True)
class AllreduceParams:
    """Machine parameters (seconds, seconds per byte).

    ``threshold`` is the fan-in ``w`` absorbed without contention. For the plain
    alpha-beta-gamma model ``delta`` and ``epsilon`` are zero.
    """

    alpha: float
    beta: float
    gamma: float
    delta: float = 0.0
    epsilon: float = 0.0
    threshold: int = 1

    def __post_init__(self) -> None:
        values = (self.alpha, self.beta, self.gamma, self.delta, self.epsilon)
        if not all(math.isfinite(v) and v >= 0 for v in values) or self.threshold < 0:
            raise OptiqError(f"allreduce model parameters must be finite and non-negative: {self}")

    def __repr__(self) -> str:
        return (f"AllreduceParams(alpha={self.alpha:.3g} s, beta={self.beta * 1e9:.3g} ns/B, "
                f"gamma={self.gamma * 1e9:.3g} ns/B, delta={self.delta * 1e9:.3g} ns/B, "
                f"epsilon={self.epsilon * 1e9:.3g} ns/B, threshold={self.threshold})")


@dataclass(frozen=True)
class Step:
    """One step of an algorithm on the critical path (see the module docstring)."""

    rounds: float
    bytes_sent: float
    bytes_reduced: float
    memory_bytes: float
    fan_in: int
    message_bytes: float


@dataclass(frozen=True)
class CostTerms:
    """The five terms of a prediction, in seconds."""

    latency: float
    bandwidth: float
    reduction: float
    memory: float
    contention: float

    @property
    def total(self) -> float:
        return self.latency + self.bandwidth + self.reduction + self.memory + self.contention


def algorithms(ranks: int) -> list[str]:
    """The algorithm names for ``ranks``: ring, rhd, cps and every ``hcps:AxB`` with a, b ≥ 2.

    Examples
    --------
    >>> algorithms(12)
    ['ring', 'rhd', 'cps', 'hcps:2x6', 'hcps:3x4', 'hcps:4x3', 'hcps:6x2']
    """
    if ranks < 2:
        raise OptiqError(f"an allreduce needs at least 2 ranks, got {ranks}")
    return ["ring", "rhd", "cps"] + [f"hcps:{a}x{ranks // a}" for a in range(2, ranks // 2 + 1)
                                     if ranks % a == 0]


def parse_hierarchy(name: str, ranks: int) -> tuple[int, int]:
    """``"hcps:AxB"`` -> ``(A, B)``, checked against ``ranks``."""
    try:
        a, b = (int(x) for x in name.split(":", 1)[1].lower().split("x"))
    except (IndexError, ValueError):
        raise OptiqError(f"hierarchical CPS is written hcps:AxB (for example hcps:3x4), got {name!r}") from None
    if a < 1 or b < 1 or a * b != ranks:
        raise OptiqError(f"{name!r}: the fan-ins {a} x {b} must multiply to the {ranks} ranks")
    return a, b


def _cps_steps(S: float, group: int, slice_bytes: float) -> tuple[Step, Step]:
    """Reduce-scatter and allgather of ``slice_bytes`` among ``group`` ranks, all at once."""
    block = slice_bytes / group
    reduce = Step(1, (group - 1) * block, (group - 1) * block, (group + 1) * block, group - 1, block)
    gather = Step(1, (group - 1) * block, 0.0, 0.0, group - 1, block)
    return reduce, gather


def algorithm_steps(name: str, ranks: int, nbytes: float) -> list[Step]:
    """The steps of algorithm ``name`` (see :func:`algorithms`) for ``nbytes`` on ``ranks``.

    Raises
    ------
    OptiqError
        For an unknown algorithm, a bad hierarchy or fewer than 2 ranks.

    Examples
    --------
    Ring on 4 ranks, 4,000 bytes: 6 rounds of 1,000 bytes, 3 of them reducing.

    >>> steps = algorithm_steps("ring", 4, 4000)
    >>> sum(s.rounds for s in steps), sum(s.bytes_sent for s in steps), sum(s.bytes_reduced for s in steps)
    (6, 6000.0, 3000.0)
    """
    N, S = int(ranks), float(nbytes)
    if N < 2:
        raise OptiqError(f"an allreduce needs at least 2 ranks, got {N}")
    if name == "ring":
        block = S / N
        return [Step(N - 1, (N - 1) * block, (N - 1) * block, 3 * (N - 1) * block, 1, block),
                Step(N - 1, (N - 1) * block, 0.0, 0.0, 1, block)]
    if name == "rhd":
        p2 = 1 << (N.bit_length() - 1)
        log = p2.bit_length() - 1
        part = (p2 - 1) / p2 * S
        steps = [Step(log, part, part, 3 * part, 1, S / 2), Step(log, part, 0.0, 0.0, 1, S / 2)]
        if p2 != N:  # the fold's busiest link: a vector, and a first half sent at once
            steps = [Step(1, 1.5 * S, S, 3 * S, 1, S)] + steps + [Step(1, S, 0.0, 0.0, 1, S)]
        return steps
    if name == "cps":
        reduce, gather = _cps_steps(S, N, S)
        return [reduce, gather]
    if name.startswith("hcps:"):
        a, b = parse_hierarchy(name, N)
        r1, g1 = _cps_steps(S, a, S)
        r2, g2 = _cps_steps(S, b, S / a)
        return [s for s in (r1, r2, g2, g1) if s.fan_in > 0]
    raise OptiqError(f"unknown allreduce algorithm {name!r}; expected one of {', '.join(algorithms(N))}")


@dataclass(frozen=True, repr=False)
class Routes:
    """Which links the bytes between every two ranks cross: the network's own routes
    (:func:`optiq.paths.network_routes`), rank ``i`` on host ``i``.

    On one switch every step's busiest link is a rank's own, and the model is the seed's; on a
    tree, the links between switches may carry more (a step whose pairs cross them share
    them), and :meth:`busiest` says how much more.

    Attributes
    ----------
    network : str
        The topology's spec.
    ranks : int
    links, offsets : ndarray of int
        The links of pair ``i * ranks + j`` are ``links[offsets[p]:offsets[p + 1]]`` (none for ``i == j``).
    weight : ndarray of float
        Per link, the ranks' own links' capacity over its own: a byte on it weighs that many bytes on theirs.
    """

    network: str
    ranks: int
    links: np.ndarray
    offsets: np.ndarray
    weight: np.ndarray

    @classmethod
    def of(cls, topology: Any, ranks: int) -> Routes:
        """The routes between ``ranks`` ranks on the first hosts of ``topology`` (a Topology or a spec).

        Raises
        ------
        OptiqError
            When the network has fewer hosts than ranks, or cannot route a pair.

        Examples
        --------
        >>> r = Routes.of("cluster:hosts=4,edges=2,cores=1", 4)
        >>> r.busiest([0, 1], [2, 3], [1000.0, 1000.0])  # both pairs cross the uplink of the first edge switch
        2000.0
        >>> r.busiest([0, 2], [1, 3], [1000.0, 1000.0])  # each pair within its edge switch
        1000.0
        """
        from ..paths import network_routes
        from ..topology import Topology, from_spec

        t = topology if isinstance(topology, Topology) else from_spec(topology)
        if ranks > t.num_endpoints:
            raise OptiqError(f"{t.name} has {t.num_endpoints} hosts, fewer than {ranks} ranks")
        src, dst = np.divmod(np.arange(ranks * ranks), ranks)
        apart = src != dst
        routes = network_routes(t, src[apart], dst[apart])
        hops = np.zeros(ranks * ranks, np.int64)
        hops[apart] = np.diff(routes.offsets)
        own = t.capacity[np.isin(t.link_src, np.arange(ranks))]
        return cls(t.spec or t.name, ranks, routes.links.astype(np.int64), np.concatenate(([0], np.cumsum(hops))),
                   float(own.max()) / t.capacity)

    def busiest(self, src: Any, dst: Any, nbytes: Any) -> float:
        """The bytes on the busiest link (weighed by :attr:`weight`) when ``src[k]`` sends
        ``nbytes[k]`` to ``dst[k]`` for every ``k`` at once."""
        from ..paths.pathset import csr_positions

        pair = np.asarray(src, np.int64) * self.ranks + np.asarray(dst, np.int64)
        hops = self.offsets[pair + 1] - self.offsets[pair]
        loads = np.bincount(self.links[csr_positions(self.offsets[pair], hops)],
                            weights=np.repeat(np.asarray(nbytes, float), hops), minlength=self.weight.size)
        return float((loads * self.weight).max(initial=0.0))

    def __repr__(self) -> str:
        return f"Routes({self.network}, {self.ranks} ranks)"


def pairs_within(groups: list[list[int]], nbytes: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every member of every group sending ``nbytes`` to every other member."""
    pairs = [(i, j) for g in groups for i in g for j in g if i != j]
    src, dst = (np.array(x, np.int64) for x in zip(*pairs)) if pairs else (np.zeros(0, np.int64),) * 2
    return src, dst, np.full(src.size, float(nbytes))


def algorithm_rounds(name: str, ranks: int, nbytes: float) -> list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Who sends what to whom in each round of each step of :func:`algorithm_steps` (the same
    steps, in order): per step, per round, ``(src, dst, bytes)`` of every message at once."""
    N, S = int(ranks), float(nbytes)
    ranks_ = np.arange(N)
    if name == "ring":
        ring = (ranks_, (ranks_ + 1) % N, np.full(N, S / N))
        return [[ring] * (N - 1), [ring] * (N - 1)]
    if name == "rhd":
        p2 = 1 << (N.bit_length() - 1)
        extra = N - p2
        real = np.array([2 * m + 1 if m < extra else m + extra for m in range(p2)])
        dists = [1 << k for k in range(p2.bit_length() - 1)]  # doubling's partners' distances; halving's reversed
        steps = [[(real, real[np.arange(p2) ^ d], np.full(p2, S * d / p2)) for d in order]
                 for order in (dists[::-1], dists)]
        if extra:
            evens = 2 * np.arange(extra)
            steps = [[(evens, evens + 1, np.full(extra, S))]] + steps + [[(evens + 1, evens, np.full(extra, S))]]
        return steps
    a, b = (N, 1) if name == "cps" else parse_hierarchy(name, N) if name.startswith("hcps:") else (0, 0)
    if not a:
        algorithm_steps(name, N, S)  # raises for the unknown name
    within = pairs_within([[g * a + j for j in range(a)] for g in range(b)], S / a)
    across = pairs_within([[g * a + i for g in range(b)] for i in range(a)], S / N)
    return [[within], [across], [across], [within]] if b > 1 and a > 1 else [[within], [within]] if a > 1 \
        else [[across], [across]]


def routed_steps(name: str, ranks: int, nbytes: float, routes: Routes | None) -> list[Step]:
    """:func:`algorithm_steps`, each step's bytes the time its messages take as they travel
    over the network's routes (:func:`optiq.collectives.replay.replay_rounds`): a step ends
    when its last message arrives, and its bytes are the time since the step before ended.

    On a star, where every rank keeps in step, these are the per-round counts; on a tree more
    where a step's pairs share the links between switches, and in RHD with extra ranks more
    where early halves share a late rank's link. Without ``routes``, the steps as they are.
    """
    from .replay import replay_rounds

    steps = algorithm_steps(name, ranks, nbytes)
    if routes is None:
        return steps
    if routes.ranks != ranks:
        raise OptiqError(f"the routes are for {routes.ranks} ranks, not {ranks}")
    rounds = algorithm_rounds(name, ranks, nbytes)
    arrival = replay_rounds([r for step in rounds for r in step], routes)
    sizes = [sum(r[0].size for r in step) for step in rounds]
    ends = np.maximum.accumulate([a.max(initial=0.0) for a in np.split(arrival, np.cumsum(sizes)[:-1])])
    return [replace(step, bytes_sent=float(b)) for step, b in zip(steps, np.diff(ends, prepend=0.0))]


def step_terms(step: Step, params: AllreduceParams) -> CostTerms:
    """The cost terms of one step."""
    excess = max(0, step.fan_in - params.threshold)
    return CostTerms(params.alpha * step.rounds, params.beta * step.bytes_sent, params.gamma * step.bytes_reduced,
                     params.delta * step.memory_bytes, params.epsilon * excess * step.message_bytes)


def predict(name: str, ranks: int, nbytes: float, params: AllreduceParams, routes: Routes | None = None) -> CostTerms:
    """Predicted time of algorithm ``name``, split into its five terms; with ``routes``, each
    step's bytes are those of its busiest link (:func:`routed_steps`).

    Examples
    --------
    >>> p = AllreduceParams(alpha=1e-6, beta=1e-9, gamma=1e-9)
    >>> round(predict("ring", 4, 4000, p).total * 1e6, 3)    # 6 us + 6 us + 3 us
    15.0
    """
    parts = [step_terms(s, params) for s in routed_steps(name, ranks, nbytes, routes)]
    return CostTerms(*(sum(getattr(p, f) for p in parts) for f in CostTerms.__dataclass_fields__))


def rank_algorithms(ranks: int, nbytes: float, params: AllreduceParams,
                    routes: Routes | None = None) -> list[tuple[str, CostTerms]]:
    """Every algorithm for ``ranks``, fastest first by predicted time."""
    return sorted(((name, predict(name, ranks, nbytes, params, routes)) for name in algorithms(ranks)),
                  key=lambda item: item[1].total)


def max_fan_in(name: str, ranks: int) -> int:
    """The most ranks that send to one rank at once in any step of ``name``."""
    return max(s.fan_in for s in algorithm_steps(name, ranks, 1.0))


def choose(predicted: dict[str, float], ranks: int, tie: float = CHOICE_TIE) -> str:
    """The algorithm to run, given each one's predicted time: the fastest, except that
    predictions within ``tie`` of the fastest are a tie, which the smaller fan-in wins
    (then the faster prediction).

    Where the fitted contention is too small to tell them apart, as on a switch whose queues
    never overflow in the micro-benchmarks, every bandwidth-optimal algorithm is predicted
    within a fraction of a percent of the others, and the order among them is the fit's noise.
    The contention term is the one that would separate them, and it grows with the fan-in:
    the smaller fan-in is the side of the tie it would favour.

    Raises
    ------
    OptiqError
        With no predictions, or a name :func:`algorithm_steps` does not know.

    Examples
    --------
    >>> choose({"ring": 0.2187, "hcps:6x2": 0.2186, "rhd": 0.5}, 12)   # a tie: ring sends to one rank at a time
    'ring'
    >>> choose({"ring": 0.25, "hcps:6x2": 0.2186}, 12)
    'hcps:6x2'
    """
    if not predicted:
        raise OptiqError("no predictions to choose from")
    return min(tied(predicted, tie), key=lambda name: (max_fan_in(name, ranks), predicted[name]))


def tied(predicted: dict[str, float], tie: float = CHOICE_TIE) -> list[str]:
    """The algorithms predicted within ``tie`` of the fastest, fastest first (:func:`choose`
    picks among them).

    Examples
    --------
    >>> tied({"ring": 0.2187, "hcps:6x2": 0.2186, "rhd": 0.5})
    ['hcps:6x2', 'ring']
    """
    fastest = min(predicted.values(), default=0.0)
    return sorted((name for name, t in predicted.items() if t <= fastest * (1 + tie)), key=predicted.__getitem__)


def feature_row(steps: Any) -> np.ndarray:
    """Summed counts ``[rounds, bytes sent, bytes reduced, memory bytes]`` of ``steps``."""
    return np.array([sum(s.rounds for s in steps), sum(s.bytes_sent for s in steps),
                     sum(s.bytes_reduced for s in steps), sum(s.memory_bytes for s in steps)], dtype=float)


def incast_volume(steps: Any, threshold: int) -> float:
    """``sum max(0, f - w) * m`` over ``steps``: what epsilon multiplies."""
    return float(sum(max(0, s.fan_in - threshold) * s.message_bytes for s in steps))


def model_routes(model: str, routes: Routes | None) -> Routes | None:
    """The routes model ``model`` predicts with: the contention model's, none for alpha-beta-gamma
    (the classic model, blind to the network)."""
    return routes if model == "contention" else None


def save_params(models: dict[str, AllreduceParams], path: str | Path, **meta: Any) -> None:
    """Write fitted parameters of both models as JSON."""
    write_tagged(path, "optiq-allreduce-params", {**meta, "models": {k: asdict(v) for k, v in models.items()}})


def load_params(path: str | Path) -> dict[str, AllreduceParams]:
    """Read parameters written by :func:`save_params` (``optiq collectives fit``).

    Raises
    ------
    OptiqError
        For a missing, corrupt or foreign file, naming it.
    """
    data = read_tagged(path, "optiq-allreduce-params", "allreduce parameters", hint=" (see optiq collectives fit)")
    try:
        return {name: AllreduceParams(**data["models"][name]) for name in MODELS}
    except (KeyError, TypeError) as exc:
        raise OptiqError(f"allreduce parameters {str(path)!r} are incomplete: {exc!r}") from None


def load_routes(path: str | Path, ranks: int) -> Routes | None:
    """The routes of ``ranks`` ranks on the network the parameters were fitted on
    (``optiq collectives fit --network``), or None when fitted without one.

    Raises
    ------
    OptiqError
        For an unreadable file, or a network with fewer hosts than ``ranks``.
    """
    data = read_tagged(path, "optiq-allreduce-params", "allreduce parameters", hint=" (see optiq collectives fit)")
    network = data.get("network")
    return None if network is None else Routes.of(network, ranks)
