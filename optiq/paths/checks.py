"""The structure of a plan's paths, checked apart from their bytes: what a plan's paths
must be whatever they carry (:meth:`optiq.Plan.validate`). Paths a plan chose from a set it
keeps (:mod:`optiq.paths.kept`) are checked once, the first time one is used
(:meth:`optiq.paths.space.PathSpace.finish_used`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import PlanError
from .routing import FREE

if TYPE_CHECKING:
    from ..topology import Topology
    from .pathset import PathSet

__all__ = ["check_paths", "repeats"]


def check_paths(paths: PathSet, topology: Topology, src: np.ndarray, dst: np.ndarray, routing: str) -> None:
    """Check that every path of ``paths`` runs from its job's source (``src[job]``) to its
    destination over existing links, one after another, and stops only at ranks: a free path
    visits no node twice, a forwarded one stops at no rank twice (nor at its source).

    Raises
    ------
    PlanError
        Naming the first path at fault, its job and what is wrong.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.paths import network_routes
    >>> t = torus((4,))
    >>> check_paths(network_routes(t, [0], [2]), t, np.array([0]), np.array([2]), "forwarded")
    >>> check_paths(network_routes(t, [0], [2]), t, np.array([0]), np.array([3]), "forwarded")
    Traceback (most recent call last):
    optiq.errors.PlanError: path 0 of job 0 does not end at its destination 3 (it is at node 2)
    """
    ps, topo = paths, topology
    bad_link = np.flatnonzero((ps.links < 0) | (ps.links >= topo.num_links))
    if bad_link.size:
        p = int(np.searchsorted(ps.offsets, bad_link[0], side="right") - 1)
        raise PlanError(f"path {p} of job {ps.job[p]} uses link {ps.links[bad_link[0]]}, "
                        f"which does not exist (links are 0..{topo.num_links - 1})")
    empty = np.flatnonzero(ps.hops == 0)
    if empty.size:
        raise PlanError(f"path {empty[0]} of job {ps.job[empty[0]]} has no links")
    first, last = ps.offsets[:-1], ps.offsets[1:] - 1
    heads, tails = topo.link_dst[ps.links], topo.link_src[ps.links]
    joined = heads[:-1] == tails[1:]
    joined[last[:-1]] = True   # a path's last link and the next path's first need not meet
    broken = np.flatnonzero(~joined)
    if broken.size:
        p = int(np.searchsorted(ps.offsets, broken[0], side="right") - 1)
        raise PlanError(f"path {p} of job {ps.job[p]} is not connected: link {ps.links[broken[0]]} ends at "
                        f"node {heads[broken[0]]} but the next link starts at node {tails[broken[0] + 1]}")
    for arr, want, what in ((tails[first], src[ps.job], "start at its source"),
                            (heads[last], dst[ps.job], "end at its destination")):
        wrong = np.flatnonzero(arr != want)
        if wrong.size:
            p = wrong[0]
            raise PlanError(f"path {p} of job {ps.job[p]} does not {what} {want[p]} (it is at node {arr[p]})")
    n = topo.num_nodes
    stop_heads = heads[ps.stops]
    off_rank = np.flatnonzero(stop_heads >= topo.num_endpoints)
    if off_rank.size:
        p = int(ps.path_of_link_entry[np.flatnonzero(ps.stops)[off_rank[0]]])
        raise PlanError(f"path {p} of job {ps.job[p]} stops at {topo.label(int(stop_heads[off_rank[0]]))}, which "
                        f"is not a rank: only ranks receive and send on chunks")
    if routing == FREE:  # a simple path visits every node once: its link tails and its last head are distinct
        visits = np.concatenate([ps.path_of_link_entry * n + tails, np.arange(ps.num_paths) * n + heads[last]])
        what = "visits node"
    else:  # a leg is the network's route; the ranks a path stops at (and its source) are distinct
        visits = np.concatenate([ps.path_of_link_entry[ps.stops] * n + stop_heads, np.arange(ps.num_paths) * n
                                 + tails[first]])
        what = "stops at node"
    twice = repeats(visits)
    if twice.size:
        p, v = divmod(int(twice[0]), n)
        raise PlanError(f"path {p} of job {ps.job[p]} {what} {v} more than once")


def repeats(values: np.ndarray) -> np.ndarray:
    """The values that occur more than once, ascending (with repeats). A stable sort: the
    arrays checked here are runs already in order, which it merges in linear time, where
    numpy's default sort starts afresh."""
    ordered = np.sort(values, kind="stable")
    return ordered[1:][ordered[1:] == ordered[:-1]]
