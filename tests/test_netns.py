"""The testbed on the real kernel: namespaces, routes read back, MPI over the data network, counters, teardown.

Every test here needs root (network namespaces) and is skipped, saying why, elsewhere. The
``netns`` lane of ``.ci/run`` runs them.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import sigint_as_at_a_terminal

from optiq import from_spec
from optiq.collectives.cost import CHOICE_TIE, choose
from optiq.errors import TestbedError
from optiq.testbed import Testbed, run_testbed, sweep
from optiq.testbed.system import check_privileges
from optiq.testbed.system import find_testbeds as beds
from optiq.workloads import permutation

pytestmark = pytest.mark.netns

RATE = 20e6 / 8


@pytest.fixture(autouse=True)
def namespaces_here():
    try:
        check_privileges()
    except TestbedError as exc:
        pytest.skip(str(exc))
    if shutil.which("ethtool") is None:
        pytest.skip("the testbed turns offloads off with ethtool: apt-get install ethtool")
    yield


def left(name: str) -> list[str]:
    return beds().get(name, [])


@pytest.mark.parametrize("spec", ["torus:4x4", "fattree:k=4,n=2", "dragonfly:p=1,a=4,h=1"])
def test_the_kernel_routes_every_pair_as_the_network_does_and_nothing_is_left(spec):
    with Testbed(from_spec(spec), rate=RATE, name="optiq-route") as bed:
        assert len(left("optiq-route")) == bed.topology.num_nodes + 1
        bed.verify()  # every hop of every pair, asked of the kernel (the build did it too)
    assert left("optiq-route") == []


def test_a_route_the_kernel_takes_elsewhere_fails_naming_the_pair():
    t = from_spec("fattree:k=4,n=2")
    with Testbed(t, rate=RATE, name="optiq-wrong") as bed:
        fwd = bed.installed
        src, dst = 0, 5
        route = fwd.pair_route(src, dst)
        switch = int(t.link_src[route[1]])  # the first switch on the way
        other = next(e for e in t.links_from(switch).tolist() if e != route[1] and t.link_dst[e] >= t.num_endpoints)
        ns = bed.layout.namespaces[switch]
        subprocess.run(["ip", "-n", ns, "route", "replace", f"{bed.layout.address(dst)}/32", "via",
                        bed.layout.address(int(t.link_dst[other])), "dev", bed.layout.interface(other), "onlink"],
                       check=True)
        with pytest.raises(TestbedError, match=rf"pair H\d+ -> H{dst}: at {t.label(switch)} the kernel routes it by "
                                               rf"dev {bed.layout.interface(other)}"):
            bed.verify()
        with pytest.raises(TestbedError, match="pair H"):  # install changes what differs from its own record
            bed.install(bed.installed)
    assert left("optiq-wrong") == []


def test_an_error_inside_removes_the_network():
    with pytest.raises(RuntimeError, match="inside"):
        with Testbed(from_spec("torus:2x2"), rate=RATE, name="optiq-boom"):
            assert left("optiq-boom")
            raise RuntimeError("inside")
    assert left("optiq-boom") == []


def test_per_pair_rules_move_exactly_the_pairs_they_name():
    t = from_spec("fattree:k=4,n=2")
    with Testbed(t, rate=RATE, name="optiq-rules") as bed:
        network = bed.installed
        a = network.pair_route(0, 5)
        up = [e for e in t.links_from(int(t.link_dst[a[0]])).tolist()
              if t.link_dst[e] >= t.num_endpoints and e != a[1]][0]
        down = [e for e in t.links_from(int(t.link_dst[up])).tolist() if t.link_dst[e] == t.link_src[a[-1]]][0]
        moved = network.with_routes(network.pair_index([0], [5]), [[a[0], up, down, a[-1]]])
        assert moved.num_rules >= 1
        bed.install(moved)  # reads every pair back: this one moved, every other one as before
        assert bed.installed.pair_route(0, 5).tolist() == [a[0], up, down, a[-1]]
        bed.install(network)
        assert bed.installed.num_rules == 0


def test_a_run_measures_every_method_with_counters_equal_to_the_plans_bytes(tmp_path):
    """The CI case: 8 hosts, routes read back, the baseline and plans measured, every byte checked."""
    t = from_spec("fattree:k=2,n=3")
    demands = permutation(t.num_endpoints, nbytes=2**20, seed=3)
    report = run_testbed(t, demands, methods="default,opt,dynamic", rate=RATE, repeat=2, name="optiq-ci",
                         options={"k": 8})
    rows = {r.method: r for r in report.rows}
    assert list(rows) == ["default", "opt", "dynamic"]
    assert all(r.verified for r in report.rows)
    assert rows["opt"].routing == "forwarded" and rows["dynamic"].routing == "per-pair rules"
    for r in report.rows:
        assert r.link_bytes_deviation < 0.05, (r.method, r.link_bytes_deviation)
        assert r.measured_time_s >= 0.9 * r.predicted_time_s  # no replay beats the links
    assert 0.8 < report.goodput_bps / report.rate_bps < 1.0
    assert left("optiq-ci") == []
    data = report.to_dict()
    assert json.loads(json.dumps(data))["rows"][0]["method"] == "default"


def _optiq(*argv, **kw):
    return subprocess.Popen([sys.executable, "-m", "optiq", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_at_a_terminal, **kw)


def _wait_for_network(proc, name: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while len(left(name)) < 5:
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the testbed was not built in time"
        time.sleep(0.2)
    time.sleep(1.0)  # into the measurement


def test_ctrl_c_removes_the_network_and_says_so_once(tmp_path):
    proc = _optiq("testbed", "run", "-t", "fattree:k=2,n=3", "--pattern", "permutation", "--size", "4MiB",
                  "--methods", "default", "--repeat", "20", "--name", "optiq-ctrlc", cwd=tmp_path)
    _wait_for_network(proc, "optiq-ctrlc")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, out[-3000:], err[-3000:])
    assert err.count("optiq: interrupted") == 1
    assert left("optiq-ctrlc") == []


def test_after_kill_9_testbed_down_removes_what_is_left(tmp_path, capsys):
    from optiq.cli import main

    proc = _optiq("testbed", "run", "-t", "fattree:k=2,n=3", "--pattern", "permutation", "--size", "4MiB",
                  "--methods", "default", "--repeat", "20", "--name", "optiq-kill9", cwd=tmp_path,
                  start_new_session=True)
    _wait_for_network(proc, "optiq-kill9")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert left("optiq-kill9"), "kill -9 leaves the namespaces (and the ranks in them)"
    assert main(["testbed", "down", "optiq-kill9"]) == 0
    assert "removed optiq-kill9" in capsys.readouterr().out
    assert left("optiq-kill9") == []
    assert "optiq-kill9" not in str(sweep())


def test_down_leaves_a_testbed_whose_run_goes_on():
    with Testbed(from_spec("torus:2x2"), rate=RATE, name="optiq-alive") as bed:
        result = sweep("optiq-alive")
        assert "optiq-alive" in result.in_use and left("optiq-alive")
        assert "still runs" in str(result)
        bed.verify()
    assert left("optiq-alive") == []


@pytest.mark.parametrize("mtu", [1500, 4096])
def test_the_links_carry_packets_of_the_mtu_asked_for(mtu):
    """Every data interface has the MTU and a token bucket of two frames, 6,056 bytes or 1 ms of
    its rate, whichever is most; a flow's header bytes per payload byte are a full frame's:
    Ethernet's 14 and TCP/IP's 52 (timestamps on) bytes for ``mtu - 52`` of payload."""
    t = from_spec("torus:3")
    with Testbed(t, rate=RATE, name="optiq-mtu", mtu=mtu) as bed:
        from optiq.testbed.session import measure_goodput

        for node, ns in enumerate(bed.layout.namespaces):
            for e in t.links_from(node).tolist():
                shown = subprocess.run(["ip", "-n", ns, "-o", "link", "show", "dev", bed.layout.interface(e)],
                                       capture_output=True, text=True, check=True).stdout
                assert f" mtu {mtu} " in shown
                queue = subprocess.run(["tc", "-n", ns, "qdisc", "show", "dev", bed.layout.interface(e)],
                                       capture_output=True, text=True, check=True).stdout
                burst = int(re.search(r"burst (\d+)b", queue).group(1))  # tc rounds through its clock ticks
                assert abs(burst - max(4 * 1514, 2 * (mtu + 14), RATE * 1e-3)) <= 2
        good = measure_goodput(bed, rounds=1)
    frame_over_payload = (mtu + 14) / (mtu - 52) - 1
    assert frame_over_payload <= good.header < frame_over_payload + 0.002


def test_an_mtu_out_of_range_is_refused_before_anything_is_built():
    with pytest.raises(TestbedError, match="MTU of 100 B"):
        Testbed(from_spec("torus:2"), rate=RATE, name="optiq-mtu", mtu=100)
    assert left("optiq-mtu") == []


def test_counters_see_one_flows_bytes_on_its_route_only():
    t = from_spec("fattree:k=2,n=2")
    with Testbed(t, rate=RATE, name="optiq-count") as bed:
        from optiq.testbed.session import measure_goodput

        before = bed.counters()
        good = measure_goodput(bed, rounds=1)
        delta = bed.counters() - before
        there, back = bed.installed.pair_route(good.src, good.dst), bed.installed.pair_route(good.dst, good.src)
        other = np.setdiff1d(np.arange(t.num_links), np.concatenate([there, back]))
        assert delta.bytes[there].min() > 2**20 and delta.bytes[other].max() < 0.01 * delta.bytes[there].min()
        assert 0.8 * RATE < good.bytes_per_s < RATE
        assert 0.01 < good.header < 0.1 and 0.001 < good.ack < 0.1


def test_testbed_collectives_fits_both_models_and_measures_every_algorithm_on_a_star(tmp_path, capsys):
    from optiq.cli import main
    from optiq.collectives.cost import algorithms

    out = tmp_path / "c.json"
    # a fit size under 1 KiB: the sizes handed to the ranks' commands carry their unit; each
    # algorithm timed in two MPI jobs
    assert main(["testbed", "collectives", "--ranks", "4", "--size", "32KiB", "--fit-sizes", "512B,32KiB",
                 "--repeat", "1", "--jobs", "2", "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    rows = report["rows"]
    assert [r["algorithm"] for r in rows] == algorithms(4)
    assert all(r["correct"] and r["measured_s"] > 0 and r["model_s"] > 0 and r["abg_s"] > 0 for r in rows)
    errors = [abs(r["model_s"] - r["measured_s"]) / r["measured_s"] for r in rows]
    assert report["model_error_mean"] == pytest.approx(np.mean(errors))
    assert report["model_error_max"] == pytest.approx(max(errors))
    assert report["measured_best"] == min(rows, key=lambda r: r["measured_s"])["algorithm"]
    assert report["model_choice"] == choose({r["algorithm"]: r["model_s"] for r in rows}, 4)
    fastest = min(r["model_s"] for r in rows)
    assert sorted(report["model_choice_tied"] + [report["model_choice"]]) == sorted(
        r["algorithm"] for r in rows if r["model_s"] <= fastest * (1 + CHOICE_TIE))
    measured = {r["algorithm"]: r["measured_s"] for r in rows}
    assert report["model_choice_shortfall"] == pytest.approx(
        measured[report["model_choice"]] / measured[report["measured_best"]] - 1) and report["model_choice_shortfall"] >= 0
    predicted = sorted(r["model_s"] for r in rows)
    assert report["model_choice_margin"] == pytest.approx(predicted[1] / predicted[0] - 1)
    assert report["drops"] == sum(r["drops"] for r in rows) >= 0
    assert report["rate_bps"] == pytest.approx(20e6) and report["ranks"] == 4 and report["jobs"] == 2
    assert "fastest measured" in capsys.readouterr().out
    for r in rows:  # the break-down: the calculation timed apart, each model's terms adding up to its prediction
        assert 0 < r["compute_s"] < r["measured_s"] and 0 <= r["cpu_idle"] <= 1
        # --repeat 1 in each of 2 jobs: two runs, and the measured time is their median
        assert len(r["runs_s"]) == 2 and r["measured_s"] == pytest.approx(float(np.median(r["runs_s"])))
        assert sum(r["terms"]["contention"].values()) == pytest.approx(r["model_s"])
        assert sum(r["terms"]["abg"].values()) == pytest.approx(r["abg_s"])
        # every phase of the traced run is named, and a phase's drops are never negative
        assert r["step_drops"] and all(n >= 0 for n in r["step_drops"].values())
    phases = {phase for r in rows for phase in r["step_drops"]}
    assert {"reduce-scatter", "allgather", "halving", "doubling"} <= phases


def test_testbed_collectives_on_a_tree_fits_and_predicts_over_the_trees_routes(tmp_path):
    from optiq.cli import main
    from optiq.collectives.cost import AllreduceParams, Routes, predict

    # ranks 0, 1 under one switch; 2, 3 the other; the uplinks at half the hosts' rate
    out, tree = tmp_path / "c.json", "cluster:hosts=4,edges=2,cores=1,core_bw=5Gb/s"
    assert main(["testbed", "collectives", "--ranks", "4", "-t", tree, "--size", "32KiB", "--fit-sizes", "8KiB,32KiB",
                 "--repeat", "1", "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    assert report["params"]["network"] == tree
    routes = Routes.of(tree, 4)
    assert routes.weight.max() == pytest.approx(2.0)  # a byte on an uplink weighs two on a host's link
    fitted = {m: AllreduceParams(**report["params"]["models"][m]) for m in ("contention", "abg")}
    for r in report["rows"]:  # the contention model over the tree's routes; alpha-beta-gamma blind to them
        assert r["model_s"] == pytest.approx(predict(r["algorithm"], 4, 32768, fitted["contention"], routes).total)
        assert r["abg_s"] == pytest.approx(predict(r["algorithm"], 4, 32768, fitted["abg"]).total)


@pytest.mark.parametrize("ail", ["loss", "slow"])
def test_under_loss_or_a_slowed_cable_every_method_completes_verified_and_says_how_much_slower(ail):
    from optiq.testbed.conditions import Conditions, parse_slow

    t = from_spec("fattree:k=2,n=2")
    demands = permutation(t.num_endpoints, nbytes=2**20, seed=3)
    if ail == "loss":
        conditions = Conditions(1.0)
    else:  # the cable every pair's route crosses into one of the top switches' halves
        busiest = int(np.argmax(np.bincount(network_routes_links(t, demands), minlength=t.num_links)))
        name = f"{t.label(int(t.link_src[busiest]))}-{t.label(int(t.link_dst[busiest]))}"
        conditions = Conditions(0.0, parse_slow(t, [f"{name}:0.25"]))
    report = run_testbed(t, demands, methods="default,opt", rate=RATE, repeat=1, name=f"optiq-{ail}",
                         conditions=conditions)
    assert all(r.verified for r in report.rows)
    assert report.conditions == conditions.describe() and "how much slower" in str(report)
    slower = {r.method: r.measured_over_predicted for r in report.rows}
    if ail == "slow":  # the default routes cross the slowed cable at a quarter of its rate
        assert slower["default"] > 2.0, slower
    else:
        assert min(slower.values()) > 0.9, slower
    assert left(f"optiq-{ail}") == []


def test_a_cable_failing_mid_round_is_routed_around_and_pinned_rules_into_it_fail_within_their_bound():
    from optiq.testbed.conditions import Conditions, fault_bound, parse_fail
    from optiq.testbed.layout import Layout
    from optiq.testbed.methods import plan_methods

    t = from_spec("fattree:k=2,n=2")
    demands = permutation(t.num_endpoints, nbytes=2**20, seed=3)
    dynamic = plan_methods(Layout.of(t, "optiq-probe"), demands, ["dynamic"])[-1]
    switches = [e for e in dynamic.plan.paths.links.tolist() if min(t.link_src[e], t.link_dst[e]) >= t.num_endpoints]
    cable = f"{t.label(int(t.link_src[switches[0]]))}-{t.label(int(t.link_dst[switches[0]]))}"
    conditions = Conditions(fail=parse_fail(t, [f"{cable}@0.1"]), sweep_s=0.2)
    report = run_testbed(t, demands, methods="default,dynamic", rate=RATE, repeat=2, name="optiq-fail",
                         conditions=conditions)
    rows = {r.method: r for r in report.rows}
    default, pinned = rows["default"], rows["dynamic"]
    # the network's routes go round the cable after the sweep: every round completes, every byte verified
    assert default.outcome == "completed" and default.rounds == ("completed", "completed") and default.verified
    assert default.crossed_pairs and not default.stranded_pairs and default.measured_over_predicted > 1.0
    # the rules stay as installed: a pair into the dead cable never arrives; both rounds fail, each within its bound
    assert pinned.outcome == "failed" and pinned.rounds == ("failed", "failed") and pinned.stranded_pairs
    assert cable in pinned.error and pinned.stranded_pairs[0] in pinned.error and "\n" not in pinned.error
    assert "did not end" in pinned.error
    d = report.to_dict()["rows"][1]
    assert d["outcome"] == "failed" and d["rounds"] == ["failed", "failed"] and d["error"] == pinned.error
    assert d["verified_rounds"] == 0 and report.to_dict()["rows"][0]["verified_rounds"] == 2
    text = " ".join(str(report).split())
    assert "dynamic FAILED 2 of 2 rounds" in text and conditions.describe() in text, text
    assert report.seconds < 4 * 60 and fault_bound(pinned.predicted_time_s, 0.3) < 15
    assert left("optiq-fail") == []
    print(text)


def network_routes_links(t, demands):
    from optiq.paths import network_routes

    return network_routes(t, demands.src, demands.dst).links


def test_optiq_alltoallv_completes_every_call_through_a_failed_cable_and_measures_its_plan_again(tmp_path):
    from optiq.testbed import run_program
    from optiq.testbed.conditions import Conditions, parse_fail

    t = from_spec("torus:4x4")
    out = tmp_path / "calls.json"
    # rank 0 sends two along its row through H1: the cable H0-H1 carries the plan's paths
    conditions = Conditions(fail=parse_fail(t, ["H0-H1@10"]))
    example = Path(__file__).resolve().parents[1] / "examples" / "through_failure.py"
    command = [sys.executable, str(example), "--seconds", "16", "--size", "256KiB", "--json", str(out)]
    code, line = run_program(t, command, rate=RATE, name="optiq-tf", conditions=conditions)
    assert code == 0 and "cable H0-H1 failed at 10" in line and "routes around the dead cables installed" in line
    assert left("optiq-tf") == []
    ranks = json.loads(out.read_text())["calls"]
    calls = ranks[0]
    assert all(c["verified"] and not c["error"] for rank in ranks for c in rank), "a call lost or failed"
    assert all([c["method"] for c in rank] == [c["method"] for c in calls] for rank in ranks), "ranks differ"
    flagged = [k for k, c in enumerate(calls) if "then its call took" in c["reason"]]
    assert flagged, f"no call was slow enough to be measured again: {[round(c['transfer_s'], 3) for c in calls]}"
    first = flagged[0]
    assert all(c["method"] == "heu2" for c in calls[2:first]), "the plan was not in use before the failure"
    again = [k for k in range(first, min(first + 3, len(calls))) if "measured again" in calls[k]["reason"]]
    assert again, [c["reason"] for c in calls[first:first + 3]]
    kept = calls[again[0]]["method"]
    assert kept in ("heu2", "mpi") and all(c["method"] in ("heu2", "mpi") for c in calls[again[0]:])
    print(line, f"calls {len(calls)}, flagged at call {first}, measured again at {again[0]}: {kept} kept")


def test_on_ecmp_every_row_is_predicted_for_the_paths_its_connections_took():
    """Multipath routes hashed by the flows' ports: the kernel's own choice, read back per
    connection, predicts the counters and the time; per-pair rules hold their pairs."""
    t = from_spec("fattree:k=4,n=2,routes=ecmp:5")
    demands = permutation(t.num_endpoints, nbytes=2**19, seed=1)
    report = run_testbed(t, demands, methods="default,dynamic,heu2", rate=RATE, repeat=2, name="optiq-ecmp")
    rows = {r.method: r for r in report.rows}
    assert rows["default"].routing == "ecmp" and rows["dynamic"].routing == "per-pair rules"
    d = rows["default"]
    assert d.model_p05_s <= d.model_mean_s <= d.model_p95_s and rows["heu2"].model_mean_s is None
    for r in report.rows:
        assert r.verified and r.link_bytes_deviation < 0.1, (r.method, r.link_bytes_deviation)
        assert 0.9 < r.measured_over_predicted < 1.3, (r.method, r.measured_over_predicted)
    assert "ECMP: every flow is hashed" in str(report) and left("optiq-ecmp") == []
