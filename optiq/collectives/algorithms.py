"""Allreduce (sum) algorithms on numpy buffers with mpi4py: Ring, RHD, CPS, hierarchical CPS.

Every function takes the communicator and this rank's input vector and returns the
element-wise sum over all ranks, in ``out`` if given (else a new array); the input is not
changed. Any number of
ranks and any length work: blocks are as even as integers allow (the first ``len % N``
blocks are one element longer, as with ``np.array_split``).

Messages travel on a duplicate of the caller's communicator, made on the first call and
freed with it (:func:`optiq.mpi.comms.private_comm`), so the application's messages and
tags never meet the algorithms' own.

Scratch space is kept between calls (:func:`_scratch`): allocating and freeing megabyte
buffers on every call maps and unmaps memory, which slowed the shared-memory transfers of
MPICH (single-copy, through the other process's pages).

Waiting is polite (:func:`optiq.mpi.waiting.wait_all`): MPI's blocking waits spin and, with
more ranks than cores, would take the CPU from the ranks that still have work. The cost of
each algorithm is modelled in :mod:`optiq.collectives.cost`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from ..errors import OptiqError
from ..mpi.comms import private_comm
from ..mpi.waiting import wait_all
from .cost import algorithms, parse_hierarchy

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["allreduce", "ring_allreduce", "rhd_allreduce", "cps_allreduce", "hierarchical_cps_allreduce",
           "block_bounds"]

_TAG = 7100  # tags of this module: _TAG + step, on its own duplicate of the caller's communicator
#: The purpose under which the algorithms keep their duplicate (:func:`optiq.mpi.comms.private_comm`).
PURPOSE = "optiq.collectives"
_SCRATCH: dict[str, np.ndarray] = {}


def _scratch(name: str, *shape: int) -> np.ndarray:
    """A float64 array of ``shape`` for ``name``, reusing the memory of earlier calls."""
    size = int(np.prod(shape))
    buf = _SCRATCH.get(name)
    if buf is None or buf.size < size:
        buf = _SCRATCH[name] = np.empty(size)
    return buf[:size].reshape(shape)


def _output(send: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    send = np.asarray(send)
    if send.dtype != np.float64 or send.ndim != 1:
        raise OptiqError(f"allreduce takes a 1-D float64 vector, got {send.dtype} with shape {send.shape}")
    if out is None:
        return np.empty_like(send)
    if out.shape != send.shape or out.dtype != np.float64 or np.shares_memory(out, send):
        raise OptiqError(f"out must be a separate float64 vector of shape {send.shape}")
    return out


def block_bounds(n: int, parts: int) -> np.ndarray:
    """Start offsets of ``parts`` near-equal blocks of ``n`` elements, plus ``n`` at the end.

    Examples
    --------
    >>> block_bounds(10, 4).tolist()
    [0, 3, 6, 8, 10]
    """
    sizes = np.full(parts, n // parts)
    sizes[: n % parts] += 1
    return np.concatenate(([0], np.cumsum(sizes)))


#: Every exchange's tag of the algorithms, by the phase it is (the parts of the cost model's steps).
PHASES = {_TAG: "reduce-scatter", _TAG + 1: "allgather", _TAG + 2: "fold in", _TAG + 3: "halving",
          _TAG + 4: "doubling", _TAG + 5: "hand back", _TAG + 10: "reduce-scatter in groups",
          _TAG + 11: "reduce-scatter across groups", _TAG + 12: "allgather across groups",
          _TAG + 13: "allgather in groups"}
#: While set, what :func:`exchange` does instead (:func:`exchanges_by`).
_EXCHANGE: list[Callable[..., None] | None] = [None]


@contextmanager
def exchanges_by(how: Callable[[Any, Any, Any, int], None]) -> Iterator[None]:
    """Within the block, every exchange of the algorithms is ``how(comm, sends, recvs, tag)``:
    a no-op leaves the local work alone to be timed (the seed times calculation apart), a
    wrapper around :func:`send_and_receive` records when each exchange ran."""
    _EXCHANGE[0] = how
    try:
        yield
    finally:
        _EXCHANGE[0] = None


def exchange(comm: Any, sends: Sequence[tuple[np.ndarray, int]], recvs: Sequence[tuple[np.ndarray, int]], tag: int) -> None:
    """Post every receive ``(buffer, source)`` and send ``(buffer, dest)``, then wait for all
    (or what :func:`exchanges_by` says)."""
    how = _EXCHANGE[0]
    if how is not None:
        how(comm, sends, recvs, tag)
    else:
        send_and_receive(comm, sends, recvs, tag)


def send_and_receive(comm: Any, sends: Sequence[tuple[np.ndarray, int]], recvs: Sequence[tuple[np.ndarray, int]],
                     tag: int) -> None:
    """The exchange itself: every receive and send posted at once, then waited for."""
    from mpi4py import MPI

    reqs = [comm.Irecv([buf, MPI.DOUBLE], source=src, tag=tag) for buf, src in recvs]
    reqs += [comm.Isend([buf, MPI.DOUBLE], dest=dst, tag=tag) for buf, dst in sends]
    wait_all(reqs)


def ring_allreduce(comm: Any, send: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Ring: ``N-1`` reduce-scatter steps to the right neighbour, then ``N-1`` allgather steps."""
    comm = private_comm(comm, PURPOSE)
    N, r = comm.Get_size(), comm.Get_rank()
    buf = _output(send, out)
    np.copyto(buf, send)
    b = block_bounds(buf.size, N)
    right, left = (r + 1) % N, (r - 1) % N
    tmp = _scratch("ring", int(np.diff(b).max(initial=0)))
    for k in range(N - 1):
        s, t = (r - k) % N, (r - k - 1) % N
        incoming = tmp[: b[t + 1] - b[t]]
        exchange(comm, [(buf[b[s]:b[s + 1]], right)], [(incoming, left)], _TAG)
        buf[b[t]:b[t + 1]] += incoming
    for k in range(N - 1):
        s, t = (r + 1 - k) % N, (r - k) % N
        exchange(comm, [(buf[b[s]:b[s + 1]], right)], [(buf[b[t]:b[t + 1]], left)], _TAG + 1)
    return buf


def rhd_allreduce(comm: Any, send: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Recursive halving then doubling on the largest power of two; extra ranks fold in first."""
    comm = private_comm(comm, PURPOSE)
    N, r = comm.Get_size(), comm.Get_rank()
    buf = _output(send, out)
    np.copyto(buf, send)
    p2 = 1 << (N.bit_length() - 1)
    extra = N - p2
    if r < 2 * extra:  # pairs (even, odd): the even rank hands its vector over and waits
        if r % 2 == 0:
            exchange(comm, [(buf, r + 1)], [], _TAG + 2)
            exchange(comm, [], [(buf, r + 1)], _TAG + 5)
            return buf
        incoming = _scratch("rhd", buf.size)
        exchange(comm, [], [(incoming, r - 1)], _TAG + 2)
        buf += incoming
        me = r // 2
    else:
        me = r - extra

    def real(new: int) -> int:
        return 2 * new + 1 if new < extra else new + extra

    b = block_bounds(buf.size, p2)
    lo, hi = 0, p2
    dist = p2 // 2
    while dist >= 1:
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if me & dist == 0 else ((mid, hi), (lo, mid))
        incoming = _scratch("rhd", b[keep[1]] - b[keep[0]])
        exchange(comm, [(buf[b[give[0]]:b[give[1]]], real(me ^ dist))], [(incoming, real(me ^ dist))], _TAG + 3)
        buf[b[keep[0]]:b[keep[1]]] += incoming
        lo, hi = keep
        dist //= 2
    dist = 1
    while dist < p2:
        width = hi - lo
        other = (hi, hi + width) if me & dist == 0 else (lo - width, lo)
        exchange(comm, [(buf[b[lo]:b[hi]], real(me ^ dist))], [(buf[b[other[0]]:b[other[1]]], real(me ^ dist))],
                  _TAG + 4)
        lo, hi = min(lo, other[0]), max(hi, other[1])
        dist *= 2
    if r < 2 * extra:
        exchange(comm, [(buf, r - 1)], [], _TAG + 5)
    return buf


def peer_order(n: int, me: int) -> list[int]:
    """The other members of a group of ``n`` in the order member ``me`` sends to them: from the
    next one on, around the group.

    Every member sending to member 0 first, then 1, ... would aim the first bytes of all at
    one receiver at a time: that receiver's switch port queues them while the other ports
    idle, and a message of the step before, still on its way to it, waits behind them. From
    the next one on, each member's first message goes to a different receiver.

    Examples
    --------
    >>> peer_order(4, 0), peer_order(4, 2)
    ([1, 2, 3], [3, 0, 1])
    """
    return [(me + step) % n for step in range(1, n)]


def _mesh_reduce_scatter(comm, peers, me: int, data: np.ndarray, tag: int, result: np.ndarray) -> None:
    """All ``peers`` at once: peer ``i`` receives block ``i`` of ``data`` from every peer and sums
    the blocks into ``result`` (its length)."""
    b = block_bounds(data.size, len(peers))
    rows = _scratch(f"rows{tag}", len(peers), b[me + 1] - b[me])
    rows[me] = data[b[me]:b[me + 1]]
    others = peer_order(len(peers), me)
    exchange(comm, [(data[b[i]:b[i + 1]], peers[i]) for i in others], [(rows[i], peers[i]) for i in others], tag)
    np.sum(rows, axis=0, out=result)


def _mesh_allgather(comm, peers, me: int, part: np.ndarray, out: np.ndarray, tag: int) -> None:
    """All ``peers`` at once: peer ``i``'s ``part`` lands in block ``i`` of every peer's ``out``."""
    b = block_bounds(out.size, len(peers))
    out[b[me]:b[me + 1]] = part
    others = peer_order(len(peers), me)
    exchange(comm, [(part, peers[i]) for i in others], [(out[b[i]:b[i + 1]], peers[i]) for i in others], tag)


def hierarchical_cps_allreduce(comm: Any, send: np.ndarray, a: int, b: int, out: np.ndarray | None = None) -> np.ndarray:
    """CPS within groups of ``a`` consecutive ranks, then among the ``b`` ranks holding the same slice.

    Raises
    ------
    OptiqError
        If ``a * b`` is not the communicator's size.
    """
    comm = private_comm(comm, PURPOSE)
    N, r = comm.Get_size(), comm.Get_rank()
    if a < 1 or b < 1 or a * b != N:
        raise OptiqError(f"hierarchical CPS {a} x {b} needs {a * b} ranks, the communicator has {N}")
    out = _output(send, out)
    group, index = divmod(r, a)
    members = [group * a + j for j in range(a)]           # my group, fan-in a - 1
    across = [g * a + index for g in range(b)]             # same slice in every group, fan-in b - 1
    bounds = block_bounds(out.size, a)
    mine = out[bounds[index]:bounds[index + 1]]            # my slice, reduced in place in the output
    _mesh_reduce_scatter(comm, members, index, send, _TAG + 10, mine)
    sub_bounds = block_bounds(mine.size, b)
    sub = _scratch("sub", sub_bounds[group + 1] - sub_bounds[group])
    _mesh_reduce_scatter(comm, across, group, mine, _TAG + 11, sub)
    _mesh_allgather(comm, across, group, sub, mine, _TAG + 12)
    _mesh_allgather(comm, members, index, mine, out, _TAG + 13)
    return out


def cps_allreduce(comm: Any, send: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """CPS: every rank sums its ``1/N`` block from all others at once, then sends it to all."""
    return hierarchical_cps_allreduce(comm, send, comm.Get_size(), 1, out)


def allreduce(comm: Any, send: np.ndarray, algorithm: str, out: np.ndarray | None = None) -> np.ndarray:
    """Run ``algorithm`` (a name of :func:`optiq.collectives.cost.algorithms`).

    Raises
    ------
    OptiqError
        For an unknown algorithm, a hierarchy that does not fit the communicator, or
        ``send`` / ``out`` that are not 1-D float64 vectors of the same length.
    """
    N = comm.Get_size()
    if algorithm == "ring":
        return ring_allreduce(comm, send, out)
    if algorithm == "rhd":
        return rhd_allreduce(comm, send, out)
    if algorithm == "cps":
        return cps_allreduce(comm, send, out)
    if algorithm.startswith("hcps:"):
        return hierarchical_cps_allreduce(comm, send, *parse_hierarchy(algorithm, N), out)
    raise OptiqError(f"unknown allreduce algorithm {algorithm!r}; expected one of {', '.join(algorithms(N))}")
