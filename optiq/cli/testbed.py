"""``optiq testbed run``, ``exec``, ``collectives`` and ``down``: the emulated network from the command line."""

from __future__ import annotations

import argparse
import sys

from ..errors import OptiqError
from ..paths import FREE
from ..plan import load_plan
from ..testbed import run_program, run_testbed, sweep
from ..testbed.conditions import Conditions, parse_fail, parse_slow
from ..topology import Topology, from_spec
from ..utils.jsonfile import check_writable, write_results
from .argtypes import routed_spec
from .commands import _planner_options, _progress, _workload

__all__ = ["testbed"]


def testbed(args: argparse.Namespace) -> int:
    """``optiq testbed``: ``run`` measures methods or a plan file, ``down`` sweeps what a killed run left."""
    if args.action == "down":
        print(sweep(args.name, force=args.force))
        return 0
    if args.action == "exec":
        return _exec(args)
    if args.action == "collectives":
        return _collectives(args)
    given = [f"--{name}" for name in ("topology", "pattern", "demands", "traffic") if getattr(args, name)]
    if args.plan and given:
        raise OptiqError(f"give a plan file or a workload ({', '.join(given)}), not both")
    if not args.plan and not (args.topology and (args.pattern or args.demands or args.traffic)):
        raise OptiqError("give a plan file, or a topology (-t) and a workload (--pattern, --demands or --traffic)")
    if args.routing == FREE:
        raise OptiqError("the testbed names each method's routing: --methods opt:free measures opt's free plan")
    for option in ("json", "figure"):
        if getattr(args, option):
            check_writable(getattr(args, option), f"--{option}")
    say = _progress(args)
    common = dict(rate=args.rate, repeat=args.repeat, warmup=args.warmup, queue=args.queue,
                  congestion=args.congestion, name=args.name, seed=args.seed, pace_paths=args.pace_paths,
                  window=args.window, offloads=args.offloads, mtu=args.mtu, chunk_size=args.chunk_size, progress=say)
    if args.plan:
        plan = load_plan(args.plan)
        report = run_testbed(plan.topology, plan=plan, conditions=_conditions(args, plan.topology), **common)
    else:
        topology, demands = _workload(args, say)
        report = run_testbed(topology, demands, methods=args.methods, options=_planner_options(args),
                             conditions=_conditions(args, topology), **common)
    print(report)
    if args.json:
        write_results(args.json, report.to_dict(), "--json")
    if args.figure:
        report.figure(args.figure)
        print(f"wrote {args.figure}")
    wrong = [row.method for row in report.rows if not row.verified]
    if wrong:
        print(f"optiq: error: bytes differ from those sent: {', '.join(wrong)}", file=sys.stderr)
        return 1
    failed = [row for row in report.rows if row.outcome != "completed"]
    if failed and not args.fail:  # rounds may fail where a cable does; nowhere else
        print(f"optiq: error: {failed[0].method} failed: {failed[0].error}", file=sys.stderr)
        return 1
    return 0


def _conditions(args: argparse.Namespace, topology: Topology) -> Conditions:
    """``--loss``, ``--slow``, ``--fail`` and ``--sweep``, checked against the network before anything is
    planned or built."""
    return Conditions(args.loss, parse_slow(topology, args.slow), parse_fail(topology, args.fail), args.sweep)


def _exec(args: argparse.Namespace) -> int:
    command = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not command:
        raise OptiqError("give the program after --: optiq testbed exec -t SPEC -- python app.py")
    topology = from_spec(routed_spec(args.topology, args.routes))
    code, carried = run_program(topology, command, rate=args.rate, queue=args.queue,
                                congestion=args.congestion, name=args.name, offloads=args.offloads, mtu=args.mtu,
                                conditions=_conditions(args, topology), progress=_progress(args))
    print(f"optiq testbed: {carried}", file=sys.stderr)
    return code


def _collectives(args: argparse.Namespace) -> int:
    from ..testbed.collectives import run_collectives

    if args.ranks < 2:
        raise OptiqError(f"--ranks must be at least 2 (an allreduce between hosts), got {args.ranks}")
    if args.json:
        check_writable(args.json, "--json")
    topology = from_spec(args.topology) if args.topology else None
    run = run_collectives(args.ranks, rate=args.rate, size=args.size, queue=args.queue, congestion=args.congestion,
                          fit_sizes=tuple(args.fit_sizes) if args.fit_sizes else None, repeat=args.repeat,
                          name=args.name, offloads=args.offloads, mtu=args.mtu,
                          topology=topology, jobs=args.jobs, progress=_progress(args))
    print(run)
    if args.json:
        write_results(args.json, run.to_dict(), "--json")
    wrong = [row.algorithm for row in run.rows if not row.correct]
    if wrong:
        print(f"optiq: error: differ from MPI_Allreduce: {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0
