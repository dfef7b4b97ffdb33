import json

import numpy as np
import pytest

from optiq.errors import PlanError
from optiq.metrics import plan_metrics
from optiq.plan import Plan, load_plan
from optiq.planner import make_plan
from optiq.topology import cluster, from_networkx, torus
from optiq.workloads import Demands, constant_ratio


@pytest.fixture(scope="module")
def plan():
    t = torus((4, 4, 2), bandwidth=1e9, spec="torus:4x4x2,bw=1GB/s")
    return make_plan(t, constant_ratio(32, nbytes=10**6 + 7, num_sources=2, ratio=4), "opt", k=6)


def test_round_trip(tmp_path, plan):
    plan.save(tmp_path / "p.json")
    back = load_plan(tmp_path / "p.json")
    assert np.array_equal(back.paths.links, plan.paths.links)
    assert np.array_equal(back.path_bytes, plan.path_bytes)
    assert back.predicted_time_s == plan.predicted_time_s
    assert plan_metrics(back) == plan_metrics(plan)
    assert back.record == plan.record and back.record.cg_status == plan.info["cg_status"]


def test_the_record_keeps_what_it_cannot_type(tmp_path, plan):
    data = json.loads(json.dumps(plan.to_dict()))
    data["info"].update(warnings="not a list", k="eight", note={"by": "hand"})
    back = Plan.from_dict(data)
    assert back.record.warnings == [] and back.record.k is None
    assert back.record.extra == {"warnings": "not a list", "k": "eight", "note": {"by": "hand"}}
    assert back.info == data["info"]  # written back as it was read


def test_round_trip_without_spec_embeds_links(tmp_path):
    import networkx as nx
    g = nx.cycle_graph(5)
    nx.set_edge_attributes(g, 2.0, "capacity")
    t = from_networkx(g)
    p = make_plan(t, Demands([0], [2], [100]), "opt", k=2)
    p.save(tmp_path / "g.json")
    assert load_plan(tmp_path / "g.json").predicted_time_s == p.predicted_time_s


def test_parallel_links_are_kept_apart(tmp_path):
    t = torus((2,), spec="torus:2")
    free = make_plan(t, Demands([0], [1], [1000]), "opt", k=2, routing="free")
    assert free.paths.num_paths == 2 and free.predicted_time_s == pytest.approx(500 / 1.8e9)
    free.save(tmp_path / "e.json")
    assert load_plan(tmp_path / "e.json").paths.links.tolist() == free.paths.links.tolist()
    # the network routes 0 -> 1 over one of them (the + link, Blue Gene/Q's rule): so does a forwarded plan
    forwarded = make_plan(t, Demands([0], [1], [1000]), "opt", k=2)
    assert forwarded.paths.links.tolist() == t.links_between(0, 1)[:1]
    assert forwarded.predicted_time_s == pytest.approx(1000 / 1.8e9) == free.realized_time_s


def edit(plan, tmp_path, change):
    data = plan.to_dict()
    change(data)
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data))
    return f


def _set(path, value):
    def change(data):
        obj = data
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value
    return change


def _bytes_off(data):
    data["jobs"][0]["paths"][0]["bytes"] += 1


def _break_path(data):
    p = next(p for job in data["jobs"] for p in job["paths"] if len(p["links"]) >= 3)
    p["links"] = p["links"][:1] + p["links"][2:]  # skip a link: the path breaks
    if "stops" in p:  # one leg, so that the break is what the check meets first
        p["stops"] = [p["stops"][0], p["stops"][-1]]


def _leave_the_route(data):
    p = next(p for job in data["jobs"] for p in job["paths"] if len(p["links"]) >= 2 and len(p["stops"]) > 2)
    p["stops"] = [p["stops"][0], p["stops"][-1]]  # one leg: no longer the network's route


def _stop_off_path(data):
    p = next(p for job in data["jobs"] for p in job["paths"] if len(p["stops"]) > 2)
    p["stops"][1] = 31 - p["stops"][1]


@pytest.mark.parametrize("change,fragment", [
    (_set(["format"], "other"), "not an optiq plan"),
    (_set(["version"], 99), "version 99"),
    (_set(["topology"], {"spec": "bgq:3"}), "no Blue Gene/Q preset"),
    (_bytes_off, "demand is"),
    (_break_path, "is not connected"),
    (_leave_the_route, "the network routes it"),
    (_stop_off_path, "is not on the path"),
    (_set(["routing"], "adaptive"), "\"routing\" must be one of"),
    (_set(["jobs", 0, "paths", 0, "bytes"], -1), "non-negative"),
    (_set(["jobs", 0, "dst"], 99), "out of range"),
    (_set(["jobs", 0, "paths", 0, "stops", 0], 5), "its stops must begin at its first node"),
    (_set(["jobs", 0, "paths", 0, "links", 0], 10**6), "link 1000000 does not exist"),
    (_set(["jobs", 0, "paths"], []), "has no paths"),
    (_set(["chunk_size"], 0), "chunk_size"),
    (_set(["jobs"], []), "no \"jobs\""),
    (_set(["lower_bound_time_s"], "soon"), "lower_bound_time_s"),
    (_set(["info"], [1]), "\"info\" must be an object"),
])
def test_validation_names_the_problem(plan, tmp_path, change, fragment):
    with pytest.raises(PlanError, match=fragment):
        load_plan(edit(plan, tmp_path, change))


def test_corrupt_or_missing_file(tmp_path):
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(PlanError, match="not valid JSON"):
        load_plan(tmp_path / "x.json")
    with pytest.raises(PlanError, match="does not exist"):
        load_plan(tmp_path / "missing.json")


def test_plan_rejects_path_not_ending_at_destination():
    t = cluster(4, 2, 2)
    good = make_plan(t, Demands([0], [3], [10]), "default")
    with pytest.raises(PlanError, match="end at its destination"):
        Plan(t, Demands([0], [2], [10]), good.paths, good.path_bytes)


def test_metrics_refuse_a_progress_that_cannot_be_called():
    plan = make_plan(torus((4, 4), bandwidth=1e9), Demands([0], [5], [2**20]), "default")
    with pytest.raises(PlanError, match="progress must be a callable"):
        plan_metrics(plan, progress=1)


def test_metrics_by_hand():
    t = torus((4, 4), bandwidth=1e9)
    d = Demands([0, 0], [2, 8], [3 * 2**16, 2**16])
    plan = make_plan(t, d, "default", chunk_size=2**16)
    m = plan_metrics(plan)
    assert (m.total_paths, m.hops_max, m.hops_avg) == (2, 2, 2.0)
    assert m.hopbytes_per_path_max == 2 * 3 * 2**16
    assert m.copies_per_path_max == 0  # the network's own routes: one leg each, no copy
    free = plan_metrics(make_plan(t, d, "default", chunk_size=2**16, routing="free"))
    assert free.copies_per_path_max == 3 and free.copies_per_path_avg == 2.0  # chunks x 1 intermediate rank
    assert m.bytes_per_link_max == 3 * 2**16
    assert m.predicted_time_s == pytest.approx(3 * 2**16 / 1e9)
    assert m.throughput_Bps == pytest.approx(4 * 2**16 / m.predicted_time_s)


def test_a_forwarded_path_that_stops_at_a_rank_twice_is_refused_and_the_same_path_with_one_stop_is_not():
    """Every rank a forwarded path stops at (and its source) takes one leg in and one out: a path
    that comes back to a rank it stopped at is refused, naming it; the same links stopping only
    at the end (one leg, not the network's route: left unchecked here) pass."""
    from optiq.paths import PathSet

    t = torus((4,))
    hop = {(u, v): t.links_between(u, v)[0] for u, v in ((0, 1), (1, 0), (1, 2))}
    links = [hop[0, 1], hop[1, 0], hop[0, 1], hop[1, 2]]
    back = PathSet.from_lists([links], [0], 1, stops=[[True, True, True, True]])
    with pytest.raises(PlanError, match="path 0 of job 0 stops at node 0 more than once"):
        Plan(t, Demands([0], [2], [100]), back, [100], check_legs=False)
    once = PathSet.from_lists([links], [0], 1)
    assert Plan(t, Demands([0], [2], [100]), once, [100], check_legs=False).paths.legs.tolist() == [1]
