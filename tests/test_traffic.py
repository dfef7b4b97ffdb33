"""Rank traffic from traces and models, mapped to hosts, planned on any topology."""

import io
import json
import tarfile

import numpy as np
import pytest

from optiq import from_spec, make_plan
from optiq.cli import main
from optiq.errors import WorkloadError
from optiq.lp import cut_lower_bound
from optiq.workloads import host_demands, milc_traffic, nas_cg_traffic, read_traffic
from optiq.workloads.traffic import write_pfprof


def pfprof_dir(tmp_path, records):
    d = tmp_path / "trace"
    d.mkdir()
    for i, rec in enumerate(records):
        (d / f"r{i}.json").write_text(rec if isinstance(rec, str) else json.dumps(rec))
    return d


def rank(r, n=3, tx=None):
    return {"rank": r, "n_procs": n, "tx_bytes": tx if tx is not None else [0 if j == r else 10 * r + j
                                                                          for j in range(n)]}


@pytest.mark.parametrize("form", ["dir", "tar.gz", "tgz"])
def test_a_pfprof_trace_round_trips_in_every_form(tmp_path, form):
    t = nas_cg_traffic(ranks=32, rows=4, volume=12345)
    path = write_pfprof(t, tmp_path / ("trace" if form == "dir" else f"trace.{form}"))
    assert np.array_equal(read_traffic(path), t)


@pytest.mark.parametrize("records, fragment", [
    ([rank(0), rank(2)], "missing rank(s) 1"),
    ([rank(0), rank(1), rank(1), rank(2)], "rank 1 appears twice"),
    ([rank(0), rank(1), rank(2, n=4)], "says n_procs 4"),
    ([rank(0), rank(1, tx=[1, 2]), rank(2)], "(rank 1) has tx_bytes of 2 entries; n_procs is 3"),
    ([rank(0), rank(1, tx=[1, -2, 0]), rank(2)], "(rank 1) has tx_bytes[1] = -2"),
    ([rank(0), rank(1, tx=[1, "x", 0]), rank(2)], "(rank 1) has tx_bytes[1] = 'x'"),
    ([rank(0), rank(1, tx=[1, True, 0]), rank(2)], "tx_bytes[1] = True"),
    ([rank(0), "{not json", rank(2)], "r1.json is not valid JSON"),
    ([rank(0), {"rank": 1, "n_procs": 3}, rank(2)], "r1.json needs the keys rank, n_procs and tx_bytes"),
    ([rank(0), rank(5), rank(2)], "has rank 5, not below n_procs 3"),
    ([rank(0), rank(-1), rank(2)], "has rank -1"),
])
def test_malformed_pfprof_traces_name_the_file_and_rank(tmp_path, records, fragment):
    with pytest.raises(WorkloadError) as err:
        read_traffic(pfprof_dir(tmp_path, records))
    assert fragment in str(err.value) and "trace" in str(err.value)


def test_a_tarball_without_json_or_a_broken_tarball_is_refused(tmp_path):
    empty = tmp_path / "empty.tgz"
    with tarfile.open(empty, "w:gz") as tar:
        info = tarfile.TarInfo("readme.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(WorkloadError, match="has no .json files"):
        read_traffic(empty)
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not a tarball")
    with pytest.raises(WorkloadError, match="cannot read PFProf trace"):
        read_traffic(broken)


def test_rank_triples_and_matrices_with_units(tmp_path):
    triples = tmp_path / "t.csv"
    triples.write_text("src_rank,dst_rank,bytes\n0,3,5\n3,0,7\n0,3,1\n")
    t = read_traffic(triples, unit=2)
    assert t.shape == (4, 4) and t[0, 3] == 12 and t[3, 0] == 14 and t.sum() == 26
    bad = tmp_path / "bad.csv"
    bad.write_text("src_rank,dst_rank,bytes\n0,1,5\n1,x,2\n")
    with pytest.raises(WorkloadError, match=r"line 3"):
        read_traffic(bad)
    matrix = tmp_path / "m.txt"
    matrix.write_text("0 1\n2 0\n")
    assert read_traffic(matrix, unit=2**20).tolist() == [[0, 2**20], [2**21, 0]]


def test_host_demands_keep_every_byte_and_report_what_stays_within_hosts(tmp_path):
    t = milc_traffic(volume=1000)
    for selection in ("linear", "random"):
        for placement in ("block", "cyclic"):
            h = host_demands(t, 64, ranks_per_node=4, selection=selection, placement=placement, seed=3)
            assert h.demands.total_bytes + h.intra_host_bytes == t.sum()
            assert np.bincount(h.host_of).max() == 4 and h.host_of.max() < 64
    explicit = tmp_path / "hosts.txt"
    explicit.write_text("rank host\n" + "".join(f"{r} {r % 5}\n" for r in range(128)))
    h = host_demands(t, 8, placement=str(explicit))
    assert h.host_of.tolist() == [r % 5 for r in range(128)]
    explicit.write_text("".join(f"{r} 0\n" for r in range(127)))
    with pytest.raises(WorkloadError, match="does not place rank"):
        host_demands(t, 8, placement=str(explicit))
    with pytest.raises(WorkloadError, match="neither block nor cyclic nor a file"):
        host_demands(t, 8, placement="diagonal")
    with pytest.raises(WorkloadError, match="need 32 hosts, but the topology has 16"):
        host_demands(t, 16, ranks_per_node=4)


@pytest.mark.parametrize("spec, per_node", [("fattree:k=4", 8), ("torus:4x4", 8)])
def test_a_trace_is_planned_with_opt_within_its_bound(tmp_path, spec, per_node):
    trace = write_pfprof(nas_cg_traffic(), tmp_path / "cg.tgz")
    out = tmp_path / "plan.json"
    assert main(["plan", "-t", spec, "--traffic", str(trace), "--ranks-per-node", str(per_node), "-m", "opt",
                 "-o", str(out), "-q"]) == 0
    from optiq.plan import load_plan

    plan = load_plan(out)
    topo = from_spec(spec)
    h = host_demands(read_traffic(trace), topo.num_endpoints, ranks_per_node=per_node)
    assert plan.demands.total_bytes == h.demands.total_bytes
    bound = cut_lower_bound(topo, plan.demands).time_s
    default = make_plan(topo, plan.demands, "default")
    assert bound * (1 - 1e-9) <= plan.predicted_time_s <= default.predicted_time_s * (1 + 1e-9)


def test_traffic_mistakes_on_the_command_line_are_one_line(tmp_path, capsys):
    trace = write_pfprof(nas_cg_traffic(), tmp_path / "cg")
    assert main(["plan", "-t", "fattree:k=4", "--traffic", str(trace), "-m", "default", "-o",
                 str(tmp_path / "p.json"), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.count("optiq: error:") == 1 and "need 128 hosts, but the topology has 64" in err
    assert main(["plan", "-t", "fattree:k=4", "--traffic", str(tmp_path / "nope"), "-m", "default", "-o",
                 str(tmp_path / "p.json"), "-q"]) == 1
    assert "no such file or directory" in capsys.readouterr().err


def test_trace_options_without_a_trace_and_headerless_triples_are_named(tmp_path, capsys):
    assert main(["plan", "-t", "torus:4x4", "--pattern", "disjoint", "--ranks-per-node", "4", "--placement", "cyclic",
                 "-m", "default", "-o", str(tmp_path / "p.json"), "-q"]) == 1
    assert "--ranks-per-node, --placement apply only with --traffic" in capsys.readouterr().err
    headerless = tmp_path / "t.csv"
    headerless.write_text("0,1,5\n1,0,7\n")
    with pytest.raises(WorkloadError, match="need the header line src_rank,dst_rank,bytes"):
        read_traffic(headerless)
