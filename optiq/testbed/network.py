"""A topology made real: namespaces, veth cables with rate limits and queues, and kernel routes.

:class:`Testbed` builds the network :class:`~optiq.testbed.layout.Layout` describes, installs
a :class:`~optiq.testbed.forwarding.Forwarding` (the network's own routes by default), reads
every hop back from the kernel, and counts what every link sent and dropped. It is a
context manager that always removes what it made; a run killed outright leaves namespaces
that :func:`sweep` (``optiq testbed down``) removes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import TestbedError
from .conditions import Conditions
from .forwarding import Forwarding, check_readback, readback_queries
from .layout import DATA_DEVICE, MANAGEMENT_BRIDGE, MANAGEMENT_DEVICE, Layout, check_name
from .system import (
    PREFIX,
    check_privileges,
    delete_namespaces,
    each,
    find_testbeds,
    in_namespace,
    ip_batch,
    run,
    tc_batch,
)

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["Testbed", "Counters", "DEFAULT_QUEUE", "DEFAULT_MTU", "sweep", "state_root", "SweepResult",
           "default_tcp_window"]

#: Bytes a link's queue holds before it drops (tail drop) by default: deep enough that TCP
#: seldom loses a packet, as on a lossless fabric (InfiniBand's credits hold a packet back
#: instead of dropping it); a loss stalls a flow, and a plan whose busiest links are all full
#: cannot make up for the stall. A smaller queue shows incast.
DEFAULT_QUEUE = 4 * 2**20
#: The largest IP packet a link carries by default (bytes): Ethernet's.
DEFAULT_MTU = 1500
#: The bytes of a frame's link header beside its IP packet (Ethernet's).
LINK_HEADER = 14
#: The MTUs a testbed accepts: IPv4's least that every host must take, and a veth's largest.
MTU_RANGE = (576, 65535)
#: Link time the token bucket of a link may save up (its burst), at least :data:`MIN_BURST`.
BURST_S = 1e-3
#: The least burst (bytes): four frames of the default MTU. A larger MTU's bucket holds two of
#: its frames where they are more, and these bytes where they are not, so that a link which
#: stood idle runs no further ahead of its rate with larger packets than it must.
MIN_BURST = 4 * (DEFAULT_MTU + LINK_HEADER)
#: The kernel settings of every namespace: routers forward, and routes may be asymmetric; a
#: connection idle between two exchanges keeps its window (``tcp_slow_start_after_idle=0``), as
#: a fabric's credits do, instead of probing the links again from ten packets: every leg of a
#: forwarded path is a connection of its own that slow start would hold back at every call
#: (``benchmarks/RESULTS.md``, "The testbed's chunks, its connections, ...").
SYSCTLS = ("net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
           "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.default.send_redirects=0",
           "net.ipv4.conf.all.accept_redirects=0", "net.ipv4.conf.default.accept_redirects=0",
           "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
           "net.ipv4.tcp_slow_start_after_idle=0")


def default_tcp_window(queue: int) -> int:
    """The most a TCP connection may have in flight by default: a quarter of a link's queue, at
    least 64 KiB. A loss-based TCP grows its window until a queue overflows, so flows starting
    together on one link lose packets and wait for retransmissions; with this ceiling, four
    connections meeting on one link fill its queue without a loss, as on the lossless network
    the testbed stands for. A much smaller ceiling would hold connections back where queues
    are long (the measurements behind the choice: ``benchmarks/RESULTS.md``, testbed).

    Examples
    --------
    >>> default_tcp_window(4 * 2**20), default_tcp_window(100_000)
    (1048576, 65536)
    """
    return max(65536, int(queue) // 4)


def state_root() -> Path:
    """Where testbeds keep their state (owner, launcher, control files): a directory per testbed."""
    return Path(tempfile.gettempdir()) / "optiq-testbed"


#: The header fields an ECMP testbed hashes: source and destination address, protocol, source
#: and destination port (``fib_multipath_hash_fields`` bits 0, 1, 2, 4, 5).
ECMP_FIELDS = 0x37
#: Where the kernel takes the seed of its multipath hash (absent before Linux 6.11: a random one).
ECMP_SEED_SYSCTL = Path("/proc/sys/net/ipv4/fib_multipath_hash_seed")


@dataclass(frozen=True)
class Counters:
    """What every link's sending interface counted: bytes sent and packets dropped by its queue.

    Subtract two readings for what happened between them.
    """

    bytes: np.ndarray
    drops: np.ndarray
    at: float

    def __sub__(self, earlier: Counters) -> Counters:
        return Counters(self.bytes - earlier.bytes, self.drops - earlier.drops, self.at - earlier.at)


class Testbed:
    """A network of namespaces built from ``topology`` (module docstring).

    Parameters
    ----------
    topology : Topology
        Its hosts become host namespaces (endpoint ``i``: ``<name>-h<i>``, MPI rank ``i``),
        its other nodes switches, every pair of opposite links a cable.
    rate : float
        Bytes/s of the fastest link; every other link in proportion to its capacity.
    queue : int
        Bytes every link direction queues before it drops.
    name : str, optional
        The testbed's name (``optiq-`` and letters or digits); default ``optiq-<pid>``.
    offloads : bool
        Keep the interfaces' segmentation offloads (default off, so every packet is link sized:
        needs ``ethtool``).
    mtu : int
        The largest IP packet of every data link (bytes; default Ethernet's 1500). A fabric's
        own is often larger (InfiniBand's frames carry 4096 bytes, a data centre's Ethernet
        9000): fewer, larger packets, and the emulating host forwards more link rate.
    congestion : str
        TCP congestion control of every namespace (one the host allows, e.g. ``reno``, ``bbr``).
    tcp_window : int, optional
        The most a TCP connection may have in flight (its receive window's ceiling, bytes);
        default :func:`default_tcp_window` of ``queue``.
    conditions : Conditions, optional
        Random loss on every link direction and cables at a fraction of their rate
        (:mod:`optiq.testbed.conditions`); default a healthy network.
    progress : callable, optional
        Receives a line for every step of the build.

    Raises
    ------
    TestbedError
        If namespaces cannot be made here, the name is taken or bad, or the topology cannot be
        cabled (:meth:`Layout.of`).

    Examples
    --------
    Needs root (skipped in the doctests)::

        with Testbed(from_spec("fattree:k=4,n=2"), rate=2.5e6) as bed:
            bed.verify()            # every pair's route, hop by hop, as the kernel has it
            print(bed.counters().bytes)
    """

    __test__ = False  # not a test class, whatever its name

    def __init__(self, topology: Topology, *, rate: float, queue: int = DEFAULT_QUEUE, name: str | None = None,
                 offloads: bool = False, congestion: str = "reno", tcp_window: int | None = None,
                 conditions: Conditions | None = None, mtu: int = DEFAULT_MTU,
                 progress: Callable[[str], None] | None = None) -> None:
        if not rate > 0:
            raise TestbedError(f"the link rate must be positive, got {rate}")
        if not MTU_RANGE[0] <= int(mtu) <= MTU_RANGE[1]:
            raise TestbedError(f"an MTU of {mtu} B is out of range: {MTU_RANGE[0]} to {MTU_RANGE[1]} bytes")
        self.mtu = int(mtu)
        frame = self.frame
        if int(queue) < frame:
            raise TestbedError(f"a link queue of {queue} B cannot hold one {frame} B frame")
        self.layout = Layout.of(topology, check_name(name or f"{PREFIX}{os.getpid()}"))
        self.topology = topology
        self.rate, self.queue, self.offloads, self.congestion = float(rate), int(queue), offloads, congestion
        self.tcp_window = default_tcp_window(self.queue) if tcp_window is None else int(tcp_window)
        if self.tcp_window < 4 * frame:
            raise TestbedError(f"a TCP window of {self.tcp_window} B holds fewer than 4 frames")
        self.conditions = conditions or Conditions()
        self.say = progress or (lambda message: None)
        self.installed: Forwarding | None = None
        self.armed: dict[int, tuple[subprocess.Popen[str], Path]] = {}  # nodes ready to fail links: nft -i, its log
        self.state = state_root() / self.layout.name
        self.built = False
        self.build_s = 0.0

    @property
    def name(self) -> str:
        return self.layout.name

    @property
    def frame(self) -> int:
        """Bytes of a full-size frame on the data links: the MTU and the link header."""
        return self.mtu + LINK_HEADER

    def __repr__(self) -> str:
        t = self.topology
        return (f"Testbed({self.name!r}, {t.name}, {t.num_endpoints} hosts, {t.num_nodes - t.num_endpoints} switches, "
                f"{t.num_links // 2} cables at {self.rate * 8 / 1e6:.4g} Mbit/s, queue {self.queue:,} B, "
                f"MTU {self.mtu}, TCP {self.congestion})")

    # -- lifetime ---------------------------------------------------------------------------
    def __enter__(self) -> Testbed:
        try:
            self.build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def build(self) -> None:
        """Make the namespaces, cables, queues and the network's own routes, and read them back.

        Raises
        ------
        TestbedError
            If a step fails (naming it), or a route read back is not the network's.
        """
        check_privileges()
        allowed = _allowed_congestion()
        if allowed is not None and self.congestion not in allowed:
            raise TestbedError(f"TCP congestion control {self.congestion!r} is not allowed here (the host allows "
                               f"{', '.join(allowed)}: net.ipv4.tcp_allowed_congestion_control)")
        if self.conditions.loss_percent and _nft() is None:
            raise TestbedError("random loss (--loss) is drawn by nftables: apt-get install nftables")
        if self.conditions.fail and _nft() is None:
            raise TestbedError("failed cables (--fail) drop their packets by nftables: apt-get install nftables")
        if self.offloads is False and shutil.which("ethtool") is None:
            raise TestbedError("the testbed turns segmentation offloads off (packets the size of a link's frames) "
                               "with ethtool: apt-get install ethtool, or keep them (offloads=True, --offloads)")
        taken = find_testbeds().get(self.name)
        if taken:
            raise TestbedError(f"testbed {self.name} exists ({len(taken)} namespaces): remove it with optiq testbed "
                               f"down {self.name}, or choose another name")
        start = time.perf_counter()
        self._claim()
        lay, t = self.layout, self.topology
        self.built = True
        self.say(f"testbed {self.name}: {t.num_endpoints} hosts, {t.num_nodes - t.num_endpoints} switches, "
                 f"{t.num_links // 2} cables; making namespaces")
        ip_batch(None, [f"netns add {ns}" for ns in [*lay.namespaces, lay.control]], what="making namespaces")
        each(self._settings, lay.namespaces)
        self.say(f"cables ({t.num_links // 2} data, {t.num_endpoints} management)")
        ip_batch(None, self._cable_lines(), what="making cables")
        fwd = Forwarding.network(lay)
        self.say(f"addresses, queues at {self.rate * 8 / 1e6:.4g} Mbit/s (fastest link) with {self.queue:,} B each, "
                 f"and the network's routes ({t.default_routing})")
        each(lambda node: self._configure(node, fwd), range(t.num_nodes))
        self._configure_control()
        self.installed = fwd
        self.verify()
        self.build_s = time.perf_counter() - start
        self.say(f"testbed {self.name} up in {self.build_s:.1f} s")

    def close(self) -> None:
        """Remove every namespace of this testbed (and its processes) and its state; safe to repeat."""
        if not self.built:
            return
        # a second Ctrl-C must not leave half the network behind
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
        try:
            for session, _ in self.armed.values():
                session.kill()
                session.wait()
            names = find_testbeds().get(self.name, [])
            delete_namespaces(names)
            shutil.rmtree(self.state, ignore_errors=True)
            self.built = False
            self.installed = None
            self.armed = {}
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def _claim(self) -> None:
        """The state directory, with the owner's process id (``sweep`` leaves a live owner's testbed)."""
        self.state.mkdir(parents=True, exist_ok=True)
        (self.state / "owner").write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")

    # -- building ---------------------------------------------------------------------------
    def _settings(self, namespace: str) -> None:
        # a receive buffer that starts at the window's ceiling: one that starts at the kernel's
        # default and grows with what the application reads holds a message of about that size
        # back for window updates (benchmarks/testbed_pairs.py times it)
        tcp = [f"net.ipv4.tcp_congestion_control={self.congestion}",
               f"net.ipv4.tcp_rmem=4096 {self.tcp_window} {self.tcp_window}"]
        in_namespace(namespace, ["sysctl", "-qw", *SYSCTLS, *tcp, *self.ecmp_settings()],
                     what=f"kernel settings of {namespace}")

    def ecmp_settings(self) -> list[str]:
        """ECMP (the topology's ``ecmp_seed``): hash each flow by its addresses, protocol and ports,
        with the topology's seed where the kernel takes one (``fib_multipath_hash_seed``, Linux 6.11).

        The fields are given (policy 3, ``fib_multipath_hash_fields``) rather than layer 4 (policy
        1): policy 1 takes a forwarded packet's own hash where it has one, and a TCP packet carries
        its socket's random hash across the emulated cables (which TCP draws again after a
        timeout), so neither ``ip route get`` nor anything else could say which path a flow took."""
        seed = self.topology.ecmp_seed
        if seed is None:
            return []
        out = ["net.ipv4.fib_multipath_hash_policy=3", f"net.ipv4.fib_multipath_hash_fields={ECMP_FIELDS:#x}"]
        if ECMP_SEED_SYSCTL.exists():
            out.append(f"net.ipv4.fib_multipath_hash_seed={seed}")
        return out

    def _cable_lines(self) -> list[str]:
        lay, t = self.layout, self.topology
        lines = []
        for e in np.flatnonzero(np.arange(t.num_links) < lay.peer).tolist():  # each cable once
            r = int(lay.peer[e])
            lines.append(f"link add {lay.interface(e)} netns {lay.namespaces[t.link_src[e]]} address {lay.mac(e)} "
                         f"type veth peer name {lay.interface(r)} netns {lay.namespaces[t.link_src[r]]} "
                         f"address {lay.mac(r)}")
        for h in range(t.num_endpoints):
            lines.append(f"link add {MANAGEMENT_DEVICE} netns {lay.namespaces[h]} type veth peer name m{h} "
                         f"netns {lay.control}")
        return lines

    def _configure(self, node: int, fwd: Forwarding) -> None:
        lay, t = self.layout, self.topology
        ns = lay.namespaces[node]
        links = t.links_from(node).tolist()
        lines = ["link set lo up", f"link add {DATA_DEVICE} type bridge", f"link set {DATA_DEVICE} up",
                 f"address add {lay.address(node)}/32 dev {DATA_DEVICE}"]
        for e in links:
            lines.append(f"link set {lay.interface(e)} mtu {self.mtu} up")
            lines.append(f"neighbour replace {lay.address(int(t.link_dst[e]))} lladdr {lay.mac(int(lay.peer[e]))} "
                         f"dev {lay.interface(e)} nud permanent")
        if node < t.num_endpoints:
            lines += [f"address add {lay.management_address(node)}/12 dev {MANAGEMENT_DEVICE}",
                      f"link set {MANAGEMENT_DEVICE} up"]
        lines += fwd.port_table_lines(node)
        lines += fwd.route_lines(node)
        lines += [fwd.rule_line("add", s, d, e) for s, d, e in sorted(fwd.rule_keys().get(node, ()))]
        ip_batch(ns, lines, what=f"configuring {ns}")
        rates = lay.link_rates(self.rate) * self.conditions.rate_factors(t)
        least = max(MIN_BURST, 2 * self.frame)
        lines = [f"qdisc replace dev {lay.interface(e)} root handle 1: tbf rate {max(8, round(rates[e] * 8))}bit "
                 f"burst {max(least, int(rates[e] * BURST_S))} limit {self.queue}" for e in links]
        tc_batch(ns, lines, what=f"queues of {ns}")
        if self.conditions.loss_percent and links:  # every link direction drops at random, before its queue
            run(["ip", "netns", "exec", ns, _nft() or "nft", "-f", "-"], input=_loss_rules([lay.interface(e) for e in links],
                self.conditions.loss_percent), what=f"random loss in {ns} (nftables)")
        if not self.offloads and links:
            script = "; ".join(f"ethtool -K {lay.interface(e)} tso off gso off gro off 2>/dev/null || "
                               f"ethtool -K {lay.interface(e)} gso off gro off" for e in links)
            in_namespace(ns, ["sh", "-ec", script], what=f"offloads of {ns}")

    def _configure_control(self) -> None:
        lay, t = self.layout, self.topology
        lines = ["link set lo up", f"link add {MANAGEMENT_BRIDGE} type bridge",
                 f"address add {lay.control_address}/12 dev {MANAGEMENT_BRIDGE}", f"link set {MANAGEMENT_BRIDGE} up"]
        lines += [f"link set m{h} master {MANAGEMENT_BRIDGE} up" for h in range(t.num_endpoints)]
        ip_batch(lay.control, lines, what="the management network")

    # -- routes -----------------------------------------------------------------------------
    def install(self, fwd: Forwarding, *, verify: bool = True) -> None:
        """Make the kernel route as ``fwd`` says: changed table entries replaced, rules added and
        removed, namespaces that did not change left alone; then read every hop back.

        Raises
        ------
        TestbedError
            If a command fails, or a hop read back is not ``fwd``'s (naming the pair).
        """
        old = self.installed
        if old is None:
            raise TestbedError(f"testbed {self.name} is not built")
        old_rules, new_rules = old.rule_keys(), fwd.rule_keys()
        changed = np.flatnonzero((old.table != fwd.table).any(axis=1)).tolist()
        nodes = sorted(set(changed) | set(old_rules) | set(new_rules))

        def apply(node: int) -> None:
            lines = []
            before, after = old_rules.get(node, set()), new_rules.get(node, set())
            lines += [old.rule_line("del", *key) for key in sorted(before - after)]
            differ = np.flatnonzero(old.table[node] != fwd.table[node])
            lines += fwd.route_lines(node, differ)
            lines += [fwd.rule_line("add", *key) for key in sorted(after - before)]
            ip_batch(self.layout.namespaces[node], lines, what=f"routes of {self.layout.namespaces[node]}")

        each(apply, nodes)
        self.installed = fwd
        if verify:
            self.verify()

    def verify(self) -> None:
        """Ask every node's kernel for every hop of every host pair's route through it.

        Raises
        ------
        TestbedError
            Naming the first pair whose hop differs from the installed forwarding.
        """
        fwd = self.installed
        if fwd is None:
            raise TestbedError(f"testbed {self.name} is not built")
        hops = fwd.hops()
        nodes = np.unique(hops[0]).tolist()

        def ask(node: int) -> str:
            lines, expected = readback_queries(fwd, node, hops)
            out = ip_batch(self.layout.namespaces[node], lines, force=True, json_out=True)
            answers = [a for line in out.splitlines() if line.strip() for a in json.loads(line)]
            return check_readback(fwd, node, answers, expected)

        problems = [p for p in each(ask, nodes) if p]
        if problems:
            raise TestbedError(f"the kernel does not route as installed: {problems[0]}"
                               + (f" ({len(problems) - 1} more nodes differ)" if len(problems) > 1 else ""))

    # -- faults -----------------------------------------------------------------------------
    def arm(self, links: np.ndarray) -> None:
        """Get ready to fail ``links`` at once (:meth:`fail`): an empty nftables table on each of
        their interfaces' egress, and an ``nft -i`` session in each namespace that holds one, so
        that failing them later costs a line written, not a process started (which on a busy
        machine takes longer than a short round)."""
        t = self.topology
        nft = _nft()
        if nft is None:
            raise TestbedError("failed cables (--fail) drop their packets by nftables: apt-get install nftables")
        self.mend()
        by_node: dict[int, list[str]] = {}
        for e in np.asarray(links, dtype=np.int64).tolist():
            by_node.setdefault(int(t.link_src[e]), []).append(self.layout.interface(e))
        for node, devices in sorted(by_node.items()):
            log = self.state / f"nft.{node}"
            with open(log, "w") as out:
                session = subprocess.Popen(["ip", "netns", "exec", self.layout.namespaces[node], nft, "-i"],
                                           stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, text=True)
            self.armed[node] = (session, log)
            self._tell(node, _dead_table(devices))

    def fail(self, links: np.ndarray) -> None:
        """Make ``links`` (armed by :meth:`arm`) carry nothing from now on: every packet leaving by
        them is dropped, as a switch drops what its tables route into a dead port; the kernel's
        routes stay as they are. :meth:`mend` undoes it."""
        t = self.topology
        for e in np.asarray(links, dtype=np.int64).tolist():
            node = int(t.link_src[e])
            if node not in self.armed:
                raise TestbedError(f"link {t.link_label(e)} was not armed to fail")
            self._tell(node, f"add rule netdev {DEAD_TABLE} {self.layout.interface(e)} counter drop\n")

    def mend(self) -> None:
        """Undo :meth:`arm` and :meth:`fail`: the dead links carry packets again.

        Raises
        ------
        TestbedError
            If nftables refused a command meanwhile (its words).
        """
        armed, self.armed = self.armed, {}
        problems = []
        for node, (session, log) in armed.items():
            try:
                if session.stdin is None or session.poll() is not None:
                    raise OSError("the session ended")  # a host's: ended with the MPI job's processes
                session.stdin.write(f"delete table netdev {DEAD_TABLE}\n")
                session.stdin.close()
                session.wait(timeout=10)
                said = [line for line in log.read_text(errors="replace").splitlines() if "rror" in line]
                if said:
                    problems.append(f"{self.layout.namespaces[node]}: {said[0]}")
            except (OSError, subprocess.TimeoutExpired):
                session.kill()
                session.wait()
                run(["ip", "netns", "exec", self.layout.namespaces[node], _nft() or "nft", "-f", "-"],
                    input=f"add table netdev {DEAD_TABLE}\ndelete table netdev {DEAD_TABLE}\n",  # there or not
                    what=f"mending cables in {self.layout.namespaces[node]}")
        if problems:
            raise TestbedError(f"nftables refused to fail or mend a cable in {problems[0]}")

    def _tell(self, node: int, text: str) -> None:
        session = self.armed[node][0]
        assert session.stdin is not None
        session.stdin.write(text)
        session.stdin.flush()

    # -- measuring ---------------------------------------------------------------------------
    def counters(self) -> Counters:
        """Bytes sent and packets dropped so far by every link's queue (``tc -s qdisc``)."""
        lay, t = self.layout, self.topology
        nbytes = np.zeros(t.num_links, dtype=np.int64)
        drops = np.zeros(t.num_links, dtype=np.int64)
        at = time.perf_counter()

        def read(node: int) -> list[dict[str, Any]]:
            out = run(["tc", "-n", lay.namespaces[node], "-s", "-j", "qdisc", "show"], what="tc -s qdisc").stdout
            return json.loads(out) if out.strip() else []

        for node, qdiscs in enumerate(each(read, range(t.num_nodes))):
            by_dev = {q.get("dev"): q for q in qdiscs if q.get("root")}
            for e in t.links_from(node).tolist():
                q = by_dev.get(lay.interface(e))
                if q is None:
                    raise TestbedError(f"link {t.link_label(e)} has no queue in {lay.namespaces[node]}")
                nbytes[e], drops[e] = int(q.get("bytes", 0)), int(q.get("drops", 0))
        return Counters(nbytes, drops, at)


@dataclass(frozen=True)
class SweepResult:
    """What :func:`sweep` removed and what it left because its owner still runs."""

    removed: dict[str, int]
    in_use: dict[str, tuple[int, int]]

    def __str__(self) -> str:
        if not self.removed and not self.in_use:
            return "no testbed namespaces here"
        parts = [f"removed {name} ({n} namespaces)" for name, n in sorted(self.removed.items())]
        parts += [f"left {name} ({n} namespaces): its owner, process {pid}, still runs (--force removes it)"
                  for name, (n, pid) in sorted(self.in_use.items())]
        return "\n".join(parts)


def sweep(name: str | None = None, *, force: bool = False) -> SweepResult:
    """Remove testbeds left behind (a run killed with ``kill -9``): every namespace named
    ``optiq-<tag>-...``, with its processes, unless the process that made it still runs
    (``force``: that too). ``name``: only that testbed.

    Raises
    ------
    TestbedError
        If namespaces cannot be listed or removed here, or ``name`` is not a testbed name.
    """
    check_privileges()
    if name is not None:
        check_name(name)
    found = find_testbeds()
    if name is not None:
        found = {name: found.get(name, [])} if name in found else {}
    removed: dict[str, int] = {}
    in_use: dict[str, tuple[int, int]] = {}
    for bed, names in sorted(found.items()):
        owner = _owner(bed)
        if owner is not None and not force:
            in_use[bed] = (len(names), owner)
            continue
        delete_namespaces(names)
        shutil.rmtree(state_root() / bed, ignore_errors=True)
        removed[bed] = len(names)
    if name is None:  # state of testbeds whose namespaces are gone
        for stale in state_root().glob(f"{PREFIX}*") if state_root().is_dir() else []:
            if stale.name not in found and _owner(stale.name) is None:
                shutil.rmtree(stale, ignore_errors=True)
    return SweepResult(removed, in_use)


def _owner(name: str) -> int | None:
    """The live process that made testbed ``name``, if any."""
    try:
        pid_text, start = (state_root() / name / "owner").read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    return pid if _start_time(pid) == start else None


def _start_time(pid: int) -> str:
    """A process's start time (field 22 of ``/proc/PID/stat``): with the pid, it names one process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return "gone"


def _nft() -> str | None:
    """The nftables command (root's ``/usr/sbin`` may be off the PATH), or None."""
    return shutil.which("nft") or ("/usr/sbin/nft" if Path("/usr/sbin/nft").exists() else None)


#: Random loss is drawn per packet as one of this many equal chances (a loss of 0.01% is one).
LOSS_CHANCES = 10_000


def _loss_rules(devices: list[str], percent: float) -> str:
    """An nftables table that drops ``percent`` of the packets leaving every device, at random
    (the netdev egress hook, before the device's queue: the kernels here have no netem).

    Examples
    --------
    >>> print(_loss_rules(["p1"], 1), end="")
    table netdev optiq_loss {
      chain p1 { type filter hook egress device "p1" priority 0; numgen random mod 10000 < 100 drop; }
    }
    """
    below = max(1, round(percent / 100 * LOSS_CHANCES))
    chains = [f'  chain {d} {{ type filter hook egress device "{d}" priority 0; numgen random mod {LOSS_CHANCES} '
              f'< {below} drop; }}' for d in devices]
    return "\n".join(["table netdev optiq_loss {", *chains, "}"]) + "\n"


#: The nftables table of a node's dead links.
DEAD_TABLE = "optiq_dead"


def _dead_table(devices: list[str]) -> str:
    """nftables commands (``nft -i``, one per line) for an empty table with a chain on the egress
    of every device of ``devices``, before its queue: a rule added to a chain drops them all.

    Examples
    --------
    >>> print(_dead_table(["p1"]), end="")
    add table netdev optiq_dead
    add chain netdev optiq_dead p1 { type filter hook egress device "p1" priority -1; }
    """
    chains = [f'add chain netdev {DEAD_TABLE} {d} {{ type filter hook egress device "{d}" priority -1; }}'
              for d in devices]
    return "\n".join([f"add table netdev {DEAD_TABLE}", *chains]) + "\n"


def _allowed_congestion() -> list[str] | None:
    """The TCP congestion controls a namespace may choose (None: cannot tell)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_allowed_congestion_control") as f:
            return f.read().split()
    except OSError:
        return None


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


@contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (``kill``, a CI job's timeout) raises :class:`KeyboardInterrupt`,
    so the block's cleanup runs as it does for Ctrl-C."""
    if not _main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
