"""The ``optiq`` command line: parsing and error handling only; the work is in the library."""

from __future__ import annotations

import argparse
from dataclasses import asdict, replace
import math
import re
import sys
import time

import numpy as np

from . import __version__
from .errors import OptiqError, OutputError
from .heuristics import DEFAULT_UNIT
from .jsonfile import check_directory, check_writable, dumps, write_json
from .launch import abort_on_failure, need_mpi, together, world, world_rank
from .metrics import plan_metrics
from .lp import DEFAULT_SOLVER, LP_SOLVERS
from .lp.colgen import DEFAULT_GAP, DEFAULT_HOP_SLACK
from .workloads.qos import read_qos
from .plan import DEFAULT_CHUNK_SIZE, load_plan
from .progress import heartbeat
from .planner import CANDIDATE_KINDS, METHODS, make_candidates, make_plan
from .report import metrics_table
from .runtime import BASELINES
from .sim.flow import DEFAULT_BATCH
from .sim import (SHARING, ChunkModel, fit_chunk_model, load_chunk_model, read_run_samples, simulate_chunks,
                  simulate_direct, simulate_flows)
from .topology import from_spec
from .topology.spec import SPEC_HELP
from .units import parse_rate, parse_size
from .experiments.fattree_study import DEFAULT_TOPOLOGY as FATTREE_TOPOLOGY
from .workloads import (PATTERNS, SELECTIONS, constant_ratio, destination_sweep, distance_sweep, host_demands,
                        random_pairing, random_sizes, read_demands, read_traffic)

PATTERN_CHOICES = PATTERNS + ("distance", "destsize")
#: Chunk hops per transfer beyond which ``optiq run`` warns (the executor's per-chunk work is Python).
MANY_CHUNKS = 1_000_000


class UsageError(Exception):
    """A malformed command line (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    """Usage mistakes become one ``optiq: error:`` line (printed by rank 0 alone under
    mpiexec), and values such as ``-5MB/s`` reach their option's check instead of being
    taken for an option."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")

    def _print_message(self, message: str, file=None) -> None:
        if world_rank() == 0:
            super()._print_message(message, file)


def _argument(parse):
    """An argparse type from a parser that raises OptiqError or ValueError."""
    def convert(text: str):
        try:
            return parse(text)
        except (OptiqError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = parse.__name__
    return convert


def _int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an integer") from None
        if value < low:
            raise ValueError(f"{text!r} must be at least {low}")
        return value
    return _argument(parse)


_size = _argument(parse_size)
_rate = _argument(parse_rate)
_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)


@_argument
def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise ValueError(f"{text!r} must be a number in [0, 1]")
    return value


@_argument
def _positive_float(text: str) -> float:
    value = float(text)
    if not 0 < value < math.inf:
        raise ValueError(f"{text!r} must be a finite number > 0")
    return value


@_argument
def _gap(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise ValueError(f"{text!r} must be a fraction in [0, 1), e.g. 0.01 for 1%")
    return value


@_argument
def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"{text!r} must be a finite number >= 0")
    return value


def _add_workload(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topology", "-t", required=True, help=SPEC_HELP)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--pattern", choices=PATTERN_CHOICES,
                     help="disjoint/overlap/subset: first P/16 endpoints each to RATIO others (docs in "
                          "optiq.workloads.patterns); distance: needs --position; destsize: needs --per-source")
    src.add_argument("--demands", metavar="FILE", help="CSV (src,dst,bytes) or JSON demand file")
    src.add_argument("--traffic", metavar="PATH",
                     help="rank-level traffic: a PFProf directory or .tar.gz, a src_rank,dst_rank,bytes CSV or an "
                          "N x N matrix; mapped to hosts by --ranks-per-node, --selection and --placement")
    p.add_argument("--size", type=_size, default=8 * 2**20, help="bytes per pair, e.g. 8MiB (default)")
    p.add_argument("--random-sizes", metavar="LOW:HIGH", help="draw each pair's size in [LOW, HIGH], e.g. 64KiB:8MiB")
    p.add_argument("--ratio", type=_positive_int, help="destinations per source (default 8; 2 for distance)")
    p.add_argument("--sources", type=_positive_int, help="number of sources (default P/16; P/8 for distance)")
    p.add_argument("--position", type=_positive_int, help="distance pattern: destination block at POSITION*sources")
    p.add_argument("--per-source", type=_positive_int, help="destsize pattern: destinations per source")
    p.add_argument("--pairing", choices=("aligned", "random"), default="aligned",
                   help="random: shuffle which destination each source sends to (uses --seed)")
    p.add_argument("--seed", type=_non_negative_int, default=0, help="seed of every random choice (default 0)")
    _add_placement(p)


def _add_placement(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ranks-per-node", type=_positive_int, default=None,
                   help="--traffic: ranks sharing a host (default 1; 8 in the fat-tree study)")
    p.add_argument("--selection", choices=SELECTIONS, default="linear",
                   help="--traffic: which hosts run the ranks (default linear; random uses --seed)")
    p.add_argument("--placement", default="block",
                   help="--traffic: block, cyclic, or a file of 'rank host' lines (default block)")
    p.add_argument("--traffic-unit", type=_size, default=1,
                   help="--traffic: bytes per matrix or CSV entry, e.g. 1MiB (default 1 B; PFProf is in bytes)")


def _add_planning(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=_positive_int, default=16, help="lp and heuristics: candidate paths per job (default 16)")
    p.add_argument("--candidates", choices=CANDIDATE_KINDS, default="auto",
                   help="lp/heuristics: how candidates are made (auto: diverse up to 2,048 nodes, spread beyond)")
    p.add_argument("--maxload", type=_positive_int, default=16, help="heu1: paths allowed per link (default 16)")
    p.add_argument("--unit", type=_size, default=DEFAULT_UNIT, help="heu2: bytes placed per step (default 1MiB)")
    p.add_argument("--hop-limit", type=_positive_int, help="longest candidate path (default: network diameter)")
    p.add_argument("--chunk-size", type=_size, default=DEFAULT_CHUNK_SIZE, help="executor chunk (default 64KiB)")
    p.add_argument("--solver", choices=LP_SOLVERS, default=DEFAULT_SOLVER, help="HiGHS LP algorithm")
    p.add_argument("--time-limit", type=_positive_float, help="opt/lp: time limit in seconds (best plan so far)")
    p.add_argument("--gap", type=_gap, default=DEFAULT_GAP,
                   help=f"opt: stop within this fraction of the proven lower bound (default {DEFAULT_GAP})")
    p.add_argument("--hop-slack", type=_non_negative_int, default=DEFAULT_HOP_SLACK,
                   help=f"opt: paths at most this many hops over the shortest (default {DEFAULT_HOP_SLACK})")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="optiq", description="Plan multipath data movement on torus and "
                                     "fat-tree interconnects.")
    parser.add_argument("--version", action="version", version=f"optiq {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="plan one workload with one method and write the plan file")
    _add_workload(p)
    _add_planning(p)
    p.add_argument("--method", "-m", choices=METHODS, default="opt")
    p.add_argument("--qos", metavar="FILE", help='opt/lp: QoS classes, JSON {"shares": {"gold": 0.7, "bronze": 0.3}, '
                                                 '"classes": ["gold", ...]} with one class per job')
    p.add_argument("--output", "-o", required=True, help="plan file to write (JSON)")
    p = sub.add_parser("eval", help="print the metrics of a plan file")
    p.add_argument("plan")
    p.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    p = sub.add_parser("compare", help="plan one workload with several methods, side by side")
    _add_workload(p)
    _add_planning(p)
    p.add_argument("--methods", default="default,heu1,heu2,opt",
                   help=f"comma-separated, from {','.join(METHODS)} (default default,heu1,heu2,opt)")
    p.add_argument("--json", action="store_true", help="a JSON list instead of a table")
    p = sub.add_parser("demo", help="the main job: compare methods on Blue Gene/Q 1024, disjoint, 8 MiB")
    p.add_argument("--topology", "-t", default="bgq:1024", help="default bgq:1024")
    p = sub.add_parser("simulate", help="simulate a plan file at flow or chunk level")
    p.add_argument("plan")
    p.add_argument("--model", choices=("flow", "chunk", "direct"), default="flow",
                   help="flow: max-min fair link sharing over time; chunk: store-and-forward of every chunk; "
                        "direct: the paths' messages cut through the hardware with no copies (what MPI does)")
    p.add_argument("--params", metavar="FILE",
                   help="chunk/direct: model parameters from optiq fit-chunk (the options below override)")
    p.add_argument("--link-rate", type=_rate, help="chunk/direct: every link's rate instead of the topology's")
    p.add_argument("--sharing", choices=SHARING, default="equal",
                   help="flow: equal (max-min fair per path) or proportional (weighted by remaining bytes)")
    p.add_argument("--batch", type=_fraction, default=DEFAULT_BATCH,
                   help=f"flow: fraction of the moving flows that may end before rates are recomputed (default "
                        f"{DEFAULT_BATCH}; 0 = exact)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.add_argument("--hop-latency", type=_non_negative_float,
                   help=f"chunk/direct: seconds per hop (default {ChunkModel.hop_latency_s})")
    p.add_argument("--header", type=_non_negative_int,
                   help=f"chunk/direct: header bytes per chunk or packet (default {ChunkModel.header_bytes})")
    p.add_argument("--forward-cost", type=_non_negative_float,
                   help=f"chunk: seconds to forward one chunk at an intermediate node (default "
                        f"{ChunkModel.forward_cost_s})")
    p.add_argument("--chunk-size", type=_size, help="chunk: override the plan's chunk size")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    p = sub.add_parser("fit-chunk", help="fit the chunk model to optiq run --json reports of one plan",
                       description="Fit forwarding cost, hop latency and (for unpaced runs) the link rate "
                                   "of the chunk-level model to measured runs of PLAN at several chunk sizes.")
    p.add_argument("plan", help="the plan the runs replayed")
    p.add_argument("runs", nargs="+", help="JSON reports from optiq run PLAN --json FILE --chunk-size ...")
    p.add_argument("--output", "-o", required=True, help="where to write the fitted parameters (JSON)")
    p = sub.add_parser("experiment", help="run one of the papers' studies: a CSV table and a PNG figure")
    p.add_argument("name", nargs="?", help="study name (see --list)")
    p.add_argument("--list", action="store_true", help="name the studies")
    p.add_argument("--quick", action="store_true", help="small sizes that run in seconds")
    p.add_argument("--out", default="out", help="output directory (default out/)")
    p.add_argument("--traffic", metavar="PATH",
                   help="fattree: a PFProf directory or .tar.gz, a src_rank,dst_rank,bytes CSV or an N x N matrix "
                        "instead of the CG and MILC models")
    p.add_argument("--topology", "-t", help=f"fattree: a fattree: or cluster: spec (default {FATTREE_TOPOLOGY})")
    p.add_argument("--seed", type=_non_negative_int, default=0, help="fattree: seed of the random selection")
    _add_placement(p)
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    _add_collectives(sub)
    p = sub.add_parser("run", help="replay a plan under mpiexec (same as python -m optiq.runtime)",
                       description="Replay a plan with chunked store-and-forward. Run it under "
                                   "mpiexec -n N with one rank per endpoint of the plan.")
    p.add_argument("plan", help="plan file (JSON) from optiq plan")
    p.add_argument("--verify", action="store_true", help="send seeded patterns and check every byte received")
    p.add_argument("--json", metavar="FILE", help="write the measurements as JSON (rank 0)")
    p.add_argument("--baseline", choices=BASELINES, default="none", help="also time MPI_Alltoallv on the same jobs")
    p.add_argument("--repeat", type=_positive_int, default=3, help="measured repeats (default 3)")
    p.add_argument("--warmup", type=_non_negative_int, default=1, help="unmeasured runs first (default 1)")
    p.add_argument("--link-bw", type=_rate, help="emulate links of this bandwidth, e.g. 200MB/s")
    p.add_argument("--window", type=_positive_int,
                   help="chunks in flight per link and slots per forwarded path (default 4; with --link-bw, "
                        "20 ms of a link's traffic, 4 to 64 chunks)")
    p.add_argument("--chunk-size", type=_size, help="override the plan's chunk size")
    p.add_argument("--timeout", type=_positive_float,
                   help="seconds per transfer before every rank gives up (default 60 + 10x the predicted time)")
    p.add_argument("--seed", type=_non_negative_int, default=0, help="seed of the --verify patterns (default 0)")
    return parser


def _add_collectives(sub) -> None:
    p = sub.add_parser("collectives", help="allreduce cost model with contention and memory terms: fit, predict, bench",
                       description="Fit the allreduce cost model on this machine (under mpiexec), rank Ring, RHD, "
                                   "CPS and hierarchical CPS by predicted time, or measure them.")
    actions = p.add_subparsers(dest="action", required=True, metavar="{fit,predict,bench}")
    a = actions.add_parser("fit", help="run micro-benchmarks under mpiexec -n N and fit both models")
    a.add_argument("--output", "-o", required=True, help="parameter file to write (JSON)")
    a.add_argument("--sizes", type=_size_list, default=[16384, 131072, 1048576],
                   help="message sizes of the micro-benchmarks (default 16KiB,128KiB,1MiB)")
    a.add_argument("--repeat", type=_positive_int, default=5, help="timed runs per measurement (default 5)")
    a.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    a = actions.add_parser("predict", help="rank the algorithms by predicted time under both models")
    a.add_argument("--params", required=True, help="file from optiq collectives fit")
    a.add_argument("--ranks", type=_int_at_least(2), required=True, help="number of ranks N")
    a.add_argument("--size", type=_size, required=True, help="bytes per rank, e.g. 1MiB")
    a.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    a = actions.add_parser("bench", help="measure every algorithm under mpiexec -n N and check it against Allreduce")
    a.add_argument("--size", type=_size_list, required=True, help="bytes per rank (a comma list measures each)")
    a.add_argument("--json", metavar="FILE", help="write the measurements as JSON")
    a.add_argument("--params", help="also show the predictions of this fitted parameter file")
    a.add_argument("--algorithms", help="comma list (default: all for this rank count)")
    a.add_argument("--repeat", type=_positive_int, default=5, help="timed runs per algorithm (default 5)")
    a.add_argument("--quiet", "-q", action="store_true", help="no progress output")


@_argument
def _size_list(text: str) -> list[int]:
    sizes = [parse_size(part) for part in text.split(",") if part.strip()]
    if not sizes:
        raise ValueError(f"{text!r} names no size")
    return sizes


def _workload(args, say):
    start = time.perf_counter()
    with heartbeat(say, f"building topology {args.topology}", every=5.0):
        topology = from_spec(args.topology)
    P = topology.num_endpoints
    if say and time.perf_counter() - start > 1:
        say(f"topology {topology.name}: {topology.num_nodes:,} nodes, {topology.num_links:,} links "
            f"({time.perf_counter() - start:.1f} s)")
    if args.demands:
        if say:
            say(f"reading {args.demands}")
        demands = read_demands(args.demands)
    elif args.traffic:
        if say:
            say(f"reading {args.traffic}")
        traffic = read_traffic(args.traffic, unit=args.traffic_unit)
        try:
            hosts = host_demands(traffic, P, ranks_per_node=args.ranks_per_node or 1, selection=args.selection,
                                 placement=args.placement, seed=args.seed)
        except OptiqError as exc:
            raise type(exc)(f"--traffic {args.traffic} on {topology.name}: {exc}") from None
        demands = hosts.demands
        if say:
            say(f"{traffic.shape[0]} ranks on {np.unique(hosts.host_of).size} hosts: {demands.num_jobs:,} host pairs, "
                f"{int(demands.nbytes.sum()):,} bytes over the network, {hosts.intra_host_bytes:,.0f} bytes within "
                f"hosts (not routed)")
    elif args.pattern in PATTERNS:
        demands = constant_ratio(P, args.pattern, nbytes=args.size, num_sources=args.sources, ratio=args.ratio or 8)
    elif args.pattern == "distance":
        if args.position is None:
            raise OptiqError("--pattern distance needs --position")
        demands = distance_sweep(P, args.position, nbytes=args.size, num_sources=args.sources,
                                 ratio=args.ratio or 2)
    else:
        if args.per_source is None:
            raise OptiqError("--pattern destsize needs --per-source")
        demands = destination_sweep(P, args.per_source, nbytes=args.size, num_sources=args.sources or 64)
    if args.pairing == "random":
        demands = random_pairing(demands, seed=args.seed)
    if args.random_sizes:
        low, sep, high = args.random_sizes.partition(":")
        if not sep:
            raise OptiqError(f"--random-sizes {args.random_sizes!r} must be LOW:HIGH, e.g. 64KiB:8MiB")
        demands = random_sizes(demands, parse_size(low), parse_size(high), seed=args.seed)
    demands.check_against(topology)
    return topology, demands


def _progress(args):
    if getattr(args, "quiet", False):
        return None
    start = time.perf_counter()
    return lambda msg: print(f"[{time.perf_counter() - start:7.2f}s] {msg}", file=sys.stderr, flush=True)


def _plan_kwargs(args) -> dict:
    return dict(k=args.k, maxload=args.maxload, unit=args.unit, hop_limit=args.hop_limit,
                chunk_size=args.chunk_size, solver=args.solver, time_limit=args.time_limit, seed=args.seed,
                gap=args.gap, hop_slack=args.hop_slack, candidate_kind=args.candidates)


def _compare(topology, demands, methods, kwargs, say) -> tuple[list, list[str]]:
    rows, times, candidates = [], [], None
    if any(m not in ("default", "opt") for m in methods):
        candidates = make_candidates(topology, demands, kwargs.get("k", 16), kwargs.get("candidate_kind", "auto"),
                                     hop_limit=kwargs.get("hop_limit"), seed=kwargs.get("seed", 0), progress=say)
    for method in methods:
        if say:
            say(f"planning with {method}")
        start = time.perf_counter()
        plan = make_plan(topology, demands, method, progress=say, candidates=candidates, **kwargs)
        times.append(f"{time.perf_counter() - start:.2f}")  # without the shared candidate search
        rows.append(plan_metrics(plan, check_bound=False))
        _warn(plan)
    return rows, times


def _warn(plan) -> None:
    for line in plan.info.get("warnings", []):
        print(f"optiq: warning: {plan.method}: {line}", file=sys.stderr, flush=True)


def run(args) -> int:
    if args.command == "plan":
        comm = world()
        leader = comm is None or comm.Get_rank() == 0
        _check_outputs(args)
        say = _progress(args) if leader else None
        topology, demands = _workload(args, say)
        qos = read_qos(args.qos, demands.num_jobs) if args.qos else None
        plan = make_plan(topology, demands, args.method, progress=say, qos=qos, comm=comm, **_plan_kwargs(args))
        if not leader:
            return 0
        _warn(plan)
        plan.save(args.output)
        if "qos_throughput_Bps" in plan.info:
            rates = plan.info["qos_throughput_Bps"]
            print("QoS throughput: " + ", ".join(f"{name} {rate / 1e9:.3f} GB/s (share {qos.shares[name]:g})"
                                                 for name, rate in rates.items()))
        m = plan_metrics(plan, check_bound=False)
        print(f"wrote {args.output}: {args.method}, {m.jobs} jobs, {m.total_paths} paths, predicted "
              f"{m.predicted_time_s * 1e3:.3f} ms (lower bound {m.lower_bound_time_s * 1e3:.3f} ms)")
    elif args.command == "eval":
        m = plan_metrics(load_plan(args.plan))
        print(dumps(m.to_dict()) if args.json else metrics_table([m]))
        if m.bound_note:
            print(f"optiq: warning: {m.bound_note}", file=sys.stderr)
    elif args.command == "compare":
        say = _progress(args)
        topology, demands = _workload(args, say)
        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        unknown = [m for m in methods if m not in METHODS]
        if unknown or not methods:
            raise OptiqError(f"unknown method(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(METHODS)}")
        rows, times = _compare(topology, demands, methods, _plan_kwargs(args), say)
        if args.json:
            print(dumps([dict(r.to_dict(), plan_s=float(t)) for r, t in zip(rows, times)]))
        else:
            print(f"{topology.name}, {demands.name}, {demands.total_bytes / 2**20:.0f} MiB in all")
            print(metrics_table(rows, {"plan s": times}))
    elif args.command == "demo":
        topology = from_spec(args.topology)
        demands = constant_ratio(topology.num_endpoints, "disjoint")
        print(f"{topology.name}: disjoint 1:8 pattern, {demands.num_jobs} pairs x 8 MiB")
        rows, times = _compare(topology, demands, ["default", "heu1", "heu2", "opt"],
                               dict(k=16), _progress(args))
        print(metrics_table(rows, {"plan s": times}))
        print(f"optimised plan vs default routing: {rows[0].predicted_time_s / rows[-1].predicted_time_s:.2f}x "
              "faster (predicted, flow level)")
    elif args.command == "simulate":
        _simulate(args)
    elif args.command == "fit-chunk":
        _check_outputs(args)
        plan = load_plan(args.plan)
        fit = fit_chunk_model(plan, read_run_samples(args.runs, plan))
        fit.model.save(args.output)
        for sample, sim in zip(fit.samples, fit.simulated_s):
            print(f"chunk {sample.chunk_size:>8} B  measured {sample.elapsed_s:.4f} s  model {sim:.4f} s")
        print(f"{fit.model}\nmean relative error {fit.mean_rel_error:.1%}, max {fit.max_rel_error:.1%}; "
              f"wrote {args.output}")
    elif args.command == "experiment":
        from .experiments import STUDIES, run_study

        if args.list or not args.name:
            print("\n".join(f"{s.name:16} {s.description}" for s in STUDIES.values()))
        else:
            _check_outputs(args)
            options = {key: value for key, value in (
                ("traffic", args.traffic), ("topology", args.topology), ("ranks_per_node", args.ranks_per_node),
                ("traffic_unit", args.traffic_unit if args.traffic_unit != 1 else None),
                ("seed", args.seed or None)) if value is not None}
            if args.selection != "linear" or args.placement != "block":
                raise OptiqError("the fat-tree study runs every selection and placement; drop --selection and "
                                 "--placement")
            csv_path, png_path = run_study(args.name, args.out, quick=args.quick, say=_progress(args), **options)
            print(f"wrote {csv_path} and {png_path}")
    elif args.command == "run":
        return _replay(args)
    elif args.command == "collectives":
        return _collectives(args)
    return 0


def _simulate(args) -> None:
    plan = load_plan(args.plan)
    if args.model == "flow":
        result = simulate_flows(plan, args.sharing, batch=args.batch, progress=_progress(args))
        out = {"model": "flow", "sharing": result.sharing, "batch": args.batch, "phases": result.phases}
        completion = result.completion_time_s
    else:
        model = load_chunk_model(args.params) if args.params else ChunkModel()
        given = {"hop_latency_s": args.hop_latency, "header_bytes": args.header,
                 "forward_cost_s": args.forward_cost, "link_rate_Bps": args.link_rate}
        model = replace(model, **{k: v for k, v in given.items() if v is not None})
        out = {"model": args.model, **asdict(model)}
        if args.model == "chunk":
            result = simulate_chunks(plan, model, args.chunk_size, progress=_progress(args))
            out.update(chunks=result.chunks, events=result.events)
            completion = result.completion_time_s
        else:
            completion = simulate_direct(plan, model)
    out.update(completion_time_s=completion, predicted_time_s=plan.predicted_time_s)
    if args.json:
        print(dumps(out))
    else:
        print(f"{plan.method} plan, {plan.demands.num_jobs} jobs: completes at {completion * 1e3:.4f} ms "
              f"({args.model} model; busiest-link prediction {plan.predicted_time_s * 1e3:.4f} ms)")


def _collectives(args) -> int:
    """``optiq collectives``: predict is local; fit and bench run on every rank of mpiexec."""
    from .collectives.report import bench_report, format_bench, format_prediction, prediction_report
    from .collectives.cost import load_params

    if args.action == "predict":
        report = prediction_report(load_params(args.params), args.ranks, args.size)
        print(dumps(report) if args.json else format_prediction(report))
        return 0
    MPI = need_mpi("optiq collectives fit/bench")
    from .collectives.bench import bench_algorithms, run_microbenchmarks
    from .collectives.cost import algorithms, save_params
    from .collectives.fit import fit_allreduce_model

    comm = MPI.COMM_WORLD
    rank, N = comm.Get_rank(), comm.Get_size()
    say = _progress(args) if rank == 0 else None

    def check() -> tuple[list[int], dict | None, list[str] | None]:
        if N < 2:
            raise OptiqError(f"optiq collectives {args.action} runs under mpiexec -n N with N >= 2 (got {N} rank)")
        if rank == 0:
            _check_outputs(args)
        sizes = args.sizes if args.action == "fit" else args.size
        bad = [s for s in sizes if s < 8 or s % 8]
        if bad:
            raise OptiqError(f"size {bad[0]} B must be a positive multiple of 8 bytes (float64 elements)")
        models = load_params(args.params) if args.action == "bench" and args.params else None
        names = None
        if args.action == "bench" and args.algorithms:
            names = [n.strip() for n in args.algorithms.split(",") if n.strip()]
            unknown = [n for n in names if n not in algorithms(N)]
            if unknown:
                raise OptiqError(f"unknown algorithm(s) {', '.join(unknown)} for {N} ranks; choose from "
                                 f"{', '.join(algorithms(N))}")
        return sizes, models, names

    sizes, models, names = together(comm, check)
    if args.action == "fit":
        with abort_on_failure(comm):
            samples = run_microbenchmarks(comm, sizes, repeat=args.repeat, say=say or (lambda m: None))
        if rank == 0:
            fit = fit_allreduce_model(samples)
            print(f"contention model: {fit.contention}\n  mean / max relative error on the micro-benchmarks "
                  f"{fit.contention_error[0]:.1%} / {fit.contention_error[1]:.1%}")
            print(f"alpha-beta-gamma: {fit.abg}\n  mean / max relative error {fit.abg_error[0]:.1%} / "
                  f"{fit.abg_error[1]:.1%}", flush=True)
            save_params({"contention": fit.contention, "abg": fit.abg}, args.output, ranks=N,
                        samples=[asdict(s) for s in samples],
                        fit_error={"contention": fit.contention_error, "abg": fit.abg_error})
            print(f"wrote {args.output} ({len(samples)} timings, {N} ranks)")
        return 0
    reports = []
    with abort_on_failure(comm):
        for size in sizes:
            timings, mpi_time = bench_algorithms(comm, size, names=names, repeat=args.repeat,
                                                 say=say or (lambda m: None))
            reports.append(bench_report(timings, mpi_time, N, size, args.repeat, models))
    if rank == 0:
        print("\n\n".join(format_bench(r) for r in reports), flush=True)
        if args.json:
            _write_results(args.json, reports[0] if len(reports) == 1 else reports, "--json")
    wrong = [name for r in reports for name, e in r["algorithms"].items() if not e["correct"]]
    if wrong and rank == 0:
        print(f"optiq: error: differ from MPI_Allreduce: {', '.join(sorted(set(wrong)))}", file=sys.stderr)
    return 1 if wrong else 0


def _replay(args) -> int:
    """``optiq run``: checks fail together on every rank; a rank failing during the transfer aborts all."""
    MPI = need_mpi("optiq run")
    from .runtime import bcast_plan, check_comm, format_report, measure, predicted_time

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    together(comm, lambda: _check_outputs(args) if rank == 0 else None)
    plan = bcast_plan(comm, args.plan)
    check_comm(comm, plan)
    predicted, at = predicted_time(plan, args.link_bw)
    timeout = args.timeout or 60.0 + 10 * predicted
    runs = (args.warmup + args.repeat) * (2 if args.baseline != "none" else 1)
    chunk = args.chunk_size or plan.chunk_size
    chunks = int((-(-plan.path_bytes // chunk) * plan.paths.hops).sum())
    if rank == 0 and chunks > MANY_CHUNKS:
        print(f"optiq: warning: {chunks:,} chunk hops per transfer at --chunk-size {chunk:,} B; each costs the "
              f"executor a few microseconds of Python, so expect at least {chunks * 5e-6:.0f} s per transfer",
              file=sys.stderr, flush=True)
    if rank == 0 and predicted * runs > 2.0:
        print(f"optiq run: {runs} transfers of about {predicted:.3g} s each (predicted {at}); each gives up after "
              f"{timeout:.0f} s", file=sys.stderr, flush=True)
    with abort_on_failure(comm):
        report = measure(comm, plan, repeat=args.repeat, warmup=args.warmup, verify=args.verify, seed=args.seed,
                         window=args.window, link_bw=args.link_bw, chunk_size=args.chunk_size,
                         baseline=args.baseline, timeout=timeout)
    failed = [t.name for t in (report.plan, report.baseline) if t is not None and t.verified is False]
    if rank == 0:
        print(format_report(report), flush=True)
        if args.json:
            _write_results(args.json, report.to_dict(), "--json")
        if failed:
            print(f"optiq: error: verification failed for {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _write_results(path: str, results, option: str) -> None:
    """Write measured results; if that fails after all, keep them on stdout and say so."""
    try:
        write_json(path, results, what=option)
    except OutputError:
        print(dumps(results), flush=True)
        raise


def _check_outputs(args) -> None:
    """Every file or directory the command will write, checked before any work starts."""
    for option in ("output", "json"):
        value = getattr(args, option, None)
        if isinstance(value, str):
            check_writable(value, f"--{option}")
    if args.command == "experiment" and args.name:
        check_directory(args.out, "--out")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 bad input or failure, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version
        return int(exc.code or 0)
    except UsageError as exc:
        if world_rank() == 0:  # under mpiexec every rank parses the same line: say it once
            print(f"optiq: error: {exc}", file=sys.stderr)
        return 2
    try:
        return run(args)
    except OptiqError as exc:
        if world_rank() == 0:  # under mpiexec every rank fails alike: say it once
            print(f"optiq: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("optiq: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
