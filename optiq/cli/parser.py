"""The ``optiq`` argument parser: every subcommand and its options (types in :mod:`.argtypes`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .. import __version__
from ..experiments.fattree_study import DEFAULT_TOPOLOGY as FATTREE_TOPOLOGY
from ..heuristics.tables import REROUTE_ROUNDS
from ..lp import DEFAULT_SOLVER, LP_SOLVERS
from ..lp.colgen import DEFAULT_GAP, DEFAULT_HOP_SLACK
from ..paths import FORWARDED, ROUTINGS
from ..paths.chains import MAX_INTERMEDIATES
from ..plan import DEFAULT_CHUNK_SIZE
from ..planner import CANDIDATE_KINDS, COMPARE_METHODS, METHODS
from ..planner.methods import CANDIDATE_PATHS_MAX, DEFAULT_K, DENSE_JOBS, MIN_DEFAULT_K
from ..sim import SHARING, ChunkModel
from ..sim.flow import DEFAULT_BATCH
from ..testbed import DEFAULT_QUEUE, DEFAULT_REPEAT, TESTBED_METHODS, TESTBED_RATE
from ..testbed.collectives import COLLECTIVES_SIZE, FIT_SIZES
from ..testbed.conditions import DEFAULT_SWEEP_S
from ..testbed.network import DEFAULT_MTU, MTU_RANGE
from ..topology.spec import SPEC_HELP
from ..workloads import SELECTIONS
from ..workloads.spec import WORKLOAD_PATTERNS
from . import argtypes as types
from . import launcher

if TYPE_CHECKING:
    from typing import Any

__all__ = ["build_parser", "PATTERN_CHOICES"]

PATTERN_CHOICES = WORKLOAD_PATTERNS



#: What ``--verbose`` does.
VERBOSE_HELP = ("every progress line, with its time; without it, a terminal shows one line that updates in place "
                "(output that is not a terminal gets every line)")

#: What ``--routes`` takes.
ROUTES_HELP = ("the network's own routes, which the default row follows and forwarded plans' legs take: ecmp (each "
               "flow hashed onto one of the equal-cost next hops, the hash seeded by --seed) or ecmp:SEED, on any "
               "network; on ibnet, the fabric's linear forwarding tables (ibroute, dump_lfts.sh or opensm-lfts.dump "
               "output; without: OpenSM minhop, emulated), or opensm:ENGINE (ftree, updn, dfsssp, ...: the real "
               "OpenSM routes the fabric simulated by ibsim)")

def add_workload(p: argparse.ArgumentParser, *, required: bool = True, jobs: bool = False) -> None:
    p.add_argument("--topology", "-t", required=required, help=SPEC_HELP)
    p.add_argument("--routes", metavar="ROUTES", help=ROUTES_HELP)
    p.add_argument("--hosts", metavar="HOSTLIST",
                   help="the hosts the pattern or trace runs on, in order: Slurm host-list syntax "
                        "(node[001-064,070],gpu[1-4]) or @FILE; names as the topology gives them (H<i> on the "
                        "built-in ones)")
    src = p.add_mutually_exclusive_group(required=required)
    src.add_argument("--pattern", choices=PATTERN_CHOICES,
                     help="disjoint/overlap/subset: first P/16 endpoints each to RATIO others (docs in "
                          "optiq.workloads.patterns); distance: needs --position; destsize: needs --per-source; "
                          "permutation: every endpoint to one other, at random (uses --seed)")
    src.add_argument("--demands", metavar="FILE",
                     help="CSV (src,dst,bytes) or JSON demand file (with --hosts, ids are positions in the host list)")
    src.add_argument("--traffic", metavar="PATH",
                     help="rank-level traffic: a PFProf directory or .tar.gz, a src_rank,dst_rank,bytes CSV or an "
                          "N x N matrix; mapped to hosts by --ranks-per-node, --selection and --placement")
    if jobs:
        src.add_argument("--jobs", metavar="FILE",
                         help="every running job at once: one line per job, NAME HOSTLIST TRAFFIC (a Slurm host "
                              "list, and a demand file whose src/dst are positions in it, rank traffic one rank per "
                              "host, or pattern:NAME[:SIZE])")
    p.add_argument("--size", type=types.size, default=8 * 2**20, help="bytes per pair, e.g. 8MiB (default)")
    p.add_argument("--random-sizes", metavar="LOW:HIGH", help="draw each pair's size in [LOW, HIGH], e.g. 64KiB:8MiB")
    p.add_argument("--ratio", type=types.positive_int, help="destinations per source (default 8; 2 for distance)")
    p.add_argument("--sources", type=types.positive_int, help="number of sources (default P/16; P/8 for distance)")
    p.add_argument("--position", type=types.positive_int, help="distance pattern: destination block at POSITION*sources")
    p.add_argument("--per-source", type=types.positive_int, help="destsize pattern: destinations per source")
    p.add_argument("--pairing", choices=("aligned", "random"), default="aligned",
                   help="random: shuffle which destination each source sends to (uses --seed)")
    p.add_argument("--seed", type=types.non_negative_int, default=0, help="seed of every random choice (default 0)")
    add_trace_options(p)


#: Options that only apply with --traffic (dest names); None when not given.


def add_trace_options(p: argparse.ArgumentParser, *, placement: bool = True) -> None:
    """How a --traffic trace becomes host demands (all default to None: not given)."""
    p.add_argument("--ranks-per-node", type=types.positive_int,
                   help="--traffic: ranks sharing a host (default 1; 8 in the fat-tree study)")
    p.add_argument("--traffic-unit", type=types.size,
                   help="--traffic: bytes per matrix or CSV entry, e.g. 1MiB (default 1 B; PFProf is in bytes)")
    if placement:  # the fat-tree study runs every selection and placement itself
        p.add_argument("--selection", choices=SELECTIONS,
                       help="--traffic: which hosts run the ranks (default linear; random uses --seed)")
        p.add_argument("--placement",
                       help="--traffic: block, cyclic, or a file of 'rank host' lines, host an endpoint id or name "
                            "(default block)")


def add_planning(p: argparse.ArgumentParser) -> None:
    p.add_argument("--routing", choices=ROUTINGS, default=FORWARDED,
                   help="forwarded (default): every path a chain of the network's own routes between the ranks it "
                        "stops at, so the plan holds as the network routes; free: paths anywhere, for a network "
                        "that routes every path as planned (an upper bound)")
    p.add_argument("--max-intermediates", type=types.positive_int,
                   help=f"forwarded, on fat-trees, fabrics and dragonflies: ranks a chain may stop at (default 1, "
                        f"at most {MAX_INTERMEDIATES})")
    p.add_argument("--k", type=types.positive_int,
                   help=f"lp and heuristics: candidate paths per job (default {DEFAULT_K}, fewer where that would "
                        f"make more than {CANDIDATE_PATHS_MAX:,} paths, at least {MIN_DEFAULT_K})")
    p.add_argument("--candidates", choices=CANDIDATE_KINDS,
                   help="lp/heuristics: how candidates are made (auto: chains for forwarded plans on fat-trees, "
                        "fabrics and dragonflies; else valiant on dragonflies; for heu1, heu2 and dynamic on a "
                        f"torus whose sources have more than {DENSE_JOBS} jobs, torus-shortest; else diverse up to "
                        f"2,048 nodes where no source has more than {DENSE_JOBS} jobs, spread beyond)")
    p.add_argument("--maxload", type=types.positive_int, help="heu1: paths allowed per link (default 16)")
    p.add_argument("--unit", type=types.size, help="heu2: bytes placed per step (default 1MiB, or the largest pair's bytes / 64 where more)")
    p.add_argument("--fewest-stops", action=argparse.BooleanOptionalAction, default=None,
                   help="heu2: then the plan of fewest stop-bytes at its time and hop-bytes, as opt ends (an LP)")
    p.add_argument("--hop-limit", type=types.positive_int, help="longest candidate path (default: network diameter)")
    p.add_argument("--chunk-size", type=types.size,
                   help=f"the plan's chunk (default {DEFAULT_CHUNK_SIZE // 1024}KiB); on the testbed the "
                        "executor's too, which by default is the plan's, cut where a chunk would last long on "
                        "its links or at its stops")
    p.add_argument("--solver", choices=LP_SOLVERS, help=f"lp: HiGHS LP algorithm (default {DEFAULT_SOLVER})")
    p.add_argument("--time-limit", type=types.positive_float, help="opt/lp: time limit in seconds (best plan so far)")
    p.add_argument("--gap", type=types.gap,
                   help=f"opt: stop within this fraction of the proven lower bound (default {DEFAULT_GAP})")
    p.add_argument("--hop-slack", type=types.non_negative_int,
                   help=f"opt: paths at most this many hops over the shortest (default {DEFAULT_HOP_SLACK})")
    p.add_argument("--lean", action=argparse.BooleanOptionalAction, default=None,
                   help="opt: then the plan of fewest hop-bytes at the same time (default on, within a budget "
                        "of about what column generation cost; skipped where it cannot pay), and of those the one "
                        "of fewest stops")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.add_argument("--verbose", "-v", action="store_true", help=VERBOSE_HELP)


def add_wide(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wide", action="store_true",
                   help="every column of the metrics table (hop-bytes, copies, per-link paths and bytes)")


#: ``optiq simulate``: the options that apply to one model or two, by their ``args`` names.
MODEL_OPTIONS = {"sharing": ("flow",), "pace_paths": ("flow",), "batch": ("flow",), "params": ("chunk", "direct"),
                 "link_rate": ("chunk", "direct"), "hop_latency": ("chunk", "direct"), "header": ("chunk", "direct"),
                 "forward_cost": ("chunk",), "chunk_size": ("chunk",)}


def check_arguments(args: argparse.Namespace) -> argparse.Namespace:
    """What no single option can check: an option given with a model it does not apply to.

    Raises
    ------
    UsageError
        Naming the option and the models it applies to.
    """
    if getattr(args, "command", None) == "simulate":
        for name, models in MODEL_OPTIONS.items():
            if args.model not in models and getattr(args, name) is not None and getattr(args, name) is not False:
                option = "--" + name.replace("_", "-")
                raise types.UsageError(f"{option} applies to --model {' and '.join(models)}, not {args.model} "
                                       f"(see optiq simulate --help)")
    return args


def build_parser() -> argparse.ArgumentParser:
    parser = types.Parser(prog="optiq", description="Plan multipath data movement on supercomputer "
                                     "interconnects (tori, fat-trees, InfiniBand fabrics, dragonflies).")
    parser.add_argument("--version", action="version", version=f"optiq {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="plan one workload with one method and write the plan file",
                       description="Plan one workload (a pattern, a demand file or rank traffic, on -t's network) "
                                   "with one method and write the plan file: every pair's paths and bytes, the "
                                   "lower bound, and what the planner did. optiq eval reads it, optiq run (under "
                                   "mpiexec) replays it.")
    add_workload(p)
    add_planning(p)
    p.add_argument("--method", "-m", choices=METHODS, default="opt",
                   help="opt (default): column generation to a proven gap; lp: the LP over k candidates; heu1, heu2: "
                        "the heuristics; dynamic: heaviest pair first on its least-loaded shortest path; default: "
                        "the network's own routes")
    p.add_argument("--qos", metavar="FILE", help='opt/lp: QoS classes, JSON {"shares": {"gold": 0.7, "bronze": 0.3}, '
                                                 '"classes": ["gold", ...]} with one class per job')
    p.add_argument("--output", "-o", required=True, help="plan file to write (JSON)")
    p = sub.add_parser("eval", help="print the metrics of a plan file",
                       description="The metrics of a plan file: its predicted time against the workload's cut bound "
                                   "(/cut) and the network's default routes (/default), paths, hops and copies, the "
                                   "time if links are shared max-min fairly, and the busiest links and largest jobs "
                                   "by name (--links, --jobs).")
    p.add_argument("plan")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.add_argument("--verbose", "-v", action="store_true", help=VERBOSE_HELP)
    p.add_argument("--links", type=types.non_negative_int, default=0, metavar="N",
                   help="also list the N busiest links by name")
    p.add_argument("--jobs", type=types.non_negative_int, default=0, metavar="N",
                   help="also list the N largest jobs by host name")
    p.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    p.add_argument("--split", metavar="CSV", help="on a fabric routed with LMC > 0 (--routes its tables): the "
                                                  "split optiq tables --lmc wrote; the default routes are then "
                                                  "the job as those tables carry it with the senders splitting so")
    add_wide(p)
    p = sub.add_parser("compare", help="plan one workload with several methods, side by side")
    add_workload(p)
    add_planning(p)
    p.add_argument("--methods", default="default,heu1,heu2,opt",
                   help=f"comma-separated, from {','.join(COMPARE_METHODS)} (default default,heu1,heu2,opt; tables: "
                        f"the job on forwarding tables written for it, on an InfiniBand fabric)")
    p.add_argument("--json", action="store_true", help="a JSON list instead of a table")
    p.add_argument("--split", metavar="CSV", help="on a fabric routed with LMC > 0 (--routes its tables): the "
                                                  "split optiq tables --lmc wrote; the default routes are then "
                                                  "the job as those tables carry it with the senders splitting so")
    add_wide(p)
    p = sub.add_parser("tables", help="write a fabric's forwarding tables that carry one job, for OpenSM",
                       description="Forwarding tables for every switch and every LID of an InfiniBand fabric "
                                   "(-t ibnet:FILE, --routes its tables) that carry the job with the least busy "
                                   "busiest link: routed by destination as the switches must, on up*/down* routes "
                                   "that cannot close a credit loop, every other LID as in the given tables "
                                   "where that is safe. The file loads with opensm -R file,no_fallback -U FILE.")
    add_workload(p, jobs=True, required=False)  # --check takes none
    p.add_argument("--output", "-o", help="the tables to write (dump_lfts format, with port GUIDs)")
    p.add_argument("--check", action="store_true",
                   help="write nothing: check the tables of --routes (e.g. the loaded ones, dump_lfts) on the fabric "
                        "of -t as it is now; name every LID they route into a dead port or a loop, and exit 1 if "
                        "there is one")
    p.add_argument("--lmc", action="store_true",
                   help="a fabric routed with LMC > 0: route each destination's LIDs on trees of their own and "
                        "split every pair's bytes over them (written to --split)")
    p.add_argument("--split", metavar="CSV", help="--lmc: where to write which LID each pair sends how many bytes "
                                                  "to (default OUTPUT.split.csv)")
    p.add_argument("--allow-credit-loops", action="store_true",
                   help="shortest routes even where they close credit loops (a torus): the fabric then needs "
                        "virtual lanes that break them")
    p.add_argument("--rounds", type=types.positive_int, default=REROUTE_ROUNDS,
                   help=f"rounds of rip-up and reroute at most (default {REROUTE_ROUNDS}): they stop at the "
                        f"bound, or when neither a plain round nor one that pushes trees off the busiest links "
                        f"helps")
    p.add_argument("--against", metavar="ENGINES", type=lambda text: text.split(","),
                   help="OpenSM routing engines to report the job tables against (e.g. ftree,updn,dfsssp): the real "
                        "OpenSM routes the fabric simulated by ibsim with each; the report's first line is the gain "
                        "over the best of them")
    p.add_argument("--json", metavar="REPORT", help="also write the report as JSON: time_s, given_s, bound_s (one "
                                                   "job); jobs (name, alone_s, together_s, given_s), shared_links "
                                                   "(--jobs)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.add_argument("--verbose", "-v", action="store_true", help=VERBOSE_HELP)
    p = sub.add_parser("demo", help="the main job: compare methods on Blue Gene/Q 1024, disjoint, 8 MiB")
    p.add_argument("--topology", "-t", default="bgq:1024", help="default bgq:1024")
    add_wide(p)
    p = sub.add_parser("simulate", help="simulate a plan file at flow or chunk level")
    p.add_argument("plan")
    p.add_argument("--model", choices=("flow", "chunk", "direct"), default="flow",
                   help="flow: max-min fair link sharing over time; chunk: store-and-forward of every chunk; "
                        "direct: the paths' messages cut through the hardware with no copies (what MPI does)")
    p.add_argument("--params", metavar="FILE",
                   help="chunk/direct: model parameters from optiq fit-chunk (the options below override)")
    p.add_argument("--link-rate", type=types.rate, help="chunk/direct: every link's rate instead of the topology's")
    p.add_argument("--sharing", choices=SHARING,
                   help="flow: equal (max-min fair per path, the default) or proportional (weighted by remaining "
                        "bytes)")
    p.add_argument("--pace-paths", action="store_true",
                   help="flow: every path sends at most at its planned rate (its bytes over the predicted time)")
    p.add_argument("--batch", type=types.fraction,
                   help=f"flow: fraction of the moving flows that may end before rates are recomputed (default "
                        f"{DEFAULT_BATCH}; 0 = exact)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.add_argument("--verbose", "-v", action="store_true", help=VERBOSE_HELP)
    p.add_argument("--hop-latency", type=types.non_negative_float,
                   help=f"chunk/direct: seconds per hop (default {ChunkModel.hop_latency_s})")
    p.add_argument("--header", type=types.non_negative_int,
                   help=f"chunk/direct: header bytes per chunk or packet (default {ChunkModel.header_bytes})")
    p.add_argument("--forward-cost", type=types.non_negative_float,
                   help=f"chunk: seconds to forward one chunk at an intermediate node (default "
                        f"{ChunkModel.forward_cost_s})")
    p.add_argument("--chunk-size", type=types.size, help="chunk: override the plan's chunk size")
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
    p.add_argument("--topology", "-t", help=f"fattree: a fattree:, cluster:, ibnet: or slurm: spec (default "
                                           f"{FATTREE_TOPOLOGY})")
    p.add_argument("--seed", type=types.non_negative_int, help="fattree: seed of the random selection (default 0)")
    add_trace_options(p, placement=False)
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.add_argument("--verbose", "-v", action="store_true", help=VERBOSE_HELP)
    add_collectives(sub)
    add_testbed(sub)
    p = sub.add_parser("run", help="replay a plan under mpiexec (same as python -m optiq.runtime)",
                       description="Replay a plan with chunked store-and-forward. Run it under "
                                   "mpiexec -n N with one rank per endpoint of the plan.")
    launcher.add_arguments(p)
    return parser


def add_collectives(sub: Any) -> None:
    p = sub.add_parser("collectives", help="allreduce cost model with contention and memory terms: fit, predict, bench",
                       description="Fit the allreduce cost model on this machine (under mpiexec), rank Ring, RHD, "
                                   "CPS and hierarchical CPS by predicted time, or measure them.")
    actions = p.add_subparsers(dest="action", required=True, metavar="{fit,predict,bench}")
    a = actions.add_parser("fit", help="run micro-benchmarks under mpiexec -n N and fit both models")
    a.add_argument("--output", "-o", required=True, help="parameter file to write (JSON)")
    a.add_argument("--sizes", type=types.size_list, default=[16384, 131072, 1048576],
                   help="message sizes of the micro-benchmarks (default 16KiB,128KiB,1MiB)")
    a.add_argument("--repeat", type=types.positive_int, default=5, help="timed runs per measurement (default 5)")
    a.add_argument("--network", metavar="SPEC", help="the network the ranks run on, rank i on host i (a topology "
                                                     "spec): the contention model then counts every step's busiest "
                                                     "link on its own routes, in the fit and in the file's predictions")
    a.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    a.add_argument("--verbose", "-v", action="store_true", help=VERBOSE_HELP)
    a = actions.add_parser("predict", help="rank the algorithms by predicted time under both models")
    a.add_argument("--params", required=True, help="file from optiq collectives fit")
    a.add_argument("--ranks", type=types.int_at_least(2), required=True, help="number of ranks N")
    a.add_argument("--size", type=types.size, required=True, help="bytes per rank, e.g. 1MiB")
    a.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    a = actions.add_parser("bench", help="measure every algorithm under mpiexec -n N and check it against Allreduce")
    a.add_argument("--size", type=types.size_list, required=True, help="bytes per rank (a comma list measures each)")
    a.add_argument("--json", metavar="FILE", help="write the measurements as JSON")
    a.add_argument("--params", help="also show the predictions of this fitted parameter file")
    a.add_argument("--algorithms", help="comma list (default: all for this rank count)")
    a.add_argument("--repeat", type=types.positive_int, default=5, help="timed runs per algorithm (default 5)")
    a.add_argument("--trace", metavar="FILE", help="instead of timing: run each algorithm once with its exchanges "
                                                   "apart in time and write when each ran on each rank (JSON; "
                                                   "optiq testbed collectives counts drops per step with it)")
    a.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    a.add_argument("--verbose", "-v", action="store_true", help=VERBOSE_HELP)


def add_testbed(sub: Any) -> None:
    p = sub.add_parser("testbed", help="measure plans on an emulated network of namespaces (needs root)",
                       description="Build the topology as Linux network namespaces (hosts, switches, a veth pair "
                                   "per cable, every link direction rate limited with a tail-drop queue, the "
                                   "network's own routes in the kernel), run every method over MPI on it in turn, "
                                   "and report measured against predicted times.")
    actions = p.add_subparsers(dest="action", required=True, metavar="{run,exec,collectives,down}")
    a = actions.add_parser("run", help="measure methods (or a plan file) on the emulated network",
                           description="optiq testbed run -t SPEC (--pattern ... | --demands F) --methods M,... or "
                                       "optiq testbed run PLAN.json: build the network, measure one flow's goodput, "
                                       "run every method in turn --repeat times and compare with the predictions.")
    a.add_argument("plan", nargs="?", help="a plan file: measure it beside its demands on the network's routes")
    add_workload(a, required=False)
    add_planning(a)
    a.add_argument("--methods", default=",".join(TESTBED_METHODS),
                   help=f"comma-separated: {','.join(COMPARE_METHODS)}, or a planner with :free (its free plan: "
                        f"per-pair rules, or the network's routes if it splits pairs) (default "
                        f"{','.join(TESTBED_METHODS)}; default is always measured)")
    add_network(a, quiet=False)
    a.add_argument("--repeat", type=types.positive_int, default=DEFAULT_REPEAT,
                   help=f"measured rounds of every method, in turn (default {DEFAULT_REPEAT})")
    a.add_argument("--warmup", type=types.non_negative_int, default=1, help="unmeasured rounds first (default 1)")
    a.add_argument("--pace-paths", action=argparse.BooleanOptionalAction, default=True,
                   help="the executor sends every path at its planned rate (default on)")
    a.add_argument("--window", type=types.positive_int, help="the executor's window (default: from the link rates)")
    add_conditions(a, "every measured round")
    a.add_argument("--json", metavar="FILE", help="write the report as JSON")
    a.add_argument("--figure", metavar="PNG", help="draw predicted against measured times and every link's bytes")
    a = actions.add_parser("exec", help="run an MPI program on the emulated network, one rank per host",
                           description="optiq testbed exec -t SPEC [--rate R] -- python app.py ARGS: build the "
                                       "network, run the program under mpiexec with rank i in host i's namespace "
                                       "and its data on the data network, remove the network.")
    a.add_argument("--topology", "-t", required=True, help=SPEC_HELP)
    a.add_argument("--routes", metavar="ROUTES", help=ROUTES_HELP)
    add_network(a)
    add_conditions(a, "the program's run (from its start)")
    a.add_argument("program", nargs=argparse.REMAINDER, help="the program and its arguments, after --")
    a = actions.add_parser("collectives", help="fit and check the allreduce cost model on an emulated switch",
                           description="optiq testbed collectives --ranks N: N hosts on one switch (links rate "
                                       "limited, tail-drop queues, MPI over TCP); fit both allreduce models from "
                                       "the micro-benchmarks (pairs, full meshes of every fan-in, reductions, "
                                       "copies), measure every algorithm for N ranks with the queues' drops, and set "
                                       "both models' predictions beside the measurements.")
    a.add_argument("--ranks", type=types.positive_int, required=True, help="hosts on the switch, one rank each")
    a.add_argument("--topology", "-t", help="another network instead of the star, e.g. a two-level tree "
                                            "(cluster:hosts=12,edges=2,cores=1): ranks on its first hosts")
    a.add_argument("--size", type=types.size, default=COLLECTIVES_SIZE,
                   help=f"bytes per rank of the allreduce measured (default {COLLECTIVES_SIZE:,})")
    a.add_argument("--fit-sizes", type=types.size_list,
                   help=f"message sizes of the micro-benchmarks (default: --size over 16, 8 and 4, the blocks the "
                        f"algorithms send; {','.join(str(s) for s in FIT_SIZES)} for the default size)")
    a.add_argument("--repeat", type=types.positive_int, default=5, help="timed runs per measurement (default 5)")
    a.add_argument("--jobs", type=types.positive_int, default=1,
                   help="MPI jobs per algorithm, its time the median of all their runs (default 1): the MPI "
                        "library's order of a step's messages changes from job to job")
    a.add_argument("--json", metavar="FILE", help="write the measurements and predictions as JSON")
    add_network(a)
    a = actions.add_parser("down", help="remove testbeds a killed run left behind",
                           description="Remove every testbed's namespaces (optiq-<tag>-...) and processes, except "
                                       "those whose run still goes on (--force: those too).")
    a.add_argument("name", nargs="?", help="only this testbed (optiq-<tag>)")
    a.add_argument("--force", action="store_true", help="also testbeds whose run still goes on")


def add_conditions(p: argparse.ArgumentParser, when: str) -> None:
    """What ails the emulated network (:mod:`optiq.testbed.conditions`): loss, slow cables, failing ones."""
    p.add_argument("--loss", type=types.percent, default=0.0, metavar="PERCENT",
                   help="random loss on every link direction, in percent (e.g. 1), for the whole run")
    p.add_argument("--slow", action="append", default=[], metavar="CABLE:FACTOR",
                   help="one cable at a fraction of its rate, both ways (e.g. S0-S4:0.25, or S0:p3:0.25 by a "
                        "node's port); repeatable")
    p.add_argument("--fail", action="append", default=[], metavar="CABLE@SECONDS",
                   help=f"a cable that goes down that many seconds into {when} (e.g. S0-S4@0.5); the network "
                        f"routes around it after --sweep; repeatable")
    p.add_argument("--sweep", type=types.non_negative_float, default=DEFAULT_SWEEP_S, metavar="SECONDS",
                   help=f"seconds from a failure to the network's new routes (the subnet manager's sweep; default "
                        f"{DEFAULT_SWEEP_S:g})")


def add_network(p: argparse.ArgumentParser, *, quiet: bool = True) -> None:
    """How the emulated network is built: rates, queues, TCP, its name."""
    p.add_argument("--rate", type=types.rate, default=TESTBED_RATE,
                   help="the fastest link's rate, the others in proportion to their capacities (default 20Mb/s: "
                        "2 cores forward about 2 Gbit/s of link rate x hops)")
    p.add_argument("--queue", type=types.size, default=DEFAULT_QUEUE,
                   help=f"bytes every link direction queues before it drops (default {DEFAULT_QUEUE:,})")
    p.add_argument("--congestion", default="reno", help="TCP congestion control in every namespace (default reno)")
    p.add_argument("--offloads", action="store_true",
                   help="keep segmentation offloads (default off: link-sized packets, with ethtool)")
    p.add_argument("--mtu", type=types.int_at_least(*MTU_RANGE), default=DEFAULT_MTU, metavar="BYTES",
                   help=f"the data links' MTU (default {DEFAULT_MTU}, Ethernet's; InfiniBand's frames carry 4096, "
                        f"jumbo Ethernet 9000: fewer packets for the emulating host to forward)")
    p.add_argument("--name", help="the testbed's name, optiq-<letters or digits> (default optiq-<pid>)")
    if quiet:
        p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
        p.add_argument("--verbose", "-v", action="store_true", help=VERBOSE_HELP)
