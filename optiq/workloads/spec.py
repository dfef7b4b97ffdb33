"""The workload of the command line: a pattern, a demand file or rank traffic, on some hosts.

:class:`WorkloadSpec` holds the options ``optiq plan``, ``compare``, ``tables`` and ``testbed
run`` share (named as the options are, ``--ranks-per-node`` as ``ranks_per_node``) and makes
their demand set on a topology, checking the options that do not go together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import OptiqError
from ..utils.units import parse_size
from .files import read_demands
from .hosts import named_hosts, on_hosts
from .patterns import PATTERNS, constant_ratio, destination_sweep, distance_sweep, permutation, random_pairing
from .placement import host_demands
from .sizes import random_sizes
from .traffic import read_traffic

if TYPE_CHECKING:
    from ..topology import Topology
    from .demands import Demands

__all__ = ["WorkloadSpec", "TRACE_OPTIONS", "WORKLOAD_PATTERNS"]

#: Every pattern a workload names: the fixed-ratio ones and the sweeps and permutation.
WORKLOAD_PATTERNS = PATTERNS + ("distance", "destsize", "permutation")
#: The options that apply only to rank traffic (``traffic``).
TRACE_OPTIONS = ("ranks_per_node", "traffic_unit", "selection", "placement")


@dataclass(frozen=True)
class WorkloadSpec:
    """Where the demands come from (one of ``pattern``, ``demands``, a demand file, or
    ``traffic``, rank traffic) and how they are shaped; None is the default.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> WorkloadSpec(pattern="disjoint", size=1024, sources=2, ratio=4).make(torus((4, 4))).num_jobs
    8
    >>> WorkloadSpec(pattern="distance", size=1024).make(torus((4, 4)))
    Traceback (most recent call last):
    ...
    optiq.errors.OptiqError: --pattern distance needs --position
    >>> WorkloadSpec().make(torus((4, 4)))
    Traceback (most recent call last):
    ...
    optiq.errors.OptiqError: a workload is one of --pattern, --demands and --traffic
    """

    pattern: str | None = None
    demands: str | None = None
    traffic: str | None = None
    hosts: str | None = None
    size: int = 8 * 2**20
    random_sizes: str | None = None
    ratio: int | None = None
    sources: int | None = None
    position: int | None = None
    per_source: int | None = None
    pairing: str = "aligned"
    seed: int = 0
    ranks_per_node: int | None = None
    traffic_unit: int | None = None
    selection: str | None = None
    placement: str | None = None

    def check(self) -> None:
        """Raise :class:`OptiqError` unless exactly one source of demands is given (a known
        pattern, a demand file or traffic), or for options that apply only to rank traffic
        without it."""
        given = [name for name in ("pattern", "demands", "traffic") if getattr(self, name)]
        if len(given) != 1:
            raise OptiqError("a workload is one of --pattern, --demands and --traffic"
                             + (f", not {' and '.join('--' + g for g in given)}" if given else ""))
        if self.pattern and self.pattern not in WORKLOAD_PATTERNS:
            raise OptiqError(f"unknown pattern {self.pattern!r}; choose from {', '.join(WORKLOAD_PATTERNS)}")
        stray = [name for name in TRACE_OPTIONS if getattr(self, name) is not None]
        if stray and not self.traffic:
            named = ", ".join("--" + s.replace("_", "-") for s in stray)
            raise OptiqError(f"{named} {'applies' if len(stray) == 1 else 'apply'} only with --traffic")

    def make(self, topology: Topology, say: Callable[[str], None] | None = None) -> Demands:
        """The demand set on ``topology`` (on the ``hosts`` when given), checked against it;
        ``say`` hears what is read and where the ranks went.

        Raises
        ------
        OptiqError
            For options that do not go together, a pattern missing its parameter, a file
            that cannot be read, or demands the topology cannot carry (a subclass naming it).
        """
        self.check()
        hosts = named_hosts(topology, self.hosts) if self.hosts else None
        P = topology.num_endpoints if hosts is None else hosts.size
        if hosts is not None and say:
            say(f"--hosts: {hosts.size:,} of {topology.num_endpoints:,} hosts")
        if self.demands:
            if say:
                say(f"reading {self.demands}")
            demands = read_demands(self.demands)
        elif self.traffic:
            if say:
                say(f"reading {self.traffic}")
            traffic = read_traffic(self.traffic, unit=self.traffic_unit or 1)
            try:
                placed = host_demands(traffic, topology.num_endpoints, ranks_per_node=self.ranks_per_node or 1,
                                      selection=self.selection or "linear", placement=self.placement or "block",
                                      seed=self.seed, hosts=hosts, names=topology.endpoint_names)
            except OptiqError as exc:
                raise type(exc)(f"--traffic {self.traffic} on {topology.name}: {exc}") from None
            demands = placed.demands
            if say:
                say(f"{traffic.shape[0]} ranks on {np.unique(placed.host_of).size} hosts: {demands.num_jobs:,} host "
                    f"pairs, {int(demands.nbytes.sum()):,} bytes over the network, {placed.intra_host_bytes:,.0f} bytes "
                    f"within hosts (not routed)")
        elif self.pattern in PATTERNS:
            demands = constant_ratio(P, self.pattern, nbytes=self.size, num_sources=self.sources, ratio=self.ratio or 8)
        elif self.pattern == "permutation":
            stray = [f"--{name}" for name in ("ratio", "sources") if getattr(self, name) is not None]
            if stray or self.pairing == "random":
                raise OptiqError(f"--pattern permutation is random already (--seed); it takes no "
                                 f"{', '.join(stray) or '--pairing random'}")
            demands = permutation(P, nbytes=self.size, seed=self.seed)
        elif self.pattern == "distance":
            if self.position is None:
                raise OptiqError("--pattern distance needs --position")
            demands = distance_sweep(P, self.position, nbytes=self.size, num_sources=self.sources,
                                     ratio=self.ratio or 2)
        else:
            if self.per_source is None:
                raise OptiqError("--pattern destsize needs --per-source")
            demands = destination_sweep(P, self.per_source, nbytes=self.size, num_sources=self.sources or 64)
        if self.pairing == "random":
            demands = random_pairing(demands, seed=self.seed)
        if self.random_sizes:
            low, sep, high = self.random_sizes.partition(":")
            if not sep:
                raise OptiqError(f"--random-sizes {self.random_sizes!r} must be LOW:HIGH, e.g. 64KiB:8MiB")
            demands = random_sizes(demands, parse_size(low), parse_size(high), seed=self.seed)
        if hosts is not None and not self.traffic:
            demands = on_hosts(demands, hosts)
        demands.check_against(topology)
        return demands
