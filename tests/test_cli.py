import json

import networkx as nx
import pytest

from optiq.cli import main
from optiq.plan import load_plan


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_then_eval_json(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    code, out, _ = run(capsys, "plan", "--topology", "bgq:512", "--pattern", "disjoint", "--size", "8MiB",
                       "--method", "default", "-o", str(plan), "-q")
    assert code == 0 and plan.exists()
    code, out, _ = run(capsys, "eval", str(plan), "--json")
    m = json.loads(out)
    keys = {"total_paths", "paths_per_job_max", "paths_per_job_avg", "hops_max", "hops_avg",
            "hopbytes_per_path_max", "hopbytes_per_path_avg", "copies_per_path_max", "copies_per_path_avg",
            "paths_per_link_max", "paths_per_link_avg", "bytes_per_link_max", "bytes_per_link_avg",
            "predicted_time_s", "throughput_Bps", "lower_bound_time_s"}
    assert keys <= m.keys()
    assert m["total_paths"] == 256 and m["predicted_time_s"] >= m["lower_bound_time_s"] > 0


def test_plan_from_demand_file_and_eval_table(tmp_path, capsys):
    f = tmp_path / "d.csv"
    f.write_text("src,dst,bytes\n0,9,1MiB\n3,12,2MiB\n")
    plan = tmp_path / "p.json"
    assert run(capsys, "plan", "-t", "torus:4x4", "--demands", str(f), "-m", "heu2", "-o", str(plan), "-q")[0] == 0
    code, out, _ = run(capsys, "eval", str(plan))
    assert code == 0 and "heu2" in out and "cut bound on the completion time" in out


def test_compare_prints_all_methods(capsys):
    code, out, _ = run(capsys, "compare", "-t", "fattree:k=4,n=2", "--pattern", "disjoint", "--size", "1MiB",
                       "--methods", "default,heu1,heu2,dynamic,opt", "--json", "-q")
    rows = json.loads(out)
    assert code == 0 and [r["method"] for r in rows] == ["default", "heu1", "heu2", "dynamic", "opt"]
    opt = rows[-1]["predicted_time_s"]
    assert all(opt <= r["predicted_time_s"] * (1 + 1e-6) for r in rows)


def test_compare_gives_every_row_the_best_bound_proven_for_its_routing(capsys):
    argv = ["-t", "fattree:k=4", "--pattern", "disjoint", "--sources", "32", "--ratio", "1", "--pairing", "random"]
    code, out, _ = run(capsys, "compare", *argv, "--methods", "default,lp,heu2,opt,dynamic", "--json", "-q")
    rows = {r["method"]: r for r in json.loads(out)}
    from optiq import from_spec
    from optiq.lp import cut_lower_bound
    from optiq.planner.compare import compare_methods
    from optiq.workloads import constant_ratio, random_pairing

    topo = from_spec("fattree:k=4")
    demands = random_pairing(constant_ratio(64, "disjoint", num_sources=32, ratio=1), seed=0)
    cut = cut_lower_bound(topo, demands).time_s
    forwarded = {r["lower_bound_time_s"] for r in rows.values() if r["routing"] == "forwarded"}
    assert code == 0 and len(forwarded) == 1 and forwarded.pop() > cut * 1.01  # opt's proven bound, in every row
    assert rows["dynamic"]["lower_bound_time_s"] == pytest.approx(cut)  # a forwarded bound does not bound free plans
    assert all(r["lower_bound_time_s"] <= r["predicted_time_s"] * (1 + 1e-9) for r in rows.values())
    lp = compare_methods(topo, demands, ["lp", "opt"])[0].plan
    assert lp.lower_bound_cut.endswith("(proven by opt)")


def _cell(header: str, row: str, column: str) -> str:
    """A right-aligned table cell: the word of ``row`` that ends under ``column``'s title."""
    end = header.index(column) + len(column)
    return row[:end].split()[-1]


def test_one_cut_bound_per_workload_in_compare_eval_and_plan(tmp_path, capsys):
    """The same default plan reads the same /cut in compare and in eval (both the workload's
    cut bound, computed independently here); the tighter bound opt proves for forwarded plans
    is named in compare's footer, not mixed into the column."""
    from optiq import from_spec
    from optiq.lp import cut_lower_bound
    from optiq.workloads import constant_ratio, random_pairing

    argv = ["-t", "fattree:k=4", "--pattern", "disjoint", "--sources", "32", "--ratio", "1", "--pairing", "random"]
    code, table, _ = run(capsys, "compare", *argv, "--methods", "default,opt", "-q")
    assert code == 0
    lines = table.splitlines()
    assert "/cut" in lines[1] and "/bound" not in lines[1]
    compared = {line.split()[0]: _cell(lines[1], line, "/cut") for line in lines[3:5]}
    plan = tmp_path / "d.json"
    code, out, _ = run(capsys, "plan", *argv, "-m", "default", "-o", str(plan), "-q")
    assert code == 0 and "cut bound" in out
    code, evaluated, _ = run(capsys, "eval", str(plan))
    evaluated = evaluated.splitlines()
    assert _cell(evaluated[1], evaluated[3], "/cut") == compared["default"]
    cut = cut_lower_bound(from_spec("fattree:k=4"),
                          random_pairing(constant_ratio(64, "disjoint", num_sources=32, ratio=1), seed=0)).time_s
    code, out, _ = run(capsys, "eval", str(plan), "--json")
    assert json.loads(out)["cut_bound_s"] == pytest.approx(cut, rel=1e-12)
    assert float(compared["default"]) == pytest.approx(json.loads(out)["predicted_time_s"] / cut, abs=5e-4)
    assert "opt 1.0" in next(line for line in table.splitlines() if line.startswith("proven for forwarded plans"))


def test_tables_fit_100_columns_unless_wide_and_a_metrics_object_prints_as_its_table(tmp_path, capsys):
    argv = ["compare", "-t", "torus:4x4", "--pattern", "disjoint", "--sources", "2", "--ratio", "4", "--methods",
            "default,heu2,opt", "-q"]
    narrow, wide = run(capsys, *argv)[1], run(capsys, *argv, "--wide")[1]
    assert max(map(len, narrow.splitlines())) <= 100 < max(map(len, wide.splitlines()))
    assert "copies avg" in wide and "copies avg" not in narrow
    from optiq import from_spec, make_plan, plan_metrics
    from optiq.workloads import Demands

    text = str(plan_metrics(make_plan(from_spec("torus:4x4"), Demands([0], [5], [2**20]), "default")))
    assert text.splitlines()[0].split()[:4] == ["method", "routing", "GB/s", "time"] and "cut bound" in text


def _synthetic_fabric():
    from conftest import synthetic

    return synthetic()


def _disconnected_graphml(tmp_path):
    g = nx.Graph()
    g.add_edge(0, 1, capacity=1.0)
    g.add_edge(2, 3, capacity=1.0)
    path = tmp_path / "two.graphml"
    nx.write_graphml(g, path)
    return f"graphml:{path}"


@pytest.mark.parametrize("argv,fragment", [
    (["plan", "-t", "bgq:999", "--pattern", "disjoint", "-o", "x.json"], "no Blue Gene/Q preset"),
    (["plan", "-t", "torus:4x4", "--demands", "{d_range}", "-o", "x.json"], "out of range"),
    (["plan", "-t", "torus:4x4", "--demands", "{d_self}", "-o", "x.json"], "source = destination"),
    (["plan", "-t", "torus:4x4", "--demands", "{d_zero}", "-o", "x.json"], "must be positive"),
    (["plan", "-t", "{disconnected}", "--demands", "{d_self}", "-o", "x.json"], "disconnected"),
    (["eval", "{bad_plan}"], "not valid JSON"),
    (["eval", "{inconsistent_plan}"], "demand is"),
    (["compare", "-t", "torus:4x4", "--pattern", "disjoint", "--methods", "fast"], "unknown method"),
    (["plan", "-t", "torus:4x4", "--pattern", "distance", "-o", "x.json"], "--position"),
])
def test_user_mistakes_give_one_line_errors(tmp_path, capsys, argv, fragment):
    files = {"d_range": "src,dst,bytes\n0,99,10\n", "d_self": "src,dst,bytes\n2,2,10\n",
             "d_zero": "src,dst,bytes\n1,2,0\n"}
    subst = {}
    for name, text in files.items():
        (tmp_path / f"{name}.csv").write_text(text)
        subst[name] = str(tmp_path / f"{name}.csv")
    (tmp_path / "bad.json").write_text("{oops")
    subst["bad_plan"] = str(tmp_path / "bad.json")
    good = tmp_path / "good.json"
    assert main(["plan", "-t", "torus:4x4", "--pattern", "disjoint", "-m", "default", "-o", str(good), "-q"]) == 0
    data = json.loads(good.read_text())
    data["jobs"][0]["bytes"] += 1
    (tmp_path / "inc.json").write_text(json.dumps(data))
    subst["inconsistent_plan"] = str(tmp_path / "inc.json")
    subst["disconnected"] = _disconnected_graphml(tmp_path)
    capsys.readouterr()
    argv = [a.format(**subst) for a in argv]
    code, out, err = run(capsys, *argv, *(["-q"] if argv[0] != "eval" else []))
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("optiq: error:") and fragment in lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("spec,fragment", [
    ("torus:4x4,bw=1.8", "bandwidth '1.8' needs a unit in bytes or bits: 1.8GB/s or 1.8Gb/s"),
    ("torus:4x4,bw=2G", "needs a unit in bytes or bits"),
    ("bqg:512", "unknown topology kind 'bqg' in 'bqg:512' (did you mean bgq?)"),
    ("fatree:k=4", "(did you mean fattree?)"),
    ("bgq:1000", "no Blue Gene/Q preset with 1000 nodes (known: 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, "
                 "49152)"),
])
def test_topology_mistakes_say_what_was_meant(capsys, spec, fragment):
    code, _, err = run(capsys, "plan", "-t", spec, "--pattern", "disjoint", "-o", "x.json", "-q")
    assert code == 1 and err.count("\n") == 1 and fragment in err
    if spec.startswith("bgq"):  # the presets the error lists are the ones --help lists
        code, out, _ = run(capsys, "plan", "--help")
        assert code == 0 and "bgq:NODES (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 49152)" in " ".join(out.split())


@pytest.mark.parametrize("model,option", [("chunk", "--pace-paths"), ("direct", "--sharing=proportional"),
                                          ("chunk", "--batch=0"), ("flow", "--header=10"), ("flow", "--chunk-size=1MiB"),
                                          ("direct", "--forward-cost=1e-6")])
def test_simulate_options_of_another_model_are_refused(tmp_path, capsys, model, option):
    plan = tmp_path / "p.json"
    assert main(["plan", "-t", "torus:4x4", "--pattern", "disjoint", "-m", "default", "-o", str(plan), "-q"]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "simulate", str(plan), "--model", model, option)
    assert code == 2 and out == "" and f"{option.split('=')[0]} applies to --model" in err and f"not {model}" in err


def test_a_plan_whose_network_changed_since_is_refused_by_name(tmp_path, capsys):
    sf = _synthetic_fabric()
    fabric, plan = tmp_path / "fabric.txt", tmp_path / "p.json"
    sf.write_ibnetdiscover(sf.build(4, 2, seed=1), fabric)
    assert main(["plan", "-t", f"ibnet:{fabric}", "--pattern", "disjoint", "-m", "heu2", "-o", str(plan), "-q"]) == 0
    assert run(capsys, "eval", str(plan))[0] == 0
    sf.write_ibnetdiscover(sf.build(4, 2, seed=1, slow=0.5), fabric)  # some cables now slower
    code, _, err = run(capsys, "eval", str(plan))
    assert code == 1 and err.count("\n") == 1
    assert "the plan was made for another network" in err and f"'{fabric}' changed since the plan was written" in err


def test_usage_errors_exit_2(capsys):
    assert run(capsys, "plan", "--pattern", "disjoint")[0] == 2
    assert run(capsys, "plan", "-t", "torus:4x4", "--pattern", "disjoint", "--size", "-3", "-o", "x")[0] == 2


def test_a_bare_small_size_a_rate_unit_and_a_misspelled_option_are_named(tmp_path, capsys):
    """--size 8 needs a unit as a bare rate does; 25MBps is 25MB/s and a wrong unit gets an
    example, not a garbled hint; a misspelled required option is named, with the close one."""
    from optiq.utils.units import parse_rate

    out = str(tmp_path / "p.json")
    base = ["plan", "-t", "torus:4x4", "--pattern", "disjoint", "-m", "default", "-o", out, "-q"]
    code, _, err = run(capsys, *base, "--size", "8")
    assert code == 2 and "'8' has no unit: write 8B for bytes" in err
    assert run(capsys, *base, "--size", "8B")[0] == 0 and load_plan(out).demands.nbytes.max() == 8
    assert run(capsys, *base, "--size", "4096")[0] == 0 and load_plan(out).demands.nbytes.max() == 4096
    assert parse_rate("25MBps") == 25e6 and parse_rate("25Mbps") == 25e6 / 8 == parse_rate("25Mb/s")
    code, _, err = run(capsys, "testbed", "run", "-t", "torus:2x2", "--pattern", "disjoint", "--rate", "25XBps")
    assert code == 2 and "is not a rate (examples:" in err and "PSB" not in err
    for mtu, said in (("100", "must be at least 576"), ("70000", "must be at most 65535"), ("9k", "is not an integer")):
        code, _, err = run(capsys, "testbed", "exec", "-t", "torus:2", "--mtu", mtu, "--", "true")
        assert code == 2 and f"argument --mtu: '{mtu}' {said}" in err and err.count("optiq: error:") == 1
    code, _, err = run(capsys, "plan", "-t", "torus:4x4", "--patern", "disjoint", "-o", out)
    assert code == 2 and "unrecognized arguments: --patern (did you mean --pattern?)" in err
    assert "required" not in err
    code, _, err = run(capsys, "plan", "-t", "torus:4x4", "-o", out)  # nothing misspelled: the old message
    assert code == 2 and "one of the arguments --pattern --demands --traffic is required" in err


def test_what_the_commands_print_reads_at_any_scale_and_says_what_it_means(tmp_path, capsys):
    """One workload line in compare, eval and demo's form; times in s or us where ms would read
    as 2443359.173 or 0.000; copies explained; plan and eval describe themselves and -m its default."""
    big = ["-t", "torus:4x4", "--pattern", "disjoint", "--sources", "2", "--ratio", "4", "--size", "1TiB"]
    code, out, _ = run(capsys, "compare", *big, "--methods", "default,opt", "-q")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "torus 4x4, disjoint 2x4 on 16: 8 pairs, 8 TiB in all"
    assert "time s" in lines[1] and "time ms" not in lines[1] and "cut bound on the completion time: 814.453 s" in out
    plan = tmp_path / "p.json"
    assert run(capsys, "plan", *big, "-m", "opt", "-o", str(plan), "-q")[0] == 0
    code, out, _ = run(capsys, "eval", str(plan))
    assert code == 0 and out.splitlines()[0] == lines[0]  # the same line in eval, from the plan file
    from optiq import load_plan

    saved = load_plan(plan).used()
    copies = int((-(-saved.path_bytes // saved.chunk_size) * saved.paths.copies).sum())
    stopping = int((saved.paths.copies > 0).sum())
    assert f"{stopping} of its {saved.paths.num_paths} paths stop at ranks on the way, which receive and send on " \
           f"{copies:,} chunks" in out
    code, out, _ = run(capsys, "plan", "-t", "torus:4x4", "--pattern", "disjoint", "--size", "64B", "-m", "default",
                       "-o", str(plan), "-q")
    assert code == 0 and " us (cut bound " in out and "0.000" not in out
    assert main(["plan", "--help"]) == 0
    helped = " ".join(capsys.readouterr().out.split())
    assert "write the plan file: every pair's paths" in helped and "opt (default): column generation" in helped
    assert main(["eval", "--help"]) == 0
    assert "against the workload's cut bound" in " ".join(capsys.readouterr().out.split())


def test_the_permutation_pattern_pairs_every_host_once_and_takes_no_ratio(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["plan", "-t", "fattree:k=4,n=2", "--pattern", "permutation", "--seed", "3", "-m", "default",
                 "-o", str(out), "-q"]) == 0
    plan = load_plan(out)
    assert sorted(plan.demands.src.tolist()) == sorted(plan.demands.dst.tolist()) == list(range(16))
    assert main(["plan", "-t", "fattree:k=4,n=2", "--pattern", "permutation", "--ratio", "2", "-m", "default",
                 "-o", str(out), "-q"]) == 1
    assert "takes no --ratio" in capsys.readouterr().err


def test_a_terminal_gets_one_progress_line_that_is_cleared_before_the_table(monkeypatch):
    import io
    import sys

    from optiq.cli import live

    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    line = live.LiveLine.start(0.0)
    line("planning with opt")
    line("x" * 500)   # longer than the terminal: cut
    print("method  time")
    print("warning", file=sys.stderr)
    assert out.getvalue() == "method  time\n"
    shown = err.getvalue().split("\r\033[K")
    assert shown[1].endswith("planning with opt") and shown[2].endswith("...") and len(shown[2]) < 500
    assert len(shown) == 4 and shown[-1] == "warning\n"   # cleared once, by the table, before the warning


@pytest.mark.parametrize("given", [None, "16KiB"])
def test_testbed_run_leaves_the_executors_chunk_to_it_unless_given(monkeypatch, capsys, tmp_path, given):
    # a plan's 64 KiB default chunk must not override the executor's own default on the testbed
    # (cut to 5% of a forwarding plan's time), which the application's calls use
    import optiq.cli.testbed as cli_testbed
    from optiq.plan import DEFAULT_CHUNK_SIZE

    seen = {}

    class Stop(Exception):
        pass

    def fake_run(topology, demands=None, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(cli_testbed, "run_testbed", fake_run)
    with pytest.raises(Stop):
        main(["testbed", "run", "-t", "torus:4x4", "--pattern", "disjoint", "--methods", "opt", "-q"]
             + ([] if given is None else ["--chunk-size", given]))
    assert seen["chunk_size"] == (None if given is None else 16384)
    plan = tmp_path / "p.json"
    assert run(capsys, "plan", "-t", "torus:4x4", "--pattern", "disjoint", "-m", "default", "-o", str(plan), "-q")[0] == 0
    assert load_plan(plan).chunk_size == DEFAULT_CHUNK_SIZE  # plans still get their default
    seen.clear()
    with pytest.raises(Stop):  # a plan file's executor takes it too
        main(["testbed", "run", str(plan), "-q"] + ([] if given is None else ["--chunk-size", given]))
    assert seen["chunk_size"] == (None if given is None else 16384)
