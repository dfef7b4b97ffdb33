"""Flow-level simulation: links shared by max-min fair progressive filling, recomputed as paths finish.

Every path with bytes is a flow. While flows are active, their rates are the (weighted)
max-min fair allocation: raise every unfrozen flow's rate in proportion to its weight
until some link is full, freeze the flows crossing it, repeat. Time then advances to the
next flow's end and the rates are recomputed.

``sharing="equal"`` weighs every flow alike, as fair hardware arbitration does.
``sharing="proportional"`` weighs each flow by its remaining bytes; then the flows on the
busiest link all end together, at that link's bytes over its capacity, which is the
plan's flow-level prediction (:attr:`optiq.Plan.predicted_time_s`), and no flow ends later.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PlanError

__all__ = ["FlowResult", "simulate_flows", "flow_finish_times", "SHARING"]

SHARING = ("equal", "proportional")


@dataclass(frozen=True)
class FlowResult:
    """Completion times of a flow-level simulation.

    Attributes
    ----------
    completion_time_s : float
        When the last byte arrives.
    path_finish_s : ndarray
        When each path of the plan finishes (0 for zero-byte paths).
    job_finish_s : ndarray
        When each job's last path finishes.
    phases : int
        Rate recomputations.
    sharing : str
    """

    completion_time_s: float
    path_finish_s: np.ndarray = field(repr=False)
    job_finish_s: np.ndarray = field(repr=False)
    phases: int
    sharing: str


def simulate_flows(plan, sharing: str = "equal") -> FlowResult:
    """Simulate ``plan`` at flow level (see the module docstring).

    Raises
    ------
    PlanError
        For an unknown ``sharing``.

    Examples
    --------
    Two 1 MB jobs share a 1 MB/s link; one has a second, private link after it.

    >>> from optiq import Demands, Plan
    >>> from optiq.paths import PathSet
    >>> from optiq.topology import mesh
    >>> t = mesh((3,), bandwidth=1e6)            # links 0: 0->1, 1: 1->2, 2: 1->0, 3: 2->1
    >>> d = Demands([0, 0], [1, 2], [10**6, 2 * 10**6])
    >>> plan = Plan(t, d, PathSet.from_lists([[0], [0, 1]], [0, 1], 2), [10**6, 2 * 10**6])
    >>> r = simulate_flows(plan)                 # half the link each until job 0 ends at 2 s
    >>> r.job_finish_s.tolist(), r.completion_time_s
    ([2.0, 3.0], 3.0)
    >>> simulate_flows(plan, "proportional").job_finish_s.tolist()   # both end at 3 s
    [3.0, 3.0]
    """
    if sharing not in SHARING:
        raise PlanError(f"unknown sharing {sharing!r}; expected one of {', '.join(SHARING)}")
    ps = plan.paths
    finish, phases = flow_finish_times(ps, plan.path_bytes, plan.topology.capacity, sharing)
    job_finish = np.zeros(plan.demands.num_jobs)
    np.maximum.at(job_finish, ps.job, finish)
    return FlowResult(float(finish.max(initial=0.0)), finish, job_finish, phases, sharing)


def flow_finish_times(paths, path_bytes, capacity, sharing: str = "equal") -> tuple[np.ndarray, int]:
    """Finish time of every path carrying ``path_bytes`` over links of ``capacity``, and the phases.

    The engine of :func:`simulate_flows`, for callers that change bytes or capacities.
    """
    entry_path, entry_link = paths.path_of_link_entry, paths.links
    remaining = np.asarray(path_bytes, dtype=float).copy()
    finish = np.zeros(paths.num_paths)
    now, phases = 0.0, 0
    active = remaining > 0
    while active.any():
        phases += 1
        weight = np.where(active, remaining if sharing == "proportional" else 1.0, 0.0)
        rate = _max_min_rates(weight, entry_path, entry_link, capacity, paths.num_paths)
        with np.errstate(divide="ignore", invalid="ignore"):
            left = np.where(active, remaining / rate, np.inf)
        step = float(left.min())
        done = active & (left <= step * (1 + 1e-12))
        now += step
        remaining = np.where(active, remaining - rate * step, 0.0)
        remaining[done] = 0.0
        finish[done] = now
        active &= ~done
    return finish, phases


def _max_min_rates(weight, entry_path, entry_link, capacity, num_paths) -> np.ndarray:
    """Weighted max-min fair rates of the flows with positive weight (progressive filling)."""
    rate = np.zeros(num_paths)
    keep = weight[entry_path] > 0
    ep, el = entry_path[keep], entry_link[keep]  # only the links of flows that still move
    free = weight > 0
    cap_left = capacity.astype(float).copy()
    while ep.size:
        demand = np.bincount(el, weights=weight[ep], minlength=capacity.size)
        used = demand > 0
        level = np.full(capacity.size, np.inf)
        level[used] = cap_left[used] / demand[used]
        bottleneck = float(level.min())
        full = used & (level <= bottleneck * (1 + 1e-12))
        frozen = np.zeros(num_paths, dtype=bool)
        frozen[ep[full[el]]] = True
        frozen &= free
        rate[frozen] = weight[frozen] * bottleneck
        hit = frozen[ep]
        cap_left -= np.bincount(el[hit], weights=rate[ep[hit]], minlength=capacity.size)
        np.maximum(cap_left, 0.0, out=cap_left)
        free &= ~frozen
        ep, el = ep[~hit], el[~hit]
    return rate
