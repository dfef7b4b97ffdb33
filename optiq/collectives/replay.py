"""An allreduce's messages replayed as they travel, rank by rank, over the network's routes.

The per-round counts of :mod:`optiq.collectives.cost` assume every rank starts a round
together. Where ranks fall out of step they do not: in RHD on a number of ranks that is not
a power of two, the ranks that do not fold start halving at once, and a rank that waits for a
late partner has already sent it its half. Such early messages share the late rank's link
with the message it waits for, and the wait grows round after round.

The replay follows every rank through its rounds:

- a rank enters its next round when every message it sends or receives in this one has
  arrived (each exchange waits for all of its sends and receives);
- a message travels from when its sender enters its round, whether or not the receiver has
  reached it (MPI sends it without waiting for the receive);
- the messages on the road share every link max-min fairly (TCP's flows, roughly), each at
  most its link's capacity.

Times are in bytes of a rank's own link (:attr:`Routes.weight`): a message of ``b`` bytes
alone on its route takes ``b``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import OptiqError
from ..paths.pathset import csr_positions

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .cost import Routes

__all__ = ["replay_rounds", "fair_rates"]


def fair_rates(flow_of_entry: np.ndarray, link_of_entry: np.ndarray, active: np.ndarray,
               capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates of the ``active`` flows (progressive filling).

    Flow ``f`` crosses the links ``link_of_entry[flow_of_entry == f]``. Every round, the link
    whose capacity left per flow still growing is least fixes its flows at that share.

    Examples
    --------
    Two flows share link 0; one of them also crosses link 1 with a third flow.

    >>> import numpy as np
    >>> fair_rates(np.array([0, 1, 1, 2]), np.array([0, 0, 1, 1]), np.ones(3, bool),
    ...            np.array([1.0, 1.5])).tolist()
    [0.5, 0.5, 1.0]
    """
    rate = np.zeros(active.size)
    growing = active & (np.bincount(flow_of_entry, minlength=active.size) > 0)  # a flow on no link: never fixed
    left = np.asarray(capacity, float).copy()
    while growing.any():
        on = growing[flow_of_entry]
        count = np.bincount(link_of_entry[on], minlength=left.size)
        share = np.full(left.size, np.inf)
        share[count > 0] = left[count > 0] / count[count > 0]
        least = share.min()
        fixed = np.zeros(active.size, bool)
        fixed[flow_of_entry[on & (share[link_of_entry] <= least * (1 + 1e-12))]] = True
        rate[fixed] = least
        left -= least * np.bincount(link_of_entry[fixed[flow_of_entry]], minlength=left.size)
        growing &= ~fixed
    return rate


def replay_rounds(rounds: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], routes: Routes) -> np.ndarray:
    """When each message of ``rounds`` arrives (module docstring), in the order of the rounds
    and of their messages.

    Parameters
    ----------
    rounds : sequence of (src, dst, bytes)
        Every round's messages, in the order each rank goes through them.
    routes : Routes
        The network's routes between the ranks.

    Returns
    -------
    ndarray of float
        Arrival time of every message, in bytes of a rank's own link.

    Examples
    --------
    Rank 2 sends its half to rank 1 while rank 0 folds into it; rank 1 then answers.

    >>> import numpy as np
    >>> from optiq.collectives.cost import Routes
    >>> r = Routes.of("fattree:k=3,n=1", 3)
    >>> fold = (np.array([0]), np.array([1]), np.array([2.0]))
    >>> halves = (np.array([1, 2]), np.array([2, 1]), np.array([1.0, 1.0]))
    >>> replay_rounds([fold, halves], r).tolist()
    [3.0, 4.0, 2.0]
    """
    src = np.concatenate([np.asarray(r[0], np.int64) for r in rounds])
    dst = np.concatenate([np.asarray(r[1], np.int64) for r in rounds])
    left = np.concatenate([np.asarray(r[2], float) for r in rounds])
    rnd = np.concatenate([np.full(len(r[0]), k, np.int64) for k, r in enumerate(rounds)])
    N, M = routes.ranks, src.size
    pair = src * N + dst
    hops = routes.offsets[pair + 1] - routes.offsets[pair]
    flow_of_entry = np.repeat(np.arange(M), hops)
    link_of_entry = routes.links[csr_positions(routes.offsets[pair], hops)]
    # every (rank, round) a rank takes part in, in the order it goes through them
    part_key, part_of = np.unique(np.concatenate((src, dst)) * (len(rounds) + 1) + np.concatenate((rnd, rnd)),
                                  return_inverse=True)
    send_part, recv_part = part_of[:M], part_of[M:]
    pending = np.bincount(part_of, minlength=part_key.size)
    part_rank = part_key // (len(rounds) + 1)
    current = np.searchsorted(part_rank, np.arange(N))               # each rank's first part
    end = np.searchsorted(part_rank, np.arange(N), side="right")
    arrival = np.full(M, np.nan)
    done = left <= 0
    clock, tol = 0.0, 1e-12 * max(float(left.max(initial=0.0)), 1.0)
    capacity = 1.0 / routes.weight
    while True:
        if done.any():  # the parts whose messages all arrived let their ranks move on
            newly = done & np.isnan(arrival)
            arrival[newly] = clock
            pending -= np.bincount(send_part[newly], minlength=pending.size)
            pending -= np.bincount(recv_part[newly], minlength=pending.size)
            while True:
                ready = (current < end) & (pending[np.minimum(current, pending.size - 1)] == 0)
                if not ready.any():
                    break
                current[ready] += 1
        if done.all():
            return arrival
        active = ~done & (current[src] == send_part)
        if not active.any():
            raise OptiqError("the rounds wait on each other: no rank can send")
        if (active & (hops == 0)).any():  # a rank's message to itself: a copy, no link
            done[active & (hops == 0)] = True
            continue
        rate = fair_rates(flow_of_entry, link_of_entry, active, capacity)
        moving = np.flatnonzero(active)
        step = float((left[moving] / rate[moving]).min())
        clock += step
        left[moving] -= rate[moving] * step
        done[moving[left[moving] <= tol]] = True
