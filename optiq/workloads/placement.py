"""From ranks to hosts: node selection and process placement turn rank traffic into demands.

An application's ``N`` ranks run ``ranks_per_node`` to a host on ``ceil(N / ranks_per_node)``
hosts chosen among a topology's endpoints. *Node selection* picks those hosts: ``linear``
(the first ones) or ``random`` (a seeded sample, in host order). *Process placement* puts
rank ``i`` on a selected host: ``block`` (the ``i // ranks_per_node``-th), ``cyclic`` (the
``i % hosts``-th) or an explicit rank -> host file. Traffic between ranks of the same host
never reaches the network: it is reported, not routed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import WorkloadError
from .demands import Demands

__all__ = ["SELECTIONS", "PLACEMENTS", "HostTraffic", "select_hosts", "place_ranks", "read_rank_hosts",
           "host_demands"]

SELECTIONS = ("linear", "random")
PLACEMENTS = ("block", "cyclic")


@dataclass(frozen=True)
class HostTraffic:
    """Rank traffic summed per host pair.

    Attributes
    ----------
    demands : Demands
        One job per pair of distinct hosts that exchange bytes (bytes rounded to integers).
    host_of : ndarray of int
        The endpoint every rank runs on.
    intra_host_bytes : float
        Bytes between ranks on the same host: not routed.
    """

    demands: Demands
    host_of: np.ndarray
    intra_host_bytes: float

    def __repr__(self) -> str:
        return (f"HostTraffic(jobs={self.demands.num_jobs}, ranks={self.host_of.size}, "
                f"hosts={np.unique(self.host_of).size}, network_bytes={int(self.demands.nbytes.sum())}, "
                f"intra_host_bytes={self.intra_host_bytes:g})")


def select_hosts(endpoints: int, count: int, selection: str = "linear", *, seed: int = 0,
                 pool: str = "the topology has {} endpoints") -> np.ndarray:
    """Choose ``count`` of ``endpoints`` hosts, in increasing order.

    Raises
    ------
    WorkloadError
        If there are fewer endpoints than hosts needed, or the selection is unknown.

    Examples
    --------
    >>> select_hosts(20, 4).tolist(), select_hosts(20, 4, "random", seed=1).tolist()
    ([0, 1, 2, 3], [8, 9, 14, 19])
    """
    if selection not in SELECTIONS:
        raise WorkloadError(f"unknown node selection {selection!r}; choose from {', '.join(SELECTIONS)}")
    if count > endpoints:
        raise WorkloadError(f"the ranks need {count} hosts, but {pool.format(endpoints)}")
    if selection == "linear":
        return np.arange(count)
    return np.sort(np.random.default_rng(seed).choice(endpoints, count, replace=False))


def place_ranks(ranks: int, hosts: np.ndarray, ranks_per_node: int, placement: str = "block") -> np.ndarray:
    """The host of every rank under a ``block`` or ``cyclic`` placement.

    Examples
    --------
    >>> place_ranks(4, np.array([5, 7]), 2, "block").tolist(), place_ranks(4, np.array([5, 7]), 2, "cyclic").tolist()
    ([5, 5, 7, 7], [5, 7, 5, 7])
    """
    if placement not in PLACEMENTS:
        raise WorkloadError(f"unknown placement {placement!r}; choose from {', '.join(PLACEMENTS)} or a file")
    slot = np.arange(ranks) // ranks_per_node if placement == "block" else np.arange(ranks) % hosts.size
    return hosts[slot]


def read_rank_hosts(path: str | Path, ranks: int, endpoints: int, names: Sequence[str] | None = None) -> np.ndarray:
    """Read an explicit placement: lines ``rank host`` (or ``rank,host``), one per rank; the host
    is an endpoint id or, given the endpoints' ``names``, a host name.

    Raises
    ------
    WorkloadError
        If a line is malformed, a rank is missing or repeated, or a host is not an endpoint
        of the topology, naming the file and line.
    """
    index = {name: i for i, name in enumerate(names)} if names is not None else {}
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"cannot read placement file {name!r}: {exc}") from None
    host_of = np.full(ranks, -1, dtype=np.int64)
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#")[0].replace(",", " ").split()
        if not fields or (number == 1 and not fields[0].isdigit()):
            continue
        if len(fields) != 2 or not fields[0].isdigit() or not (fields[1].isdigit() or fields[1] in index):
            known = " or a host name" if index else ""
            if len(fields) == 2 and fields[0].isdigit() and index:
                raise WorkloadError(f"placement file {name!r}, line {number}: no host named {fields[1]!r}")
            raise WorkloadError(f"placement file {name!r}, line {number}: expected 'rank host' (host an endpoint "
                                f"id{known}), got {line.strip()!r}")
        r = int(fields[0])
        h = int(fields[1]) if fields[1].isdigit() and fields[1] not in index else index[fields[1]]
        if r >= ranks:
            raise WorkloadError(f"placement file {name!r}, line {number}: rank {r}, but the traffic has {ranks} ranks")
        if h >= endpoints:
            raise WorkloadError(f"placement file {name!r}, line {number}: host {h}, but the topology has "
                                f"{endpoints} endpoints")
        if host_of[r] >= 0:
            raise WorkloadError(f"placement file {name!r}, line {number}: rank {r} is placed twice")
        host_of[r] = h
    missing = np.flatnonzero(host_of < 0)
    if missing.size:
        raise WorkloadError(f"placement file {name!r} does not place rank(s) "
                            f"{', '.join(map(str, missing[:10].tolist()))}{' ...' if missing.size > 10 else ''}")
    return host_of


def host_demands(traffic: np.ndarray, endpoints: int, *, ranks_per_node: int = 1, selection: str = "linear",
                 placement: str | Path = "block", seed: int = 0, hosts: np.ndarray | None = None,
                 names: Sequence[str] | None = None) -> HostTraffic:
    """Sum rank traffic per host pair on a topology with ``endpoints`` hosts.

    Parameters
    ----------
    traffic : ndarray
        ``N x N`` bytes (:mod:`.traffic`).
    endpoints : int
        Hosts of the topology (``Topology.num_endpoints``).
    ranks_per_node : int
    selection : {"linear", "random"}
    placement : {"block", "cyclic"} or path
        A path is a rank -> host file (:func:`read_rank_hosts`); selection is then unused.
    seed : int
        Seed of the random selection.
    hosts : array of int, optional
        The endpoints the ranks may run on, in order (a host list); selection picks among
        them, and a placement file may name only them. Default: every endpoint.
    names : sequence of str, optional
        The endpoints' names, so a placement file can name hosts.

    Returns
    -------
    HostTraffic

    Raises
    ------
    WorkloadError
        If the ranks do not fit on the topology or an option is unknown.

    Examples
    --------
    >>> t = np.array([[0, 1, 2, 0], [0, 0, 0, 4], [0, 0, 0, 0], [8, 0, 0, 0]], float)
    >>> h = host_demands(t, 4, ranks_per_node=2)
    >>> h.demands.src.tolist(), h.demands.dst.tolist(), h.demands.nbytes.tolist(), h.intra_host_bytes
    ([0, 1], [1, 0], [6, 8], 1.0)
    """
    if ranks_per_node < 1:
        raise WorkloadError(f"ranks per node must be at least 1, got {ranks_per_node}")
    n = traffic.shape[0]
    universe = np.arange(endpoints) if hosts is None else np.asarray(hosts, dtype=np.int64)
    if isinstance(placement, str) and placement in PLACEMENTS:
        chosen = select_hosts(universe.size, math.ceil(n / ranks_per_node), selection, seed=seed,
                              **({} if hosts is None else {"pool": "the host list has {}"}))
        host_of = universe[place_ranks(n, chosen, ranks_per_node, placement)]
    elif Path(placement).is_file():
        host_of = read_rank_hosts(placement, n, endpoints, names)
        outside = np.flatnonzero(~np.isin(host_of, universe))
        if hosts is not None and outside.size:
            r = int(outside[0])
            label = names[host_of[r]] if names is not None else str(host_of[r])
            raise WorkloadError(f"placement file {str(placement)!r} puts rank {r} on {label}, which is not in the "
                                f"host list")
    else:
        raise WorkloadError(f"placement {str(placement)!r} is neither {' nor '.join(PLACEMENTS)} nor a file of "
                            f"'rank host' lines")
    i, j = np.nonzero(traffic)
    vol = traffic[i, j]
    src_host, dst_host = host_of[i], host_of[j]
    same = src_host == dst_host
    intra = float(vol[same].sum())
    pair, inverse = np.unique(src_host[~same] * endpoints + dst_host[~same], return_inverse=True)
    volume = np.zeros(pair.size)
    np.add.at(volume, inverse, vol[~same])
    if not pair.size:
        raise WorkloadError("all traffic stays within hosts: nothing to route (fewer ranks per node?)")
    demands = Demands(pair // endpoints, pair % endpoints, np.maximum(np.rint(volume), 1).astype(np.int64))
    return HostTraffic(demands=demands, host_of=host_of, intra_host_bytes=intra)
