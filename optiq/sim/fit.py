"""Fit the chunk-level model to executor runs of one plan.

``optiq run PLAN --json RUN.json`` measures a plan; runs at several chunk sizes (and, if
wanted, emulated link rates) pin down the per-chunk forwarding cost, the per-hop latency
and, for unpaced runs, the rate the machine actually moves bytes at. The fit minimises
the squared relative error between :func:`optiq.sim.simulate_chunks` and the measured
median times, over log-scaled parameters (scipy's bounded least squares).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PlanError
from .chunk import ChunkModel, simulate_chunks
from .runs import RunReport, read_run_report

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path

    from ..plan import Plan

__all__ = ["ChunkFit", "fit_chunk_model", "read_run_samples"]


@dataclass(frozen=True)
class ChunkFit:
    """A fitted :class:`ChunkModel` and how well it reproduces the runs."""

    model: ChunkModel
    samples: tuple[RunReport, ...] = field(repr=False)
    simulated_s: np.ndarray = field(repr=False)
    mean_rel_error: float
    max_rel_error: float


def read_run_samples(paths: Iterable[str | Path], plan: Plan | None = None) -> list[RunReport]:
    """Read ``optiq run --json`` files; with ``plan``, check each run replayed that plan.

    Raises
    ------
    PlanError
        For an unreadable file, one without the run keys, or a run of another plan.
    """
    samples = []
    for path in paths:
        report = read_run_report(path)
        if plan is not None and report.plan_fingerprint != plan.fingerprint:
            raise PlanError(f"{str(path)!r} measured another plan (fingerprint {report.plan_fingerprint}, this "
                            f"plan's is {plan.fingerprint})")
        samples.append(report)
    return samples


def _simulate(plan, model: ChunkModel, samples) -> np.ndarray:
    out = np.empty(len(samples))
    for i, s in enumerate(samples):
        rate = s.link_bw_Bps if s.link_bw_Bps is not None else model.link_rate_Bps
        out[i] = simulate_chunks(plan, replace(model, link_rate_Bps=rate), s.chunk_size).completion_time_s
    return out


def fit_chunk_model(plan: Plan, samples: Sequence[RunReport], *, header_bytes: int = 0, max_evaluations: int = 200) -> ChunkFit:
    """Fit forwarding cost, hop latency and (for unpaced runs) the link rate to ``samples``.

    Parameters
    ----------
    plan : Plan
        The plan the runs replayed.
    samples : sequence of RunReport
        At least two runs; the more chunk sizes, the better the fit. Each contributes its
        chunk size, emulated link rate (``None``: unpaced) and median time.
    header_bytes : int
        Bytes added to every chunk (0 for the executor, whose messages carry no header).
    max_evaluations : int
        Budget of simulations per sample.

    Returns
    -------
    ChunkFit

    Raises
    ------
    PlanError
        With fewer distinct runs (chunk size and link rate) than parameters to fit: two,
        three when a run was unpaced (the link rate is fitted too); for a run whose median
        time is 0.

    Examples
    --------
    Times made by a known model are fitted back to it.

    >>> from optiq import Demands, make_plan
    >>> from optiq.topology import mesh
    >>> plan = make_plan(mesh((4,), bandwidth=1e9), Demands([0], [3], [2**20]), "default", routing="free")
    >>> truth = ChunkModel(hop_latency_s=2e-6, header_bytes=0, forward_cost_s=3e-5, link_rate_Bps=2e8)
    >>> from optiq.sim import Timing
    >>> def unpaced_run(chunk, seconds):
    ...     return RunReport(method="default", topology=plan.topology.name, plan_fingerprint=plan.fingerprint,
    ...                      ranks=4, jobs=1, paths=1, chunk_size=chunk, window=4, link_bw_Bps=None,
    ...                      predicted_time_s=0.0, predicted_at="", repeats=1, warmup=0, baseline=None,
    ...                      plan=Timing("optiq default", (seconds,), 2**20, None), chunks_forwarded=0,
    ...                      buffer_bytes_max=0, messages=1)
    >>> runs = [unpaced_run(c, simulate_chunks(plan, truth, c).completion_time_s)
    ...         for c in (4096, 16384, 65536, 262144)]
    >>> fit = fit_chunk_model(plan, runs)
    >>> fit.max_rel_error < 1e-3, round(fit.model.link_rate_Bps / 2e8, 3)
    (True, 1.0)
    """
    from scipy.optimize import least_squares

    samples = tuple(samples)
    free_rate = any(s.link_bw_Bps is None for s in samples)
    distinct = len({(s.chunk_size, s.link_bw_Bps) for s in samples})
    needed = 3 if free_rate else 2
    if distinct < needed:
        raise PlanError(f"fitting {needed} parameters needs runs at {needed} or more distinct chunk sizes (or link "
                        f"rates), got {distinct} among {len(samples)} run(s)")
    measured = np.array([s.elapsed_s for s in samples])
    if not (measured > 0).all():
        raise PlanError(f"a run to fit needs a time above 0 s; run {int(np.argmin(measured))} took 0 s")
    busiest = float(plan.link_bytes.max())

    def model_of(x: np.ndarray) -> ChunkModel:
        f, lat = np.exp(x[:2])
        rate = float(np.exp(x[2])) if free_rate else None
        return ChunkModel(hop_latency_s=float(lat), header_bytes=header_bytes, forward_cost_s=float(f),
                          link_rate_Bps=rate)

    def residual(x):
        return _simulate(plan, model_of(x), samples) / measured - 1.0

    x0 = [np.log(1e-5), np.log(1e-6)] + ([np.log(busiest / measured.min())] if free_rate else [])
    low = [np.log(1e-10), np.log(1e-12)] + ([np.log(1e3)] if free_rate else [])
    high = [np.log(10.0), np.log(1.0)] + ([np.log(1e13)] if free_rate else [])
    best = least_squares(residual, x0, bounds=(low, high), max_nfev=max_evaluations, x_scale=1.0)
    model = model_of(best.x)
    if not free_rate and len({s.link_bw_Bps for s in samples}) == 1:
        model = replace(model, link_rate_Bps=samples[0].link_bw_Bps)
    simulated = _simulate(plan, model, samples)
    err = np.abs(simulated / measured - 1.0)
    return ChunkFit(model, samples, simulated, float(err.mean()), float(err.max()))
