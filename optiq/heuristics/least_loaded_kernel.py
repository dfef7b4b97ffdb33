"""The compiled kernels of :func:`optiq.heuristics.common.least_loaded`, of Heuristic 2's passes
and of :func:`optiq.heuristics.rebalance`'s moves: every job's candidates scanned in place,
without the arrays of (path, link) entries and the sort numpy would build (imported the first
time :func:`optiq.heuristics.common.compiled_pays` says so)."""

from __future__ import annotations

import numpy as np

from ..utils.compiled import compiled, interrupts_held

__all__ = ["least_loaded_paths", "place_batches", "rebalance_moves"]


@compiled
def _choose(job_offsets: np.ndarray, offsets: np.ndarray, links: np.ndarray, j: int, amount: float,
            load: np.ndarray, cap: np.ndarray, uniform: float) -> tuple[int, float]:  # pragma: no cover - compiled
    """Job ``j``'s candidate whose busiest link would be least loaded with ``amount`` more, and
    that time. Where every link has capacity ``uniform`` (else it is 0), the busiest link's
    time is its load over that, one division a path: rounded sums and quotients are monotone,
    so the largest quotient is the quotient of the largest load, to the bit."""
    chosen, chosen_worst, chosen_hops = -1, np.inf, 0
    for p in range(job_offsets[j], job_offsets[j + 1]):
        busiest = -np.inf
        if uniform > 0.0:
            for e in range(offsets[p], offsets[p + 1]):
                if load[links[e]] > busiest:
                    busiest = load[links[e]]
            busiest = (busiest + amount) / uniform
        else:
            for e in range(offsets[p], offsets[p + 1]):
                link = links[e]
                t = (load[link] + amount) / cap[link]
                if t > busiest:
                    busiest = t
        hops = offsets[p + 1] - offsets[p]
        # the least busiest link; ties: fewer hops, then the earlier path
        if chosen < 0 or busiest < chosen_worst or (busiest == chosen_worst and hops < chosen_hops):
            chosen, chosen_worst, chosen_hops = p, busiest, hops
    return chosen, chosen_worst


@compiled
def _least_loaded(job_offsets: np.ndarray, offsets: np.ndarray, links: np.ndarray, jobs: np.ndarray,
                  amount: np.ndarray, load: np.ndarray, cap: np.ndarray, uniform: float, best: np.ndarray,
                  worst: np.ndarray) -> None:  # pragma: no cover - compiled
    for i in range(jobs.size):
        best[i], worst[i] = _choose(job_offsets, offsets, links, jobs[i], amount[i], load, cap, uniform)


@compiled
def _place_batches(job_offsets: np.ndarray, offsets: np.ndarray, links: np.ndarray, jobs: np.ndarray,
                   amount: np.ndarray, block: int, load: np.ndarray, cap: np.ndarray, uniform: float,
                   out: np.ndarray, best: np.ndarray, added: np.ndarray) -> None:  # pragma: no cover - compiled
    for start in range(0, jobs.size, block):
        stop = min(start + block, jobs.size)
        for i in range(start, stop):   # every job of the batch against the loads before it
            best[i] = _choose(job_offsets, offsets, links, jobs[i], float(amount[i]), load, cap, uniform)[0]
        # the batch's bytes per link summed first, then added, in the order numpy's bincount adds them
        for i in range(start, stop):
            p = best[i]
            for e in range(offsets[p], offsets[p + 1]):
                added[links[e]] += float(amount[i])
        for i in range(start, stop):
            p = best[i]
            out[p] += amount[i]
            for e in range(offsets[p], offsets[p + 1]):
                link = links[e]
                if added[link] != 0.0:
                    load[link] += added[link]
                    added[link] = 0.0


def _uniform(cap: np.ndarray) -> float:
    """The capacity every link has, or 0 where they differ (the kernels' one division a path)."""
    return float(cap[0]) if cap.size and cap[0] > 0 and (cap == cap[0]).all() else 0.0


def least_loaded_paths(job_offsets: np.ndarray, offsets: np.ndarray, links: np.ndarray, jobs: np.ndarray,
                       amount: np.ndarray, load: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per job of ``jobs`` (each with a candidate), the candidate path (CSR ``job_offsets``,
    ``offsets``, ``links``) whose busiest link, in time, is least with ``amount[i]`` more bytes
    on each of its links, and that time; ties to fewer hops, then the earlier path."""
    best = np.empty(jobs.size, dtype=np.int64)
    worst = np.empty(jobs.size, dtype=np.float64)
    with interrupts_held(_least_loaded):  # contiguous arrays of fixed types: one machine code
        _least_loaded(*(np.ascontiguousarray(a, dtype=np.int64) for a in (job_offsets, offsets, links, jobs)),
                      *(np.ascontiguousarray(a, dtype=np.float64) for a in (amount, load, cap)), _uniform(cap),
                      best, worst)
    return best, worst


def place_batches(job_offsets: np.ndarray, offsets: np.ndarray, links: np.ndarray, jobs: np.ndarray,
                  amount: np.ndarray, block: int, load: np.ndarray, cap: np.ndarray, out: np.ndarray) -> None:
    """Heuristic 2's batches of ``block`` jobs in one call: each job of a batch puts ``amount[i]``
    bytes (integers) on its candidate least loaded against the loads before the batch (as
    :func:`least_loaded_paths` chooses), then the batch's bytes join ``load`` and ``out`` (bytes
    per candidate), both updated in place. The same loads as numpy's per-batch sums, bit for bit."""
    best = np.empty(jobs.size, dtype=np.int64)
    added = np.zeros(load.size)
    with interrupts_held(_place_batches):  # contiguous arrays of fixed types: one machine code
        _place_batches(*(np.ascontiguousarray(a, dtype=np.int64) for a in (job_offsets, offsets, links, jobs, amount)),
                       int(block), load, np.ascontiguousarray(cap, dtype=np.float64), _uniform(cap), out, best,
                       added)


@compiled
def _crossings(offsets: np.ndarray, links: np.ndarray, out: np.ndarray, load: np.ndarray, link_start: np.ndarray,
               crossing: np.ndarray) -> None:  # pragma: no cover - compiled
    """The loads of the paths with bytes (added path by path, link by link, as numpy's
    ``bincount`` adds them) and their crossings link by link (``crossing[link_start[l]:
    link_start[l + 1]]``, paths ascending): a counting sort."""
    for p in range(out.size):
        if out[p] > 0:
            for e in range(offsets[p], offsets[p + 1]):
                load[links[e]] += float(out[p])
                link_start[links[e] + 1] += 1
    for link in range(load.size):
        link_start[link + 1] += link_start[link]
    fill = link_start[:-1].copy()
    for p in range(out.size):
        if out[p] > 0:
            for e in range(offsets[p], offsets[p + 1]):
                crossing[fill[links[e]]] = p
                fill[links[e]] += 1


@compiled
def _rebalance_moves(job_offsets: np.ndarray, offsets: np.ndarray, links: np.ndarray, job: np.ndarray,
                     limit: int, enough: float, out: np.ndarray, load: np.ndarray, cap: np.ndarray,
                     uniform: float, link_start: np.ndarray, crossing: np.ndarray, new_links: np.ndarray,
                     new_owner: np.ndarray) -> None:  # pragma: no cover - compiled
    _crossings(offsets, links, out, load, link_start, crossing)
    busy = load / cap
    added = 0   # crossings of paths that got bytes here: new_links[:added] (links), new_owner[:added] (paths)
    seen = np.full(out.size, -1, np.int64)
    for move in range(limit):
        hot = int(np.argmax(busy))
        if busy[hot] <= enough:
            return
        # the paths with bytes that cross the busiest link, each once: the largest first (ties: lower id)
        on = np.empty(link_start[hot + 1] - link_start[hot] + added, np.int64)
        n = 0
        for i in range(link_start[hot], link_start[hot + 1]):
            p = crossing[i]
            if out[p] > 0 and seen[p] != move:
                seen[p] = move
                on[n] = p
                n += 1
        for i in range(added):
            p = new_owner[i]
            if new_links[i] == hot and out[p] > 0 and seen[p] != move:
                seen[p] = move
                on[n] = p
                n += 1
        if n == 0:
            return
        on = np.sort(on[:n])
        on = on[np.argsort(-out[on], kind="mergesort")]
        p = q = -1
        for i in range(n):
            best, worst = _choose(job_offsets, offsets, links, job[on[i]], float(out[on[i]]), load, cap, uniform)
            if worst < busy[hot]:
                p, q = on[i], best
                break
        if p < 0:
            return
        amount = float(out[p])
        for e in range(offsets[p], offsets[p + 1]):
            load[links[e]] -= amount
        for e in range(offsets[q], offsets[q + 1]):
            load[links[e]] += amount
        for e in range(offsets[p], offsets[p + 1]):
            busy[links[e]] = load[links[e]] / cap[links[e]]
        for e in range(offsets[q], offsets[q + 1]):
            busy[links[e]] = load[links[e]] / cap[links[e]]
        if out[q] == 0:
            for e in range(offsets[q], offsets[q + 1]):
                new_links[added] = links[e]
                new_owner[added] = q
                added += 1
        out[q] += out[p]
        out[p] = 0


def rebalance_moves(job_offsets: np.ndarray, offsets: np.ndarray, links: np.ndarray, job: np.ndarray,
                    limit: int, enough: float, out: np.ndarray, cap: np.ndarray) -> None:
    """:func:`optiq.heuristics.rebalance`'s moves in one call, each as its numpy loop makes it:
    ``out`` (bytes per candidate) updated in place. The kernel finds the loads and which paths
    with bytes cross each link itself, and keeps those of paths that get bytes."""
    # every move may give one path its first bytes: room for that many paths' crossings
    room = max(limit, 1) * max(int(np.diff(offsets).max(initial=1)), 1)
    cap = np.ascontiguousarray(cap, dtype=np.float64)
    with interrupts_held(_rebalance_moves):  # contiguous arrays of fixed types: one machine code
        _rebalance_moves(*(np.ascontiguousarray(a, dtype=np.int64) for a in (job_offsets, offsets, links, job)),
                         int(limit), float(enough), out, np.zeros(cap.size), cap, _uniform(cap),
                         np.zeros(cap.size + 1, np.int64), np.empty(links.size, np.int64),
                         np.empty(room, np.int64), np.empty(room, np.int64))
