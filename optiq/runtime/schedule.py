"""What one rank does in a plan: the streams of chunks it sends, forwards and receives.

A path of the plan becomes a chain of *rank-level hops*: its legs, from its source to the
ranks it stops at (``PathSet.stops``) and on to its destination. The network carries each
leg by its own route, across switches and the ranks a leg passes without stopping; only
at a stop is a chunk received and sent on. At a given rank a path is one :class:`Stream`:
the rank is its source, a forwarder in the middle, or its destination.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import PlanError
from ..plan import Plan

__all__ = ["Stream", "RankSchedule", "compile_schedule", "rank_hops"]


@dataclass(frozen=True)
class Stream:
    """One path as seen by one rank.

    Attributes
    ----------
    path : int
        Path id in the plan; also the MPI tag of its chunks.
    job : int
        The job the path belongs to.
    offset : int
        Where the path's bytes start in the job's message.
    nbytes : int
        Bytes the path carries.
    prev : int
        Rank this rank receives the path's chunks from (``-1`` at the source).
    next : int
        Rank this rank sends them to (``-1`` at the destination).
    link : int
        Topology link that leaves this rank on the path, the first of its leg (``-1`` at the
        destination).
    direct : bool
        The path has one leg: its source sends straight to its destination, and no rank
        stores its chunks on the way.
    stops : int
        Ranks that store the path's chunks on the way (its legs less one).
    """

    path: int
    job: int
    offset: int
    nbytes: int
    prev: int
    next: int
    link: int
    direct: bool = False
    stops: int = 0

    def num_chunks(self, chunk_size: int) -> int:
        return -(-self.nbytes // chunk_size)


@dataclass(frozen=True)
class RankSchedule:
    """The streams of one rank and the job buffers it owns.

    Attributes
    ----------
    rank : int
    streams : tuple of Stream
    send_jobs : dict
        Job id -> bytes, for the jobs this rank is the source of.
    recv_jobs : dict
        Job id -> bytes, for the jobs this rank is the destination of.
    """

    rank: int
    streams: tuple[Stream, ...]
    send_jobs: dict[int, int]
    recv_jobs: dict[int, int]

    def __repr__(self) -> str:
        roles = [sum(1 for s in self.streams if f(s)) for f in
                 (lambda s: s.prev < 0, lambda s: s.prev >= 0 and s.next >= 0, lambda s: s.next < 0)]
        return (f"RankSchedule(rank={self.rank}, sends={roles[0]}, forwards={roles[1]}, receives={roles[2]}, "
                f"send_jobs={len(self.send_jobs)}, recv_jobs={len(self.recv_jobs)})")


def rank_hops(plan: Plan) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rank-level hops (legs) of every path that carries bytes.

    Returns
    -------
    path, from_rank, to_rank, link : ndarray of int
        One entry per leg, in path order: the path, the rank that sends, the rank that
        receives, and the topology link leaving the sender.

    Examples
    --------
    >>> from optiq import from_spec, Demands, make_plan
    >>> plan = make_plan(from_spec("mesh:3"), Demands([0], [2], [100]), "default")
    >>> [a.tolist() for a in rank_hops(plan)]          # the network's route: one leg, no copy
    [[0], [0], [2], [0]]
    >>> free = make_plan(from_spec("mesh:3"), Demands([0], [2], [100]), "default", routing="free")
    >>> [a.tolist() for a in rank_hops(free)]          # free plans stop at every rank
    [[0, 0], [0, 1], [1, 2], [0, 1]]
    """
    topo, ps = plan.topology, plan.paths
    path, first, last = ps.leg_entries()
    tail, head = topo.link_src[ps.links[first]], topo.link_dst[ps.links[last]]
    keep = plan.path_bytes[path] > 0
    ranks = plan.ranks
    return path[keep], ranks[tail[keep]], ranks[head[keep]], ps.links[first[keep]]


def compile_schedule(plan: Plan, rank: int) -> RankSchedule:
    """The streams and job buffers of ``rank`` in ``plan``.

    Zero-byte paths are skipped. Path ids are kept, so every rank agrees on the tags.

    Raises
    ------
    PlanError
        If ``rank`` is negative.

    Examples
    --------
    >>> from optiq import from_spec, Demands, make_plan
    >>> plan = make_plan(from_spec("mesh:3"), Demands([0], [2], [100]), "default", routing="free")
    >>> compile_schedule(plan, 1).streams           # a free plan stops at rank 1 on the way
    (Stream(path=0, job=0, offset=0, nbytes=100, prev=0, next=2, link=1, direct=False, stops=1),)
    """
    if rank < 0:
        raise PlanError(f"rank must be non-negative, got {rank}")
    dem, ps = plan.demands, plan.paths
    csum = np.cumsum(plan.path_bytes) - plan.path_bytes
    offset = csum - csum[ps.job_offsets[ps.job]]
    path, src, dst, link = rank_hops(plan)
    legs = np.bincount(path, minlength=ps.num_paths)
    direct = legs == 1
    out, into = src == rank, dst == rank  # only this rank's hops reach Python
    sends = {p: (d, e) for p, d, e in zip(path[out].tolist(), dst[out].tolist(), link[out].tolist())}
    recvs = dict(zip(path[into].tolist(), src[into].tolist()))
    streams = []
    for p in sorted(sends.keys() | recvs.keys()):
        nxt, out_link = sends.get(p, (-1, -1))
        streams.append(Stream(path=p, job=int(ps.job[p]), offset=int(offset[p]), nbytes=int(plan.path_bytes[p]),
                              prev=recvs.get(p, -1), next=nxt, link=out_link, direct=bool(direct[p]),
                              stops=int(legs[p]) - 1))
    src_rank, dst_rank = plan.ranks[dem.src], plan.ranks[dem.dst]
    return RankSchedule(rank=rank, streams=tuple(streams),
                        send_jobs={int(j): int(dem.nbytes[j]) for j in np.flatnonzero(src_rank == rank)},
                        recv_jobs={int(j): int(dem.nbytes[j]) for j in np.flatnonzero(dst_rank == rank)})
