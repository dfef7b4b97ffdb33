"""The testbed's decisions, checked without a kernel: cables, tables, rules, the expected link bytes, the report.

What the kernel does with them is checked in tests/test_netns.py (root only).
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from optiq import Demands, from_spec, make_plan
from optiq.errors import PlanError, TestbedError
from optiq.paths import network_routes
from optiq.testbed import Forwarding, Layout, TestbedReport, TestbedRow, parse_methods, plan_methods
from optiq.testbed.forwarding import all_pairs, check_readback, readback_queries
from optiq.testbed.report import REPORT_KEYS, ROW_KEYS, link_deviation
from optiq.topology import Topology, kary_ntree, torus
from optiq.workloads import permutation


def walk(fwd: Forwarding, s: int, d: int) -> list[int]:
    """The links a packet from host ``s`` to host ``d`` takes as a kernel would: at every node the
    pair's rule if it has one, else the node's table (an emulation independent of ``fwd.routes``)."""
    t = fwd.layout.topology
    rules = {(int(n), int(a), int(b)): int(e) for n, a, b, e in zip(*fwd.rules())}
    node, links = s, []
    while node != d:
        e = rules.get((node, s, d), int(fwd.table[node, d]))
        assert e >= 0, f"no route at {t.label(node)} for {t.label(s)} -> {t.label(d)}"
        links.append(e)
        node = int(t.link_dst[e])
        assert len(links) <= t.num_nodes, "forwarding loop"
    return links


NETWORKS = ["fattree:k=4,n=2", "torus:4x4", "bgq:512", "dragonfly:p=1,a=4,h=1", "cluster:hosts=8,edges=2,cores=2"]


@pytest.mark.parametrize("spec", NETWORKS)
def test_the_network_routes_install_as_destination_tables_that_walk_every_pair_as_routed(spec):
    t = from_spec(spec)
    fwd = Forwarding.network(Layout.of(t, "optiq-t"))
    src, dst = all_pairs(t.num_endpoints)
    routes = network_routes(t, src, dst)
    pick = np.random.default_rng(0).choice(src.size, min(src.size, 400), replace=False)
    for k in pick.tolist():
        assert walk(fwd, int(src[k]), int(dst[k])) == routes.path(k).tolist()
    assert fwd.num_rules == 0  # every one of these networks routes by destination


def test_a_free_plan_of_one_path_per_pair_installs_as_rules_where_it_leaves_the_tables():
    t = from_spec("fattree:k=4,n=2")
    layout = Layout.of(t, "optiq-t")
    demands = permutation(t.num_endpoints, nbytes=2**20, seed=1)
    [default, dynamic] = plan_methods(layout, demands, ["dynamic"])
    assert default.routing == "network routes" and dynamic.routing == "per-pair rules"
    plan, fwd = dynamic.plan, dynamic.forwarding
    differs = 0
    for p in range(plan.paths.num_paths):
        j = int(plan.paths.job[p])
        s, d = int(plan.demands.src[j]), int(plan.demands.dst[j])
        assert walk(fwd, s, d) == plan.paths.path(p).tolist()
        differs += walk(default.forwarding, s, d) != plan.paths.path(p).tolist()
    assert differs > 0 and fwd.num_rules > 0
    # every other pair keeps the network's route, and the tables are the network's
    assert np.array_equal(fwd.table, default.forwarding.table)
    planned = {(int(plan.demands.src[j]), int(plan.demands.dst[j])) for j in plan.paths.job.tolist()}
    src, dst = all_pairs(t.num_endpoints)
    for s, d in zip(src.tolist(), dst.tolist()):
        if (s, d) not in planned:
            assert walk(fwd, s, d) == default.forwarding.pair_route(s, d).tolist()


def test_a_free_plan_that_splits_pairs_runs_on_the_network_routes_and_is_predicted_realized():
    t = from_spec("cluster:hosts=8,edges=2,cores=2")  # 3 pairs over 2 cores: 1.5 each only if one splits
    demands = Demands([0, 1, 2], [4, 5, 6], [2**20] * 3)
    [_, opt] = plan_methods(Layout.of(t, "optiq-t"), demands, ["opt:free"], {"k": 8})
    assert opt.plan.routing == "free" and (opt.plan.paths.paths_per_job > 1).any()
    assert opt.routing == "free, realized" and opt.runner == "executor"
    assert opt.model_time_s == pytest.approx(opt.plan.realized_time_s) and opt.model_time_s > opt.plan.predicted_time_s


def test_cables_pair_every_link_with_a_reverse_one_parallel_cables_apart():
    t = torus((2, 3))  # the length-2 ring: two parallel links each way between the same nodes
    lay = Layout.of(t, "optiq-t")
    assert np.array_equal(lay.peer[lay.peer], np.arange(t.num_links))
    assert (t.link_src[lay.peer] == t.link_dst).all() and (t.link_dst[lay.peer] == t.link_src).all()
    for v in range(t.num_nodes):  # every interface of a node named once
        ports = lay.port[t.links_from(v)]
        assert np.unique(ports).size == ports.size and ports.min() == 1
    parallel = t.links_between(0, 3)
    assert len(parallel) == 2 and len({int(lay.peer[e]) for e in parallel}) == 2


def test_a_fabric_keeps_its_port_numbers(tmp_path):
    from conftest import synthetic

    path = tmp_path / "fabric.txt"
    synthetic().main([str(path), "--hosts", "16"])
    t = from_spec(f"ibnet:{path}")
    lay = Layout.of(t, "optiq-t")
    assert np.array_equal(lay.port, t.fabric.link_port)
    assert lay.interface(0) == f"p{int(t.fabric.link_port[0])}"


def test_a_one_way_link_or_a_bad_name_is_refused_by_name():
    one_way = Topology("one-way", 3, [0, 1, 1, 2], [1, 0, 2, 0], [1.0, 1.0, 1.0, 1.0])
    with pytest.raises(TestbedError, match="link H1 -> H2 has no reverse link"):
        Layout.of(one_way, "optiq-t")
    with pytest.raises(TestbedError, match="'optiq_x' must be"):
        Layout.of(torus((4,)), "optiq_x")


def test_readback_names_the_pair_whose_hop_the_kernel_routes_elsewhere():
    t = kary_ntree(2, 2)
    fwd = Forwarding.network(Layout.of(t, "optiq-t"))
    node = 4  # S0: hosts 0 and 1 below, S2 and S3 above
    lines, expected = readback_queries(fwd, node)
    assert len(lines) == len(expected) > 0
    answers = [{"dst": key[0], "from": key[1], "iif": key[2], "dev": want[0]} for key, want, _, _ in expected]
    assert check_readback(fwd, node, answers, expected) == ""
    answers[0]["dev"] = "p9"
    (_, _, s, d) = expected[0]
    problem = check_readback(fwd, node, answers, expected)
    assert f"pair {t.label(s)} -> {t.label(d)}" in problem and "dev p9" in problem
    assert "no route" in check_readback(fwd, node, answers[1:], expected)


def test_methods_are_checked_before_anything_is_planned():
    t = torus((4, 4))
    assert parse_methods(["default", "opt:free", "dynamic"], t) == ["default", "opt:free", "dynamic"]
    for bad, why in (("default,default", "given twice"), ("dynamic:free", "unknown method 'dynamic:free'"),
                     ("tables", "not one"), ("", "no methods")):
        with pytest.raises(PlanError, match=why):
            parse_methods(bad, t)


def test_expected_link_bytes_are_the_flows_on_their_routes_and_acks_on_the_way_back():
    t = kary_ntree(2, 2)
    layout = Layout.of(t, "optiq-t")
    fwd = Forwarding.network(layout)
    demands = Demands([0, 1], [2, 3], [1000, 3000])
    [default] = plan_methods(layout, demands, [])
    got = default.link_bytes(0.1, 0.01)
    want = np.zeros(t.num_links)
    for s, d, n in ((0, 2, 1000), (1, 3, 3000)):
        want[fwd.pair_route(s, d)] += 1.1 * n
        want[fwd.pair_route(d, s)] += 0.01 * n
    assert np.allclose(got, want)
    assert np.allclose(default.link_bytes(0, 0), make_plan(t, demands, "default").link_bytes)


def test_an_executor_method_expects_every_leg_on_the_network_route_between_its_ends():
    t = from_spec("fattree:k=4,n=2")
    layout = Layout.of(t, "optiq-t")
    demands = permutation(t.num_endpoints, nbytes=2**20, seed=2)
    [_, opt] = plan_methods(layout, demands, ["opt"], {"k": 8})
    assert opt.runner == "executor" and (opt.plan.paths.legs > 1).any()
    assert np.allclose(opt.link_bytes(0, 0), opt.plan.link_bytes)  # forwarded: legs are the network's routes


def test_the_deviation_is_taken_over_the_busy_links_only():
    assert link_deviation(np.array([1.0, 0.0]), np.array([1.0, 5.0]), np.array([10.0, 0.5])) == 0.0
    assert link_deviation(np.array([0.0]), np.array([0.0]), np.array([0.0])) == 0.0


def _report() -> TestbedReport:
    rows = [TestbedRow("default", "network routes", "MPI_Alltoallv", 2.0, 1.9, (2.1, 2.0, 2.2), 1.0, 1.0, 0.01, 3,
                       True, 0.4),
            TestbedRow("opt", "forwarded", "executor", 1.0, 0.95, (1.1, 1.05, 1.2), 2.0, 1.9, 0.02, 0, True, 0.5)]
    return TestbedReport("4-ary 2-tree", "perm", 16, 8, 32, 20e6, 19e6, 151400, "reno", 0.045, 0.018, 3, 1, 0.45,
                         0.5, 0.3, 40.0, rows, ["a note"], {"opt": {"expected": [1.0, 2.0], "counted": [1.0, 2.1]}},
                         ["a", "b"])


def test_the_report_prints_writes_json_and_draws(tmp_path):
    report = _report()
    text = str(report)
    assert "opt" in text and "1.10" in text and "forwarded" in text and "19 Mbit/s" in text
    assert max(len(line) for line in text.splitlines()) <= 100 and "Every byte of every round arrived" in text
    data = json.loads(json.dumps(report.to_dict()))
    assert tuple(data) == REPORT_KEYS and tuple(data["rows"][0]) == ROW_KEYS
    assert data["rows"][1]["measured_time_s"] == 1.1 and data["rows"][1]["measured_gain"] == 1.9
    report.figure(tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 10_000


def test_without_privileges_the_testbed_is_refused_in_one_line(tmp_path):
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run a command as an unprivileged user")
    env = dict(os.environ, HOME=str(tmp_path))
    proc = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m",
                           "optiq", "testbed", "run", "-t", "torus:4x4", "--pattern", "disjoint", "-q"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    if "Permission denied" in proc.stderr and "optiq: error" not in proc.stderr:
        pytest.skip(f"the unprivileged user cannot run this Python: {proc.stderr.strip()[-200:]}")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("optiq: error: cannot make network namespaces here"), lines
    assert "as root" in lines[0]


def test_testbed_run_refuses_a_plan_and_a_workload_together(tmp_path, capsys):
    from optiq.cli import main

    plan = make_plan(torus((2, 2)), Demands([0], [3], [100]), "default")
    plan.save(tmp_path / "p.json")
    assert main(["testbed", "run", str(tmp_path / "p.json"), "-t", "torus:2x2", "-q"]) == 1
    assert "not both" in capsys.readouterr().err
    assert main(["testbed", "run", "-t", "torus:2x2", "-q"]) == 1
    assert "a workload" in capsys.readouterr().err
    assert main(["testbed", "run", "-t", "torus:2x2", "--pattern", "disjoint", "--routing", "free", "-q"]) == 1
    assert "opt:free" in capsys.readouterr().err


def test_testbed_collectives_refuses_mistakes_before_building_anything(capsys):
    from optiq.cli import main

    assert main(["testbed", "collectives", "--ranks", "1", "-q"]) == 1
    assert "--ranks must be at least 2" in capsys.readouterr().err
    assert main(["testbed", "collectives", "--ranks", "20", "-t", "torus:2x2", "-q"]) == 1
    assert "has 4 hosts, fewer than 20 ranks" in capsys.readouterr().err
    assert main(["testbed", "collectives", "--ranks", "4", "--size", "12B", "-q"]) == 1
    assert "multiple of 8" in capsys.readouterr().err
    from optiq.errors import TestbedError
    from optiq.testbed.collectives import run_collectives

    with pytest.raises(TestbedError, match="jobs=0"):  # before any privilege check or namespace
        run_collectives(4, rate=2.5e6, size=32768, jobs=0)


def test_cables_are_found_by_their_two_nodes_or_by_a_port_and_mistakes_are_named(tmp_path):
    from conftest import synthetic

    from optiq.errors import TopologyError
    from optiq.topology import cluster, read_ibnetdiscover
    from optiq.topology.cables import cable_link, link_ports, reverse_link

    t = cluster(8, 2, 2)
    for e in range(t.num_links):  # every link is found by its ends and by its tail's port, and has its reverse
        u, v = t.label(int(t.link_src[e])), t.label(int(t.link_dst[e]))
        if len(t.links_between(int(t.link_src[e]), int(t.link_dst[e]))) == 1:
            assert cable_link(t, f"{u}-{v}") == e
        assert cable_link(t, f"{u}:p{int(link_ports(t)[e])}") == e
        r = reverse_link(t, e)
        assert (t.link_src[r], t.link_dst[r]) == (t.link_dst[e], t.link_src[e]) and reverse_link(t, r) == e
    lay = Layout.of(t, "optiq-cab")
    assert all(reverse_link(t, e) == lay.peer[e] for e in range(t.num_links))  # as the testbed cables them
    for bad, says in (("H0-H1", "no cable joins H0 and H1"), ("H0-X9", "no cable 'H0-X9'"), ("H0:p7", "no cable on port 7"),
                      ("H0:px", "must be a number"), ("Q:p1", "no node or host named 'Q'")):
        with pytest.raises(TopologyError, match=says):
            cable_link(t, bad)
    sf = synthetic()  # a fabric: node names hold '-', and two switches may be joined by parallel cables
    model = sf.build(4, 2, seed=1, parallel=2)
    sf.write_ibnetdiscover(model, tmp_path / "f.txt")
    fabric = read_ibnetdiscover(tmp_path / "f.txt")
    e = next(e for e in range(fabric.num_links) if len(fabric.links_between(int(fabric.link_src[e]),
                                                                            int(fabric.link_dst[e]))) > 1)
    u, v = fabric.label(int(fabric.link_src[e])), fabric.label(int(fabric.link_dst[e]))
    with pytest.raises(TopologyError, match="name one by its port"):
        cable_link(fabric, f"{u}-{v}")
    assert cable_link(fabric, f"{u}:p{int(fabric.fabric.link_port[e])}") == e


def test_slowed_cables_and_loss_are_checked_before_anything_is_planned_or_built(capsys):
    from optiq.cli import main
    from optiq.testbed.conditions import Conditions, parse_slow

    t = torus((4, 4))
    conditions = Conditions(1.0, parse_slow(t, ["H0-H1:0.25"]))
    factors = conditions.rate_factors(t)
    cable = t.links_between(0, 1) + t.links_between(1, 0)
    assert sorted(np.flatnonzero(factors < 1).tolist()) == sorted(cable) and factors[cable].tolist() == [0.25, 0.25]
    assert conditions.describe() == "Conditions: cable H0-H1 at 0.25 of its rate; 1% random loss on every link direction."
    assert Conditions().healthy and Conditions().describe() == ""
    for spec, says in (("H0-H1", "give CABLE:FACTOR"), ("H0-H1:x", "not a number"), ("H0-H9:0.5", "no cable joins"),
                       ("H0-H1:0", r"must be in \(0, 1\]"), ("H0-H1:1.5", r"must be in \(0, 1\]")):
        with pytest.raises(TestbedError, match=says):
            Conditions(0.0, parse_slow(t, [spec]))
    with pytest.raises(TestbedError, match="twice"):
        parse_slow(t, ["H0-H1:0.5", "H1-H0:0.5"])
    base = ["testbed", "run", "-t", "torus:4x4", "--pattern", "disjoint", "-q"]
    assert main([*base, "--slow", "H0-H9:0.5"]) == 1  # named before any planning, privilege check or namespace
    err = capsys.readouterr().err
    assert err.count("optiq: error:") == 1 and "no cable joins H0 and H9" in err
    assert main([*base, "--loss", "100"]) == 2
    assert "percentage" in capsys.readouterr().err


def test_failing_cables_are_checked_before_anything_is_planned_or_built_and_fail_at_their_time(capsys):
    from optiq.cli import main
    from optiq.testbed.conditions import Conditions, fault_bound, parse_fail

    t = torus((4, 4))
    conditions = Conditions(fail=parse_fail(t, ["H0-H1@0.5", "H5:p1@2"]), sweep_s=0.25)
    assert not conditions.healthy and conditions.rerouted_at_s == 2.25
    first = t.links_between(0, 1) + t.links_between(1, 0)
    assert sorted(conditions.dead_links(t, 1.0).tolist()) == sorted(first)
    assert conditions.dead_links(t).size == 4 and conditions.dead_links(t, 0.1).size == 0
    assert "cable H0-H1 fails 0.5 s into every measured round" in conditions.describe()
    assert "0.25 s later" in conditions.describe()
    assert fault_bound(1.0, 2.25) > 2.25 + 1.0
    for spec, says in (("H0-H1", "give CABLE@SECONDS"), ("H0-H1@x", "not a number"), ("H0-H9@1", "no cable joins"),
                       ("H0-H1@-1", "seconds >= 0")):
        with pytest.raises(TestbedError, match=says):
            Conditions(fail=parse_fail(t, [spec]))
    with pytest.raises(TestbedError, match="twice"):
        parse_fail(t, ["H0-H1@1", "H1-H0@2"])
    with pytest.raises(TestbedError, match="--sweep"):
        Conditions(sweep_s=-1.0)
    base = ["testbed", "run", "-t", "torus:4x4", "--pattern", "disjoint", "-q"]
    assert main([*base, "--fail", "H0-H9@0.5"]) == 1  # named before any planning, privilege check or namespace
    err = capsys.readouterr().err
    assert err.count("optiq: error:") == 1 and "no cable joins H0 and H9" in err
    assert main([*base, "--fail", "H0-H1@1", "--sweep", "-2"]) == 2
    capsys.readouterr()
    program = ["testbed", "exec", "-t", "torus:4x4", "-q"]  # an application's network ails as a run's does
    assert main([*program, "--fail", "H0-H9@3", "--", "true"]) == 1
    err = capsys.readouterr().err
    assert err.count("optiq: error:") == 1 and "no cable joins H0 and H9" in err
    assert main([*program, "--slow", "H0-H1:2", "--", "true"]) == 1
    assert "factor must be in (0, 1]" in capsys.readouterr().err


def test_a_failure_strands_the_pairs_whose_rules_cross_it_and_reroutes_the_rest():
    from optiq.testbed.conditions import Conditions, parse_fail
    from optiq.testbed.methods import plan_methods
    from optiq.testbed.network import Testbed
    from optiq.testbed.session import Faults

    t = from_spec("fattree:k=4,n=2")
    demands = permutation(t.num_endpoints, nbytes=2**20, seed=0)
    bed = Testbed(t, rate=2.5e6, conditions=Conditions(fail=parse_fail(t, ["S2-S6@0.3"])), name="optiq-faults")
    rows = plan_methods(bed.layout, demands, ["opt", "dynamic"])
    faults = Faults(bed, rows)
    dead = set(bed.conditions.dead_links(t).tolist())
    for m in rows:
        after = faults.after[m.name, 0.3]
        assert after is not None
        src, dst, _ = m.flows()
        for a, b in zip(src.tolist(), dst.tolist()):
            crossed = bool(set(m.forwarding.pair_route(a, b).tolist()) & dead)
            still = bool(set(after.pair_route(a, b).tolist()) & dead)
            pair = f"{t.label(a)} -> {t.label(b)}"
            assert (pair in faults.crossed[m.name]) == crossed and (pair in faults.stranded[m.name]) == still
            assert not still or m.routing == "per-pair rules"  # the network's routes go round it; rules stay
    assert faults.crossed["default"] and not faults.stranded["default"]
    assert faults.stranded["dynamic"]  # two of its pinned paths cross the cable
    assert "pairs still route into the dead cable S2-S6: H" in faults.error(rows[-1], "it timed out")


def test_ecmp_installs_a_multipath_route_over_every_equal_cost_link_and_rules_only_for_pinned_pairs():
    from optiq import from_spec

    t = from_spec("fattree:k=2,n=2,routes=ecmp:3")   # hosts 0-3, leaves S0 S1, spines S2 S3
    fwd = Forwarding.network(Layout.of(t, "optiq-t"))
    assert fwd.num_rules == 0   # hashed pairs follow the groups
    line = next(x for x in fwd.route_lines(4) if x.startswith(f"route replace {fwd.layout.address(2)}/32"))
    assert line.count("nexthop via") == 2   # S0 climbs to H2 by S2 or S3
    lines, expected = readback_queries(fwd, 4)
    assert all(len(want) == 2 for key, want, s, d in expected if d >= 2)   # either uplink is the route
    pinned = fwd.with_routes(fwd.pair_index([0], [2]), [fwd.pair_route(0, 2)])
    node, s, d, e = pinned.rules()
    assert s.tolist() == [0] and d.tolist() == [2] and t.label(int(node[0])) == "S0"   # held where it would hash
