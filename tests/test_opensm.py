"""optiq against the real subnet manager and diagnostics on simulated fabrics (``tests/ibsim.py``).

Fabrics written by ``scripts/ibsim_fabrics.py``: a leaf-spine of 36-port switches with parallel
cables, a 3-level 4-ary tree, an irregular tree (cables missing, a dual-ported host) and a torus
of switches. OpenSM routes them (minhop, updn, ftree, dfsssp, dor; LMC 0 and 2); ``ibnetdiscover``
and ``dump_lfts`` print what optiq reads; ``ibtracert`` traces routes; the tables optiq writes are
loaded with ``opensm -R file,no_fallback -U`` and dumped again. Skipped, saying why, without the Debian
packages opensm, ibsim-utils and infiniband-diags.
"""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from ibsim import SCRIPT, Simulator, need_tools

from optiq import Demands
from optiq.errors import TopologyError
from optiq.paths import forwarding_routes, minhop_tables
from optiq.paths.tablecheck import check_tables
from optiq.planner import job_tables
from optiq.topology import read_ibnetdiscover
from optiq.topology.lft import read_forwarding_tables, write_forwarding_tables

pytestmark = pytest.mark.opensm

FABRICS = ("leaf-spine", "tree", "irregular")
GBPS = {"SDR": 2.0, "DDR": 4.0, "QDR": 8.0}


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    need_tools()
    out = tmp_path_factory.mktemp("nets")
    for kind in (*FABRICS, "torus"):
        subprocess.run([sys.executable, str(SCRIPT), kind, str(out / f"{kind}.net"), "--json", str(out / f"{kind}.json")],
                       check=True, capture_output=True)
    return out


def _routed(nets, tmp_path, kind, engine="minhop", lmc=0):
    """OpenSM routes the fabric once; what ibnetdiscover and dump_lfts print, read by optiq."""
    with Simulator(nets / f"{kind}.net", tmp_path / f"{kind}-{engine}-{lmc}") as sim:
        sim.route(engine, lmc=lmc)
        fabric, lfts = sim.discover()
    return read_ibnetdiscover(fabric, routes=lfts), read_ibnetdiscover(fabric)


def _cables(topology):
    """Every cable end by name: (node, port, peer, Gb/s)."""
    names = [d.split()[0] if d else n for d, n in zip(topology.fabric.descriptions, topology.node_names)]
    return sorted((names[int(u)], int(p), names[int(v)], round(float(c) * 8 / 1e9, 3))
                  for u, v, p, c in zip(topology.link_src, topology.link_dst, topology.fabric.link_port,
                                        topology.capacity))


@pytest.mark.parametrize("lmc", [0, 2])
@pytest.mark.parametrize("kind", FABRICS)
def test_optiq_reads_what_the_real_tools_print_and_emulates_minhop_exactly(nets, tmp_path, kind, lmc):
    real, bare = _routed(nets, tmp_path, kind, lmc=lmc)
    model = json.loads((nets / f"{kind}.json").read_text())
    # the same graph as the net file: every cable, its ports and speed (a host's two ports are one host)
    want = sorted((name, int(p), peer, 4 * GBPS[speed])
                  for name, node in model.items() for p, (peer, _, speed) in node["cables"].items())
    assert _cables(real) == want
    hosts = sorted(n for n, node in model.items() if node["kind"] == "Hca")
    assert real.endpoint_names == hosts and real.fabric.lmc == lmc
    assert real.fabric.lid_space.lids.size == (real.num_nodes - real.num_endpoints) + sum(
        len(model[h]["cables"]) for h in hosts) * (1 << lmc)
    # every LID of the dump is read, and minhop as emulated is minhop as OpenSM computes it
    tables = real.fabric.forwarding
    assert (tables.table != 255).all() and tables.remapped == 0
    assert np.array_equal(minhop_tables(bare).table, tables.table)
    assert check_tables(real).ok


def _trace(text):
    """ibtracert's route: the output port of every hop and the GUID of the node it leads to."""
    return [(int(port), int(guid, 16)) for port, guid in re.findall(r"^\[(\d+)\] -> \w+ port \{0x([0-9a-f]+)\}", text,
                                                                   re.M)]


@pytest.mark.parametrize("kind", ["tree", "irregular"])
def test_ibtracert_takes_the_routes_optiq_walks(nets, tmp_path, kind):
    with Simulator(nets / f"{kind}.net", tmp_path / kind) as sim:
        sim.route("minhop")
        fabric, lfts = sim.discover()
        t = read_ibnetdiscover(fabric, routes=lfts)
        rng = np.random.default_rng(7)
        E = t.num_endpoints
        pairs = [(int(s), int(d)) for s, d in rng.integers(0, E, size=(24, 2)) if s != d]
        routes = forwarding_routes(t, Demands([s for s, _ in pairs], [d for _, d in pairs], [1] * len(pairs)))
        f = t.fabric
        port_guid = {int(f.lid_node[i]): int(f.lid_guid[i]) for i in range(f.lids.size)  # switch port 0
                     if f.lid_link[i] < 0}
        port_guid.update({int(f.lid_endpoint[i]): int(f.lid_guid[i]) for i in range(f.lids.size)  # a host's port
                          if f.lid_endpoint[i] >= 0})
        guid = port_guid.__getitem__
        for p, (s, d) in enumerate(pairs):
            traced = _trace(sim.tracert(int(t.fabric.endpoint_lid[s]), int(t.fabric.endpoint_lid[d])))
            links = routes.path(p)
            walked = [(int(t.fabric.link_port[e]), guid(int(t.link_dst[e]))) for e in links]
            assert traced == walked, (t.endpoint_names[s], t.endpoint_names[d])


@pytest.mark.parametrize("lmc", [0, 2])
@pytest.mark.parametrize("engine", ["updn", "ftree", "dfsssp"])
@pytest.mark.parametrize("kind", ["leaf-spine", "tree"])
def test_other_engines_tables_are_read_and_checked(nets, tmp_path, kind, engine, lmc):
    if engine == "ftree" and lmc:
        pytest.skip("OpenSM 3.3.23's ftree cannot build its lid matrices with LMC > 0 (it falls back to minhop)")
    real, _ = _routed(nets, tmp_path, kind, engine, lmc)
    assert real.fabric.lmc == lmc
    if engine == "dfsssp":  # updn and ftree leave a root switch without a route to another's LID
        assert (real.fabric.forwarding.table != 255).all()
    report = check_tables(real)
    assert report.unreachable == 0 and report.looping == 0 and report.bad_ports == 0
    d = Demands(np.arange(real.num_endpoints), np.roll(np.arange(real.num_endpoints), 7),
                np.full(real.num_endpoints, 1 << 20))
    assert forwarding_routes(real, d).num_paths == d.num_jobs


@pytest.mark.parametrize("lmc", [0, 2])
@pytest.mark.parametrize("kind", ["leaf-spine", "irregular"])
def test_tables_optiq_writes_are_loaded_by_opensm_and_route_as_planned(nets, tmp_path, kind, lmc):
    with Simulator(nets / f"{kind}.net", tmp_path / kind) as sim:
        sim.route("minhop", lmc=lmc)
        fabric, lfts = sim.discover()
        t = read_ibnetdiscover(fabric, routes=lfts)
        rng = np.random.default_rng(1)
        perm = rng.permutation(t.num_endpoints)
        moved = perm != np.arange(t.num_endpoints)
        d = Demands(np.flatnonzero(moved), perm[moved], np.full(int(moved.sum()), 1 << 20))
        made = job_tables(t, d, lmc=bool(lmc))
        assert made.report.ok and made.time_s <= made.given_time_s * (1 + 1e-12)
        made.write(tmp_path / "job.lfts")
        log = sim.route("file", lmc=lmc, tables=tmp_path / "job.lfts", fallback=False)
        assert "file tables configured on all switches" in log
        _, dumped = sim.discover("-loaded")
    loaded = read_forwarding_tables(dumped, t)
    assert np.array_equal(loaded.table, made.tables.table)  # every entry, every switch, every LID
    planned = forwarding_routes(t, d, made.tables)
    walked = forwarding_routes(t, d, loaded)
    assert np.array_equal(planned.links, walked.links) and np.array_equal(planned.offsets, walked.offsets)


def test_shortest_routes_on_a_torus_close_credit_loops_and_optiq_tables_do_not(nets, tmp_path):
    for engine in ("minhop", "dor"):
        real, _ = _routed(nets, tmp_path, "torus", engine)
        report = check_tables(real)
        assert report.unreachable == 0 and report.credit_loop, engine
    made = job_tables(real, Demands(np.arange(16), np.roll(np.arange(16), 5), np.full(16, 1 << 20)))
    assert made.report.ok and made.report.deadlock_free


def test_a_dump_of_another_sweep_is_followed_by_its_port_guids(nets, tmp_path):
    # discovered at LMC 0, then routed again at LMC 2: every host LID moves
    with Simulator(nets / "tree.net", tmp_path / "sweeps") as sim:
        sim.route("minhop", lmc=0)
        fabric0, _ = sim.discover("-0")
        sim.route("minhop", lmc=2)
        fabric2, lfts2 = sim.discover("-2")
    moved = read_ibnetdiscover(fabric0, routes=lfts2)
    there = read_ibnetdiscover(fabric2, routes=lfts2)
    assert moved.fabric.forwarding.remapped > 0
    assert not np.array_equal(moved.fabric.endpoint_lid, there.fabric.endpoint_lid)
    d = Demands(np.arange(64), np.roll(np.arange(64), 9), np.full(64, 1 << 20))
    # a port's four LIDs there all land on its one LID here, the last line winning, as in
    # OpenSM's file engine: the routes of the last of the four
    a, b = forwarding_routes(moved, d), forwarding_routes(there, d, lid_offset=np.full(64, 3))
    assert np.array_equal(a.links, b.links) and np.array_equal(a.offsets, b.offsets)


def test_a_wrong_file_falls_back_to_minhop_in_silence_unless_no_fallback_and_optiq_refuses_it(nets, tmp_path):
    with Simulator(nets / "tree.net", tmp_path / "bad") as sim:
        sim.route("minhop")
        fabric, lfts = sim.discover()
        t = read_ibnetdiscover(fabric, routes=lfts)
        made = job_tables(t, Demands(np.arange(64), np.roll(np.arange(64), 5), np.full(64, 1 << 20)))
        bad = made.tables.table.copy()
        switch, column = 3, 7
        bad[switch, column] = int(t.fabric.num_ports[t.num_endpoints + switch]) + 1  # a port the switch lacks
        with pytest.raises(TopologyError, match=r"to port \d+, and it has \d+ ports.*would refuse"):
            write_forwarding_tables(made.tables.with_table(bad, "bad"), t, tmp_path / "refused.lfts")
        assert not (tmp_path / "refused.lfts").exists()
        made.write(tmp_path / "good.lfts")  # the same entry made wrong in the file, as a hand edit would
        text = (tmp_path / "good.lfts").read_text().splitlines()
        row = next(i for i, line in enumerate(text) if line.startswith("Unicast lids") and
                   f"guid 0x{int(t.fabric.node_guid[t.num_endpoints + switch]):016x}" in line)
        entry = row + 3 + column
        text[entry] = re.sub(r"^(0x[0-9a-f]+ )\d+", rf"\g<1>{int(bad[switch, column]):03d}", text[entry])
        (tmp_path / "bad.lfts").write_text("\n".join(text) + "\n")
        # plain -R file: minhop instead, exit code 0, a line in the log the only trace
        plain = tmp_path / "bad" / "plain.log"
        done = sim.run("opensm", "-o", "-f", str(plain), "-R", "file", "-U", str(tmp_path / "bad.lfts"))
        text = plain.read_text(errors="replace")
        assert done.returncode == 0 and "minhop tables configured on all switches" in text
        assert "Invalid port" in text
        # with no_fallback: the switches are left unrouted and OpenSM says so on every sweep
        with pytest.raises(AssertionError, match="did not configure its tables"):
            sim.route("file", tables=tmp_path / "bad.lfts", fallback=False, timeout=15)
        loud = (tmp_path / "bad" / f"osm-{sim.runs}.log").read_text(errors="replace")
        assert "Invalid port" in loud and "cannot build fwd tables" in loud and "tables configured" not in loud


def test_a_permutation_on_the_4_ary_3_tree_is_routed_at_its_bound_and_loaded(tmp_path):
    need_tools()
    net = tmp_path / "tree.net"
    subprocess.run([sys.executable, str(SCRIPT), "tree", str(net), "--slow", "0"], check=True, capture_output=True)
    with Simulator(net, tmp_path / "perm") as sim:
        sim.route("minhop")
        fabric, lfts = sim.discover()
        t = read_ibnetdiscover(fabric, routes=lfts)
        d = _permutation(t, 11, 8 << 20)
        made = job_tables(t, d)
        host_link = (8 << 20) / t.capacity.max()  # every cable alike: one pair's bytes over one cable
        assert made.bound_s == pytest.approx(host_link) and made.time_s == pytest.approx(host_link)
        assert made.given_time_s > made.time_s and made.gap == 0
        made.write(tmp_path / "job.lfts")
        sim.route("file", tables=tmp_path / "job.lfts", fallback=False)
        _, dumped = sim.discover("-loaded")
    assert np.array_equal(read_forwarding_tables(dumped, t).table, made.tables.table)


@pytest.mark.parametrize("fallback", [False, True])
def test_a_failed_cable_leaves_loaded_job_tables_routing_into_it_and_check_names_and_repair_mends_them(
        nets, tmp_path, fallback, capsys):
    from optiq.cli import main
    from optiq.paths import forwarding_routes

    with Simulator(nets / "tree.net", tmp_path / "sim", console=True) as sim:
        sim.route("minhop")
        fabric, lfts = sim.discover()
        t = read_ibnetdiscover(fabric, routes=lfts)
        d = _permutation(t, 1, 1 << 20)
        made = job_tables(t, d)
        made.write(tmp_path / "job.lfts")
        sim.route("file", tables=tmp_path / "job.lfts", fallback=fallback)
        _, loaded = sim.discover("-loaded")
        assert main(["tables", "--check", "-t", f"ibnet:{fabric}", "--routes", str(loaded), "-q"]) == 0
        # the switch-to-switch cable the job's routes cross most goes down; OpenSM sweeps again with the file
        E = t.num_endpoints
        used = [e for e in forwarding_routes(t, d, made.tables).links.tolist() if min(t.link_src[e], t.link_dst[e]) >= E]
        e = max(sorted(set(used)), key=used.count)
        switch, port = int(t.link_src[e]), int(t.fabric.link_port[e])
        sim.unlink(t.fabric.describe(t, switch).split("'")[1], port)
        sim.route("file", tables=tmp_path / "job.lfts", fallback=fallback)
        now, after = sim.discover("-after")
        current = read_ibnetdiscover(now, routes=after)
        assert current.num_links == t.num_links - 2
        # the file engine loads the file as written, with and without no_fallback: the entries into the dead port stay
        table = read_forwarding_tables(after, current).table
        assert int((table[switch - E] == port).sum()) == int((made.tables.table[switch - E] == port).sum()) > 0
        capsys.readouterr()
        assert main(["tables", "--check", "-t", f"ibnet:{now}", "--routes", str(after), "-q"]) == 1
        out, err = capsys.readouterr()
        report = check_tables(current)
        assert report.lost and len(report.lost) == len([line for line in out.splitlines() if line.startswith("  LID")])
        assert f"(port {port})" in out and err.count("optiq: error:") == 1 and f"{len(report.lost)} LIDs" in err
        # every LID the check names is one some host's route to does not reach, and no other
        lost = {int(line.split()[1].rstrip(":"), 16) for line in report.lost}
        for lid in current.fabric.endpoint_lid.tolist():
            h = int(np.flatnonzero(current.fabric.endpoint_lid == lid)[0])
            others = np.array([s for s in range(E) if s != h])
            try:
                forwarding_routes(current, Demands(others, np.full(others.size, h), np.ones(others.size, np.int64)))
                assert lid not in lost
            except Exception:
                assert lid in lost
        # optiq tables on the fabric as it is, from the loaded tables: the job routed again, loaded and walked
        assert main(["tables", "-t", f"ibnet:{now}", "--routes", str(after), "--demands", _demand_file(tmp_path, d),
                     "-o", str(tmp_path / "repaired.lfts"), "-q"]) == 0
        sim.route("file", tables=tmp_path / "repaired.lfts", fallback=False)
        _, reloaded = sim.discover("-repaired")
        assert main(["tables", "--check", "-t", f"ibnet:{now}", "--routes", str(reloaded), "-q"]) == 0
    repaired = read_forwarding_tables(tmp_path / "repaired.lfts", current)
    assert np.array_equal(read_forwarding_tables(reloaded, current).table, repaired.table)
    kept = repaired.table == table
    assert kept.mean() > 0.9  # only what the dead cable broke, and the job's own routes, change
    forwarding_routes(current, d, repaired)  # every pair of the job arrives


def _permutation(t, seed: int, nbytes: int) -> Demands:
    """A random permutation of the hosts (the ones it leaves in place dropped), ``nbytes`` a pair."""
    perm = np.random.default_rng(seed).permutation(t.num_endpoints)
    moved = perm != np.arange(t.num_endpoints)
    return Demands(np.flatnonzero(moved), perm[moved], np.full(int(moved.sum()), nbytes))


def _demand_file(tmp_path, d) -> str:
    path = tmp_path / "job.csv"
    path.write_text("src,dst,bytes\n" + "".join(f"{s},{t},{n}\n" for s, t, n in zip(d.src, d.dst, d.nbytes)))
    return str(path)


@pytest.mark.parametrize("engine", ["ftree", "updn", "dfsssp"])
def test_routes_opensm_engine_are_the_tables_that_engine_of_the_real_opensm_gives_the_fabric(nets, tmp_path, monkeypatch,
                                                                                          engine):
    from optiq.paths.opensm import opensm_tables
    from optiq.topology.lft import read_forwarding_tables

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real, bare = _routed(nets, tmp_path, "tree", engine)   # the harness's own run of the engine, as discovered
    dump = opensm_tables(bare, engine)
    mine = read_forwarding_tables(dump, bare)
    assert np.array_equal(mine.table, real.fabric.forwarding.table) and mine.remapped == 0
    assert opensm_tables(bare, engine) == dump   # kept: the second call routes nothing
    assert check_tables(read_ibnetdiscover(bare.fabric.source, routes=dump)).ok


def test_compare_and_tables_take_opensm_engines_and_a_wrong_one_is_one_line(nets, tmp_path, monkeypatch, capsys):
    from optiq.cli.main import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _, bare = _routed(nets, tmp_path, "tree")
    fabric = f"ibnet:{bare.fabric.source}"
    job = ["--pattern", "permutation", "--size", "8MiB", "-q"]
    assert main(["compare", "-t", fabric, "--routes", "opensm:ftree", *job, "--methods", "default,tables", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    from optiq.paths.opensm import opensm_tables

    ftree = read_ibnetdiscover(bare.fabric.source, routes=opensm_tables(bare, "ftree"))   # the cached file
    from optiq.workloads import WorkloadSpec

    demands = WorkloadSpec(pattern="permutation", size=2**23).make(ftree)
    assert rows[0]["predicted_time_s"] == pytest.approx(
        forwarding_routes(ftree, demands).busiest_link_time(demands.nbytes.astype(float), ftree.capacity))
    report = tmp_path / "r.json"
    assert main(["tables", "-t", fabric, *job, "--against", "ftree,minhop", "-o", str(tmp_path / "t.lfts"),
                 "--json", str(report)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    got = json.loads(report.read_text())
    assert first.startswith("the job tables: ") and "best engine for the job" in first
    assert got["best_engine"] in ("ftree", "minhop") and got["time_s"] <= min(got["engines_s"].values()) * (1 + 1e-9)
    for wrong in (["compare", "-t", fabric, "--routes", "opensm:ar_updn", *job],
                  ["tables", "-t", fabric, *job, "--against", "fastest", "-o", str(tmp_path / "u.lfts")]):
        assert main(wrong) != 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("optiq: error:") and "engine" in err[0]
