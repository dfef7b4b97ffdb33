"""What a testbed run found: per method, predicted and measured times and gains, and the links' bytes.

:class:`TestbedReport` prints as a table (``str``), writes the JSON of ``optiq testbed run
--json`` (:meth:`TestbedReport.to_dict`) and draws its figure (:meth:`TestbedReport.figure`):
predicted against measured time per method, and every link's counted bytes against the
plan's.

The prediction, ``predicted_time_s``, is the flow model's at the testbed's link rates with the
bytes the wire really carries: every flow's payload plus the header bytes, and the
acknowledgements coming back, that one flow measured per payload byte (a few percent, and
an acknowledgement crosses a link the other way: a host's uplink carries those of what it
receives). ``predicted_at_link_rate_s`` is the plan's own time at the link rates, payload
only. The gains are over the default routes: predicted over predicted, measured over measured.
On a network that hashes flows (ECMP) the paths are those the job's connections took, read back
from the kernels once they were open (:mod:`optiq.testbed.connections`), and the default row
gives the model's spread over hash draws beside them (``model_mean_s``, ``model_p05_s``,
``model_p95_s``).
``link_bytes_deviation``: over the links that carry at least a tenth of the busiest link's
planned bytes, the largest relative difference between the bytes the kernel counted and the
plan's bytes plus the header and acknowledgement bytes one flow measured.
"""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .network import DEFAULT_MTU

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["TestbedRow", "TestbedReport", "link_deviation", "ROW_KEYS", "REPORT_KEYS"]

#: Keys of one row of the JSON report.
ROW_KEYS = ("method", "routing", "moved_by", "predicted_time_s", "predicted_at_link_rate_s", "measured_time_s",
            "measured_times_s", "measured_over_predicted", "predicted_gain", "measured_gain", "link_bytes_deviation",
            "drops", "verified", "cpu_idle", "outcome", "error", "rounds", "verified_rounds", "crossed_pairs", "stranded_pairs",
            "model_mean_s", "model_p05_s", "model_p95_s")
#: Top-level keys of the JSON report.
REPORT_KEYS = ("topology", "workload", "hosts", "switches", "cables", "rate_bps", "goodput_bps", "queue_bytes",
               "mtu", "congestion_control", "header_overhead", "ack_overhead", "repeat", "warmup", "cpu_idle",
               "load_before", "build_s", "seconds", "conditions", "rows", "notes", "links")


def link_deviation(counted: np.ndarray, expected: np.ndarray, planned: np.ndarray) -> float:
    """The largest ``|counted - expected| / expected`` over the links whose ``planned`` bytes are
    at least a tenth of the busiest link's (0 when no link carries bytes).

    Examples
    --------
    >>> link_deviation(np.array([105., 0., 9.]), np.array([100., 1., 10.]), np.array([100., 0., 5.]))
    0.05
    """
    top = float(planned.max(initial=0.0))
    if top <= 0:
        return 0.0
    busy = planned >= 0.1 * top
    return float(np.max(np.abs(counted[busy] - expected[busy]) / expected[busy]))


@dataclass(frozen=True)
class TestbedRow:
    """One method as the testbed measured it (module docstring for the fields)."""

    __test__ = False

    method: str
    routing: str
    moved_by: str
    predicted_time_s: float
    predicted_at_link_rate_s: float
    measured_times_s: tuple[float, ...]
    predicted_gain: float
    measured_gain: float
    link_bytes_deviation: float
    drops: int
    verified: bool
    cpu_idle: float
    #: ``completed`` when every measured round completed, else ``failed``
    outcome: str = "completed"
    #: the first failed round's reason, in one line ("" when none failed)
    error: str = ""
    #: every measured round's outcome, in order (the times are those of the completed ones)
    rounds: tuple[str, ...] = ()
    #: measured rounds that completed with every byte as sent (``verified`` is whether all completed ones did)
    verified_rounds: int = 0
    #: host pairs it sends between whose route crossed a failed cable when it failed
    crossed_pairs: tuple[str, ...] = ()
    #: of those, the pairs whose route still crosses it once the network has rerouted
    stranded_pairs: tuple[str, ...] = ()
    #: ECMP, the default row: the model's time over hash draws at the testbed's rates (mean, 5th
    #: and 95th percentiles); its ``predicted_time_s`` is that of the paths the connections took
    model_mean_s: float | None = None
    model_p05_s: float | None = None
    model_p95_s: float | None = None

    @property
    def measured_time_s(self) -> float:
        """The median of the completed measured repeats (NaN when none completed)."""
        return float(statistics.median(self.measured_times_s)) if self.measured_times_s else float("nan")

    @property
    def measured_over_predicted(self) -> float:
        return self.measured_time_s / self.predicted_time_s if self.predicted_time_s > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        out = {key: getattr(self, key) for key in ROW_KEYS}
        for key in ("measured_times_s", "rounds", "crossed_pairs", "stranded_pairs"):
            out[key] = list(getattr(self, key))
        return out


@dataclass
class TestbedReport:
    """A testbed run: the network, what one flow measured, and a row per method.

    ``notes`` say what a row's numbers do not (a free plan measured on the network's routes);
    ``links`` holds, per method, every link's expected bytes per run and the mean the kernel
    counted (for the figure and the JSON); ``labels`` names the links.
    """

    __test__ = False

    topology: str
    workload: str
    hosts: int
    switches: int
    cables: int
    rate_bps: float
    goodput_bps: float
    queue_bytes: int
    congestion_control: str
    header_overhead: float
    ack_overhead: float
    repeat: int
    warmup: int
    cpu_idle: float
    load_before: float
    build_s: float
    seconds: float
    rows: list[TestbedRow]
    notes: list[str] = field(default_factory=list)
    links: dict[str, dict[str, list[float]]] = field(default_factory=dict, repr=False)
    labels: list[str] = field(default_factory=list, repr=False)
    #: what ailed the network (:meth:`optiq.testbed.conditions.Conditions.describe`), "" when healthy
    conditions: str = ""
    #: the data links' MTU (bytes)
    mtu: int = DEFAULT_MTU

    def __repr__(self) -> str:
        return (f"TestbedReport({self.topology!r}, {len(self.rows)} methods, {self.rate_bps / 1e6:.4g} Mbit/s, "
                f"{self.repeat} repeats)")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {key: getattr(self, key) for key in REPORT_KEYS}
        out["rows"] = [row.to_dict() for row in self.rows]
        out["links"] = {"labels": self.labels, **self.links}
        return out

    def __str__(self) -> str:
        head = "\n".join(textwrap.wrap(
            f"{self.topology}, {self.workload}: {self.hosts} hosts, {self.switches} switches, {self.cables} cables at "
            f"{self.rate_bps / 1e6:.4g} Mbit/s, queue {self.queue_bytes:,} B, MTU {self.mtu}, "
            f"TCP {self.congestion_control}.", 100)
            + textwrap.wrap(
            f"One flow: {self.goodput_bps / 1e6:.4g} Mbit/s of payload ({self.goodput_bps / self.rate_bps:.1%} of the "
            f"link), {self.header_overhead:.1%} header and {self.ack_overhead:.1%} acknowledgement bytes per payload "
            f"byte. Medians of {self.repeat} rounds after {self.warmup} warm-up, the methods in turn.", 100))
        columns: tuple[str, ...] = ("method", "routing", "moved by", "pred s", "meas s", "meas/pred", "pred gain",
                                    "meas gain", "links", "drops")
        cells: list[tuple[str, ...]] = [
            (r.method, r.routing, r.moved_by.removeprefix("MPI_"), f"{r.predicted_time_s:.3f}",
             f"{r.measured_time_s:.3f}", f"{r.measured_over_predicted:.2f}", f"{r.predicted_gain:.2f}",
             f"{r.measured_gain:.2f}", f"{r.link_bytes_deviation:.1%}", f"{r.drops:,}") for r in self.rows]
        if any(r.outcome != "completed" or r.crossed_pairs for r in self.rows):  # faults: which rounds completed
            columns += ("ok",)
            cells = [(*c, f"{r.rounds.count('completed')}/{len(r.rounds)}") for c, r in zip(cells, self.rows)]
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
        left = {0, 1, 2}

        def line(values: tuple[str, ...]) -> str:
            return "  ".join(v.ljust(w) if i in left else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths)))

        table = [line(columns), line(tuple("-" * w for w in widths)), *(line(c) for c in cells)]
        wrong = [r.method for r in self.rows if not r.verified]
        failed = [r for r in self.rows if r.outcome != "completed"]
        verified = (f"BYTES DIFFERED from those sent: {', '.join(wrong)}." if wrong
                    else "Every byte of every completed round arrived as sent." if failed
                    else "Every byte of every round arrived as sent.")
        foot = textwrap.fill(
            f"pred: the flow model at the link rates, with the header and acknowledgement bytes one flow measured. "
            f"Gains over the default routes. Ialltoallv: MPI_Ialltoallv, waited for without polling. links: the "
            f"largest difference between the bytes the kernel counted and the plan's plus overhead, on the links "
            f"with a tenth of the busiest's bytes or more. {verified} CPU idle {self.cpu_idle:.0%} during the runs "
            f"(load {self.load_before:.2f} before); built in {self.build_s:.1f} s, measured in {self.seconds:.0f} s.",
            100)
        notes = [textwrap.fill(note, 100) for note in self.notes]
        for r in self.rows:
            if r.crossed_pairs:
                notes.append(textwrap.fill(
                    f"{r.method}: {len(r.crossed_pairs)} of its pairs' routes crossed the failed cable"
                    + (f", {len(r.stranded_pairs)} still did after the sweep ({', '.join(r.stranded_pairs[:4])}"
                       f"{' ...' if len(r.stranded_pairs) > 4 else ''})" if r.stranded_pairs
                       else "; the network rerouted every one of them") + ".", 100))
        notes += [textwrap.fill(f"{r.method} FAILED {r.rounds.count('failed')} of {len(r.rounds)} rounds: {r.error}",
                                100) for r in failed]
        spread = next((r for r in self.rows if r.model_mean_s), None)
        if spread is not None and spread.model_mean_s:
            notes.append(textwrap.fill(
                f"ECMP: every flow is hashed by its addresses and ports at every switch. pred is the time of the paths "
                f"the job's connections took, read back from the kernels; over hash draws the model gives "
                f"{spread.method} {spread.model_mean_s:.3f} s on average ({spread.model_p05_s or 0:.3f} to "
                f"{spread.model_p95_s or 0:.3f} s from the 5th to the 95th percentile), and measured over that mean "
                f"{spread.measured_time_s / spread.model_mean_s:.2f}.", 100))
        if self.conditions:
            notes.insert(0, textwrap.fill(f"{self.conditions} The plans and predictions are the healthy network's: "
                                          f"meas/pred is how much slower each method ran.", 100))
        return "\n".join([head, *table, foot, *notes])

    def figure(self, path: str | Path) -> None:
        """Draw predicted against measured time per method, and every link's counted bytes against
        the expected, to ``path`` (PNG)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from ..experiments.figures import set_title

        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
        x = np.arange(len(self.rows))
        pred = [r.predicted_time_s for r in self.rows]
        meas = [r.measured_time_s for r in self.rows]
        left.bar(x - 0.2, pred, 0.4, label="predicted (flow model, with measured header and ack bytes)",
                 color="#9ecae1")
        left.bar(x + 0.2, meas, 0.4, label=f"measured (median of {self.repeat})", color="#3182bd")
        for i, r in enumerate(self.rows):
            left.plot([x[i] + 0.2] * len(r.measured_times_s), r.measured_times_s, "k.", markersize=3)
        left.set_xticks(x, [f"{r.method}\n{r.routing}" for r in self.rows], fontsize=8)
        left.set_ylabel("completion time (s)")
        left.legend(fontsize=7, loc="upper right")
        set_title(left, f"{self.topology}, {self.workload}, links at {self.rate_bps / 1e6:.4g} Mbit/s")
        top = 0.0
        for r in self.rows:
            data = self.links.get(r.method)
            if not data:
                continue
            expected, counted = np.asarray(data["expected"]), np.asarray(data["counted"])
            busy = expected > 0
            right.plot(expected[busy] / 2**20, counted[busy] / 2**20, ".", label=r.method, alpha=0.7)
            top = max(top, float(expected.max(initial=0)), float(counted.max(initial=0)))
        right.plot([0, top / 2**20], [0, top / 2**20], "k-", linewidth=0.5, label="counted = expected")
        right.set_xlabel("expected bytes per run: the plan's plus header and acks (MiB)")
        right.set_ylabel("bytes the kernel counted per run (MiB)")
        right.legend(fontsize=7)
        set_title(right, "every link's bytes: the kernel's counters against the plan")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
