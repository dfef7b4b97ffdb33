import json

import numpy as np
import pytest

from optiq.errors import OptiqError, WorkloadError
from optiq.utils.units import parse_size
from optiq.workloads import (
    Demands,
    cesm_coupling,
    constant_ratio,
    destination_sweep,
    distance_sweep,
    hacc_aggregation,
    mxn_redistribution,
    random_pairing,
    random_sizes,
    read_demands,
    write_demands,
)


def test_disjoint_is_the_constant_ratio_experiment():
    P = 1024
    d = constant_ratio(P, "disjoint")
    assert d.num_jobs == 512
    for i in (0, 5, 63):
        assert d.dst[d.src == i].tolist() == list(range(P // 2 + 8 * i, P // 2 + 8 * i + 8))
    assert np.all(d.nbytes == 8 * 2**20)


def test_overlap_and_subset_definitions():
    P = 256
    ov = constant_ratio(P, "overlap")
    srcs, dsts = set(ov.src.tolist()), set(ov.dst.tolist())
    assert srcs == set(range(16)) and srcs & dsts == set(range(8, 16))
    sub = constant_ratio(P, "subset")
    assert set(sub.src.tolist()) < set(sub.dst.tolist()) == set(range(P // 2, P))
    # every destination receives exactly once in all three patterns
    for d in (constant_ratio(P), ov, sub):
        assert np.unique(d.dst).size == d.num_jobs


def test_sweeps_match_the_paper_ranges():
    assert [(int(d.dst.min()), int(d.dst.max())) for d in (distance_sweep(2048, p) for p in (1, 4))] == \
        [(256, 767), (1024, 1535)]
    d = destination_sweep(2048, 8)
    assert (d.num_jobs, int(d.dst.min()), int(d.dst.max())) == (512, 1088, 1599)
    assert d.dst[d.src == 3].tolist() == list(range(1088 + 24, 1088 + 32))


def test_random_pairing_keeps_sets_and_is_seeded():
    base = constant_ratio(512, "subset")
    a, b, c = random_pairing(base, seed=1), random_pairing(base, seed=1), random_pairing(base, seed=2)
    assert np.array_equal(a.dst, b.dst) and not np.array_equal(a.dst, c.dst)
    assert sorted(a.dst.tolist()) == sorted(base.dst.tolist())
    assert np.array_equal(np.bincount(a.src), np.bincount(base.src))
    assert not (a.src == a.dst).any()


def test_random_sizes_are_seeded_and_in_range():
    base = constant_ratio(256)
    a = random_sizes(base, 64 * 1024, 8 * 2**20, seed=4)
    assert np.array_equal(a.nbytes, random_sizes(base, 64 * 1024, 8 * 2**20, seed=4).nbytes)
    assert a.nbytes.min() >= 65536 and a.nbytes.max() <= 8 * 2**20 and np.unique(a.nbytes).size > 1


@pytest.mark.parametrize("text,value", [("8MiB", 8388608), ("64KB", 64000), ("1.5KiB", 1536), ("4096", 4096),
                                        ("2GB", 2 * 10**9)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["0", "-5MiB", "8XB", "abc", "0.5", "1e30", "9223372036854775808", float("nan")])
def test_parse_size_rejects(text):
    with pytest.raises(OptiqError):
        parse_size(text)


@pytest.mark.parametrize("src,dst,size,fragment", [([1], [1], [5], "source = destination"),
                                                   ([0], [1], [0], "positive"),
                                                   ([0], [1], [1.5], "must be an integer"),
                                                   ([0.7], [1], [5], "source 0.7"),
                                                   ([0], [1.2], [5], "destination 1.2"),
                                                   ([0], [1], [1e30], "integer below 2"),
                                                   ([0], [1], [10**30], "integer below 2"),
                                                   ([0, 1], [1, 2], [5 * 10**18] * 2, "add up to"),
                                                   ([-1], [1], [5], "negative source"),
                                                   ([0, 0], [1, 1], [5, 5], "more than once")])
def test_bad_demands(src, dst, size, fragment):
    with pytest.raises(WorkloadError, match=fragment):
        Demands(src, dst, size)


def test_demand_files_round_trip(tmp_path):
    d = random_sizes(constant_ratio(64), 10, 1000, seed=1)
    write_demands(d, tmp_path / "d.csv")
    back = read_demands(tmp_path / "d.csv")
    assert back.to_rows() == d.to_rows()
    (tmp_path / "d.json").write_text(json.dumps({"demands": [{"src": 0, "dst": 3, "bytes": "1MiB"}]}))
    assert read_demands(tmp_path / "d.json").to_rows() == [(0, 3, 2**20)]


def test_demand_file_errors_name_the_line(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("src,dst,bytes\n0,1,5\n2,x,5\n")
    with pytest.raises(WorkloadError, match="line 3"):
        read_demands(f)
    f.write_text("a,b\n1,2\n")
    with pytest.raises(WorkloadError, match="header"):
        read_demands(f)
    with pytest.raises(WorkloadError, match="does not exist"):
        read_demands(tmp_path / "none.csv")


def test_hacc_aggregation_sends_every_node_to_its_groups_bridge():
    d = hacc_aggregation(512, nodes_per_bridge=64, nbytes=6)
    assert d.num_jobs == 512 - 8
    assert np.all(d.dst // 64 == d.src // 64) and np.all(d.dst % 64 == 32)
    with pytest.raises(WorkloadError, match="nodes_per_bridge=48"):
        hacc_aggregation(512, nodes_per_bridge=48)


def _brute_force_redistribution(src, dst, nbytes, fan_out):
    block = int(np.ceil(nbytes / fan_out))
    pairs = {}
    for b in range(len(src) * nbytes):  # byte by byte
        s, d = src[b // nbytes], dst[(b // block) % len(dst)]
        if s != d:
            pairs[(s, d)] = pairs.get((s, d), 0) + 1
    return pairs


@pytest.mark.parametrize("src, dst, nbytes, fan_out", [
    ([0, 1, 2], [3, 4], 10, 3), ([0, 1, 2, 3], [2, 3, 4], 7, 2.5), ([5], [0, 1, 2, 3, 4, 5], 12, 6), ([0, 1], [1], 5, 1)])
def test_mxn_redistribution_matches_byte_by_byte_brute_force(src, dst, nbytes, fan_out):
    d = mxn_redistribution(src, dst, nbytes, fan_out)
    assert dict(zip(zip(d.src.tolist(), d.dst.tolist()), d.nbytes.tolist())) == \
        _brute_force_redistribution(src, dst, nbytes, fan_out)


def test_cesm_layout_follows_the_thesis():
    pairs = {m: cesm_coupling(512, m).num_jobs for m in ("ATM", "LND", "ICE", "OCN")}
    thesis = {"ATM": 2233, "LND": 2911, "ICE": 765, "OCN": 502}
    assert all(abs(pairs[m] / thesis[m] - 1) < 0.01 for m in thesis)
    ocn = cesm_coupling(512, "OCN")
    assert ocn.src.min() == 448 and ocn.dst.max() < 448  # disjoint: ocean nodes to coupler nodes
    assert ocn.total_bytes == 64 * 2 * 2**20
    with pytest.raises(WorkloadError, match="unknown CESM model 'SEA'"):
        cesm_coupling(512, "SEA")


@pytest.mark.parametrize("encoding,newline", [("utf-8", "\n"), ("utf-8-sig", "\r\n"), ("utf-8-sig", "\n")])
def test_demand_csv_with_a_byte_order_mark_or_crlf_reads_alike(tmp_path, encoding, newline):
    plain = tmp_path / "plain.csv"
    plain.write_text("src,dst,bytes\n0,1,8MiB\n2,3,100\n")
    other = tmp_path / "other.csv"
    other.write_bytes(newline.join(["src, dst ,bytes", "0,1,8388608", "", "2,3,100", ""]).encode(encoding))
    assert read_demands(other).to_rows() == read_demands(plain).to_rows() == [(0, 1, 8388608), (2, 3, 100)]


@pytest.mark.parametrize("body,fragment", [("0,1\n", "line 2 has 2 fields"), ("0,1,-5\n", "positive"),
                                           ("0,1,1e30\n", "too large"), ("", "no demands"),
                                           ("0.5,1,5\n", "not integer node ids")])
def test_bad_demand_csv_names_the_file_and_line(tmp_path, body, fragment):
    path = tmp_path / "d.csv"
    path.write_text("src,dst,bytes\n" + body)
    with pytest.raises(WorkloadError, match=fragment) as info:
        read_demands(path)
    assert "d.csv" in str(info.value)


def test_sizes_are_checked_exactly_up_to_2_63_minus_1():
    assert Demands([0], [1], ["9223372036854775807"]).nbytes.tolist() == [2**63 - 1]  # a float would round it up
    with pytest.raises(WorkloadError, match="job 1 has size '9223372036854775808'"):
        Demands([0, 1], [1, 2], ["5", "9223372036854775808"])
