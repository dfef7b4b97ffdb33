"""``optiq testbed run``: plan, build the network, measure every method in turn, report.

The checks that can fail come first (privileges, MPI, the methods' names, the plans), then the
network is built, one flow measures its goodput, and one MPI job runs a warm-up and
``repeat`` rounds of every method (:mod:`optiq.testbed.session`). The network is removed on
every way out, Ctrl-C and ``kill`` included.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import TestbedError
from .conditions import Conditions
from .launch import find_mpiexec
from .methods import NETWORK, REALIZED, RULES, TABLE_ROUTES, Method, methods_of_plan, parse_methods, plan_methods
from .network import DEFAULT_MTU, DEFAULT_QUEUE, Testbed, terminated_as_interrupt
from .report import TestbedReport, TestbedRow, link_deviation
from .session import COMPLETED, FAILED, Faults, failure_events, measure_goodput, measure_methods
from .system import check_privileges

if TYPE_CHECKING:
    from ..plan import Plan
    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["run_testbed", "DEFAULT_METHODS", "DEFAULT_REPEAT"]

#: The methods measured when none are named.
DEFAULT_METHODS = ("default", "heu2", "opt")
#: Measured rounds of every method by default.
DEFAULT_REPEAT = 5


def run_testbed(topology: Topology, demands: Demands | None = None, *, plan: Plan | None = None,
                methods: str | Sequence[str] = DEFAULT_METHODS, rate: float, repeat: int = DEFAULT_REPEAT,
                warmup: int = 1, queue: int = DEFAULT_QUEUE, congestion: str = "reno", name: str | None = None,
                seed: int = 0, options: dict[str, Any] | None = None, chunk_size: int | None = None,
                pace_paths: bool = True, window: int | None = None, offloads: bool = False,
                mtu: int = DEFAULT_MTU, conditions: Conditions | None = None,
                progress: Callable[[str], None] | None = None) -> TestbedReport:
    """Measure ``methods`` for ``demands`` (or one ``plan`` file's plan) on an emulated network of ``topology``.

    Parameters
    ----------
    topology : Topology
        The network to build (a plan's own, with ``plan``).
    demands : Demands, optional
        What to move; every method plans it (:func:`~optiq.testbed.methods.plan_methods`).
    plan : Plan, optional
        Instead of ``demands`` and ``methods``: this plan, beside its demands on the network's
        routes (``default``).
    methods : str or sequence of str
        ``default`` (always measured), planners (``heu2``, ``opt``, ...), ``tables``,
        ``dynamic``, ``M:free`` (:mod:`optiq.testbed.methods`).
    rate : float
        Bytes/s of the fastest link.
    repeat, warmup : int
        Measured and unmeasured rounds of every method in turn.
    queue : int
        Bytes every link direction queues before dropping.
    congestion : str
        TCP congestion control in every namespace (``reno``: a flow catches up at once when it
        falls behind; ``bbr`` paces itself and lags behind planned rates).
    name : str, optional
        The testbed's name (default ``optiq-<pid>``).
    seed, options, chunk_size
        Planning (as :func:`optiq.planner.compare_methods`) and the verified patterns;
        ``chunk_size`` is the executor's too (by default its own,
        :func:`~optiq.runtime.executor.default_chunk_size`), with ``plan`` as well.
    pace_paths : bool
        The executor sends every path at its planned rate (default; the network shares links
        by itself, and unpaced paths alone on their links run ahead of the plan).
    window : int, optional
        The executor's window (default: from the plan's link rates at the testbed's scale).
    offloads : bool
        Keep segmentation offloads on (default off: packets of link size; needs ethtool).
    mtu : int
        The data links' MTU (default Ethernet's 1500; :class:`~optiq.testbed.network.Testbed`).
    conditions : Conditions, optional
        Loss and slowed cables for the whole run (:mod:`optiq.testbed.conditions`): the plans
        and predictions are the healthy network's, so ``measured_over_predicted`` says how much
        slower each method ran.
    progress : callable, optional

    Returns
    -------
    TestbedReport

    Raises
    ------
    TestbedError
        Where namespaces or MPI are not to be had (before any planning), or the network or a
        run fails (the network is removed first).
    PlanError
        For unknown methods or a planner's refusal (before the network is built).
    """
    say = progress or (lambda message: None)
    if (plan is None) == (demands is None):
        raise TestbedError("give demands (with methods) or one plan, not both or neither")
    if repeat < 1 or warmup < 0:
        raise TestbedError(f"need repeat >= 1 and warmup >= 0, got repeat={repeat}, warmup={warmup}")
    check_privileges()
    find_mpiexec()
    if plan is not None:
        topology = plan.topology
    names = parse_methods(methods, topology) if plan is None else []
    bed = Testbed(topology, rate=rate, queue=queue, name=name, offloads=offloads, congestion=congestion,
                  conditions=conditions, mtu=mtu, progress=say)
    started = time.perf_counter()
    load = os.getloadavg()[0]
    if plan is None:
        assert demands is not None
        say(f"planning {', '.join(names)}")
        rows = plan_methods(bed.layout, demands, names, options, seed=seed, chunk_size=chunk_size, progress=say)
        workload = demands.name
    else:
        rows = methods_of_plan(bed.layout, plan)
        workload = f"{plan.demands.name} ({plan.method} plan)"
    faults = Faults(bed, rows) if bed.conditions.fail else None  # the network's routes without the cables, first
    with terminated_as_interrupt(), bed:
        goodput = measure_goodput(bed, say=say)
        say(f"one flow: {goodput.bytes_per_s * 8 / 1e6:.4g} Mbit/s of payload ({goodput.bytes_per_s / bed.rate:.1%} "
            f"of the link); {goodput.header:.1%} header, {goodput.ack:.1%} acknowledgement bytes")
        rates = bed.layout.link_rates(bed.rate)
        expected = [m.link_bytes(goodput.header, goodput.ack) for m in rows]
        predicted = [float((e / rates).max(initial=0.0)) for e in expected]
        hashed = HashedPaths(bed, say) if topology.ecmp_seed is not None else None
        steps = measure_methods(bed, rows, predicted, repeat=repeat, warmup=warmup, seed=seed, pace_paths=pace_paths,
                                window=window, chunk_size=chunk_size, faults=faults, say=say,
                                connected=None if hashed is None else hashed.read)
    model = None
    if hashed is not None:  # every row on the paths its connections took, the model's spread beside the default
        model = hashed.model(rows[0], predicted[0])
        rows = [hashed.realized(m) for m in rows]
        expected = [m.link_bytes(goodput.header, goodput.ack) for m in rows]
        predicted = [float((e / rates).max(initial=0.0)) for e in expected]
    return _report(bed, rows, steps, goodput, expected, predicted, workload, repeat, warmup, load,
                   time.perf_counter() - started, faults, model)


class HashedPaths:
    """An ECMP testbed's paths: the routes the job's connections took, read once they are open."""

    def __init__(self, bed: Testbed, say: Callable[[str], None]) -> None:
        self.bed, self.say = bed, say
        self.connections: list[tuple[int, int, int, int]] = []
        self.paths: list[np.ndarray] = []  # of each connection direction

    def read(self) -> None:
        from .connections import connection_routes, list_connections

        new = sorted(set(list_connections(self.bed.layout)) - set(self.connections))
        if not new:
            return
        routes = connection_routes(self.bed.layout, new)
        self.paths += [routes.path(i) for i in range(routes.num_paths)]
        self.connections += new
        self.say(f"ECMP: the paths of {len(new)} new connection directions read back ({len(self.connections)} in all)")

    def realized(self, m: Method) -> Method:
        """``m`` with its hashed pairs on the paths read back (rules and job tables stay)."""
        if not self.paths or m.routing in (RULES, TABLE_ROUTES):
            return m
        fwd = m.forwarding
        src = np.array([c[0] for c in self.connections], dtype=np.int64)
        dst = np.array([c[1] for c in self.connections], dtype=np.int64)
        pairs, first = np.unique(fwd.pair_index(src, dst), return_index=True)   # one connection a pair
        return replace(m, forwarding=fwd.with_routes(pairs, [self.paths[i] for i in first.tolist()]))

    def model(self, default: Method, predicted_s: float) -> tuple[float, float, float]:
        """The default row's time over hash draws (:func:`optiq.paths.ecmp.ecmp_spread`), at the
        testbed's scale (as the prediction of the topology's own draw is)."""
        from ..paths.ecmp import ecmp_spread

        t = self.bed.topology
        spread = ecmp_spread(t, default.plan.demands, seed=int(t.ecmp_seed or 0))
        scale = predicted_s / default.model_time_s if default.model_time_s > 0 else 0.0
        return spread.mean_s * scale, spread.p05_s * scale, spread.p95_s * scale


def _report(bed: Testbed, methods: list[Method], steps: list, goodput: Any, expected: list[np.ndarray],
            predicted: list[float], workload: str, repeat: int, warmup: int, load: float,
            seconds: float, faults: Faults | None = None,
            model: tuple[float, float, float] | None = None) -> TestbedReport:
    t = bed.topology
    to_rate = bed.rate / float(t.capacity.max())  # plan capacities -> the testbed's link rates
    out_rows, links, notes = [], {}, []
    measured = [s for s in steps if s.measured]
    base = [s.elapsed_s for s in measured if s.method == methods[0].name and s.outcome == COMPLETED]
    baseline_meas = statistics.median(base) if base else float("nan")
    for m, wire, pred in zip(methods, expected, predicted):
        mine = [s for s in measured if s.method == m.name]
        completed = [s for s in mine if s.outcome == COMPLETED]
        counted = np.mean([s.counters.bytes for s in mine], axis=0)
        times = tuple(s.elapsed_s for s in completed)
        errors = [s.error for s in mine if s.outcome != COMPLETED]
        spread = model if model is not None and m is methods[0] else (None, None, None)
        out_rows.append(TestbedRow(
            model_mean_s=spread[0], model_p05_s=spread[1], model_p95_s=spread[2],
            method=m.name, routing="ecmp" if model is not None and m.routing == NETWORK else m.routing, moved_by="MPI_Ialltoallv" if m.runner == "alltoallv" else "executor",
            predicted_time_s=pred, predicted_at_link_rate_s=m.model_time_s / to_rate,
            measured_times_s=times, predicted_gain=predicted[0] / pred,
            measured_gain=baseline_meas / statistics.median(times) if times else float("nan"),
            link_bytes_deviation=link_deviation(counted, wire, m.link_bytes(0.0, 0.0)),
            drops=int(statistics.median(int(s.counters.drops.sum()) for s in mine)),
            verified=all(s.verified for s in completed), cpu_idle=float(np.mean([s.cpu_idle for s in mine])),
            outcome=FAILED if errors else COMPLETED, error=errors[0] if errors else "",
            rounds=tuple(s.outcome for s in mine), verified_rounds=sum(s.verified for s in completed),
            crossed_pairs=tuple(faults.crossed[m.name]) if faults is not None else (),
            stranded_pairs=tuple(faults.stranded[m.name]) if faults is not None else ()))
        links[m.name] = {"expected": wire.tolist(), "counted": counted.tolist()}
        if m.routing == REALIZED:
            split = int((np.bincount(m.plan.used().paths.job, minlength=m.plan.demands.num_jobs) > 1).sum())
            notes.append(f"{m.name} splits {split} of its {m.plan.demands.num_jobs} pairs over several paths. Per-pair "
                         f"rules cannot carry that: MPI has one connection per pair of ranks, and a rule moves all of "
                         f"it. So it ran on the network's own routes, and its prediction is what they make of it.")
    return TestbedReport(
        topology=t.name, workload=workload, hosts=t.num_endpoints, switches=t.num_nodes - t.num_endpoints,
        cables=t.num_links // 2, rate_bps=bed.rate * 8, goodput_bps=goodput.bytes_per_s * 8, queue_bytes=bed.queue,
        mtu=bed.mtu, congestion_control=bed.congestion, header_overhead=goodput.header, ack_overhead=goodput.ack,
        repeat=repeat, warmup=warmup, cpu_idle=float(np.mean([s.cpu_idle for s in measured])), load_before=load,
        build_s=bed.build_s, seconds=seconds, rows=out_rows, notes=notes, links=links,
        conditions=bed.conditions.describe(),
        labels=[t.link_label(e) for e in range(t.num_links)])


def run_program(topology: Topology, command: Sequence[str], *, rate: float, queue: int = DEFAULT_QUEUE,
                congestion: str = "reno", name: str | None = None, offloads: bool = False,
                mtu: int = DEFAULT_MTU, conditions: Conditions | None = None,
                progress: Callable[[str], None] | None = None) -> tuple[int, str]:
    """Run an MPI program on the emulated network of ``topology``: ``command`` under ``mpiexec`` with
    one rank per host namespace (rank ``i`` on host ``i``), its data pinned to the data network,
    its output to this process's. The network is removed afterwards, whatever happens.

    ``conditions`` ail the network for the whole run (:mod:`optiq.testbed.conditions`); its
    cables that fail do so that many seconds after the program starts, and a sweep later the
    network's own routes around them are installed (:func:`~optiq.testbed.session.failure_events`).

    Returns
    -------
    tuple of (int, str)
        The program's exit code, and a line saying what the data links carried (the busiest
        link and all of them, from the kernel's counters) and when the failures happened.

    Raises
    ------
    TestbedError
        Where namespaces or MPI are not to be had, or the network cannot be built.
    """
    import subprocess

    from .launch import MPI_ENVIRONMENT, mpiexec_argv, write_launcher
    from .system import kill_namespace_processes

    if not command:
        raise TestbedError("no program to run: optiq testbed exec -t SPEC -- python app.py")
    check_privileges()
    find_mpiexec()
    say = progress or (lambda message: None)
    bed = Testbed(topology, rate=rate, queue=queue, name=name, offloads=offloads, congestion=congestion,
                  conditions=conditions, mtu=mtu, progress=say)
    happened: list[str] = []
    with terminated_as_interrupt(), bed:
        events = failure_events(bed)
        if events:
            bed.arm(bed.conditions.dead_links(topology))
        argv = mpiexec_argv(bed.layout, write_launcher(bed.layout, bed.state), range(topology.num_endpoints),
                            command)
        say(f"running {' '.join(command)} on {topology.num_endpoints} ranks, one per host")
        before = bed.counters()
        process = subprocess.Popen(argv, env=dict(os.environ, **MPI_ENVIRONMENT), start_new_session=True)
        began = time.perf_counter()
        try:
            for at, what, do in events:
                try:
                    process.wait(timeout=max(0.0, began + at - time.perf_counter()))
                    break  # the program ended first
                except subprocess.TimeoutExpired:
                    do()
                    happened.append(f"{what} at {time.perf_counter() - began:.2f} s")
                    say(happened[-1])
            code = process.wait()
        except BaseException:
            kill_namespace_processes(bed.layout.namespaces[: topology.num_endpoints] + [bed.layout.control])
            process.wait()
            raise
        finally:
            bed.mend()
        carried = bed.counters() - before
    busiest = int(np.argmax(carried.bytes))
    line = (f"the data links carried {carried.bytes.sum() / 2**20:.1f} MiB in all, the busiest "
            f"{carried.bytes[busiest] / 2**20:.1f} MiB ({topology.link_label(busiest)}); {int(carried.drops.sum()):,} "
            f"packets dropped" + "".join(f"; {event}" for event in happened))
    return code, line
