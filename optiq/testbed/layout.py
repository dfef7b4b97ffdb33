"""How a topology becomes namespaces, cables and addresses: decided here, made by :mod:`.network`.

* Every node is a namespace: host ``i`` (endpoint ``i``) is ``<name>-h<i>``, the ``j``-th other
  node (a switch) ``<name>-s<j>``. A host that the network's routes cross (a torus node)
  routes; every host sends and receives from one address of its own on a device with no
  cable (``oq``), so that all of its traffic, through whichever cable, has that address.
* Every cable is a veth pair: link ``e`` (``u -> v``) and the reverse link paired with it
  (the ``i``-th ``u -> v`` link with the ``i``-th ``v -> u`` link, so parallel cables stay
  apart). Link ``e`` leaves ``u`` by the interface ``p<port>``: the fabric's port number on
  InfiniBand fabrics, else the link's place among ``u``'s links, from 1. Its bytes are
  what that interface sends, rate limited to ``rate * capacity[e] / max(capacity)``.
* Addresses: node ``v`` is ``10.0.0.0 + v + 1`` on the data network; host ``i`` is
  ``172.16.0.0 + i + 2`` on the management network, a bridge in ``<name>-ctl`` (``.1``).
  Link ``e``'s sending end has the MAC ``02:00:`` + ``e`` (32 bits); every node knows its
  neighbours' MACs (static neighbour entries: no ARP on the data network).

Examples
--------
>>> from optiq.topology import cluster
>>> lay = Layout.of(cluster(4, 2, 1), "optiq-doc")
>>> lay.namespaces[:5], lay.namespaces[-3:]
(['optiq-doc-h0', 'optiq-doc-h1', 'optiq-doc-h2', 'optiq-doc-h3', 'optiq-doc-s0'], ['optiq-doc-s0', 'optiq-doc-s1', 'optiq-doc-s2'])
>>> lay.interface(0), lay.address(0), lay.management_address(0), lay.mac(0)
('p1', '10.0.0.1', '172.16.0.2', '02:00:00:00:00:00')
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TestbedError
from ..topology.cables import link_ports
from .system import NAME_PATTERN, PREFIX

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["Layout", "DATA_DEVICE", "MANAGEMENT_DEVICE", "MANAGEMENT_BRIDGE", "MAX_HOSTS", "check_name"]

#: The cable-less device that holds a node's data address.
DATA_DEVICE = "oq"
#: A host's interface on the management network, and the bridge it joins in ``<name>-ctl``.
MANAGEMENT_DEVICE = "m0"
MANAGEMENT_BRIDGE = "oqm"
#: A Linux bridge takes at most 1,024 ports: one per host on the management network.
MAX_HOSTS = 1000
_DATA = int(ipaddress.IPv4Address("10.0.0.0"))
_MANAGEMENT = int(ipaddress.IPv4Address("172.16.0.0"))


def check_name(name: str) -> str:
    """A testbed's name: ``optiq-`` and letters or digits.

    Raises
    ------
    TestbedError
        Naming what is wrong with it.

    Examples
    --------
    >>> check_name("optiq-ci1")
    'optiq-ci1'
    >>> check_name("mine")
    Traceback (most recent call last):
    ...
    optiq.errors.TestbedError: testbed name 'mine' must be 'optiq-' and letters or digits (e.g. optiq-1)
    """
    if not NAME_PATTERN.match(f"{name}-ctl") or not name.startswith(PREFIX):
        raise TestbedError(f"testbed name {name!r} must be {PREFIX!r} and letters or digits (e.g. {PREFIX}1)")
    return name


@dataclass(frozen=True, eq=False)
class Layout:
    """Names, interfaces, addresses and rates of a topology's testbed (module docstring).

    Build it with :meth:`of`; it only decides, :class:`~optiq.testbed.Testbed` makes.

    Attributes
    ----------
    topology : Topology
    name : str
        The testbed's name (:func:`check_name`).
    port : ndarray of int
        Every link's port number at its tail (its interface is ``p<port>``).
    peer : ndarray of int
        Every link's reverse link, the other direction of its cable.
    """

    topology: Topology
    name: str
    port: np.ndarray
    peer: np.ndarray

    @classmethod
    def of(cls, topology: Topology, name: str) -> Layout:
        """The layout of ``topology`` under the testbed name ``name``.

        Raises
        ------
        TestbedError
            For a bad name, a link without a reverse link (a cable carries both directions),
            or more hosts than the management bridge takes (:data:`MAX_HOSTS`).
        """
        check_name(name)
        t = topology
        if t.num_endpoints > MAX_HOSTS:
            raise TestbedError(f"{t.name} has {t.num_endpoints:,} hosts; a testbed takes at most {MAX_HOSTS:,} "
                               f"(one management bridge port each)")
        src, dst = t.link_src, t.link_dst
        peer = np.full(t.num_links, -1, dtype=np.int64)
        forward = np.lexsort((np.arange(t.num_links), dst, src))       # by (u, v, id)
        backward = np.lexsort((np.arange(t.num_links), src, dst))      # by (v, u, id): the reverse links
        fk = src[forward] * t.num_nodes + dst[forward]
        bk = dst[backward] * t.num_nodes + src[backward]
        if not np.array_equal(fk, bk):  # both sorted: equal exactly when every (u, v) has as many (v, u)
            pairs = Counter(zip(src.tolist(), dst.tolist()))
            bad = next(e for e in range(t.num_links) if pairs[int(src[e]), int(dst[e])] != pairs[int(dst[e]), int(src[e])])
            raise TestbedError(f"link {t.link_label(bad)} has no reverse link for it: a testbed makes cables, "
                               f"each carrying both directions")
        peer[forward] = backward
        return cls(t, name, link_ports(t), peer)

    @cached_property
    def namespaces(self) -> list[str]:
        """Every node's namespace, in node order."""
        e = self.topology.num_endpoints
        return [f"{self.name}-h{i}" for i in range(e)] + \
               [f"{self.name}-s{j}" for j in range(self.topology.num_nodes - e)]

    @property
    def control(self) -> str:
        """The management namespace, where ``mpiexec`` runs."""
        return f"{self.name}-ctl"

    @cached_property
    def routers(self) -> np.ndarray:
        """Whether each node forwards packets: switches, and hosts that a link of another host crosses."""
        t = self.topology
        out = np.ones(t.num_nodes, dtype=bool)
        out[: t.num_endpoints] = np.bincount(t.link_src, minlength=t.num_nodes)[: t.num_endpoints] > 1
        return out

    def interface(self, link: int) -> str:
        """The interface link ``link`` leaves its tail by."""
        return f"p{int(self.port[link])}"

    def address(self, node: int) -> str:
        """A node's data address."""
        return str(ipaddress.IPv4Address(_DATA + int(node) + 1))

    def management_address(self, host: int) -> str:
        """A host's address on the management network."""
        return str(ipaddress.IPv4Address(_MANAGEMENT + int(host) + 2))

    @property
    def control_address(self) -> str:
        """The management bridge's address, in the control namespace."""
        return str(ipaddress.IPv4Address(_MANAGEMENT + 1))

    @staticmethod
    def mac(link: int) -> str:
        """The MAC of the interface link ``link`` leaves by."""
        b = int(link).to_bytes(4, "big")
        return "02:00:" + ":".join(f"{x:02x}" for x in b)

    def link_rates(self, rate_Bps: float) -> np.ndarray:
        """Every link's rate in bytes/s when the fastest runs at ``rate_Bps``."""
        cap = self.topology.capacity
        return rate_Bps * cap / cap.max()

    def node_of_address(self, address: str) -> int:
        """The node whose data address is ``address``."""
        return int(ipaddress.IPv4Address(address)) - _DATA - 1
