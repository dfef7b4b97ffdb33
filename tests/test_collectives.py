"""Allreduce cost model: counts by hand, the fit on synthetic timings, algorithms against Allreduce."""

import json

import numpy as np
import pytest
from conftest import MPI_SCRIPTS, launch

from optiq.cli import main
from optiq.collectives.algorithms import PHASES
from optiq.collectives.bench import TRACE_GAP_S
from optiq.collectives.cost import (
    CHOICE_TIE,
    AllreduceParams,
    Routes,
    algorithm_steps,
    algorithms,
    choose,
    feature_row,
    incast_volume,
    load_params,
    max_fan_in,
    predict,
    routed_steps,
    save_params,
    step_terms,
)
from optiq.collectives.fit import Sample, fit_allreduce_model
from optiq.errors import OptiqError


def counts(name, ranks, nbytes, threshold=1):
    steps = algorithm_steps(name, ranks, nbytes)
    return feature_row(steps).tolist() + [incast_volume(steps, threshold)]


# [rounds, bytes sent, bytes reduced, memory bytes, sum of max(0, f - 1) * m], worked out by hand
@pytest.mark.parametrize("name, ranks, nbytes, want", [
    ("ring", 4, 4000, [6, 6000, 3000, 9000, 0]),            # 3 + 3 steps of 1,000 B; 3 reductions read 2 write 1
    ("rhd", 8, 8000, [6, 14000, 7000, 21000, 0]),           # 4000 + 2000 + 1000 each way
    ("rhd", 6, 6000, [6, 24000, 10500, 31500, 0]),          # fold 6,000 in (with a first half of 3,000 beside it)
                                                            # and out + rhd on 4: 4,500 each way
    ("cps", 4, 4000, [2, 6000, 3000, 5000, 4000]),          # fan-in 3 of 1,000 B, twice; 4 reads + 1 write of 1,000
    ("hcps:2x3", 6, 6000, [4, 10000, 5000, 13000, 2000]),   # a=2: 3,000 B each; b=3 on 3,000 B: 1,000 B blocks
    ("hcps:3x2", 6, 6000, [4, 10000, 5000, 11000, 4000]),   # a=3: 2,000 B blocks, fan-in 2; b=2 on 2,000 B
])
def test_counts_match_hand_computed_cases(name, ranks, nbytes, want):
    assert counts(name, ranks, nbytes) == pytest.approx(want)


@pytest.mark.parametrize("ranks", [2, 3, 5, 6, 8, 12, 16])
def test_every_algorithm_sends_and_reduces_at_least_the_lower_bounds(ranks):
    S = 12345.0
    for name in algorithms(ranks):
        rounds, sent, reduced, memory, _ = counts(name, ranks, S)
        assert sent >= 2 * (ranks - 1) / ranks * S * (1 - 1e-12)
        assert reduced >= (ranks - 1) / ranks * S * (1 - 1e-12)
        exact = name != "rhd" or ranks & (ranks - 1) == 0
        assert (sent == pytest.approx(2 * (ranks - 1) / ranks * S)) == exact


def test_hierarchies_trade_memory_for_contention():
    # the first step's fan-in a up: memory traffic down, incast volume up (the paper's 6 x 2 trade-off)
    names = ["hcps:2x6", "hcps:3x4", "hcps:4x3", "hcps:6x2"]
    memory = [counts(n, 12, 1e6)[3] for n in names]
    incast = [counts(n, 12, 1e6)[4] for n in names]
    assert memory == sorted(memory, reverse=True) and incast == sorted(incast)


def test_algorithm_names_and_errors():
    assert algorithms(8) == ["ring", "rhd", "cps", "hcps:2x4", "hcps:4x2"]
    assert algorithms(7) == ["ring", "rhd", "cps"]
    for bad, fragment in (("hcps:3x3", "multiply to the 8 ranks"), ("hcps:3", "hcps:AxB"), ("tree", "unknown")):
        with pytest.raises(OptiqError, match=fragment):
            algorithm_steps(bad, 8, 100)


def test_abg_is_the_contention_model_without_its_two_terms():
    p = AllreduceParams(1e-6, 2e-9, 1e-9, 5e-10, 3e-9, threshold=2)
    plain = AllreduceParams(1e-6, 2e-9, 1e-9)
    for name in algorithms(12):
        full, abg = predict(name, 12, 2**20, p), predict(name, 12, 2**20, plain)
        assert full.total == pytest.approx(abg.total + full.memory + full.contention)
        assert abg.memory == abg.contention == 0


def synthetic_samples(true, fan_ins=range(1, 12), noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for kind, cs in (("p2p", [1]), ("fullmesh", list(fan_ins)), ("reduce", [2, 4, 12]), ("copy", [1])):
        for c in cs:
            for m in (16384, 131072, 1048576):
                t = sum(step_terms(s, true).total for s in Sample(kind, c, m, 1.0).steps())
                out.append(Sample(kind, c, m, t * (1 + noise * rng.standard_normal())))
    return out


def test_fit_recovers_known_parameters():
    true = AllreduceParams(3e-5, 8e-10, 2e-10, 3e-10, 6e-10, threshold=3)
    fit = fit_allreduce_model(synthetic_samples(true))
    got = fit.contention
    assert got.threshold == 3
    for field in ("alpha", "beta", "gamma", "delta", "epsilon"):
        assert getattr(got, field) == pytest.approx(getattr(true, field), rel=1e-6)
    assert fit.contention_error[1] < 1e-9 < fit.abg_error[1]  # abg cannot explain incast or memory
    noisy = fit_allreduce_model(synthetic_samples(true, noise=0.01, seed=3)).contention
    assert noisy.threshold == 3 and noisy.epsilon == pytest.approx(true.epsilon, rel=0.1)


def test_fit_needs_every_kind():
    with pytest.raises(OptiqError, match="missing copy"):
        fit_allreduce_model([s for s in synthetic_samples(AllreduceParams(1e-6, 1e-9, 1e-9, 1e-10)) if s.kind != "copy"])


def test_params_file_round_trip_and_predict_cli(tmp_path, capsys):
    models = {"contention": AllreduceParams(2e-5, 1e-9, 3e-10, 4e-10, 2e-9, threshold=2),
              "abg": AllreduceParams(2e-5, 1.2e-9, 8e-10)}
    path = tmp_path / "params.json"
    save_params(models, path, ranks=12)
    assert load_params(path) == models
    assert main(["collectives", "predict", "--params", str(path), "--ranks", "12", "--size", "1MiB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ranks"] == 12 and out["size_bytes"] == 2**20
    for model in ("contention", "abg"):
        rows = out["models"][model]
        assert {r["algorithm"] for r in rows} == set(algorithms(12))
        times = [r["time_s"] for r in rows]
        assert times == sorted(times)
        assert out["best"][model] == choose({r["algorithm"]: r["time_s"] for r in rows}, 12)
        want = predict(rows[0]["algorithm"], 12, 2**20, models[model]).total
        assert rows[0]["time_s"] == pytest.approx(want)


@pytest.mark.parametrize("argv, fragment", [
    (["--params", "missing.json", "--ranks", "4", "--size", "1MiB"], "cannot read allreduce parameters"),
    (["--params", "{plan}", "--ranks", "4", "--size", "1MiB"], "not an optiq allreduce parameters file"),
])
def test_predict_errors(tmp_path, capsys, argv, fragment):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "optiq-plan"}))
    argv = [a.replace("{plan}", str(other)).replace("missing.json", str(tmp_path / "missing.json")) for a in argv]
    assert main(["collectives", "predict", *argv]) == 1
    err = capsys.readouterr().err
    assert fragment in err and err.count("optiq: error:") == 1 and "Traceback" not in err
    assert main(["collectives", "predict", "--params", "p", "--ranks", "1", "--size", "1MiB"]) == 2


# -- under mpiexec ------------------------------------------------------------------------


@pytest.mark.mpi
@pytest.mark.parametrize("n", [3, 4, 6, 8, 12])
def test_algorithms_equal_mpi_allreduce(n):
    proc, _ = launch(n, MPI_SCRIPTS / "allreduce_check.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 9 * len(algorithms(n)) + 1 and all(line.endswith(": ok") for line in lines[:-1])
    assert lines[-1].endswith("the application's messages with the algorithms' tags arrived intact")


@pytest.mark.mpi
def test_fit_predict_bench_contract(tmp_path):
    params, bench = tmp_path / "params.json", tmp_path / "bench.json"
    cli = ["-m", "optiq"]
    proc, _ = launch(4, *cli, "collectives", "fit", "-o", params, "--sizes", "8KiB,64KiB", "--repeat", "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("wrote") == 1  # only rank 0 prints
    models = load_params(params)
    assert models["contention"].alpha > 0
    proc, _ = launch(4, *cli, "collectives", "bench", "--size", "64KiB", "--json", bench, "--params", params,
                     "--repeat", "2")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(bench.read_text())
    assert set(report["algorithms"]) == set(algorithms(4)) and report["fastest"] in report["algorithms"]
    for entry in report["algorithms"].values():
        assert entry["correct"] is True and entry["time_s"] > 0 and set(entry["predicted_s"]) == {"contention", "abg"}
        assert 0 < entry["compute_s"]  # the calculation alone
        # the machine's idle share; None where the timed runs were shorter than /proc/stat's clock tick
        assert entry["cpu_idle"] is None or 0 <= entry["cpu_idle"] <= 1
        for model in ("contention", "abg"):
            assert sum(entry["predicted_terms"][model].values()) == pytest.approx(entry["predicted_s"][model])
    trace = tmp_path / "trace.json"
    proc, _ = launch(4, *cli, "collectives", "bench", "--size", "64KiB", "--algorithms", "ring,rhd,hcps:2x2",
                     "--trace", trace)
    assert proc.returncode == 0, proc.stderr
    traced = json.loads(trace.read_text())
    assert set(traced) == {"ring", "rhd", "hcps:2x2"}
    ring = traced["ring"]  # 4 ranks x (3 reduce-scatter + 3 allgather) exchanges, apart in time
    assert len(ring) == 24 and {w["rank"] for w in ring} == set(range(4))
    assert sorted({w["phase"] for w in ring}) == ["allgather", "reduce-scatter"]
    for rank in range(4):
        mine = sorted((w for w in ring if w["rank"] == rank), key=lambda w: w["start"])
        assert all(b["start"] - a["end"] >= TRACE_GAP_S * 0.9 for a, b in zip(mine, mine[1:]))
    assert {w["phase"] for w in traced["rhd"]} == {"halving", "doubling"}  # 4 ranks: a power of two, no fold
    assert {w["phase"] for w in traced["hcps:2x2"]} == set(PHASES[t] for t in range(7110, 7114))


@pytest.mark.mpi
@pytest.mark.parametrize("argv, fragment", [
    (["bench", "--size", "12B"], "multiple of 8"),
    (["bench", "--size", "64KiB", "--algorithms", "ring,hcps:3x3"], "unknown algorithm(s) hcps:3x3"),
    (["fit", "-o", "/nonexistent/dir/p.json"], "does not exist"),
    (["fit", "-o", "p.json", "--network", "cluster:hosts=3,edges=1"], "has 3 hosts, fewer than 4 ranks"),
])
def test_mpi_errors_are_reported_once(argv, fragment):
    proc, _ = launch(4, "-m", "optiq", "collectives", *argv)
    assert proc.returncode != 0
    assert proc.stderr.count(fragment) == 1 and "Traceback" not in proc.stderr, proc.stderr


def test_one_rank_is_a_clear_error(capsys):  # in process: a communicator of one rank
    assert main(["collectives", "bench", "--size", "1KiB"]) == 1
    assert "mpiexec -n N" in capsys.readouterr().err


def test_steps_are_timed_back_to_back_and_local_work_from_its_own_start(monkeypatch):
    """On a fake clock: every common start costs a rank a lag of 5 (woken late) and a call of
    the work 1. A step timed back to back is charged the lag once per run, not per call;
    work on the rank's own core is never charged it."""
    from mpi4py import MPI

    from optiq.collectives import bench

    clock = [0.0]
    calls = []

    def start_together(comm):
        moment = clock[0]
        clock[0] += 5.0      # the lag of a rank that gets its core late
        return moment

    def work():
        calls.append(1)
        clock[0] += 1.0

    monkeypatch.setattr(bench, "start_together", start_together)
    monkeypatch.setattr(bench.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(bench, "cpu_times", lambda: None)
    monkeypatch.setattr(bench, "idle_share", lambda before, after: 0.0)
    comm = MPI.COMM_SELF
    assert bench._timed(comm, work, repeat=3, warmup=1)[0] == 6.0
    assert bench._timed(comm, work, repeat=3, warmup=1, inner=4)[0] == (5.0 + 4.0) / 4
    assert len(calls) == 4 + 16
    assert bench._timed(comm, work, repeat=3, warmup=1, own_clock=True)[0] == 1.0


# -- the network's routes -----------------------------------------------------------------


@pytest.mark.parametrize("ranks", [2, 3, 5, 8, 12, 15, 16])
def test_on_a_star_the_routed_model_is_the_seeds_where_the_ranks_keep_in_step(ranks):
    routes = Routes.of(f"fattree:k={ranks},n=1", ranks)
    for name in algorithms(ranks):
        if name == "rhd" and ranks in (5, 15):  # some folding ranks get an early half, others not
            continue
        plain, routed = algorithm_steps(name, ranks, 3e5), routed_steps(name, ranks, 3e5, routes)
        assert [s.bytes_sent for s in routed] == pytest.approx([s.bytes_sent for s in plain], rel=1e-12), name


def test_rhd_on_five_ranks_as_worked_by_hand():
    """Rank 1 folds rank 0's vector (S). Rank 3 (new 2) sends its half (S/2) to rank 1 at once,
    and rank 2, done with rank 4 at S/2, its quarter: rank 1's link carries 7S/4 before the
    fold ends. Rank 3 then gets rank 1's half (S/2) at 9S/4, so the second halving round ends at
    5S/2; doubling takes S/4 + S/2 and the hand-back S: 17S/4, where the per-round count is 4S."""
    routed = routed_steps("rhd", 5, 1.0, Routes.of("fattree:k=5,n=1", 5))
    assert [s.bytes_sent for s in routed] == pytest.approx([1.75, 0.75, 0.75, 1.0])
    assert sum(s.bytes_sent for s in algorithm_steps("rhd", 5, 1.0)) == pytest.approx(4.0)


def _replay_one_flow_at_a_time(rounds, routes):
    """The replay written plainly: flows and links in Python sets, ranks walked one by one."""
    msgs = [(int(s), int(d), float(b), k) for k, (src, dst, nb) in enumerate(rounds) for s, d, b in zip(src, dst, nb)]
    links = [set(routes.links[routes.offsets[s * routes.ranks + d]:routes.offsets[s * routes.ranks + d + 1]].tolist())
             for s, d, _, _ in msgs]
    left = [b for _, _, b, _ in msgs]
    arrival = [None] * len(msgs)
    stage = {i: sorted({k for s, d, _, k in msgs if i in (s, d)}) for i in range(routes.ranks)}
    clock = 0.0
    while None in arrival:
        at = {i: next((k for k in ks if any(arrival[m] is None and i in msgs[m][:2] and msgs[m][3] == k
                                             for m in range(len(msgs)))), None) for i, ks in stage.items()}
        active = [m for m in range(len(msgs)) if arrival[m] is None and at[msgs[m][0]] == msgs[m][3]]
        if any(not links[m] for m in active):  # a copy to itself arrives at once
            for m in active:
                arrival[m] = clock if not links[m] else arrival[m]
            continue
        rate, free, cap = {}, set(active), {link: 1 / routes.weight[link] for link in range(routes.weight.size)}
        while free:
            use = {}
            for m in free:
                for link in links[m]:
                    use[link] = use.get(link, 0) + 1
            least = min(cap[link] / n for link, n in use.items())
            for m in [m for m in free if any(cap[link] / use[link] <= least * (1 + 1e-12) for link in links[m])]:
                rate[m] = least
                free.discard(m)
                for link in links[m]:
                    cap[link] -= least
        step = min(left[m] / rate[m] for m in active)
        clock += step
        for m in active:
            left[m] -= rate[m] * step
            if left[m] <= 1e-12:
                arrival[m] = clock
    return arrival


@pytest.mark.parametrize("spec, ranks", [("cluster:hosts=8,edges=2,cores=1", 8), ("fattree:k=4,n=2", 7),
                                         ("fattree:k=6,n=1", 6)])
def test_replay_against_one_flow_at_a_time_on_random_rounds(spec, ranks):
    from optiq.collectives.replay import replay_rounds

    routes = Routes.of(spec, ranks)
    rng = np.random.default_rng(ranks)
    for _ in range(4):
        rounds = []
        for _ in range(int(rng.integers(1, 5))):
            src, dst = rng.integers(0, ranks, 6), rng.integers(0, ranks, 6)
            keep = src != dst
            rounds.append((src[keep], dst[keep], rng.integers(1, 5, keep.sum()).astype(float)))
        # every message of a round, a rank's copy to itself included, arrives: the plain replay below
        # gives a copy no link and no time
        rounds.append((np.array([0, 1]), np.array([0, 2]), np.array([3.0, 2.0])))  # one to itself: a copy
        got = replay_rounds(rounds, routes)
        assert got.tolist() == pytest.approx(_replay_one_flow_at_a_time(rounds, routes))
        # no link carries more than its capacity allows
        every = tuple(np.concatenate(x) for x in zip(*rounds))
        assert got.max() >= routes.busiest(*every) * (1 - 1e-12)


@pytest.mark.parametrize("spec, ranks", [("cluster:hosts=12,edges=2,cores=1", 12), ("cluster:hosts=8,edges=4,cores=2", 7),
                                         ("fattree:k=4,n=2", 8), ("torus:3x3", 9)])
def test_busiest_link_against_walking_every_route(spec, ranks):
    from optiq.paths import network_routes
    from optiq.topology import from_spec

    t = from_spec(spec)
    routes = Routes.of(t, ranks)
    rng = np.random.default_rng(ranks)
    for _ in range(5):
        src, dst = rng.integers(0, ranks, 30), rng.integers(0, ranks, 30)
        keep = src != dst
        src, dst, nbytes = src[keep], dst[keep], rng.integers(1, 1000, keep.sum()).astype(float)
        load = np.zeros(t.num_links)
        for i, j, b in zip(src, dst, nbytes):  # one route at a time
            load[network_routes(t, [i], [j]).links] += b
        assert routes.busiest(src, dst, nbytes) == pytest.approx(load.max())


def test_a_tree_charges_the_steps_whose_pairs_share_the_links_between_switches():
    tree = Routes.of("cluster:hosts=12,edges=2,cores=1", 12)  # ranks 0-5 under one switch, 6-11 under the other
    plain, routed = algorithm_steps("hcps:6x2", 12, 12e4), routed_steps("hcps:6x2", 12, 12e4, tree)
    # within the switches as on a star; across them, 6 pairs share each direction of the uplink
    assert [r.bytes_sent / p.bytes_sent for p, r in zip(plain, routed)] == pytest.approx([1, 6, 6, 1])
    assert [s.bytes_sent for s in routed_steps("ring", 12, 12e4, tree)] == [s.bytes_sent for s in
                                                                             algorithm_steps("ring", 12, 12e4)]
    with pytest.raises(OptiqError, match="fewer than 13 ranks"):
        Routes.of("cluster:hosts=12,edges=2,cores=1", 13)


def test_the_fit_on_a_tree_recovers_the_links_parameters_only_with_the_routes():
    tree = Routes.of("cluster:hosts=12,edges=2,cores=1", 12)
    true = AllreduceParams(2e-4, 4e-7, 3e-10, 2e-10, 5e-8, threshold=3)

    def time(kind, count, m):
        return sum(step_terms(s, true).total for s in Sample(kind, count, m, 1.0).routed_steps(tree))
    samples = [Sample(k, c, m, time(k, c, m)) for k, cs in (("p2p", [1]), ("fullmesh", range(1, 12)),
                                                            ("reduce", [2, 4, 12]), ("copy", [1]))
               for c in cs for m in (16384, 32768, 65536)]
    routed, blind = fit_allreduce_model(samples, tree), fit_allreduce_model(samples)
    assert routed.contention.beta == pytest.approx(true.beta, rel=1e-6) and routed.contention_error[1] < 1e-6
    assert blind.contention_error[1] > 0.05  # the uplink's sharing, unexplained
    for name in algorithms(12):  # and its predictions are the true parameters' over the routes
        assert predict(name, 12, 2**18, routed.contention, tree).total == pytest.approx(
            predict(name, 12, 2**18, true, tree).total, rel=1e-6)


def test_predict_reads_the_network_the_parameters_were_fitted_on(tmp_path, capsys):
    p = AllreduceParams(1e-3, 4e-7, 1e-9, 1e-10, 1e-8, threshold=2)  # on the star, fewer rounds win clearly
    star, tree = tmp_path / "star.json", tmp_path / "tree.json"
    save_params({"contention": p, "abg": p}, star)
    save_params({"contention": p, "abg": p}, tree, network="cluster:hosts=12,edges=2,cores=1")
    best = {}
    for path in (star, tree):
        assert main(["collectives", "predict", "--params", str(path), "--ranks", "12", "--size", "256KiB",
                     "--json"]) == 0
        best[path] = json.loads(capsys.readouterr().out)["best"]
    assert best[star]["contention"] == best[star]["abg"] == best[tree]["abg"] != best[tree]["contention"] == "ring"


@pytest.mark.parametrize("ranks", [4, 12, 15, 16])
def test_the_choice_is_the_fastest_prediction_but_for_a_tie_won_by_the_smaller_fan_in(ranks):
    names = algorithms(ranks)
    assert max_fan_in("ring", ranks) == max_fan_in("rhd", ranks) == 1 and max_fan_in("cps", ranks) == ranks - 1
    for name in names[3:]:
        a, b = (int(x) for x in name.split(":")[1].split("x"))
        assert max_fan_in(name, ranks) == max(a, b) - 1
    rng = np.random.default_rng(ranks)
    for _ in range(200):
        predicted = dict(zip(names, 0.2 * (1 + rng.choice([0.0, 0.004, 0.008, 0.02, 0.1], len(names)))))
        chosen, fastest = choose(predicted, ranks), min(predicted.values())
        tied = [n for n in names if predicted[n] <= fastest * (1 + CHOICE_TIE)]
        assert chosen in tied and max_fan_in(chosen, ranks) == min(max_fan_in(n, ranks) for n in tied)
        assert predicted[chosen] == min(predicted[n] for n in tied if max_fan_in(n, ranks) == max_fan_in(chosen, ranks))
        assert predicted[choose(predicted, ranks, tie=0.0)] == fastest
    with pytest.raises(OptiqError, match="no predictions"):
        choose({}, ranks)
