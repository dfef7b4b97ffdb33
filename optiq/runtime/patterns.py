"""One pattern of ``optiq.alltoallv`` and ``optiq.alltoallw``: how its bytes move (planned, or by MPI).

:func:`prepare` (collective) gathers every rank's byte counts, checks them against the
receivers', places the ranks on the network, plans the bytes between hosts and compiles this
rank's part of the rank-level plan (:mod:`optiq.runtime.ranklevel`), or decides that MPI
moves them (``method="auto"``'s rules, module docstring of :mod:`optiq.runtime.alltoall`).
:mod:`optiq.runtime.moves` moves a call's bytes as its pattern says.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from ..errors import ArgumentError, OptiqError
from ..mpi.launch import from_leader, from_leader_beside, together
from ..paths import PathSet
from ..plan import Plan
from ..topology import Topology, from_spec
from .executor import Executor
from .ranklevel import RankNetwork, host_demands_of, rank_plan

__all__ = ["Pattern", "prepare", "gather_counts", "check_placement", "check_placement_here", "import_planner",
           "names_needed", "rates_known", "planner_options", "MIN_GAIN", "AUTO_METHOD", "MAX_MODEL_EVENTS"]

#: ``method="auto"`` uses a plan only if it predicts at least this fraction less time than
#: the default routes.
MIN_GAIN = 0.05
#: The planner ``method="auto"`` tries.
AUTO_METHOD = "heu2"
#: A re-split solves the LP over the new and the last plan's paths while they are at most this many.
RESPLIT_LP_PATHS = 20_000
#: ``method="auto"``: patterns of at most this many jobs are planned by rank 0 alone.
LEADER_JOBS = 4096
#: ``method="auto"`` skips the chunk-model comparison for plans of more chunk events than
#: this (large messages, where forwarding costs little against the transfer).
MAX_MODEL_EVENTS = 500_000

T = TypeVar("T")


def planner_options(method: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options a call's planner gets: the call's own, and for Heuristic 2 (``heu2`` and
    ``auto``'s plan) its fewest-stops step unless the call says otherwise.

    A plan a call runs forwards every stop's chunks through a rank, which receives and sends
    them again: CPU a node with more ranks than cores lacks, and a time the flow-level
    prediction does not count. So the runtime's Heuristic 2 ends, as ``opt`` does, with the
    plan of fewest stop-bytes at its time and hop-bytes (:func:`optiq.lp.stops.fewest_stops`).

    Examples
    --------
    >>> planner_options("heu2", {"k": 4})
    {'fewest_stops': True, 'k': 4}
    >>> planner_options("heu2", {"fewest_stops": False})
    {'fewest_stops': False}
    >>> planner_options("opt", {})
    {}
    """
    if method in ("heu2", "auto"):
        return {"fewest_stops": True, **options}
    return dict(options)


@dataclass
class Pattern:
    """A pattern: how its bytes move on this rank (``comm.Alltoallv``, a local copy, or a plan)."""

    method: str
    reason: str
    executor: Executor | None = None
    send_jobs: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros(0, np.int64))  # job, peer rank
    recv_jobs: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    predicted_s: float | None = None
    default_s: float | None = None
    trial: bool = False  # auto, unpaced: measure it against comm.Alltoallv on the first call
    #: auto: the candidate paths and the plan's paths between hosts, for the shape's next counts
    candidates: PathSet | None = None
    paths: PathSet | None = None
    #: this rank's own words of the pattern's fingerprint (its counts and the options), once agreed on
    own: tuple[int, int] | None = None
    #: this rank's fastest call of the plan so far (:mod:`optiq.runtime.watch`)
    fastest_s: float | None = None
    #: this rank's last calls of the plan (seconds, the newest last; :mod:`optiq.runtime.watch`)
    recent_s: list[float] = field(default_factory=list)
    #: a call much slower than the usual is measured against MPI again (auto, on real links)
    watched: bool = False
    #: why it is measured again, once it was
    drifted: str = ""

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()

    def runs_ahead(self) -> bool:
        """Whether calls predicted to be of this pattern may run its plan while the ranks agree
        (a plan, settled: not one to measure against MPI first)."""
        return self.executor is not None and not self.trial and self.own is not None

    def stand_in(self, timeout: float) -> None:
        """Take part in a run of the plan with scratch bytes of this rank's sizes (a rank whose
        call is not of this pattern, while the others run it: none of them waits for it)."""
        assert self.executor is not None
        jobs = self.executor.schedule.send_jobs
        self.executor.run({j: np.zeros(n, np.uint8) for j, n in jobs.items()}, timeout=timeout)


#: Between the labelled options of a call's configuration string (``method='auto'; network=...``).
CONFIG_SEPARATOR = "; "


def gather_counts(comm: Any, send_counts: np.ndarray, recv_counts: np.ndarray, config: str,
                  checked: bool = False) -> np.ndarray:
    """Every rank's send counts, as a ``ranks x ranks`` matrix (collective), checking that the
    ranks agree: the same options, and every receive count its sender's send count.

    ``checked``: the agreement's checksums showed that already (:mod:`optiq.runtime.agreement`);
    then only the counts are gathered, in one collective step instead of three.

    Raises
    ------
    ArgumentError
        On every rank, naming the first rank that differs.
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    matrix = np.empty((size, size), dtype=np.int64)
    comm.Allgather(np.ascontiguousarray(send_counts, dtype=np.int64), matrix)
    if checked:
        return matrix
    configs = comm.allgather(config)
    if len(set(configs)) > 1:
        other = next(r for r, value in enumerate(configs) if value != configs[0])
        ours, theirs = configs[0].split(CONFIG_SEPARATOR), configs[other].split(CONFIG_SEPARATOR)
        differ = [(a, b) for a, b in zip(ours, theirs) if a != b]
        raise ArgumentError(f"the ranks passed different options to alltoallv: rank 0 "
                            f"{', '.join(a for a, _ in differ)}; rank {other} {', '.join(b for _, b in differ)}")

    def check_counts() -> None:
        wrong = np.flatnonzero(matrix[:, rank] != recv_counts)
        if wrong.size:
            s = int(wrong[0])
            raise ArgumentError(f"rank {rank} expects {int(recv_counts[s])} bytes from rank {s}, which sends it "
                                f"{int(matrix[s, rank])}")

    together(comm, check_counts)
    return matrix


def check_placement(comm: Any, network: Any, hosts: Any, link_bw: float | None) -> None:
    """Check where the ranks run on the network (collective), raising on every rank as a plan would."""
    together(comm, lambda: _placement(comm, network, hosts, comm.Get_size(), link_bw))


def names_needed(hosts: Any) -> bool:
    """Whether placing the ranks takes every rank's processor name (a collective step): else
    every rank places them alike on its own (:func:`check_placement_here`)."""
    return isinstance(hosts, str) and hosts == "processor" or isinstance(hosts, Mapping)


def check_placement_here(network: Any, hosts: Any, size: int, link_bw: float | None) -> None:
    """:func:`check_placement` on this rank alone, for ``hosts=`` that need no processor names
    (:func:`names_needed`); raises what the plan would raise."""
    if names_needed(hosts):
        raise ValueError("placing the ranks by processor name takes every rank: use check_placement")
    if isinstance(network, str) and hosts is None:  # the commonest call: the outcome remembered per spec
        failure = _default_placement(network, size, link_bw)
        if failure is not None:
            raise failure.with_traceback(None)
        return
    _placement(None, network, hosts, size, link_bw)


@functools.lru_cache(maxsize=32)
def _default_placement(network: str, size: int, link_bw: float | None) -> OptiqError | None:
    """What placing ``size`` ranks on ``network``'s first endpoints raised (the network is not
    built again for every new communicator)."""
    try:
        _placement(None, network, None, size, link_bw)
    except OptiqError as exc:
        return exc
    return None


def prepare(comm: Any, matrix: np.ndarray, *, network: Any, method: str, hosts: Any, link_bw: float | None,
            chunk_model: Any, options: dict[str, Any], last: tuple[PathSet | None, PathSet] | None = None,
            post: Callable[[], Sequence[Any]] = tuple) -> Pattern:
    """Plan a new pattern of every rank's send counts ``matrix`` (:func:`gather_counts`;
    collective): every rank returns its part of the same plan.

    ``method="auto"`` with ``last``, the candidates and plan paths of a pattern of the same
    pairs (other amounts), re-splits: it plans on those candidates instead of making them
    again (:func:`_planned_on`). ``post``: for ``auto``, called on every rank once a plan is
    to be made, it hands the call's bytes to MPI and returns the requests, kept moving while
    rank 0 plans (the caller waits for them). It is not called where the default routes are
    known to be as fast as any plan: a collective's small messages would queue behind those
    bytes on every link, so whatever can be decided before them is.

    Every collective step costs each rank a round of the others, which on a node with more
    ranks than cores is a scheduler's time slice or more; so ``auto``'s decision (is a plan
    faster, which, by how much) is one step of rank 0's (:func:`_auto_decision`)."""
    size = comm.Get_size()
    if not (matrix - np.diag(np.diag(matrix))).any():
        return Pattern("local", "no rank sends to another")
    if method == "mpi" or network is None:
        return Pattern("mpi", "method='mpi'" if method == "mpi" else "no network= to plan on")
    if names_needed(hosts):
        topology, host_of = together(comm, lambda: _placement(comm, network, hosts, size, link_bw))
    else:  # every rank places the ranks alike, and raises alike
        topology, host_of = _placement(None, network, hosts, size, link_bw)
    net = RankNetwork(topology, host_of)
    pace = link_bw is None and rates_known(topology)  # real links of known rates: every path at its planned rate
    demands = host_demands_of(matrix, host_of)
    if demands is None:
        if method == "auto":
            return Pattern("mpi", "every byte stays within hosts")
        return _compiled(comm, net, matrix, None, method, link_bw, "every byte stays within hosts")
    from ..planner import default_routes_optimal, make_plan

    planner = AUTO_METHOD if method == "auto" else method
    # a path may stop only at a host that runs a rank: only ranks forward
    forwarders = np.unique(net.host_of)
    if method != "auto":
        plan = make_plan(topology, demands, planner, comm=comm, forwarders=forwarders,
                         **planner_options(planner, options))
        predicted_s, default_s = _times(net, matrix, plan, topology, demands, link_bw)
        return _compiled(comm, net, matrix, plan, planner, link_bw, f"method={method!r}", predicted_s, default_s,
                         pace)
    # rank 0 decides while the others wait without taking its core (every rank deciding at once,
    # many ranks to a core, took seconds), MPI's bytes in flight kept moving once posted
    if from_leader(comm, lambda: default_routes_optimal(topology, demands, shortest=False)):
        return Pattern("mpi", "the default routes finish at the cut bound: no plan is faster")
    beside = post()
    if demands.num_jobs <= LEADER_JOBS:
        kept: list[PathSet] = []  # the candidates, on rank 0 only: it alone re-splits the shape's next counts

        def decide() -> Pattern | tuple[dict[str, Any], float, float]:
            decision = _auto_decision(None, net, matrix, topology, demands, forwarders, options, last, chunk_model,
                                      link_bw)
            if isinstance(decision, Pattern):
                return decision
            plan, candidates, predicted_s, default_s = decision
            kept.append(candidates)
            return _handed(plan), predicted_s, default_s

        handed = from_leader_beside(comm, decide, beside)
        if isinstance(handed, Pattern):
            return handed
        plan = _received(handed[0], topology, demands)
        candidates, predicted_s, default_s = (kept[0] if kept else None), handed[1], handed[2]
    else:  # the plan's work spread over the ranks
        decision = _auto_decision(comm, net, matrix, topology, demands, forwarders, options, last, chunk_model,
                                  link_bw, beside)
        if isinstance(decision, Pattern):
            return decision
        plan, candidates, predicted_s, default_s = decision
    planner = plan.method
    how = f"the {planner} plan" + (" re-split over the last plan of these pairs" if last is not None else "")
    entry = _compiled(comm, net, matrix, plan, planner, link_bw,
                      f"{how} predicts {default_s / predicted_s:.2f}x the default routes' throughput",
                      predicted_s, default_s, pace)
    # emulated links: comm.Alltoallv is no measure of the emulated network
    entry.trial = entry.watched = link_bw is None
    entry.candidates, entry.paths = candidates, plan.paths
    return entry


def _handed(plan: Plan) -> dict[str, Any]:
    """What rank 0 hands the other ranks of a plan they can complete themselves: all but its
    topology and demands, which every rank has (the broadcast crosses the network's links,
    busy with the call's own bytes: its size is its time)."""
    return {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan) if f.name not in ("topology", "demands")}


def _received(fields: dict[str, Any], topology: Topology, demands: Any) -> Plan:
    """The plan :func:`_handed` handed, with this rank's own topology and demands (checked on rank 0)."""
    return Plan(topology=topology, demands=demands, check_legs=False, check_paths=False, **fields)


#: The modules ``auto``'s decision imports when first run, beyond ``import optiq``'s (SciPy's
#: graph routines for the network's routes take the most): :func:`import_planner` imports them.
PLANNER_MODULES = ("scipy.sparse.csgraph", "random", "optiq.planner", "optiq.planner.methods", "optiq.paths.space",
                   "optiq.sim", "optiq.sim.chunk", "optiq.runtime.runner")


def import_planner() -> None:
    """Import what ``auto``'s decision needs (:data:`PLANNER_MODULES`).

    Its first plan would otherwise import them on the critical path, every rank waiting for
    rank 0's plan: on a node with more ranks than cores, as long as several of the calls it
    plans for. An application's set-up may call this before its loop
    (:func:`optiq.integrations.mpi4py_fft.accelerate` does); a thread beside the calls would
    take the interpreter from the application's own Python, and a crowded node's CPU from
    its ranks, exactly when the calls run.
    """
    for module in PLANNER_MODULES:
        importlib.import_module(module)


def _auto_decision(comm: Any, net: RankNetwork, matrix: np.ndarray, topology: Topology, demands: Any,
                   forwarders: np.ndarray, options: dict[str, Any], last: tuple[PathSet | None, PathSet] | None,
                   chunk_model: Any, link_bw: float | None,
                   beside: Sequence[Any] = ()) -> Pattern | tuple[Plan, PathSet, float, float]:
    """``method="auto"``'s decision, for a pattern whose default routes do not finish at its cut
    bound: a Pattern handing the calls to MPI, and why, or the plan, its candidates and the
    predicted times of the plan and of the default routes.

    With ``comm`` None, this process decides alone (rank 0, for a pattern of at most
    :data:`LEADER_JOBS` jobs: the work a plan spreads over the ranks costs them more in
    messages than it saves); else the plan is made on the ranks of ``comm`` (collective), and
    rank 0 alone runs the steps that are not spread, the others waiting without taking its core.
    The plan is :func:`_planned_on`'s. On emulated links (or with a chunk model fitted to the
    real ones) the plan is kept only if the chunk model predicts forwarding it beats MPI on the
    default routes; on real links without one, its first call is measured instead.
    """
    def leader(step: Callable[[], T]) -> T:
        return step() if comm is None else from_leader_beside(comm, step, beside)

    plan, candidates = _planned_on(comm, topology, demands, forwarders, options, last)
    predicted_s, default_s = leader(lambda: _times(net, matrix, plan, topology, demands, link_bw))
    if predicted_s > default_s * (1 - MIN_GAIN):
        return Pattern("mpi", f"the {plan.method} plan predicts {predicted_s * 1e3:.4g} ms against the default "
                              f"routes' {default_s * 1e3:.4g} ms: {_too_little(predicted_s, default_s)}",
                       predicted_s=predicted_s, default_s=default_s)
    slower = None if link_bw is None and chunk_model is None else leader(
        lambda: _forwarding_costs_more(net, matrix, plan, topology, demands, chunk_model, link_bw))
    if slower is not None:
        return Pattern("mpi", slower, predicted_s=predicted_s, default_s=default_s)
    return plan, candidates, predicted_s, default_s


def _planned_on(comm: Any, topology: Topology, demands: Any, forwarders: np.ndarray, options: dict[str, Any],
                last: tuple[PathSet | None, PathSet] | None) -> tuple[Plan, PathSet]:
    """``method="auto"``'s plan and its candidates, made on the ranks of ``comm`` (collective;
    None: this process alone).

    Heuristic 2, with its fewest-stops step, over the candidate paths of the pairs, made once
    per shape (rank 0 makes them; they depend on the pairs, not the amounts). Re-splitting a
    shape planned before, it then solves the LP over the new plan's paths and the last plan's
    (while they are few, :data:`RESPLIT_LP_PATHS`) and keeps the faster: never worse than
    planning anew, which would give Heuristic 2's plan on the same candidates."""
    from ..paths.space import PathSpace
    from ..planner import make_plan
    from ..planner.methods import default_k, make_candidates

    candidates, last_paths = last if last is not None else (None, None)
    if candidates is None or candidates.num_jobs != demands.num_jobs:
        picks = {key: options[key] for key in ("k", "hop_limit", "seed") if key in options}
        kind = options.get("candidate_kind", "auto")
        picks.setdefault("k", default_k(demands.num_jobs))
        candidates = from_leader(comm, lambda: make_candidates(
            topology, demands, kind=kind, space=PathSpace(topology, demands, forwarders=forwarders,
                                                          seed=picks.get("seed", 0)), stops=False,
            greedy=True, **picks))   # for AUTO_METHOD, a greedy heuristic
        last_paths = None
    plan = make_plan(topology, demands, AUTO_METHOD, comm=comm, candidates=candidates, forwarders=forwarders,
                     **planner_options("auto", options))
    if last_paths is not None and plan.paths.num_paths + last_paths.num_paths <= RESPLIT_LP_PATHS:
        union = PathSet.concat([plan.paths, last_paths])[0].unique()
        lp_options = {key: value for key, value in options.items() if key in ("solver", "time_limit", "seed")}
        split = make_plan(topology, demands, "lp", comm=comm, candidates=union, forwarders=forwarders, **lp_options)
        if split.predicted_time_s < plan.predicted_time_s:
            plan = split
    return plan, candidates


def _times(net: RankNetwork, matrix: np.ndarray, plan: Plan, topology: Topology, demands: Any,
           link_bw: float | None) -> tuple[float, float]:
    """Predicted times of the plan and of the default routes (at ``link_bw`` on emulated links)."""
    if link_bw is None:
        return plan.predicted_time_s, float(plan.info.get("default_time_s", plan.predicted_time_s))
    from ..planner import make_plan
    from .runner import predicted_time

    default = make_plan(topology, demands, "default")
    return (predicted_time(rank_plan(net, matrix, plan), link_bw)[0],
            predicted_time(rank_plan(net, matrix, default), link_bw)[0])


def _compiled(comm: Any, net: RankNetwork, matrix: np.ndarray, host_plan: Plan | None, method: str,
              link_bw: float | None, reason: str, predicted_s: float | None = None,
              default_s: float | None = None, pace: bool = False) -> Pattern:
    plan = rank_plan(net, matrix, host_plan)
    # the host plan was checked; the context's duplicate carries no other point-to-point messages
    executor = Executor(comm, plan, link_bw=link_bw, routes_as_planned=True, pace_paths=pace, duplicate=False)
    rank_of = net.rank_of_endpoint
    jobs = np.array(sorted(executor.schedule.send_jobs), dtype=np.int64)
    sends = (jobs, rank_of[plan.demands.dst[jobs]])
    jobs = np.array(sorted(executor.schedule.recv_jobs), dtype=np.int64)
    recvs = (jobs, rank_of[plan.demands.src[jobs]])
    return Pattern(method, reason, executor, sends, recvs, predicted_s=predicted_s, default_s=default_s)


def rates_known(topology: Topology) -> bool:
    """Whether the network's link rates are the real links' (a spec that names them with
    ``bw=``, an InfiniBand fabric's, Blue Gene/Q's): then a planned call on real links paces
    every path at its planned rate, as ``optiq testbed run`` does, so that links shared max-min
    fairly keep the plan's time; rates a spec only assumes could hold the paths back.

    Examples
    --------
    >>> [rates_known(from_spec(s)) for s in ("torus:4x4", "torus:4x4,bw=20Mb/s", "bgq:512")]
    [False, True, True]
    """
    spec = topology.spec or ""
    return topology.fabric is not None or "bw=" in spec or spec.startswith("bgq:")


def no_faster_plan(network: Topology | str) -> str:
    """Why no plan of any pattern is faster than ``network``'s own routes, or ``""``: on a tree
    (:attr:`~optiq.Topology.is_tree`) every pair of hosts has one route, which any plan's paths
    cross, so ``auto`` hands every call to MPI without gathering its counts or planning.

    Examples
    --------
    >>> no_faster_plan("torus:4x4")
    ''
    >>> no_faster_plan("cluster:hosts=16,edges=4,cores=1")[:38]
    'the network is a tree: every pair of h'
    """
    topology = network if isinstance(network, Topology) else _topology_of(network)
    if topology.is_tree:  # found once per topology object
        return ("the network is a tree: every pair of hosts has one route, which every plan's paths cross, "
                "so no plan is faster than its routes")
    return ""


@functools.lru_cache(maxsize=4)
def _topology_of(spec: str) -> Topology:
    """The topology of a ``network=`` spec, made once per process: the network's routes and the
    candidate paths a plan keeps live with the topology object (:mod:`optiq.paths.kept`), so the
    plans of later calls find them."""
    return from_spec(spec)


def _placement(comm: Any, network: Any, hosts: Any, size: int, link_bw: float | None) -> tuple[Topology, np.ndarray]:
    """The network and the endpoint of every rank (every rank computes the same)."""
    topology = network if isinstance(network, Topology) else _topology_of(network)
    E = topology.num_endpoints

    def endpoint(value: Any, who: str) -> int:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return topology.check_endpoint(int(value), what=who)
        return int(topology.endpoints_named([str(value)])[0])

    if hosts is None:
        if size > E:
            raise ArgumentError(f"the communicator has {size} ranks, more than the {E} endpoints of {topology.name}: "
                             f"give hosts= to put several ranks on a host")
        host_of = np.arange(size)
    elif isinstance(hosts, str) and hosts == "processor" or isinstance(hosts, Mapping):
        names = comm.allgather(_processor_name())
        host_of = np.empty(size, dtype=np.int64)
        for r, name in enumerate(names):
            if isinstance(hosts, Mapping):
                if name not in hosts:
                    raise ArgumentError(f"rank {r} runs on {name!r}, which the hosts= map does not name")
                host_of[r] = endpoint(hosts[name], f"the host of rank {r}")
            else:
                try:
                    host_of[r] = endpoint(name, f"the host of rank {r}")
                except OptiqError as exc:
                    raise ArgumentError(f"rank {r} runs on {name!r} (MPI.Get_processor_name()), which is not a host "
                                        f"of {topology.name} ({exc}); give hosts= a mapping from processor names "
                                        f"to hosts, or a list of hosts by rank") from None
    elif callable(hosts):
        host_of = np.array([endpoint(hosts(r), f"the host of rank {r}") for r in range(size)], dtype=np.int64)
    elif isinstance(hosts, Sequence) and not isinstance(hosts, str):
        if len(hosts) != size:
            raise ArgumentError(f"hosts= names {len(hosts)} hosts for {size} ranks")
        host_of = np.array([endpoint(h, f"the host of rank {r}") for r, h in enumerate(hosts)], dtype=np.int64)
    else:
        raise ArgumentError(f"hosts= must be a list, a function of the rank, 'processor' or a mapping, not {hosts!r}")
    if link_bw is not None and np.unique(host_of).size < size:
        raise ArgumentError("link_bw= emulates one rank per host; several ranks share a host here")
    return topology, host_of


def _too_little(predicted_s: float, default_s: float) -> str:
    """Why a plan that gains less than :data:`MIN_GAIN` is not used, in words.

    Examples
    --------
    >>> _too_little(1.5, 1.0), _too_little(0.98, 1.0), _too_little(1.0, 1.0)
    ('50% slower', 'a gain of 2.0%, less than 5%', 'no faster')
    """
    if predicted_s > default_s * (1 + 1e-9):
        return f"{predicted_s / default_s - 1:.0%} slower"
    if predicted_s >= default_s * (1 - 1e-9):
        return "no faster"
    return f"a gain of {1 - predicted_s / default_s:.1%}, less than {MIN_GAIN:.0%}"


def _processor_name() -> str:
    from mpi4py import MPI

    return MPI.Get_processor_name()


def _forwarding_costs_more(net: RankNetwork, matrix: np.ndarray, plan: Plan, topology: Topology, demands: Any,
                           chunk_model: Any, link_bw: float | None) -> str | None:
    """Why MPI on the default routes is predicted faster than forwarding the plan's chunks, or None."""
    from ..planner import make_plan
    from ..sim import ChunkModel, simulate_chunks, simulate_direct
    from ..sim.chunk import chunk_events

    model = chunk_model or ChunkModel(link_rate_Bps=link_bw)
    planned = rank_plan(net, matrix, plan)
    if chunk_events(planned, planned.chunk_size) > MAX_MODEL_EVENTS:
        return None
    default = rank_plan(net, matrix, make_plan(topology, demands, "default"))
    executor_s = simulate_chunks(planned, model).completion_time_s
    direct_s = simulate_direct(default, model)
    if executor_s >= direct_s:
        return (f"the chunk model predicts {executor_s * 1e3:.4g} ms to forward the {plan.method} plan's chunks, "
                f"against {direct_s * 1e3:.4g} ms for MPI on the default routes")
    return None
