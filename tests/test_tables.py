"""Forwarding tables for a job: checks of any tables (reachability, loops, credit loops), the
tables optiq writes (complete, destination based, deadlock free, never worse than the given
ones, optimal by brute force on a small fabric), their file format, LMC and other sweeps."""

import itertools
import json
import re

import numpy as np
import pytest
from conftest import synthetic

from optiq import Demands, from_spec
from optiq.cli import main
from optiq.errors import OptiqError, TopologyError
from optiq.heuristics.clos import clos_routes
from optiq.paths import forwarding_routes, minhop_tables
from optiq.paths.tablecheck import check_tables
from optiq.planner import compare_methods, exact_tables, job_tables, single_path_bound
from optiq.planner.tables import with_tables
from optiq.topology import read_ibnetdiscover
from optiq.topology.lft import NO_PORT, read_forwarding_tables, write_forwarding_tables
from optiq.workloads import constant_ratio, random_pairing


def _fabric(tmp_path, *, lmc=0, name="fabric", **build):
    """A synthetic fabric with its D-mod-K tables, read back."""
    sf = synthetic()
    model = sf.build(build.pop("k", 4), build.pop("levels", 3), lmc=lmc, **build)
    sf.write_ibnetdiscover(model, str(tmp_path / f"{name}.txt"))
    sf.write_lfts(model, str(tmp_path / f"{name}.lfts"))
    return read_ibnetdiscover(tmp_path / f"{name}.txt", routes=tmp_path / f"{name}.lfts")


def _permutation(topology, seed):
    rng = np.random.default_rng(seed)
    P = topology.num_endpoints
    perm = rng.permutation(P)
    moved = perm != np.arange(P)
    return Demands(np.arange(P)[moved], perm[moved], np.full(int(moved.sum()), 1 << 20))


# -- a ring of five switches: its shortest routes close a credit loop, up*/down* ones are longer --

N = 5


def _ring_fabric(tmp_path):
    """Switches R0..R4 in a ring (port 1 to the next, port 2 to the previous), host h<i> on port 3."""
    sw = [f"S-00000000000000a{i}" for i in range(N)]
    hosts = [f"H-00000000000000b{i}" for i in range(N)]
    blocks = []
    for i in range(N):
        nxt, prv = (i + 1) % N, (i - 1) % N
        blocks.append(f'Switch\t3 "{sw[i]}"\t\t# "R{i}" base port 0 lid {i + 1} lmc 0\n'
                      f'[1]\t"{sw[nxt]}"[2]\t\t# "R{nxt}" lid {nxt + 1} 4xEDR\n'
                      f'[2]\t"{sw[prv]}"[1]\t\t# "R{prv}" lid {prv + 1} 4xEDR\n'
                      f'[3]\t"{hosts[i]}"[1](b{i}1) \t\t# "h{i}" lid {11 + i} 4xEDR\n')
        blocks.append(f'Ca\t1 "{hosts[i]}"\t\t# "h{i}"\n'
                      f'[1](b{i}1) \t"{sw[i]}"[3]\t\t# lid {11 + i} lmc 0 "R{i}" lid {i + 1} 4xEDR\n')
    path = tmp_path / "ring.txt"
    path.write_text("\n".join(blocks))
    return read_ibnetdiscover(path)


def _clockwise(topology):
    """Tables that send every LID one way round the ring (port 1), delivering at its own switch."""
    tables = minhop_tables(topology)
    table = np.full_like(tables.table, 1)
    fabric = topology.fabric
    for c in range(tables.lids.size):
        i = fabric.lid_space.entry[c]
        node = int(fabric.lid_node[i])
        if fabric.lid_link[i] >= 0:  # a host's LID: port 3 at its switch
            table[int(topology.link_src[fabric.lid_link[i]]) - N, c] = 3
        else:
            table[node - N, c] = 0
    return tables.with_table(table, "clockwise")


def test_a_hand_built_credit_loop_is_found_and_named(tmp_path):
    ring = _ring_fabric(tmp_path)
    report = check_tables(ring, _clockwise(ring))
    assert report.unreachable == 0 and report.looping == 0 and report.bad_ports == 0
    assert not report.deadlock_free and len(report.credit_loop) == N  # R0 -> R1 -> ... -> R4 -> R0
    assert {re.match(r"R(\d) port 1", name).group(1) for name in report.credit_loop} == {str(i) for i in range(N)}
    assert "credit loop" in str(report) and not report.ok


def test_tables_written_for_a_ring_are_deadlock_free_unless_loops_are_allowed(tmp_path):
    ring = _ring_fabric(tmp_path)
    d = Demands([0, 1, 2, 3, 4], [2, 3, 4, 0, 1], [1 << 20] * N)
    made = job_tables(ring, d)
    assert made.report.ok and made.report.deadlock_free
    assert made.minimal_credit_loop  # shortest routes on a ring close loops, and it says so
    assert made.longer_routes > 0
    loose = job_tables(ring, d, allow_credit_loops=True)
    assert loose.time_s <= made.time_s and loose.report.credit_loop  # shortest routes: one way round


def test_a_dropped_lid_and_a_forwarding_loop_are_found(tmp_path):
    ring = _ring_fabric(tmp_path)
    tables = _clockwise(ring)
    dropped = tables.table.copy()
    dropped[1, tables.endpoint_column[3]] = NO_PORT  # R1 forgets h3
    report = check_tables(ring, tables.with_table(dropped, "dropped"))
    assert report.unreachable == N - 2 and "LID 0x000e is unreachable from host" in report.problems()[0]  # h4, h0, h1
    loop = tables.table.copy()
    loop[2, tables.endpoint_column[3]] = 2  # R2 sends h3's traffic back to R1, which sends it to R2
    report = check_tables(ring, tables.with_table(loop, "loop"))
    assert report.looping >= 2 and any("a forwarding loop for LID 0x000e: R1 -> R2 -> R1 (" in line for line in report.problems())
    beyond = tables.table.copy()
    beyond[0, 0] = 7
    assert check_tables(ring, tables.with_table(beyond, "beyond")).bad_ports == 1
    with pytest.raises(TopologyError, match="has no entry for LID 0x000e .*OpenSM would drop"):
        write_forwarding_tables(tables.with_table(dropped, "dropped"), ring, tmp_path / "x.lfts")


def test_eval_and_compare_warn_about_given_tables_with_a_credit_loop(tmp_path, capsys):
    ring = _ring_fabric(tmp_path)
    write_forwarding_tables(_clockwise(ring), ring, tmp_path / "cw.lfts")
    assert main(["compare", "-t", f"ibnet:{tmp_path / 'ring.txt'}", "--routes", str(tmp_path / "cw.lfts"),
                 "--pattern", "disjoint", "--sources", "2", "--ratio", "1", "--methods", "default", "-q"]) == 0
    err = capsys.readouterr().err
    assert f"cw.lfts: a credit loop (a cycle of {N} links" in err and err.count("optiq: warning") == 1


# -- job tables on synthetic fat-trees -----------------------------------------------------------

@pytest.mark.parametrize("build", [dict(seed=1), dict(seed=2, drop=3, slow=0.25, parallel=2)])
def test_job_tables_are_complete_safe_and_never_worse_than_the_given(tmp_path, build):
    t = _fabric(tmp_path, **build)
    for seed in (1, 2):
        d = _permutation(t, seed)
        made = job_tables(t, d)
        assert (made.tables.table != NO_PORT).all()  # every switch, every LID
        assert made.report.ok and made.report.deadlock_free
        assert made.time_s <= made.given_time_s * (1 + 1e-12)
        assert made.bound_s <= made.time_s * (1 + 1e-9)
        # the job walked through the written tables carries what the tables promise
        routes = forwarding_routes(t, d, made.tables)
        assert routes.busiest_link_time(d.nbytes.astype(float), t.capacity) == pytest.approx(made.time_s)
        # every other LID keeps its given port wherever that was on a legal route: few change
        assert made.changed < made.tables.table.size * 0.1


def test_job_tables_reach_the_best_destination_tables_by_brute_force(tmp_path):
    # a two-level tree with two spines: every leaf switch chooses one of two spines per LID
    t = _fabric(tmp_path, k=2, levels=2, seed=1)
    E = t.num_endpoints
    d = Demands([0, 1, 2, 3], [2, 3, 0, 1], [1 << 20, 3 << 19, 1 << 19, 1 << 20])
    made = job_tables(t, d)
    given = minhop_tables(t)
    leaves = sorted({int(t.link_dst[t.fabric.egress[h]]) - E for h in range(E)})
    spines = [s for s in range(t.num_nodes - E) if s not in leaves]
    cols = [int(made.tables.endpoint_column[h]) for h in sorted(set(d.dst.tolist()))]
    up_ports = {s: sorted({int(p) for p in given.table[s, cols]} - {1, 2}) for s in leaves}
    best = np.inf
    for choice in itertools.product(*[up_ports[s] for s in leaves for _ in cols]):
        table = made.tables.table.copy()
        for (s, c), port in zip(itertools.product(leaves, cols), choice):
            if made.tables.table[s, c] not in (1, 2):  # not delivered on the leaf itself
                table[s, c] = port
        routes = forwarding_routes(t, d, made.tables.with_table(table, "trial"))
        best = min(best, routes.busiest_link_time(d.nbytes.astype(float), t.capacity))
    assert spines and made.time_s == pytest.approx(best)


def test_single_path_bound_holds_for_every_tables_and_is_met_on_a_permutation(tmp_path):
    t = _fabric(tmp_path, seed=3, drop=2, parallel=2)
    d = random_pairing(constant_ratio(t.num_endpoints, "disjoint", num_sources=32, ratio=1), seed=1)
    made = job_tables(t, d)
    bound = single_path_bound(t, d)
    for tables in (made.tables, made.given, minhop_tables(t)):
        routes = forwarding_routes(t, d, tables)
        assert routes.busiest_link_time(d.nbytes.astype(float), t.capacity) >= bound * (1 - 1e-12)
    assert made.time_s == pytest.approx(bound)


def test_written_tables_read_back_the_same_in_the_format_opensm_parses(tmp_path):
    t = _fabric(tmp_path, seed=1, lmc=1)
    made = job_tables(t, _permutation(t, 1))
    made.write(tmp_path / "job.lfts")
    text = (tmp_path / "job.lfts").read_text()
    # what OpenSM's file engine reads: a header with ' guid 0x', then '0x<lid> <port>' lines, each
    # with ' portguid 0x' followed by the GUID and whitespace or ':'
    headers = re.findall(r"^Unicast lids .* guid 0x([0-9a-f]+)\s", text, re.M)
    entries = re.findall(r"^0x([0-9a-f]+)\s+(\d+)\s.* portguid 0x[0-9a-f]+[:\s]", text, re.M)
    S, L = made.tables.table.shape
    assert len(headers) == S and len(entries) == S * L
    assert {int(p) for _, p in entries} <= set(range(0, int(t.fabric.num_ports.max()) + 1))
    again = read_forwarding_tables(tmp_path / "job.lfts", t)
    assert np.array_equal(again.table, made.tables.table) and again.remapped == 0


def test_a_dump_of_another_sweep_is_remapped_by_its_port_guids(tmp_path):
    # the same fabric discovered at LMC 0 and routed (dumped) at LMC 2: every host LID moved
    lmc0 = _fabric(tmp_path, seed=4, name="a")
    _fabric(tmp_path, seed=4, lmc=2, name="b")
    moved = read_ibnetdiscover(tmp_path / "a.txt", routes=tmp_path / "b.lfts")
    tables = moved.fabric.forwarding
    assert tables.remapped > 0 and (tables.table != NO_PORT).all()
    d = _permutation(lmc0, 1)
    # each host's base LID of the other sweep takes its port's LID here: the same routes as there
    there = read_ibnetdiscover(tmp_path / "b.txt", routes=tmp_path / "b.lfts")
    a, b = forwarding_routes(moved, d), forwarding_routes(there, d)
    assert b.hops.sum() > 0 and a.num_paths == b.num_paths
    # without the port GUIDs on the lines, the LIDs cannot be followed: refused, saying why
    bare = re.sub(r" : \(.*\)", "", (tmp_path / "b.lfts").read_text())
    (tmp_path / "bare.lfts").write_text(bare)
    with pytest.raises(TopologyError, match="another sweep"):
        read_ibnetdiscover(tmp_path / "a.txt", routes=tmp_path / "bare.lfts")


def test_lmc_lids_are_read_and_split_the_pairs(tmp_path):
    t = _fabric(tmp_path, seed=2, lmc=2, parallel=2)
    fabric = t.fabric
    assert fabric.lmc == 2 and fabric.lid_space.lids.size == (t.num_nodes - t.num_endpoints) + 4 * t.num_endpoints
    d = _permutation(t, 3)
    plain = job_tables(t, d)
    split = job_tables(t, d, lmc=True)
    assert split.split is not None and np.array_equal(split.split.sum(axis=1), d.nbytes)
    assert split.time_s <= plain.time_s * (1 + 1e-9) and split.report.ok
    plan = split.plan()
    assert plan.predicted_time_s == pytest.approx(split.time_s)
    split.write_split(tmp_path / "split.csv")
    rows = (tmp_path / "split.csv").read_text().splitlines()
    assert rows[0] == "src,dst,lid,bytes" and sum(int(r.split(",")[3]) for r in rows[1:]) == d.nbytes.sum()
    with pytest.raises(TopologyError, match="LMC 0"):
        job_tables(_fabric(tmp_path, seed=2, name="z"), d, lmc=True)


def test_compare_shows_tables_beside_default_dynamic_and_opt(tmp_path):
    t = _fabric(tmp_path, seed=2, drop=2, parallel=2)
    d = random_pairing(constant_ratio(t.num_endpoints, "disjoint", num_sources=24, ratio=1), seed=2)
    runs = {r.method: r.plan for r in compare_methods(t, d, ["default", "tables", "dynamic", "opt"])}
    tables = runs["tables"]
    assert tables.predicted_time_s <= runs["default"].predicted_time_s * (1 + 1e-12)
    assert tables.realized_time_s == tables.predicted_time_s
    assert tables.lower_bound_time_s <= tables.predicted_time_s * (1 + 1e-9)
    assert tables.lower_bound_time_s >= runs["dynamic"].lower_bound_time_s * (1 - 1e-9)
    assert tables.topology.fabric.forwarding is not t.fabric.forwarding
    assert with_tables(t, t.fabric.forwarding).fabric.forwarding is t.fabric.forwarding


def test_optiq_tables_command_writes_and_refuses_mistakes(tmp_path, capsys):
    _fabric(tmp_path, seed=1)
    spec = f"ibnet:{tmp_path / 'fabric.txt'}"
    argv = ["tables", "-t", spec, "--routes", str(tmp_path / "fabric.lfts"), "--pattern", "disjoint",
            "--sources", "8", "--ratio", "1", "--pairing", "random", "-q"]
    assert main(argv + ["-o", str(tmp_path / "job.lfts")]) == 0
    out = capsys.readouterr().out
    assert "the job's busiest link: given tables" in out and "no credit loop" in out
    assert read_forwarding_tables(tmp_path / "job.lfts", read_ibnetdiscover(tmp_path / "fabric.txt")).table.size
    assert main(argv + ["-o", str(tmp_path / "x.lfts"), "--lmc"]) == 1
    assert "routed at LMC 0" in capsys.readouterr().err
    assert main(argv + ["-o", str(tmp_path / "x.lfts"), "--split", str(tmp_path / "s.csv")]) == 1
    assert "--split applies with --lmc" in capsys.readouterr().err
    assert main(["tables", "-t", "fattree:k=4", "--pattern", "disjoint", "-o", str(tmp_path / "y.lfts"), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.count("optiq: error:") == 1 and "is not one (-t ibnet:FILE)" in err
    with pytest.raises(OptiqError, match="tables method writes an InfiniBand fabric"):
        compare_methods(from_spec("torus:4x4"), Demands([0], [5], [1]), ["tables"])


# -- permutations on full-bisection fat-trees, the exact program, several jobs --

@pytest.mark.parametrize("k,levels", [(2, 3), (4, 2), (3, 3), (4, 3)])
def test_clos_routes_carry_any_permutation_with_no_shared_link_on_shortest_routes(tmp_path, k, levels):
    t = _fabric(tmp_path, k=k, levels=levels, seed=2)
    hops = shortest_host_hops(t)
    for seed in range(5):
        d = _permutation(t, seed)
        routes = clos_routes(t, d)
        assert routes is not None
        used = np.bincount(np.concatenate(routes), minlength=t.num_links)
        assert used.max() == 1  # every link, the hosts' cables too, carries at most one pair
        for j, r in enumerate(routes):
            assert t.link_src[r[0]] == d.src[j] and t.link_dst[r[-1]] == d.dst[j]
            assert (t.link_dst[r[:-1]] == t.link_src[r[1:]]).all() and r.size == hops[d.src[j], d.dst[j]]


def shortest_host_hops(t):
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path
    graph = csr_matrix((np.ones(t.num_links), (t.link_src, t.link_dst)), shape=(t.num_nodes, t.num_nodes))
    return shortest_path(graph, unweighted=True, indices=np.arange(t.num_endpoints))[:, :t.num_endpoints]


def test_clos_routes_decline_what_they_cannot_route(tmp_path):
    t = _fabric(tmp_path, k=4, levels=3, seed=2)
    assert clos_routes(t, Demands([0, 1], [5, 5], [1, 1])) is None  # two senders to one host
    cut = _fabric(tmp_path, k=4, levels=3, seed=2, drop=1, name="cut")  # a cable missing: no longer a Clos network
    assert clos_routes(cut, _permutation(cut, 0)) is None
    made = job_tables(cut, _permutation(cut, 0))  # the heuristic still writes tables, never below the bound
    assert made.report.ok and made.time_s >= made.bound_s * (1 - 1e-12)


def test_job_tables_meet_the_host_link_bound_on_twenty_permutations(tmp_path):
    t = _fabric(tmp_path, k=4, levels=3, seed=5)
    for seed in range(20):
        d = _permutation(t, seed)
        made = job_tables(t, d)
        assert made.time_s == pytest.approx((1 << 20) / t.capacity.max()) and made.gap == 0
        assert made.report.ok and made.report.deadlock_free


@pytest.mark.parametrize("k,levels", [(2, 2), (2, 3), (3, 2), (4, 2)])
def test_the_exact_program_agrees_with_brute_force_bounds_the_heuristic_and_is_reached(tmp_path, k, levels):
    t = _fabric(tmp_path, k=k, levels=levels, seed=1, host_speed="NDR")  # the switches' cables bind, not the hosts'
    P = t.num_endpoints
    for seed in range(4):
        rng = np.random.default_rng(seed)
        pairs = np.unique(rng.integers(0, P, (P, 2)), axis=0)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        d = Demands(pairs[:, 0], pairs[:, 1], rng.integers(1, 4, len(pairs)) << 20)
        exact = exact_tables(t, d)
        heuristic = job_tables(t, d, exact_routes=0)
        assert exact.optimal
        assert single_path_bound(t, d) <= exact.time_s * (1 + 1e-9) <= heuristic.time_s * (1 + 1e-9)
        assert job_tables(t, d).time_s == pytest.approx(exact.time_s)  # small: job_tables solves the program
        # the optimum's routes are tables: one port per switch and destination, and that busy
        ports = {}
        for j, r in zip(np.arange(d.num_jobs), exact.routes):
            for e in r:
                assert ports.setdefault((int(t.link_src[e]), int(d.dst[j])), int(e)) == int(e)
        if levels == 2 and k == 2:  # small enough to try every destination table
            assert exact.time_s == pytest.approx(_brute_force(t, d))
    perm = _permutation(t, 3)
    assert exact_tables(t, perm).time_s == pytest.approx(job_tables(t, perm, exact_routes=0).time_s)


def _brute_force(t, d, k=2):
    """The least busiest link over every choice of spine per (leaf, destination) of a two-level
    tree (a leaf's ports 1..k lead down, k+1..2k up)."""
    E = t.num_endpoints
    given = minhop_tables(t)
    leaf_of = t.link_dst[t.fabric.egress[np.arange(E)]] - E
    leaves = sorted(set(leaf_of.tolist()))
    targets = sorted(set(d.dst.tolist()))
    choices = [(s, h) for s in leaves for h in targets if leaf_of[h] != s]
    best = np.inf
    for ports in itertools.product(range(k + 1, 2 * k + 1), repeat=len(choices)):
        table = given.table.copy()
        for (s, h), port in zip(choices, ports):
            table[s, given.endpoint_column[h]] = port
        routes = forwarding_routes(t, d, given.with_table(table, "trial"))
        best = min(best, routes.busiest_link_time(d.nbytes.astype(float), t.capacity))
    return best


def test_tables_for_three_jobs_report_each_alone_together_and_given(tmp_path, capsys):
    t = _fabric(tmp_path, k=4, levels=3, seed=3)
    names = t.endpoint_names
    rng = np.random.default_rng(4)
    hosts = rng.permutation(t.num_endpoints)
    lists = [hosts[:16], hosts[16:48], hosts[48:]]
    # a demand file, rank traffic (a matrix, one rank per host) and a pattern
    (tmp_path / "job0.csv").write_text("src,dst,bytes\n" + "".join(f"{a},{(a + 1) % 16},{1 << 20}\n" for a in range(16)))
    matrix = np.roll(np.eye(32), 2, axis=1) * (1 << 20)
    np.savetxt(tmp_path / "job1.txt", matrix, fmt="%d")
    files = ["job0.csv", "job1.txt", "pattern:permutation:1MiB"]
    jobs = tmp_path / "jobs.txt"
    jobs.write_text("".join(f"job{i} {','.join(names[x] for x in h)} {f}  # job {i}\n"
                            for i, (h, f) in enumerate(zip(lists, files))))
    argv = ["tables", "-t", f"ibnet:{tmp_path / 'fabric.txt'}", "--routes", str(tmp_path / "fabric.lfts"),
            "--jobs", str(jobs), "-o", str(tmp_path / "jobs.lfts"), "--json", str(tmp_path / "r.json"), "-q"]
    assert main(argv) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert [j["name"] for j in report["jobs"]] == ["job0", "job1", "job2"]
    one_cable = (1 << 20) / t.capacity.max()
    for j in report["jobs"]:  # together the jobs are one permutation: each at its own bound, no link shared
        assert j["together_s"] == pytest.approx(one_cable) and j["alone_s"] == pytest.approx(one_cable)
        assert j["given_s"] >= j["together_s"] * (1 - 1e-12)
    assert report["shared_links"] == 0
    out = capsys.readouterr().out
    assert "job1" in out and "more than one job" in out and "no_fallback" in out
    # mistakes are named before any work
    jobs.write_text("job0 node999 job0.csv\n")
    assert main(argv) == 1
    assert "line 1" in capsys.readouterr().err
    jobs.write_text("job0 onlytwo\n")
    assert main(argv) == 1
    assert "expected NAME HOSTLIST TRAFFIC" in capsys.readouterr().err
    jobs.write_text(f"job0 {names[0]},{names[1]} pattern:shuffle\n")
    assert main(argv) == 1
    assert "unknown pattern 'shuffle'" in capsys.readouterr().err


def test_cluster_tables_route_alone_only_the_jobs_above_their_bound(tmp_path):
    """A job at its own bound under the tables made together is not routed again alone (its
    alone figure is that bound); one above it is, and gets what tables made for it alone give."""
    from optiq.planner import cluster_tables
    from optiq.planner.tables import host_cable_bound, tables_bound
    from optiq.workloads.jobs import ClusterJob

    t = _fabric(tmp_path, k=4, levels=3, seed=5)
    rng = np.random.default_rng(6)
    hosts = rng.permutation(t.num_endpoints)
    # many-to-few into four hosts (their cables decide) and random pairs crowding the same fabric
    few = Demands(hosts[4:20], np.repeat(hosts[:4], 4), [8 << 20] * 16)
    pairs = hosts[20:].reshape(-1, 2)
    crowd = Demands(np.concatenate([pairs[:, 0], pairs[:, 1]]), np.concatenate([pairs[:, 1], pairs[:, 0]]),
                    rng.integers(1, 9, 2 * len(pairs)) << 20)
    jobs = [ClusterJob("few", hosts[:20], few), ClusterJob("crowd", hosts[20:], crowd)]
    made = cluster_tables(t, jobs)
    for job, row in zip(jobs, made.jobs):
        bound = tables_bound(t, job.demands)
        assert row.alone_s >= bound * (1 - 1e-9)
        at_bound = row.together_s <= bound * (1 + 1e-9)
        if at_bound:
            assert row.alone_s == pytest.approx(row.together_s)
        else:
            assert row.alone_s == pytest.approx(job_tables(t, job.demands).time_s)
    assert any(row.together_s > tables_bound(t, job.demands) * (1 + 1e-9) for job, row in zip(jobs, made.jobs))
    assert made.jobs[0].together_s == pytest.approx(host_cable_bound(t, few))


def test_lmc_tables_are_checked_with_their_split_by_compare_and_eval(tmp_path, capsys):
    """After optiq tables --lmc, compare and eval of the written tables with --split show the
    tables' own figure (the base LIDs alone are slower); a wrong split is named by its line."""
    _fabric(tmp_path, seed=2, lmc=2, parallel=2)
    spec, job = f"ibnet:{tmp_path / 'fabric.txt'}", ["--pattern", "permutation", "--seed", "3", "-q"]
    out = tmp_path / "job.lfts"
    assert main(["tables", "-t", spec, "--routes", str(tmp_path / "fabric.lfts"), *job, "--lmc", "-o", str(out),
                 "--json", str(tmp_path / "r.json")]) == 0
    capsys.readouterr()
    made_s = json.loads((tmp_path / "r.json").read_text())["time_s"]
    split = f"{out}.split.csv"
    loaded = ["-t", spec, "--routes", str(out), *job]  # the written file as the fabric's tables
    rows = {}
    for extra in ([], ["--split", split]):
        assert main(["compare", *loaded, "--methods", "default", "--json", *extra]) == 0
        rows[bool(extra)] = json.loads(capsys.readouterr().out)[0]
    assert rows[True]["predicted_time_s"] == pytest.approx(made_s, rel=1e-12)
    assert rows[False]["predicted_time_s"] > made_s * 1.01  # the split is what makes the tables' figure
    plan = tmp_path / "h.json"
    assert main(["plan", *loaded, "-m", "heu2", "-o", str(plan)]) == 0
    capsys.readouterr()
    assert main(["eval", str(plan), "--json", "--split", split]) == 0
    assert json.loads(capsys.readouterr().out)["default_time_s"] == pytest.approx(made_s, rel=1e-12)
    lines = open(split).read().splitlines()
    src, dst, lid, nbytes = lines[1].split(",")
    for bad, message in ((f"{src},{dst},0x9999,{nbytes}", "line 2: LID 0x9999 is not one of"),
                         (f"{src},nowhere,{lid},{nbytes}", "line 2: no host 'nowhere'"),
                         (f"{src},{dst},{lid},1", "sends")):
        (tmp_path / "bad.csv").write_text("\n".join([lines[0], bad, *lines[2:]]) + "\n")
        assert main(["compare", *loaded, "--methods", "default", "--split", str(tmp_path / "bad.csv")]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("k,levels", [(4, 2), (2, 4), (4, 3)])
def test_the_neighbourhood_search_takes_the_heuristic_to_the_exact_optimum(tmp_path, k, levels):
    """Random pairs where the switches' cables bind: the rip-up heuristic alone stops up to a
    third above the integer program's optimum; with the search (and without the program) the
    tables reach it, still tables (checked) and above the bound."""
    t = _fabric(tmp_path, k=k, levels=levels, seed=1, host_speed="NDR")
    P = t.num_endpoints
    behind = 0
    for seed in range(3):
        rng = np.random.default_rng(seed)
        pairs = np.unique(rng.integers(0, P, (P, 2)), axis=0)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        d = Demands(pairs[:, 0], pairs[:, 1], rng.integers(1, 4, len(pairs)) << 20)
        best = exact_tables(t, d).time_s
        behind += job_tables(t, d, exact_routes=0, search_rounds=0).time_s > best * (1 + 1e-9)
        made = job_tables(t, d, exact_routes=0)
        assert made.time_s == pytest.approx(best) and made.report.ok and made.report.deadlock_free
        assert made.bound_s <= made.time_s * (1 + 1e-9)
    assert behind >= 1   # the search had something to do
