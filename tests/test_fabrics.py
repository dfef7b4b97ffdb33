"""InfiniBand fabrics (ibnetdiscover, forwarding tables, minhop), Slurm topologies and host lists."""

import re

import numpy as np
import pytest
from conftest import synthetic

from optiq import Demands, from_spec, load_plan, make_plan
from optiq.cli import main
from optiq.errors import PathError, TopologyError, WorkloadError
from optiq.paths import minhop_tables, system_routes
from optiq.topology import compress_hostlist, expand_hostlist, read_ibnetdiscover, read_topology_conf
from optiq.topology.lft import read_forwarding_tables
from optiq.workloads import named_hosts

# -- a hand-built fabric: two leaves under one spine, two parallel cables from leaf L1 ---------
#    L1 (lid 1): ports 1, 2 -> node1, node2; ports 3, 4 -> S ports 1, 2
#    L2 (lid 2): ports 1, 2 -> node3, node4; port 3 -> S port 3
#    S  (lid 3): ports 1, 2 -> L1 ports 3, 4; port 3 -> L2 port 3
#    node1..node4: LIDs 11..14

L1, L2, SP = "S-00000000000000a1", "S-00000000000000a2", "S-00000000000000a3"
HOSTS = {1: "H-00000000000000b1", 2: "H-00000000000000b2", 3: "H-00000000000000b3", 4: "H-00000000000000b4"}


def _host_block(i, leaf, port, leaf_lid, speed="4xEDR", extra=""):
    return (f'Ca\t1 "{HOSTS[i]}"\t\t# "node{i} HCA-1"\n'
            f'[1](b{i}1) \t"{leaf}"[{port}]\t\t# lid {10 + i} lmc 0 "leaf" lid {leaf_lid} {speed}\n{extra}')


FABRIC = f"""#
# Topology file: written by tests/test_fabrics.py
#
vendid=0x2c9
devid=0xc738
switchguid=0xa1(a1)
Switch\t36 "{L1}"\t\t# "leaf one" enhanced port 0 lid 1 lmc 0
[1]\t"{HOSTS[1]}"[1](b11) \t\t# "node1 HCA-1" lid 11 4xEDR
[2]\t"{HOSTS[2]}"[1](b21) \t\t# "node2 HCA-1" lid 12 4xEDR
[3]\t"{SP}"[1]\t\t# "spine" lid 3 4xEDR
[4]\t"{SP}"[2]\t\t# "spine" lid 3 4xEDR

Switch\t36 "{L2}"\t\t# "leaf two" enhanced port 0 lid 2 lmc 0
[1]\t"{HOSTS[3]}"[1](b31) \t\t# "node3 HCA-1" lid 13 4xEDR
[2]\t"{HOSTS[4]}"[1](b41) \t\t# "node4 HCA-1" lid 14 4xEDR
[3]\t"{SP}"[3]\t\t# "spine" lid 3 4xFDR

Switch\t36 "{SP}"\t\t# "spine" enhanced port 0 lid 3 lmc 0
[1]\t"{L1}"[3]\t\t# "leaf one" lid 1 4xEDR
[2]\t"{L1}"[4]\t\t# "leaf one" lid 1 4xEDR
[3]\t"{L2}"[3]\t\t# "leaf two" lid 2 4xFDR

{_host_block(1, L1, 1, 1)}
{_host_block(2, L1, 2, 1)}
{_host_block(3, L2, 1, 2)}
{_host_block(4, L2, 2, 2)}
"""

# ibroute's format; the spine routes node1 through its port 2 (the second parallel cable)
LFTS = """Unicast lids [0x0-0xe] of switch Lid 1 guid 0x00000000000000a1 (leaf one):
  Lid  Out   Destination
       Port     Info
0x0001 000 : (Switch portguid 0x00000000000000a1: 'leaf one')
0x000b 001 : (Channel Adapter portguid 0x00000000000000b1: 'node1 HCA-1')
0x000c 002 : (Channel Adapter portguid 0x00000000000000b2: 'node2 HCA-1')
0x000d 004 : (Channel Adapter portguid 0x00000000000000b3: 'node3 HCA-1')
0x000e 003 : (Channel Adapter portguid 0x00000000000000b4: 'node4 HCA-1')
5 valid lids dumped
Unicast lids [0x0-0xe] of switch Lid 2 guid 0x00000000000000a2 (leaf two):
0x000b 003 : (Channel Adapter portguid 0x00000000000000b1: 'node1 HCA-1')
0x000c 003 : (Channel Adapter portguid 0x00000000000000b2: 'node2 HCA-1')
0x000d 001 : (Channel Adapter portguid 0x00000000000000b3: 'node3 HCA-1')
0x000e 002 : (Channel Adapter portguid 0x00000000000000b4: 'node4 HCA-1')
Unicast lids [0-14] of switch Lid 3 guid 0x00000000000000a3 ('spine'):
0x000b 002 # Channel Adapter portguid 0x00000000000000b1: 'node1 HCA-1'
0x000c 001 # Channel Adapter portguid 0x00000000000000b2: 'node2 HCA-1'
0x000d 003 # Channel Adapter portguid 0x00000000000000b3: 'node3 HCA-1'
0x000e 003 # Channel Adapter portguid 0x00000000000000b4: 'node4 HCA-1'
"""


@pytest.fixture
def fabric_file(tmp_path):
    path = tmp_path / "fabric.txt"
    path.write_text(FABRIC)
    return path


def _route(topology, ps, p):
    """A path as 'node:port' hops by name."""
    out = []
    for e in ps.path(p):
        port = int(topology.fabric.link_port[e])
        out.append(f"{topology.label(int(topology.link_src[e]))}:{port}")
    return out + [topology.label(int(topology.link_dst[ps.path(p)[-1]]))]


def test_hand_built_fabric_reads_as_written(fabric_file):
    t = read_ibnetdiscover(fabric_file)
    assert t.endpoint_names == ["node1", "node2", "node3", "node4"]
    assert t.node_names == [HOSTS[1], HOSTS[2], HOSTS[3], HOSTS[4], L1, L2, SP]
    assert t.num_links == 2 * 7  # 4 host cables, 2 parallel cables, 1 cable to leaf two
    assert len(t.links_between(t.node_named(L1), t.node_named(SP))) == 2
    edr, fdr = 4 * 25e9 / 8, 4 * 13.64e9 / 8
    spine_l2 = t.links_between(t.node_named(SP), t.node_named(L2))
    assert t.capacity[spine_l2].tolist() == [fdr] and sorted(set(t.capacity.tolist())) == [fdr, edr]
    assert t.fabric.endpoint_lid.tolist() == [11, 12, 13, 14]
    assert t.node_named("node3") == 2 and t.node_named(HOSTS[3]) == 2


def test_forwarding_tables_walk_to_the_hand_checked_routes(fabric_file, tmp_path):
    (tmp_path / "lfts.txt").write_text(LFTS)
    t = read_ibnetdiscover(fabric_file, routes=tmp_path / "lfts.txt")
    d = Demands([0, 0, 2, 3], [2, 3, 1, 0], [1, 1, 1, 1])
    ps = system_routes(t, d)
    assert [_route(t, ps, p) for p in range(4)] == [
        ["node1:1", f"{L1}:4", f"{SP}:3", f"{L2}:1", "node3"],
        ["node1:1", f"{L1}:3", f"{SP}:3", f"{L2}:2", "node4"],
        ["node3:1", f"{L2}:3", f"{SP}:1", f"{L1}:2", "node2"],
        ["node4:1", f"{L2}:3", f"{SP}:2", f"{L1}:1", "node1"],
    ]
    assert t.default_routing.startswith("linear forwarding tables from")


def test_minhop_emulation_on_the_hand_built_fabric(fabric_file):
    # OpenSM's order: the CA ports of the switches with most CA ports first (leaf one before leaf
    # two: equal counts, GUIDs 0xa1 < 0xa2 byte-reversed), so LIDs 11, 12, 13, 14, then the
    # switches' own LIDs 1, 2, 3 (port GUIDs byte-reversed), which count no routes. Leaf one:
    # LID 13 port 3, LID 14 port 4 (fewest routes), LIDs 2 and 3 port 3 (counts tied 1-1, the
    # lowest). The spine: LID 11 port 1, LID 12 port 2, LID 1 port 1. Leaf two has one way up.
    t = read_ibnetdiscover(fabric_file)
    assert t.fabric.lid_space.lids.tolist() == [1, 2, 3, 11, 12, 13, 14]
    assert minhop_tables(t).table.tolist() == [[0, 3, 3, 1, 2, 3, 4], [3, 0, 3, 3, 3, 1, 2], [1, 3, 0, 1, 2, 3, 3]]
    assert minhop_tables(t).ports.tolist() == [[1, 2, 3, 4], [3, 3, 1, 2], [1, 2, 3, 3]]
    assert t.default_routing == "OpenSM minhop (emulated)"


def test_minhop_routes_are_minimum_hop_and_balance_a_regular_tree():
    sf = synthetic()
    model = sf.build(4, 3, seed=5)
    t = _read_model(sf, model)
    src, dst = np.nonzero(~np.eye(t.num_endpoints, dtype=bool))
    d = Demands(src, dst, np.ones(src.size, int))
    ps = system_routes(t, d)
    assert (ps.hops == t.pair_hops(src, dst)).all()
    # every leaf spreads the LIDs it sends up evenly over its up ports (least used first)
    tables = minhop_tables(t).ports
    E = t.num_endpoints
    for leaf in range(16):
        remote = np.flatnonzero(np.arange(E) // 4 != _leaf_of(t, leaf))
        counts = np.bincount(tables[leaf, remote], minlength=9)[5:9]
        assert counts.max() - counts.min() <= 1


def _leaf_of(t, leaf_row):
    """The leaf index (host slot // k) of the hosts hung on switch row ``leaf_row``."""
    v = t.num_endpoints + leaf_row
    hosts = [int(t.link_dst[e]) for e in t.links_from(v) if t.link_dst[e] < t.num_endpoints]
    return hosts[0] // 4


def _read_model(sf, model, **write):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        sf.write_ibnetdiscover(model, f"{d}/f.txt", **write)
        return read_ibnetdiscover(f"{d}/f.txt")


@pytest.mark.parametrize("options", [
    dict(k=4, levels=2), dict(k=4, levels=3, seed=1), dict(k=3, levels=3, hosts=20, seed=2, parallel=2),
    dict(k=4, levels=3, seed=3, drop=4, slow=0.3), dict(k=2, levels=4, seed=4, anonymous=True)])
@pytest.mark.parametrize("grouped", [False, True])
def test_reader_gives_back_the_generated_fabric(tmp_path, options, grouped):
    sf = synthetic()
    model = sf.build(**options)
    sf.write_ibnetdiscover(model, tmp_path / "f.txt", grouped=grouped)
    names = None
    if options.get("anonymous"):
        sf.write_names(model, tmp_path / "names.map")
        names = tmp_path / "names.map"
    t = read_ibnetdiscover(tmp_path / "f.txt", names=names)
    got = {(t.node_names[u], int(p), t.node_names[v], c * 8 / 1e9)
           for u, v, p, c in zip(t.link_src.tolist(), t.link_dst.tolist(), t.fabric.link_port, t.capacity)}
    want = {(a, pa, b, gbps) for a, pa, b, pb, gbps in model.cables()}
    assert {g[:3] for g in got} == {w[:3] for w in want}
    assert sorted(g[3] for g in got) == pytest.approx(sorted(w[3] for w in want))
    assert t.endpoint_names == [h.host for h in model.hosts]  # natural order = generator order
    assert t.num_nodes == len(model.hosts) + len(model.switches)


@pytest.mark.parametrize("fmt", ["ibroute", "opensm"])
def test_generated_forwarding_tables_walk_to_the_generator_routes(tmp_path, fmt):
    sf = synthetic()
    model = sf.build(4, 3, seed=7, drop=3, parallel=2)
    sf.write_ibnetdiscover(model, tmp_path / "f.txt")
    sf.write_lfts(model, tmp_path / "l.txt", fmt)
    t = read_ibnetdiscover(tmp_path / "f.txt", routes=tmp_path / "l.txt")
    hosts = model.hosts
    pairs = [(i, j) for i in range(len(hosts)) for j in range(len(hosts)) if i != j]
    d = Demands([i for i, _ in pairs], [j for _, j in pairs], np.ones(len(pairs), int))
    ps = system_routes(t, d)
    dists = {id(h): sf._distances(model, h) for h in hosts}
    for p, (i, j) in enumerate(pairs):
        node, want = hosts[i].cables[1][0], [f"{hosts[i].name}:1"]
        while node is not hosts[j]:
            port = sf.route_port(model, node, hosts[j], dists[id(hosts[j])])
            want.append(f"{node.name}:{port}")
            node = node.cables[port][0]
        got = [f"{t.node_names[int(t.link_src[e])]}:{int(t.fabric.link_port[e])}" for e in ps.path(p)]
        assert got == want


def test_forwarding_table_mistakes_name_switch_and_lid(fabric_file, tmp_path):
    def walk(text):
        (tmp_path / "l.txt").write_text(text)
        t = read_ibnetdiscover(fabric_file, routes=tmp_path / "l.txt")
        return system_routes(t, Demands([0], [2], [1]))

    with pytest.raises(PathError, match=f"switch {SP} \\('spine'\\) has no entry for LID 0x000d \\(host node3\\)"):
        walk(LFTS.replace("0x000d 003 #", "0x000f 003 #"))
    loop = LFTS.replace("0x000d 003 #", "0x000d 001 #")  # the spine sends node3's traffic back to leaf one
    with pytest.raises(PathError, match=r"from node1 to LID 0x000d \(host node3\) loops through switch S-"):
        walk(loop)
    with pytest.raises(PathError, match="sends to port 9, which has no cable, for LID 0x000d"):
        walk(LFTS.replace("0x000d 004 :", "0x000d 009 :"))
    with pytest.raises(PathError, match="reaches host node2 instead .*LID 0x000d"):
        walk(LFTS.replace("0x000d 004 :", "0x000d 002 :"))
    (tmp_path / "bad.txt").write_text(LFTS.replace("guid 0x00000000000000a2", "guid 0x00000000000000ff"))
    with pytest.raises(TopologyError, match=r"line 10: switch 0x00000000000000ff is not in"):
        read_ibnetdiscover(fabric_file, routes=tmp_path / "bad.txt")
    (tmp_path / "bad.txt").write_text("0x0001 001\n" + LFTS)
    with pytest.raises(TopologyError, match="line 1: an entry before any 'Unicast lids"):
        read_ibnetdiscover(fabric_file, routes=tmp_path / "bad.txt")
    (tmp_path / "bad.txt").write_text(LFTS.replace("0x000b 001 :", "0x000b 255 :"))
    with pytest.raises(TopologyError, match=r"line 5: port 255 \(switch ports are 0..254\)"):
        read_ibnetdiscover(fabric_file, routes=tmp_path / "bad.txt")
    (tmp_path / "bad.txt").write_text(LFTS + LFTS.splitlines()[0] + "\n")
    with pytest.raises(TopologyError, match="a second table of switch 0x00000000000000a1"):
        read_ibnetdiscover(fabric_file, routes=tmp_path / "bad.txt")
    with pytest.raises(TopologyError, match="need an InfiniBand fabric"):
        read_forwarding_tables(tmp_path / "bad.txt", from_spec("torus:4x4"))


def _fails(tmp_path, text, pattern, **kwargs):
    path = tmp_path / "broken.txt"
    path.write_text(text)
    with pytest.raises(TopologyError, match=pattern):
        read_ibnetdiscover(path, **kwargs)


def test_every_fabric_mistake_is_one_line_naming_its_line(tmp_path):
    lines = FABRIC.splitlines()
    at = {text: n for n, text in enumerate(lines, 1)}
    port3 = next(n for text, n in at.items() if text.startswith("[3]") and SP in text and "4xEDR" in text)
    _fails(tmp_path, FABRIC.replace('[4]\t"' + SP + '"[2]', '[4]\t"' + SP + '"[2]!'), "not an ibnetdiscover line")
    _fails(tmp_path, '[1]\t"' + L1 + '"[1]\n' + FABRIC, "line 1: a port line before any Switch or Ca block")
    _fails(tmp_path, FABRIC.replace(f'[4]\t"{SP}"[2]', f'[3]\t"{SP}"[2]'), f"line {port3 + 1}: port 3 .* listed again")
    _fails(tmp_path, FABRIC.replace(f'Switch\t36 "{L1}"', f'Switch\t3 "{L1}"'), "port 4 of S-00000000000000a1, which has 3")
    _fails(tmp_path, FABRIC + _host_block(1, L1, 1, 1), "H-00000000000000b1 is declared again")
    _fails(tmp_path, FABRIC.replace(f'[2]\t"{HOSTS[4]}"', '[2]\t"H-00000000000000c9"'),
           "cabled to H-00000000000000c9, which the file never declares")
    _fails(tmp_path, FABRIC.replace(f'[3]\t"{L2}"[3]\t\t# "leaf two" lid 2 4xFDR\n', ""),
           r"listed from one end only: that node's block \(line \d+\) lists no port 3")
    _fails(tmp_path, FABRIC.replace(f'[3]\t"{L2}"[3]', f'[3]\t"{L2}"[2]'), r"but line \d+ says that port goes to S-00000000000000a2\[2\]")
    _fails(tmp_path, FABRIC.replace(f'[4]\t"{SP}"[2]', f'[4]\t"{L1}"[2]'), "cabled to port 2 of its own node")
    _fails(tmp_path, FABRIC.replace("lid 3 4xFDR", "lid 3 4xXDR"), r"unknown link speed 'XDR'.*as XDR=RATE")
    _fails(tmp_path, FABRIC.replace("lid 3 4xFDR", "lid 3 3xFDR"), "unknown link width '3x'")
    _fails(tmp_path, FABRIC.replace("lid 14 lmc", "lid 13 lmc"), "LID 13 is also given on line")
    _fails(tmp_path, FABRIC.replace('Switch\t36 "' + L2, 'Rt\t36 "R-00000000000000a2'), "a router")
    _fails(tmp_path, FABRIC + 'Ca\t1 "H-00000000000000d1"\t\t# "lonely HCA-1"\n', "has no cabled port")
    _fails(tmp_path, "# nothing here\n", "no Switch or Ca blocks")
    # what is handled: a speed given on the spec, or every link's capacity
    t = read_ibnetdiscover(_written(tmp_path, FABRIC.replace("4xFDR", "4xXDR")), lane_rates={"XDR": "200Gb/s"})
    assert t.capacity.max() == 4 * 200e9 / 8
    t = read_ibnetdiscover(_written(tmp_path, FABRIC.replace("4xFDR", "4x???")), bandwidth=1e9)
    assert set(t.capacity.tolist()) == {1e9}


def _written(tmp_path, text):
    path = tmp_path / "fabric2.txt"
    path.write_text(text)
    return path


def test_cables_between_two_speeds_run_at_the_slower(tmp_path):
    text = FABRIC.replace(f'[3]\t"{L2}"[3]\t\t# "leaf two" lid 2 4xFDR', f'[3]\t"{L2}"[3]\t\t# "leaf two" lid 2 1xSDR')
    t = read_ibnetdiscover(_written(tmp_path, text))
    both = t.links_between(t.node_named(SP), t.node_named(L2)) + t.links_between(t.node_named(L2), t.node_named(SP))
    assert t.capacity[both].tolist() == [2e9 / 8, 2e9 / 8]


def test_host_names_from_the_map_the_description_or_the_guid(tmp_path):
    text = FABRIC.replace('"node2 HCA-1"', '"MT4123 ConnectX6 Mellanox Technologies"')
    t = read_ibnetdiscover(_written(tmp_path, text))
    assert t.endpoint_names == [HOSTS[2], "node1", "node3", "node4"]
    (tmp_path / "map").write_text(f'# names\n0x00000000000000b2 "gpu7"\n{HOSTS[1]} login1\n')
    t = read_ibnetdiscover(_written(tmp_path, text), names=tmp_path / "map")
    assert t.endpoint_names == ["gpu7", "login1", "node3", "node4"]
    (tmp_path / "map").write_text('0xb2 "gpu7"\n0x00000000000000B2 "gpu8"\n')
    with pytest.raises(TopologyError, match=r"line 2: GUID 0x00000000000000b2 is named 'gpu8' here and 'gpu7' on line 1"):
        read_ibnetdiscover(fabric_file_of(tmp_path), names=tmp_path / "map")
    (tmp_path / "map").write_text("0xb2\n")
    with pytest.raises(TopologyError, match="line 1: expected '0xGUID"):
        read_ibnetdiscover(fabric_file_of(tmp_path), names=tmp_path / "map")


def fabric_file_of(tmp_path):
    return _written(tmp_path, FABRIC)


def test_a_host_with_two_ports_or_two_adapters_is_one_endpoint(tmp_path):
    # node4 gets a second port on leaf one's port 5; node3 a second adapter on leaf two's port 4
    text = (FABRIC.replace(f'[4]\t"{SP}"[2]\t\t# "spine" lid 3 4xEDR',
                           f'[4]\t"{SP}"[2]\t\t# "spine" lid 3 4xEDR\n[5]\t"{HOSTS[4]}"[2](b42) \t\t# "node4 HCA-1" lid 24 4xEDR')
            .replace('Ca\t1 "' + HOSTS[4] + '"', 'Ca\t2 "' + HOSTS[4] + '"')
            .replace(f'[3]\t"{SP}"[3]\t\t# "spine" lid 3 4xFDR',
                     f'[3]\t"{SP}"[3]\t\t# "spine" lid 3 4xFDR\n[4]\t"H-00000000000000b5"[1](b51) \t\t# "node3 HCA-2" lid 15 4xEDR'))
    text += f'[2](b42) \t"{L1}"[5]\t\t# lid 24 lmc 0 "leaf" lid 1 4xEDR\n'
    text += ('Ca\t1 "H-00000000000000b5"\t\t# "node3 HCA-2"\n'
             f'[1](b51) \t"{L2}"[4]\t\t# lid 15 lmc 0 "leaf" lid 2 4xEDR\n')
    t = read_ibnetdiscover(_written(tmp_path, text))
    assert t.num_endpoints == 4 and "(5 adapters)" in t.name
    node3, node4 = t.node_named("node3"), t.node_named("node4")
    assert len(t.links_from(node3)) == 2 and len(t.links_from(node4)) == 2
    assert t.fabric.endpoint_lid[node4] == 14  # routes arrive at the first port
    ps = system_routes(t, Demands([node4], [node3], [1]))
    assert t.link_src[ps.path(0)[0]] == node4 and int(t.fabric.link_port[ps.path(0)[0]]) == 1


def test_fabric_spec_round_trips_through_a_plan_file(tmp_path, monkeypatch):
    sf = synthetic()
    model = sf.build(4, 2, seed=1)
    sf.write_ibnetdiscover(model, tmp_path / "f.txt")
    sf.write_lfts(model, tmp_path / "l.txt")
    monkeypatch.chdir(tmp_path)
    t = from_spec("ibnet:f.txt,routes=l.txt")
    assert t.spec == f"ibnet:{tmp_path / 'f.txt'},routes={tmp_path / 'l.txt'}"
    d = Demands([0, 1], [9, 12], [2**20, 2**20])
    plan = make_plan(t, d, "default")
    plan.save(tmp_path / "p.json")
    monkeypatch.chdir("/")
    again = load_plan(tmp_path / "p.json")
    assert again.topology.default_routing == t.default_routing
    assert np.array_equal(system_routes(again.topology, d).links, plan.paths.links)
    assert again.topology.endpoint_names == t.endpoint_names


# -- Slurm ------------------------------------------------------------------------------------

def test_slurm_topology_conf(tmp_path):
    conf = tmp_path / "topology.conf"
    conf.write_text("# a two-level cluster\nSwitchName=leaf0 Nodes=node[01-04]\n"
                    "SwitchName=leaf1 Nodes=node[05-08],gpu[1-2]   LinkSpeed=100\n"
                    "switchname=spine switches=leaf[0-1]\nSwitchName=spine2 Switches=leaf[0-1]\n")
    t = read_topology_conf(conf, bandwidth=12.5e9)
    assert t.endpoint_names == ["gpu1", "gpu2"] + [f"node{i:02d}" for i in range(1, 9)]
    assert t.node_names[10:] == ["leaf0", "leaf1", "spine", "spine2"]
    assert t.num_links == 2 * (10 + 4)
    assert t.default_routing == "D-mod-K"
    ps = system_routes(t, Demands([t.node_named("node01")], [t.node_named("gpu2")], [1]))
    assert [t.label(v) for v in ps.nodes(0, t)] in (["node01", "leaf0", s, "leaf1", "gpu2"] for s in ("spine", "spine2"))
    spec = from_spec(f"slurm:{conf},bw=12.5GB/s")
    assert spec.capacity.tolist() == t.capacity.tolist()
    for text, pattern in [("SwitchName=a Nodes=n[1-2]\nSwitchName=a Nodes=n3\n", "line 2: switch 'a' is defined again"),
                          ("SwitchName=a Nodes=n[1-2] Speed=4\n", "line 1: unknown parameter 'Speed=4'"),
                          ("Nodes=n[1-2]\n", "line 1: a line without SwitchName="),
                          ("SwitchName=a Switches=b\nSwitchName=c Nodes=n[1-2]\n", "line 1: switch 'a' lists 'b'"),
                          ("SwitchName=a Switches=a Nodes=n[1-2]\n", "lists itself"),
                          ("SwitchName=a Nodes=n[1-2,a]\n", "line 1: host list"),
                          ("BlockName=b1 Nodes=n[1-4]\n", "block plugin"),
                          ("SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n[3-4]\n", "disconnected"),
                          ("SwitchName=a Nodes=a,n1\n", "names both a switch")]:
        conf.write_text(text)
        with pytest.raises(TopologyError, match=pattern):
            read_topology_conf(conf)


# -- host lists -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, names", [
    ("node[001-003,010]", ["node001", "node002", "node003", "node010"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("n[7]", ["n7"]),
    ("a[1-2]b[1,3]", ["a1b1", "a1b3", "a2b1", "a2b3"]),
    ("r1-[1-2]-ib,login", ["r1-1-ib", "r1-2-ib", "login"]),
    ("n[1-2],gpu[1-2],n3", ["n1", "n2", "gpu1", "gpu2", "n3"]),
    (" n1 , n2 ", ["n1", "n2"]),
])
def test_host_list_expansion(text, names):
    assert expand_hostlist(text) == names
    assert expand_hostlist(compress_hostlist(names)) == names


@pytest.mark.parametrize("text, pattern", [
    ("", "empty"), ("n[1-3", "never closed"), ("n1]", "without '\\['"), ("n[[1]]", "inside brackets"),
    ("n[3-1]", "runs backwards"), ("n[a-b]", "numbers and ranges"), ("n[]", "empty brackets"),
    ("n1,,n2", "empty item"), ("n[1-3],", "empty item"), ("n[0-99999999]", "more than"),
])
def test_host_list_mistakes(text, pattern):
    with pytest.raises(TopologyError, match=pattern):
        expand_hostlist(text)


def test_host_selection_by_name(tmp_path):
    t = from_spec("torus:4x4")
    assert named_hosts(t, "H[3-5],H0").tolist() == [3, 4, 5, 0]
    (tmp_path / "hosts").write_text("# allocation\nH[1-2]\nH7  # the last\n")
    assert named_hosts(t, f"@{tmp_path / 'hosts'}").tolist() == [1, 2, 7]
    with pytest.raises(TopologyError, match="no node or host named 'H16'"):
        named_hosts(t, "H[15-16]")
    with pytest.raises(WorkloadError, match="'H3' is listed twice"):
        named_hosts(t, "H[1-3],H3")
    with pytest.raises(TopologyError, match="'S0' is not a host .* it names a switch"):
        named_hosts(from_spec("cluster:hosts=4,edges=2,cores=1"), "H0,S0")


def test_an_unknown_host_suggests_the_same_number_in_the_fabrics_padding_first(tmp_path):
    sf = synthetic()
    sf.write_ibnetdiscover(sf.build(4, 3, seed=2), tmp_path / "f.txt")
    fabric = from_spec(f"ibnet:{tmp_path / 'f.txt'}")
    assert fabric.endpoint_names[:2] == ["node001", "node002"]  # padded as a cluster pads them
    with pytest.raises(TopologyError) as info:
        named_hosts(fabric, "node[00001-00002]")
    message = str(info.value)
    assert message.startswith("host list 'node[00001-00002]': ") and "--hosts" not in message  # the API's words
    assert "no node or host named 'node00001' (did you mean node001," in message


def _cli(capsys, *argv):
    code = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_a_fabric_by_host_list_from_the_command_line(tmp_path, capsys):
    sf = synthetic()
    model = sf.build(4, 3, seed=2)
    sf.write_ibnetdiscover(model, tmp_path / "f.txt")
    sf.write_lfts(model, tmp_path / "l.txt")
    code, out, err = _cli(capsys, "plan", "-t", f"ibnet:{tmp_path / 'f.txt'}", "--routes", tmp_path / "l.txt",
                          "--hosts", "node[001-032]", "--pattern", "disjoint", "--sources", 4, "--ratio", 4,
                          "-m", "heu2", "-o", tmp_path / "p.json")
    assert code == 0, err
    assert "default routes: linear forwarding tables from" in err and "--hosts: 32 of 64 hosts" in err
    plan = load_plan(tmp_path / "p.json")
    names = plan.topology.endpoint_names
    assert {names[s] for s in plan.demands.src} == {f"node{i:03d}" for i in range(1, 5)}
    assert {names[s] for s in plan.demands.dst} == {f"node{i:03d}" for i in range(17, 33)}
    code, out, err = _cli(capsys, "eval", tmp_path / "p.json", "--links", 2, "--jobs", 2)
    assert code == 0 and "/default" in out and re.search(r"node\d{3}\s+node\d{3}", out)
    assert "default routes: linear forwarding tables" in out


@pytest.mark.parametrize("argv, message", [
    (["-t", "torus:4x4", "--routes", "x.txt", "--pattern", "disjoint"], "a tables file applies to InfiniBand fabrics"),
    (["-t", "torus:4x4", "--hosts", "H[1-20]", "--pattern", "disjoint"], "no node or host named 'H16'"),
    (["-t", "torus:4x4", "--pattern", "overlap"], "overlap: needs at least 2 sources"),
    (["-t", "torus:8x4", "--hosts", "H[0-15]", "--pattern", "overlap"], "overlap: needs at least 2 sources"),
    (["-t", "ibnet:/no/such/file", "--pattern", "disjoint"], "fabric file '/no/such/file' does not exist"),
    (["-t", "dragonfly:p=2,a=4", "--pattern", "disjoint"], "dragonfly needs p=, a= and h="),
])
def test_fabric_and_host_mistakes_are_one_line(tmp_path, capsys, argv, message):
    code, out, err = _cli(capsys, "plan", *argv, "-m", "default", "-o", tmp_path / "p.json")
    assert code == 1 and err.count("optiq: error:") == 1 and message in err and "Traceback" not in err


def test_placement_file_names_hosts(tmp_path, capsys):
    (tmp_path / "traffic.csv").write_text("src_rank,dst_rank,bytes\n0,1,1000\n1,2,1000\n2,0,1000\n")
    (tmp_path / "place.txt").write_text("0 H5\n1 H9\n2 H14\n")
    code, out, err = _cli(capsys, "plan", "-t", "torus:4x4", "--traffic", tmp_path / "traffic.csv", "--placement",
                          tmp_path / "place.txt", "-m", "default", "-o", tmp_path / "p.json")
    assert code == 0, err
    plan = load_plan(tmp_path / "p.json")
    assert sorted(zip(plan.demands.src.tolist(), plan.demands.dst.tolist())) == [(5, 9), (9, 14), (14, 5)]
    code, out, err = _cli(capsys, "plan", "-t", "torus:4x4", "--traffic", tmp_path / "traffic.csv", "--placement",
                          tmp_path / "place.txt", "--hosts", "H[0-8]", "-m", "default", "-o", tmp_path / "p.json")
    assert code == 1 and "puts rank 1 on H9, which is not in the host list" in err
    (tmp_path / "place.txt").write_text("0 H5\n1 nowhere\n2 H14\n")
    code, out, err = _cli(capsys, "plan", "-t", "torus:4x4", "--traffic", tmp_path / "traffic.csv", "--placement",
                          tmp_path / "place.txt", "-m", "default", "-o", tmp_path / "p.json")
    assert code == 1 and "line 2: no host named 'nowhere'" in err


@pytest.mark.mpi
def test_the_executor_reloads_a_fabric_plan_and_replays_it_byte_exact(tmp_path):
    import json

    from conftest import launch

    sf = synthetic()
    model = sf.build(2, 2, seed=3, parallel=2)  # 4 hosts, 4 switches, parallel cables on top
    sf.write_ibnetdiscover(model, tmp_path / "f.txt")
    sf.write_lfts(model, tmp_path / "l.txt")
    t = from_spec(f"ibnet:{tmp_path / 'f.txt'},routes={tmp_path / 'l.txt'}")
    d = Demands([0, 1, 2, 3], [2, 3, 0, 1], [300_000, 200_000, 100_000, 250_000])
    plan = make_plan(t, d, "opt")
    plan.save(tmp_path / "p.json")
    out = tmp_path / "out.json"
    proc, _ = launch(4, "-m", "optiq.runtime", tmp_path / "p.json", "--verify", "--json", out, "--repeat", 1)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["verified"] is True


def test_routes_kept_for_a_fabric_are_dropped_when_its_tables_change():
    from dataclasses import replace

    from optiq.paths import network_routes, system

    sf = synthetic()
    t = _read_model(sf, sf.build(4, 2, seed=1))
    first = network_routes(t, [0], [3])
    kept = system._MEMO[t]
    t.fabric = replace(t.fabric)  # other tables (the same, here): the routes kept are not theirs
    again = network_routes(t, [0], [3])
    assert system._MEMO[t] is not kept and system._MEMO[t].fabric is t.fabric
    assert again.path(0).tolist() == first.path(0).tolist()
