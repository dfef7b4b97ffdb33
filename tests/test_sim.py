import json

import numpy as np
import pytest

from optiq import Demands, Plan, make_plan
from optiq.cli import main
from optiq.paths import PathSet
from optiq.sim import ChunkModel, simulate_chunks, simulate_flows
from optiq.topology import mesh, torus
from optiq.workloads import constant_ratio

from conftest import SMALL_TOPOLOGIES, random_demands


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
def test_one_path_matches_the_pipelined_closed_form(hops, chunks, header, latency, forward):
    t = mesh((hops + 1,), bandwidth=1e8)
    s = 4096
    plan = make_plan(t, Demands([0], [hops], [chunks * s]), "default", chunk_size=s)
    model = ChunkModel(hop_latency_s=latency, header_bytes=header, forward_cost_s=forward)
    per_link = (s + header) / 1e8
    want = hops * per_link + hops * latency + (hops - 1) * forward + (chunks - 1) * max(per_link, forward)
    assert simulate_chunks(plan, model).completion_time_s == pytest.approx(want, rel=1e-12)


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
