import json
from dataclasses import replace

import numpy as np
import pytest
from conftest import SMALL_TOPOLOGIES, random_demands

from optiq import Demands, Plan, make_plan
from optiq.cli import main
from optiq.paths import PathSet
from optiq.sim import ChunkModel, RunReport, Timing, fit_chunk_model, simulate_chunks, simulate_direct, simulate_flows
from optiq.topology import mesh, torus
from optiq.workloads import constant_ratio


def test_flows_on_one_link_finish_in_turn():
    t = mesh((2,), bandwidth=1e6)  # link 0: 0 -> 1
    d = Demands([0], [1], [6 * 10**6])
    plan = Plan(t, d, PathSet.from_lists([[0], [0], [0]], [0, 0, 0], 1), [10**6, 2 * 10**6, 3 * 10**6])
    r = simulate_flows(plan)
    # three flows at 1/3 MB/s until the 1 MB one ends (3 s), two at 1/2 until 5 s, then one alone
    np.testing.assert_allclose(r.path_finish_s, [3.0, 5.0, 6.0])
    assert r.phases == 3


@pytest.mark.parametrize("name", sorted(SMALL_TOPOLOGIES))
@pytest.mark.parametrize("method", ["lp", "heu2", "default"])
def test_proportional_sharing_is_the_plan_prediction_and_equal_sharing_never_beats_it(name, method):
    topo = SMALL_TOPOLOGIES[name]()
    plan = make_plan(topo, random_demands(topo, 6, seed=1), method, k=4)
    assert simulate_flows(plan, "proportional").completion_time_s == pytest.approx(plan.predicted_time_s, rel=1e-9)
    assert simulate_flows(plan, "equal").completion_time_s >= plan.predicted_time_s * (1 - 1e-9)


@pytest.mark.parametrize("name", sorted(SMALL_TOPOLOGIES))
@pytest.mark.parametrize("method", ["opt", "heu2", "heu1"])
@pytest.mark.parametrize("sharing", ["equal", "proportional"])
def test_paced_paths_end_at_the_predicted_time_under_any_sharing(name, method, sharing):
    topo = SMALL_TOPOLOGIES[name]()
    plan = make_plan(topo, random_demands(topo, 8, seed=2), method, k=4)
    paced = simulate_flows(plan, sharing, pace_paths=True, batch=0)
    moving = plan.path_bytes > 0
    assert paced.path_finish_s[moving] == pytest.approx(np.full(moving.sum(), plan.predicted_time_s), rel=1e-9)
    assert paced.completion_time_s == pytest.approx(plan.predicted_time_s, rel=1e-9)


def test_fair_sharing_is_reported_beside_the_prediction_and_paced_paths_keep_it(tmp_path, capsys):
    plan = make_plan(torus((4, 4, 4, 2)), constant_ratio(128, nbytes=2**20), "opt", lean=False, routing="free")
    plan.save(tmp_path / "p.json")
    assert main(["eval", str(tmp_path / "p.json"), "--json", "-q"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["fair_time_s"] == pytest.approx(simulate_flows(plan, "equal").completion_time_s)
    assert m["fair_time_s"] > m["predicted_time_s"] * 1.05   # flows alone on a link run ahead
    assert main(["simulate", str(tmp_path / "p.json"), "--pace-paths", "--json", "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pace_paths"] and out["completion_time_s"] == pytest.approx(plan.predicted_time_s, rel=1e-9)


def _one_level_at_a_time(weight, paths, capacity):
    """Textbook progressive filling: raise every free flow until the first link fills, freeze, repeat."""
    rate, free, cap = np.zeros(paths.num_paths), weight > 0, capacity.astype(float).copy()
    while free.any():
        demand = paths.link_loads(np.where(free, weight, 0.0), capacity.size)
        level = np.where(demand > 0, cap / np.where(demand > 0, demand, 1), np.inf)
        low = level.min()
        on_full = np.zeros(paths.num_paths, bool)
        on_full[paths.path_of_link_entry[level[paths.links] <= low * (1 + 1e-12)]] = True
        frozen = on_full & free
        rate[frozen] = weight[frozen] * low
        cap -= paths.link_loads(np.where(frozen, rate, 0.0), capacity.size)
        free &= ~frozen
    return rate


@pytest.mark.parametrize("seed", range(6))
def test_max_min_rates_equal_one_level_at_a_time_filling(seed):
    from optiq.sim.flow import _Entries, _max_min_rates

    rng = np.random.default_rng(seed)
    t = torus((4, 3), bandwidth=1e9) if seed % 2 else mesh((3, 4), bandwidth=1e9)
    t.capacity = t.capacity * rng.integers(1, 4, t.num_links)
    plan = make_plan(t, random_demands(t, 12, seed), "lp", k=3)
    weight = rng.random(plan.paths.num_paths) * (rng.random(plan.paths.num_paths) > 0.2)
    entries = _Entries(plan.paths.path_of_link_entry, plan.paths.links, t.num_links)
    got = _max_min_rates(weight, entries.keep(weight[entries.path] > 0), t.capacity, plan.paths.num_paths)
    assert got == pytest.approx(_one_level_at_a_time(weight, plan.paths, t.capacity), rel=1e-9)


def test_batched_recomputation_is_exact_for_few_flows_and_close_for_many():
    from optiq.sim.flow import flow_finish_times

    t = torus((4, 4), bandwidth=1e9)
    plan = make_plan(t, random_demands(t, 40, 3), "heu2", k=4, unit=2**16)
    exact, phases = flow_finish_times(plan.paths, plan.path_bytes, t.capacity, batch=0.0)
    same, _ = flow_finish_times(plan.paths, plan.path_bytes, t.capacity, batch=0.5 / plan.paths.num_paths)
    assert same == pytest.approx(exact, rel=1e-12)
    batched, fewer = flow_finish_times(plan.paths, plan.path_bytes, t.capacity, batch=0.05)
    assert fewer < phases
    assert batched.max() == pytest.approx(exact.max(), rel=0.02)


def test_lp_plan_agrees_with_the_lp():
    t = torus((4, 4, 2), bandwidth=1e9)
    plan = make_plan(t, constant_ratio(32, nbytes=2**20, num_sources=2, ratio=4), "lp", k=8)
    assert simulate_flows(plan, "proportional").completion_time_s == pytest.approx(plan.info["lp_time_s"], rel=1e-5)


def test_simulate_cli_json(tmp_path, capsys):
    t = torus((4, 4), bandwidth=1e9)
    plan = make_plan(t, constant_ratio(16, nbytes=2**20, num_sources=2, ratio=4), "default")
    path = tmp_path / "p.json"
    plan.save(path)
    assert main(["simulate", str(path), "--model", "flow", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["completion_time_s"] >= plan.predicted_time_s * (1 - 1e-9)


@pytest.mark.parametrize("hops, chunks, header, latency, forward", [
    (1, 5, 0, 0.0, 0.0), (3, 8, 32, 1e-7, 2e-6), (4, 16, 64, 5e-8, 5e-4), (2, 1, 16, 1e-6, 1e-5)])
@pytest.mark.parametrize("routing", ["free", "forwarded"])
def test_one_path_matches_the_pipelined_closed_form(hops, chunks, header, latency, forward, routing):
    t = mesh((hops + 1,), bandwidth=1e8)
    s = 4096
    plan = make_plan(t, Demands([0], [hops], [chunks * s]), "default", chunk_size=s, routing=routing)
    model = ChunkModel(hop_latency_s=latency, header_bytes=header, forward_cost_s=forward)
    per_link = (s + header) / 1e8
    copies = hops - 1 if routing == "free" else 0  # free plans stop at every rank; forwarded: one leg
    want = hops * per_link + hops * latency + copies * forward + (chunks - 1) * max(per_link, forward if copies else 0)
    result = simulate_chunks(plan, model)
    assert result.completion_time_s == pytest.approx(want, rel=1e-12)
    assert result.copies == copies * chunks


@pytest.mark.parametrize("name", sorted(SMALL_TOPOLOGIES))
def test_chunks_never_beat_the_flow_level_bound(name):
    topo = SMALL_TOPOLOGIES[name]()
    plan = make_plan(topo, random_demands(topo, 5, seed=2), "lp", k=4, chunk_size=2**20)
    r = simulate_chunks(plan)
    assert r.completion_time_s >= plan.predicted_time_s * (1 - 1e-9)
    assert r.chunks == int((-(-plan.path_bytes // plan.chunk_size)).sum())


def test_simulate_cli_chunk_model_and_bad_plan(tmp_path, capsys):
    t = torus((4, 4), bandwidth=1e9)
    plan = make_plan(t, constant_ratio(16, nbytes=2**20, num_sources=2, ratio=4), "heu2", k=4)
    path = tmp_path / "p.json"
    plan.save(path)
    assert main(["simulate", str(path), "--model", "chunk", "--forward-cost", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "chunk" and out["completion_time_s"] >= plan.predicted_time_s * (1 - 1e-9)
    assert main(["simulate", str(tmp_path / "missing.json")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_direct_transfer_of_one_path_is_bytes_plus_headers_plus_latency():
    t = mesh((4,), bandwidth=1e8)
    plan = make_plan(t, Demands([0], [3], [10_000]), "default")
    model = ChunkModel(hop_latency_s=1e-6, header_bytes=32, packet_bytes=512)
    packets = -(-10_000 // 512)
    assert simulate_direct(plan, model) == pytest.approx((10_000 + 32 * packets) / 1e8 + 3e-6, rel=1e-12)


@pytest.mark.parametrize("name", sorted(SMALL_TOPOLOGIES))
def test_direct_transfer_is_the_flow_model_when_headers_and_latency_vanish(name):
    topo = SMALL_TOPOLOGIES[name]()
    plan = make_plan(topo, random_demands(topo, 6, seed=2), "heu2", k=4)
    free = ChunkModel(hop_latency_s=0, header_bytes=0)
    assert simulate_direct(plan, free) == pytest.approx(simulate_flows(plan).completion_time_s, rel=1e-12)
    assert simulate_direct(plan) > simulate_direct(plan, free)


def test_link_rate_replaces_every_capacity():
    t = mesh((3,), bandwidth=1e9)
    plan = make_plan(t, Demands([0], [2], [4000]), "default", chunk_size=1000)
    model = ChunkModel(0, 0, 0, link_rate_Bps=1e6)
    assert simulate_chunks(plan, model).completion_time_s == pytest.approx(0.005, rel=1e-12)


def _runs_from(plan, truth, chunks, rate=None):
    """Reports of runs of ``plan`` at each chunk size, timed by the chunk model ``truth``."""
    model = replace(truth, link_rate_Bps=rate or truth.link_rate_Bps)
    return [RunReport(method=plan.method, topology=plan.topology.name, plan_fingerprint=plan.fingerprint,
                      ranks=plan.topology.num_nodes, jobs=plan.demands.num_jobs, paths=len(plan.path_bytes),
                      chunk_size=c, window=4, link_bw_Bps=rate, predicted_time_s=plan.predicted_time_s,
                      predicted_at="plan", repeats=1, warmup=0, baseline=None, chunks_forwarded=0,
                      buffer_bytes_max=0, messages=1,
                      plan=Timing(f"optiq {plan.method}", (simulate_chunks(plan, model, c).completion_time_s,),
                                  int(plan.demands.nbytes.sum()), None)) for c in chunks]


def test_fit_recovers_a_known_model_from_synthetic_runs():
    t = torus((4, 4), bandwidth=1e9)
    plan = make_plan(t, constant_ratio(16, nbytes=2**17, num_sources=2, ratio=4), "heu2", k=4)
    truth = ChunkModel(hop_latency_s=0, header_bytes=0, forward_cost_s=4e-5, link_rate_Bps=3e8)
    fit = fit_chunk_model(plan, _runs_from(plan, truth, [1024, 4096, 16384, 65536]))
    assert fit.max_rel_error < 1e-3
    assert fit.model.link_rate_Bps == pytest.approx(3e8, rel=0.01)
    assert fit.model.forward_cost_s == pytest.approx(4e-5, rel=0.05)
    # paced runs fix the rate; the forwarding cost is still found
    paced = fit_chunk_model(plan, _runs_from(plan, truth, [1024, 4096, 16384], rate=2e8))
    assert paced.model.link_rate_Bps == 2e8 and paced.model.forward_cost_s == pytest.approx(4e-5, rel=0.05)


def test_fit_chunk_cli_round_trip_and_errors(tmp_path, capsys):
    t = torus((4, 4), bandwidth=1e9)
    plan = make_plan(t, constant_ratio(16, nbytes=2**17, num_sources=2, ratio=4), "default")
    plan_path = tmp_path / "p.json"
    plan.save(plan_path)
    truth = ChunkModel(hop_latency_s=0, header_bytes=0, forward_cost_s=2e-5, link_rate_Bps=5e8)
    runs = []
    for sample in _runs_from(plan, truth, [2048, 8192, 32768]):
        runs.append(tmp_path / f"run{sample.chunk_size}.json")
        runs[-1].write_text(json.dumps(sample.to_dict()))
    out = tmp_path / "model.json"
    assert main(["fit-chunk", str(plan_path), *map(str, runs), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["simulate", str(plan_path), "--model", "chunk", "--params", str(out), "--chunk-size", "8192",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["completion_time_s"]
    assert got == pytest.approx(json.loads(runs[1].read_text())["elapsed_s"], rel=1e-3)
    # a run of another plan, a file that is no run, a model file that is no model
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**json.loads(runs[1].read_text()), "plan_fingerprint": "0123456789abcdef"}))
    unnamed = tmp_path / "unnamed.json"
    unnamed.write_text(json.dumps({k: v for k, v in json.loads(runs[1].read_text()).items()
                                   if k != "plan_fingerprint"}))
    bad_rate = tmp_path / "bad_rate.json"
    bad_rate.write_text(json.dumps({**json.loads(runs[0].read_text()), "link_bw_Bps": "fast"}))
    for argv in (["fit-chunk", str(plan_path), str(runs[0]), str(runs[2]), str(other), "-o", str(out)],
                 ["fit-chunk", str(plan_path), str(runs[0]), str(runs[2]), str(unnamed), "-o", str(out)],
                 ["fit-chunk", str(plan_path), str(runs[0]), str(runs[0]), str(runs[0]), "-o", str(out)],
                 ["fit-chunk", str(plan_path), str(runs[0]), str(bad_rate), "-o", str(out)],
                 ["fit-chunk", str(plan_path), str(runs[0]), str(plan_path), "-o", str(out)],
                 ["simulate", str(plan_path), "--model", "chunk", "--params", str(plan_path)],
                 ["fit-chunk", str(plan_path), *map(str, runs), "-o", str(tmp_path / "no" / "model.json")]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.count("optiq: error:") == 1 and "Traceback" not in err
