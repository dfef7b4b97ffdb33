"""Whether a cached plan still holds: each planned call's time, reviewed at the next call.

A plan is made for the network as it was. When a cable fails, the network reroutes (the
subnet manager's sweep) and every byte still arrives, but the plan's paths now share
links it did not count, and its prediction no longer holds; where the network does not
reroute, a path it uses carries nothing, and its transfer cannot end.

Every rank tells the next agreement (:mod:`optiq.runtime.agreement`) how long its last
planned call took and whether it failed, so every rank reviews the plan alike
(:func:`review`):

- A plan whose transfer failed on some rank (it did not end within its bound) is replaced
  by MPI's own call for the calls after: ``comm.Alltoallv`` (``comm.Alltoallw``) moves them.
- A plan of ``method="auto"`` on real links (``link_bw`` not given) whose call took some rank
  more than :data:`DRIFT_FACTOR` times its usual, and :data:`DRIFT_SLACK_S` more, is measured
  against MPI again on its next call, and the faster is kept: MPI where the network no
  longer carries the plan as it did, the plan where it still wins.

Each rank judges its own call against its own usual call of the plan (:func:`judge`): the
median of its last :data:`RECENT_CALLS` calls, once it has :data:`RECENT_MIN` of them (a
plan's first calls are not judged). Its fastest call would be the extreme of the calls'
noise, and ranks that share cores would measure a plan again (a call moved twice) that
still wins. The agreement counts the ranks that found theirs slow, so the verdict is alike
everywhere. A
planned transfer ends within :func:`bound`: :data:`FAULT_MULTIPLE` times this rank's
fastest call of the plan so far and :data:`FAULT_GRACE_S` more, or ``timeout`` if that is sooner (the
first call of a plan has no measured time, and waits ``timeout``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .patterns import Pattern

if TYPE_CHECKING:
    from .context import Context

__all__ = ["bound", "judge", "review", "DRIFT_FACTOR", "DRIFT_SLACK_S", "RECENT_CALLS", "RECENT_MIN",
           "FAULT_MULTIPLE", "FAULT_GRACE_S"]

#: ``method="auto"``: a planned call this many times slower than the plan's usual is measured against MPI again
#: (a measurement costs one call moved both ways: cheap beside a plan that no longer wins).
DRIFT_FACTOR = 1.5
#: ... and at least this many seconds slower (calls of a few milliseconds vary by more than twice).
DRIFT_SLACK_S = 0.02
#: A rank's usual call of a plan: the median of its last this many calls ...
RECENT_CALLS = 8
#: ... once it has this many (its calls before are not judged).
RECENT_MIN = 3
#: A planned transfer gives up after this many times the plan's fastest call ...
FAULT_MULTIPLE = 5.0
#: ... and this many seconds more.
FAULT_GRACE_S = 5.0


def bound(pattern: Pattern, timeout: float) -> float:
    """Seconds a transfer of ``pattern``'s plan may take before it is abandoned (module docstring).

    Examples
    --------
    >>> p = Pattern("heu2", "")
    >>> bound(p, 60.0)
    60.0
    >>> p.fastest_s = 0.5
    >>> bound(p, 60.0)
    7.5
    """
    if pattern.fastest_s is None:
        return timeout
    return min(timeout, FAULT_MULTIPLE * pattern.fastest_s + FAULT_GRACE_S)


def judge(pattern: Pattern, seconds: float) -> bool:
    """Whether this rank's call of ``pattern``'s plan, ``seconds`` long, was much slower than its
    usual (module docstring); its fastest and last calls are kept, on this rank (told to the
    next agreement, the ranks' verdicts then decide alike).

    Examples
    --------
    >>> p = Pattern("heu2", "")
    >>> [judge(p, s) for s in (0.05, 0.09, 0.08, 0.09)]  # 0.09 > 1.5 x 0.05 + 0.02, but usual
    [False, False, False, False]
    >>> judge(p, 0.2), p.fastest_s  # 0.2 > 1.5 x 0.09 (the median of the last) + 0.02
    (True, 0.05)
    """
    fastest, recent = pattern.fastest_s, pattern.recent_s
    usual = float(sorted(recent)[len(recent) // 2]) if len(recent) >= RECENT_MIN else None
    if fastest is None or seconds < fastest:
        pattern.fastest_s = seconds
    recent.append(seconds)
    del recent[:-RECENT_CALLS]
    return usual is not None and seconds > DRIFT_FACTOR * usual + DRIFT_SLACK_S


def review(ctx: Context, pattern: Pattern, mean_s: float, failed: int, slow: int, api: str) -> None:
    """Review ``pattern`` after a call of its plan, alike on every rank: ``mean_s`` is the ranks'
    mean time of it, ``failed`` how many ranks' transfers failed and ``slow`` how many were much
    slower than their usual (:func:`judge`), all from the agreement. ``api``: MPI's call that
    takes over (``comm.Alltoallv``)."""
    key = next((k for k, entry in ctx.entries.items() if entry is pattern), None)
    if key is None:  # evicted meanwhile
        return
    size = ctx.comm.Get_size()
    if failed:
        # its executor is not freed: a transfer that failed may still have messages pending on it
        ctx.entries[key] = Pattern("mpi", f"the {pattern.method} plan's last call failed on {failed} of the {size} "
                                          f"ranks (its transfer did not end within its bound: a cable it uses may "
                                          f"have failed): {api} moves these calls now",
                                   predicted_s=pattern.predicted_s, default_s=pattern.default_s, own=pattern.own)
        return
    if pattern.watched and slow:
        pattern.drifted = (f"its call took {slow} of the {size} ranks more than {DRIFT_FACTOR:g}x their usual "
                           f"(the ranks' mean {mean_s:.4g} s): the network may no longer carry the plan as it did "
                           f"(a failed or slow cable)")
        pattern.reason = f"{pattern.reason}; then {pattern.drifted}"
        pattern.trial, pattern.fastest_s = True, None
        pattern.recent_s.clear()
