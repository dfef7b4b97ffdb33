"""One function per ``optiq`` subcommand: read the parsed arguments, call the library, print.

``optiq run`` is :func:`optiq.cli.launcher.replay`. The work itself is in the library;
what is here is turning options into calls and results into lines.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, fields, replace
from typing import TYPE_CHECKING

from ..errors import OptiqError
from ..metrics.compute import plan_metrics
from ..metrics.tables import jobs_table, links_table, metrics_table, named_loads, workload_line
from ..mpi.launch import need_mpi, world
from ..plan import DEFAULT_CHUNK_SIZE, load_plan
from ..planner import COMPARE_METHODS, cluster_tables, compare_methods, job_tables, make_plan, split_plan
from ..planner.engines import check_engines, tables_against_engines
from ..sim import (
    ChunkModel,
    fit_chunk_model,
    load_chunk_model,
    read_run_samples,
    simulate_chunks,
    simulate_direct,
    simulate_flows,
)
from ..sim.flow import DEFAULT_BATCH
from ..topology import capacity_classes, from_spec
from ..utils.jsonfile import check_directory, check_writable, dumps, write_results
from ..utils.progress import heartbeat
from ..utils.units import format_seconds
from ..workloads import WorkloadSpec, constant_ratio, read_jobs, read_qos, read_split
from . import launcher
from .argtypes import routed_spec
from .live import LiveLine

if TYPE_CHECKING:
    from typing import Any

    from ..topology import Topology
    from ..workloads import Demands

__all__ = ["COMMANDS"]


def plan(args: argparse.Namespace) -> int:
    """``optiq plan``: plan one workload with one method and write the plan file."""
    comm = world()
    leader = comm is None or comm.Get_rank() == 0
    _check_outputs(args)
    say = _progress(args) if leader else None
    topology, demands = _workload(args, say)
    qos = read_qos(args.qos, demands.num_jobs) if args.qos else None
    plan = make_plan(topology, demands, args.method, progress=say, qos=qos, comm=comm,
                     chunk_size=args.chunk_size or DEFAULT_CHUNK_SIZE,
                     seed=args.seed, routing=args.routing, max_intermediates=args.max_intermediates or 1,
                     **_planner_options(args))
    if not leader:
        return 0
    _warn(plan)
    plan.save(args.output)
    if qos is not None and "qos_throughput_Bps" in plan.info:
        rates = plan.info["qos_throughput_Bps"]
        print("QoS throughput: " + ", ".join(f"{name} {rate / 1e9:.3f} GB/s (share {qos.shares[name]:g})"
                                             for name, rate in rates.items()))
    m = plan_metrics(plan, check_bound=False, fair=False)
    print(f"wrote {args.output}: {args.method}, {plan.routing}, {m.jobs} jobs, {m.total_paths} paths, predicted "
          f"{format_seconds(m.predicted_time_s)} (cut bound {format_seconds(m.cut_bound_s)}"
          + (f", proven for {plan.routing} plans {format_seconds(m.lower_bound_time_s)})"
             if m.lower_bound_time_s > m.cut_bound_s * (1 + 1e-9) else ")"))
    if plan.routing == "free":
        print(f"free plan: the network must route every path as planned; routed by its own rule "
              f"({topology.default_routing}) it takes {format_seconds(plan.realized_time_s)}")
    return 0


def evaluate(args: argparse.Namespace) -> int:
    """``optiq eval``: the metrics of a plan file."""
    plan = load_plan(args.plan)
    _warn_tables(plan.topology)
    split = read_split(args.split, plan.topology, plan.demands) if args.split else None
    carried = None if split is None else split_plan(plan.topology, plan.demands, split).predicted_time_s
    m = plan_metrics(plan, progress=_progress(args), default_time_s=carried)
    if args.json:
        out = m.to_dict()
        if args.links or args.jobs:
            out.update(named_loads(plan, args.links, args.jobs))
        print(dumps(out))
    else:
        print(workload_line(plan.topology.name, plan.demands))
        print(metrics_table([m], wide=args.wide))
        print(f"default routes: {plan.topology.default_routing}"
              + (f", split over the LIDs as {args.split} says" if args.split else "") + f", {format_seconds(m.default_time_s)}")
        print(_routing_line(plan, m))
        if m.fair_time_s is not None:
            print(f"links shared max-min fairly: {format_seconds(m.fair_time_s)}, {m.fair_time_s / m.predicted_time_s:.3f} "
                  f"x predicted (optiq run --pace-paths sends every path at its planned rate, which keeps the "
                  f"predicted time)")
        for count, table in ((args.links, links_table), (args.jobs, jobs_table)):
            if count:
                print("\n" + table(plan, count))
    if m.bound_note:
        print(f"optiq: warning: {m.bound_note}", file=sys.stderr)
    return 0


def compare(args: argparse.Namespace) -> int:
    """``optiq compare``: plan one workload with several methods, side by side."""
    say = _progress(args)
    topology, demands = _workload(args, say)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in COMPARE_METHODS]
    if unknown or not methods:
        raise OptiqError(f"unknown method(s) {', '.join(unknown) or '(none)'}; choose from "
                         f"{', '.join(COMPARE_METHODS)}")
    split = read_split(args.split, topology, demands) if args.split else None
    rows, times = _compare(topology, demands, methods, _planner_options(args), say,
                           chunk_size=args.chunk_size or DEFAULT_CHUNK_SIZE,
                           seed=args.seed, routing=args.routing, max_intermediates=args.max_intermediates or 1,
                           split=split)
    if args.json:
        print(dumps([dict(r.to_dict(), plan_s=float(t)) for r, t in zip(rows, times)]))
    else:
        print(workload_line(topology.name, demands))
        print(metrics_table(rows, {"plan s": times}, wide=args.wide))
    return 0


def tables(args: argparse.Namespace) -> int:
    """``optiq tables``: forwarding tables that carry one job, or every job of a jobs file, for OpenSM's file engine;
    ``--check``: whether loaded tables still route every LID on the fabric as it is now."""
    if args.check:
        return _check_loaded_tables(args)
    if not (args.pattern or args.demands or args.traffic or args.jobs):
        raise OptiqError("optiq tables needs the job: --pattern, --demands, --traffic or --jobs (or --check, to check "
                         "the tables of --routes)")
    if not args.topology:
        raise OptiqError("optiq tables needs the fabric: -t ibnet:FILE")
    if not args.output:
        raise OptiqError("optiq tables needs --output FILE for the tables it writes (or --check, to check the "
                         "tables of --routes)")
    _check_outputs(args)
    split_path = args.split or (f"{args.output}.split.csv" if args.lmc else None)
    if split_path and not args.lmc:
        raise OptiqError("--split applies with --lmc (which LID of its destination each pair sends to)")
    if args.jobs and args.lmc:
        raise OptiqError("--lmc applies to one job (--demands, --pattern or --traffic), not to --jobs")
    for path, option in ((split_path, "--split"), (args.json, "--json")):
        if path:
            check_writable(path, option)
    engines = check_engines(args.against) if args.against else []
    if engines and args.jobs:
        raise OptiqError("--against applies to one job (--demands, --pattern or --traffic), not to --jobs")
    say = _progress(args)
    topology = _topology(args, say)
    if topology.fabric is None:
        raise OptiqError(f"optiq tables writes an InfiniBand fabric's forwarding tables; {topology.name} is not one "
                         f"(-t ibnet:FILE)")
    if args.jobs:
        cluster = cluster_tables(topology, read_jobs(args.jobs, topology), rounds=args.rounds, progress=say)
        made, report = cluster.made, cluster.as_dict()
    else:
        demands = _demands(args, topology, say)
        options = dict(lmc=args.lmc, allow_credit_loops=args.allow_credit_loops, rounds=args.rounds)
        if engines:
            made, against = tables_against_engines(topology, demands, engines, progress=say, **options)
        else:
            made = job_tables(topology, demands, progress=say, **options)
        cluster, report = None, made.as_dict()
        if engines:
            report.update(engines_s=against.times_s, best_engine=against.best)
            print(against.line(made.time_s))
    for line in made.warnings():
        print(f"optiq: warning: {line}", file=sys.stderr)
    made.write(args.output)
    if split_path:
        made.write_split(split_path)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(dumps(report) + "\n")
    print(made)
    if cluster is not None:
        print(cluster)
    print(f"wrote {args.output}" + (f" and the split {split_path}" if split_path else "")
          + (f" and the report {args.json}" if args.json else ""))
    print(f"load them: opensm -R file,no_fallback -U {args.output} (a running OpenSM re-reads them on kill -HUP; "
          f"without no_fallback a wrong file falls back to minhop in silence)")
    return 0


def _check_loaded_tables(args: argparse.Namespace) -> int:
    """``optiq tables --check -t ibnet:CURRENT --routes LOADED``: every LID the tables lose, one line each."""
    from ..paths.tablecheck import check_tables

    given = [f"--{name}" for name in ("pattern", "demands", "traffic", "jobs", "output", "split", "json")
             if getattr(args, name, None)]
    if given:
        raise OptiqError(f"--check writes nothing and takes no workload: {', '.join(given)} does not apply")
    if not args.routes:
        raise OptiqError("--check needs the tables to check: --routes LOADED (dump_lfts of the fabric)")
    topology = _topology(args, _progress(args))
    if topology.fabric is None:
        raise OptiqError(f"--check checks an InfiniBand fabric's tables; {topology.name} is not one (-t ibnet:FILE)")
    report = check_tables(topology)
    print(report)
    for line in report.lost:
        print(f"  {line}")
    if report.ok:
        return 0
    print(f"optiq: error: {report.source}: {len(report.lost):,} LIDs unreachable from some host, "
          f"{report.looping:,} entries loop, {report.bad_ports:,} name a port the switch lacks"
          + (", and a credit loop" if report.credit_loop else "")
          + f"; repair them: optiq tables -t {args.topology} --routes {args.routes} (the job) -o FILE",
          file=sys.stderr)
    return 1


def demo(args: argparse.Namespace) -> int:
    """``optiq demo``: the main job, methods compared on Blue Gene/Q 1024."""
    topology = from_spec(args.topology)
    demands = constant_ratio(topology.num_endpoints, "disjoint")
    print(workload_line(topology.name, demands))
    rows, times = _compare(topology, demands, ["default", "heu1", "heu2", "opt"], dict(k=16), _progress(args))
    print(metrics_table(rows, {"plan s": times}, wide=args.wide))
    print(f"optimised plan vs default routing: {rows[0].predicted_time_s / rows[-1].predicted_time_s:.2f}x "
          "faster (predicted, flow level)")
    return 0


def simulate(args: argparse.Namespace) -> int:
    """``optiq simulate``: a plan file at flow or chunk level."""
    plan = load_plan(args.plan)
    if args.model == "flow":
        batch = DEFAULT_BATCH if args.batch is None else args.batch
        result = simulate_flows(plan, args.sharing or "equal", batch=batch, pace_paths=args.pace_paths,
                                progress=_progress(args))
        out = {"model": "flow", "sharing": result.sharing, "batch": batch, "pace_paths": args.pace_paths,
               "phases": result.phases}
        completion = result.completion_time_s
    else:
        model = load_chunk_model(args.params) if args.params else ChunkModel()
        given = {"hop_latency_s": args.hop_latency, "header_bytes": args.header,
                 "forward_cost_s": args.forward_cost, "link_rate_Bps": args.link_rate}
        model = replace(model, **{k: v for k, v in given.items() if v is not None})
        out = {"model": args.model, **asdict(model)}
        if args.model == "chunk":
            chunked = simulate_chunks(plan, model, args.chunk_size, progress=_progress(args))
            out.update(chunks=chunked.chunks, events=chunked.events)
            completion = chunked.completion_time_s
        else:
            completion = simulate_direct(plan, model)
    out.update(completion_time_s=completion, predicted_time_s=plan.predicted_time_s)
    if args.json:
        print(dumps(out))
    else:
        print(f"{plan.method} plan, {plan.demands.num_jobs} jobs: completes at {format_seconds(completion)} "
              f"({args.model} model; busiest-link prediction {format_seconds(plan.predicted_time_s)})")
    return 0


def fit_chunk(args: argparse.Namespace) -> int:
    """``optiq fit-chunk``: fit the chunk model to runs of one plan."""
    _check_outputs(args)
    plan = load_plan(args.plan)
    fit = fit_chunk_model(plan, read_run_samples(args.runs, plan))
    fit.model.save(args.output)
    for sample, sim in zip(fit.samples, fit.simulated_s):
        print(f"chunk {sample.chunk_size:>8} B  measured {sample.elapsed_s:.4f} s  model {sim:.4f} s")
    print(f"{fit.model}\nmean relative error {fit.mean_rel_error:.1%}, max {fit.max_rel_error:.1%}; "
          f"wrote {args.output}")
    return 0


def experiment(args: argparse.Namespace) -> int:
    """``optiq experiment``: one of the papers' studies, a CSV table and a PNG figure."""
    from ..experiments import STUDIES, run_study

    if args.list or not args.name:
        print("\n".join(f"{s.name:16} {s.description}" for s in STUDIES.values()))
    else:
        _check_outputs(args)
        given = {name: getattr(args, name) for name in ("traffic", "topology", "ranks_per_node", "traffic_unit", "seed")}
        options = {name: value for name, value in given.items() if value is not None}
        csv_path, png_path = run_study(args.name, args.out, quick=args.quick, say=_progress(args), **options)
        print(f"wrote {csv_path} and {png_path}")
    return 0


def collectives(args: argparse.Namespace) -> int:
    """``optiq collectives``: predict is local; fit and bench run on every rank of mpiexec."""
    from ..collectives.cost import load_params, load_routes
    from ..collectives.report import prediction_report

    if args.action == "predict":
        report = prediction_report(load_params(args.params), args.ranks, args.size, load_routes(args.params, args.ranks))
        print(dumps(report.to_dict()) if args.json else report)
        return 0
    MPI = need_mpi("optiq collectives fit/bench")
    from ..collectives.session import bench_on_ranks, fit_on_ranks, trace_on_ranks

    comm = MPI.COMM_WORLD
    leader = comm.Get_rank() == 0
    say = _progress(args) if leader else None
    check = (lambda: _check_outputs(args)) if leader else None
    if args.action == "fit":
        fit = fit_on_ranks(comm, args.sizes, repeat=args.repeat, check=check, say=say, network=args.network)
        if fit is not None:
            print(fit, flush=True)
            fit.save(args.output)
            print(f"wrote {args.output} ({len(fit.samples)} timings, {fit.ranks} ranks)")
        return 0
    names = [n.strip() for n in args.algorithms.split(",") if n.strip()] if args.algorithms else None
    if args.trace:
        traced = trace_on_ranks(comm, args.size[0], names=names, check=(lambda: check_writable(args.trace, "--trace"))
                                if leader else None, say=say)
        if traced is not None:
            write_results(args.trace, traced, "--trace")
            print(f"wrote {args.trace}: {sum(map(len, traced.values())):,} exchanges of {len(traced)} algorithms")
        return 0
    reports = bench_on_ranks(comm, args.size, names=names, repeat=args.repeat, params=args.params, check=check,
                             say=say)
    wrong = sorted({name for r in reports for name in r.wrong})
    if leader:
        print("\n\n".join(str(r) for r in reports), flush=True)
        if args.json:
            dicts = [r.to_dict() for r in reports]
            write_results(args.json, dicts[0] if len(dicts) == 1 else dicts, "--json")
        if wrong:
            print(f"optiq: error: differ from MPI_Allreduce: {', '.join(wrong)}", file=sys.stderr)
    return 1 if wrong else 0


def _workload(args, say):
    topology = _topology(args, say)
    return topology, _demands(args, topology, say)


def _topology(args, say) -> Topology:
    """The topology of ``-t`` (with ``--routes``), saying what it is when that took a while."""
    spec = routed_spec(args.topology, args.routes, getattr(args, "seed", None) or 0, say)
    start = time.perf_counter()
    with heartbeat(say, f"building topology {spec}", every=5.0):
        topology = from_spec(spec)
    if say and (time.perf_counter() - start > 1 or topology.fabric is not None or topology.dragonfly is not None
                or spec.lower().startswith("slurm:")):
        say(f"topology {topology.name}: {topology.num_nodes:,} nodes, {topology.num_links:,} links, "
            f"{capacity_classes(topology)}; default routes: {topology.default_routing} "
            f"({time.perf_counter() - start:.1f} s)")
    if args.routes and topology.fabric is not None and topology.ecmp_seed is None and args.command != "tables":
        # optiq tables checks and reports them itself
        _warn_tables(topology)
    return topology


def _demands(args, topology: Topology, say) -> Demands:
    """The workload's demands on ``topology``: a demand file, a trace or a pattern, on --hosts."""
    spec = WorkloadSpec(**{f.name: getattr(args, f.name) for f in fields(WorkloadSpec)})
    return spec.make(topology, say)


def _warn_tables(topology: Topology) -> None:
    """A warning for each problem of the fabric's own tables (a credit loop, an unreachable LID)."""
    from ..paths.tablecheck import check_tables

    if topology.fabric is not None and topology.fabric.forwarding is not None:
        tables = topology.fabric.forwarding
        if tables.remapped:
            print(f"optiq: warning: {tables.source}: {tables.remapped:,} entries are for LIDs of another sweep, "
                  f"taken to their ports' LIDs by the port GUIDs on their lines (as OpenSM's file engine does)",
                  file=sys.stderr)
        for line in check_tables(topology).problems():
            print(f"optiq: warning: {tables.source}: {line}", file=sys.stderr)


def _routing_line(plan, m) -> str:
    """What the plan's routing means for its time, in one line."""
    if plan.routing == "forwarded":
        used = plan.used().paths
        stopping = int((used.copies > 0).sum())
        copies = round(m.copies_per_path_avg * m.total_paths)
        return (f"forwarded: every leg is the network's own route ({plan.topology.default_routing}), so the plan "
                f"holds as the network routes; {stopping} of its {used.num_paths} paths stop at ranks on the way, "
                f"which receive and send on {copies:,} chunks of {plan.chunk_size:,} bytes in all")
    return (f"free: the network must route every path as planned; routed by its own rule it takes "
            f"{format_seconds(m.realized_time_s)} ({m.realized_time_s / m.predicted_time_s:.2f}x the predicted time)")


def _progress(args):
    """The progress printer of a command: none with ``--quiet``; on a terminal without
    ``--verbose``, one line that updates in place (:class:`~optiq.cli.live.LiveLine`); else
    a line per message, with its time."""
    if getattr(args, "quiet", False):
        return None
    start = time.perf_counter()
    if not getattr(args, "verbose", False) and sys.stderr.isatty():
        return LiveLine.start(start)
    return lambda msg: print(f"[{time.perf_counter() - start:7.2f}s] {msg}", file=sys.stderr, flush=True)


def _planner_options(args) -> dict:
    """The planner options given on the command line (None: not given, the planner's default)."""
    given = dict(k=args.k, maxload=args.maxload, unit=args.unit, hop_limit=args.hop_limit, solver=args.solver,
                 time_limit=args.time_limit, gap=args.gap, hop_slack=args.hop_slack, candidate_kind=args.candidates,
                 lean=args.lean, fewest_stops=args.fewest_stops)
    return {name: value for name, value in given.items() if value is not None}


def _compare(topology: Topology, demands: Demands, methods: list[str], options: dict[str, Any],
             say: Callable[[str], None] | None, **kwargs: Any) -> tuple[list, list[str]]:
    """Every method's metrics and planning time (as table cells); warnings printed."""
    runs = compare_methods(topology, demands, methods, options, progress=say, **kwargs)
    for run in runs:
        _warn(run.plan)
    rows = [plan_metrics(run.plan, check_bound=False) for run in runs]
    rows = [replace(row, routing="tables") if run.method == "tables" else row for row, run in zip(rows, runs)]
    return rows, [f"{run.plan_s:.2f}" for run in runs]


def _warn(plan) -> None:
    for line in plan.info.get("warnings", []):
        print(f"optiq: warning: {plan.method}: {line}", file=sys.stderr, flush=True)


def _check_outputs(args) -> None:
    """Every file or directory the command will write, checked before any work starts."""
    for option in ("output", "json"):
        value = getattr(args, option, None)
        if isinstance(value, str):
            check_writable(value, f"--{option}")
    if args.command == "experiment" and args.name:
        check_directory(args.out, "--out")


#: Subcommand name -> the function that runs it.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "plan": plan, "eval": evaluate, "compare": compare, "tables": tables, "demo": demo, "simulate": simulate,
    "fit-chunk": fit_chunk,
    "experiment": experiment, "run": launcher.replay, "collectives": collectives}

