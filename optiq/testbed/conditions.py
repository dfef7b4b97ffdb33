"""What ails the emulated network: random loss on every link, cables at a fraction of their rate, cables that fail.

``optiq testbed run --loss 1 --slow S0-S4:0.25`` measures every method on a network whose every
link direction drops 1% of its packets at random (nftables, at every interface's egress, before its queue) and whose
cable ``S0-S4`` runs at a quarter of its rate both ways. The plans are made for the healthy
network, as they would be on a real one; the report says how much slower each method ran than
its prediction there.

``--fail S0-S4@0.5`` takes cable ``S0-S4`` down half a second into every measured round: from
then on it carries nothing either way (nftables drops every packet at both ends, as a switch
drops what its tables route into a dead port; the kernel's routes stay as installed). After
``sweep_s`` (the subnet manager's sweep) the network's own routes are recomputed without it
(:func:`optiq.paths.failover.routes_after_failure`), installed and read back; per-pair rules
and job tables stay as installed, as they would on a real fabric. A round under a failure
must end within :func:`fault_bound`; one that does not is reported as failed, and the next
rounds run in a new MPI job on the healthy network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TestbedError, TopologyError
from ..runtime.watch import FAULT_GRACE_S, FAULT_MULTIPLE  # the bound of a planned transfer, from the reroute
from ..topology.cables import cable_link, reverse_link

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["Conditions", "parse_slow", "parse_fail", "fault_bound", "DEFAULT_SWEEP_S", "FAULT_MULTIPLE",
           "FAULT_GRACE_S"]

#: Seconds from a cable's failure to the network's new routes by default (a subnet manager's sweep).
DEFAULT_SWEEP_S = 1.0


def fault_bound(predicted_s: float, rerouted_at_s: float) -> float:
    """Seconds a round may last when a cable fails in it: :data:`FAULT_MULTIPLE` times its
    predicted time after the network rerouted (``rerouted_at_s`` into the round), plus
    :data:`FAULT_GRACE_S`.

    Examples
    --------
    >>> fault_bound(2.0, 1.5)
    16.5
    """
    return rerouted_at_s + FAULT_MULTIPLE * predicted_s + FAULT_GRACE_S


@dataclass(frozen=True)
class Conditions:
    """Loss on every link direction (percent) and cables slowed: ``(link, factor, name)``, the
    link leaving the named end (both directions of its cable run at ``factor`` of their rate)
    and the cable as the user named it; cables that fail: ``(link, seconds, name)``, both
    directions dead from ``seconds`` into every measured round; and the sweep's delay before
    the network routes around them."""

    loss_percent: float = 0.0
    slow: tuple[tuple[int, float, str], ...] = ()
    fail: tuple[tuple[int, float, str], ...] = ()
    sweep_s: float = DEFAULT_SWEEP_S

    def __post_init__(self) -> None:
        if not 0 <= self.loss_percent < 100:
            raise TestbedError(f"--loss must be a percentage in [0, 100), got {self.loss_percent:g}")
        for _, factor, name in self.slow:
            if not 0 < factor <= 1:
                raise TestbedError(f"--slow {name}: the factor must be in (0, 1] (a fraction of the cable's rate), "
                                   f"got {factor:g}")
        for _, at, name in self.fail:
            if not (at >= 0 and np.isfinite(at)):
                raise TestbedError(f"--fail {name}@{at:g}: the time must be seconds >= 0 into the round")
        if not (self.sweep_s >= 0 and np.isfinite(self.sweep_s)):
            raise TestbedError(f"--sweep must be seconds >= 0, got {self.sweep_s:g}")

    @property
    def healthy(self) -> bool:
        return self.loss_percent == 0 and not self.slow and not self.fail

    def dead_links(self, topology: Topology, upto_s: float = float("inf")) -> np.ndarray:
        """Both links of every cable that has failed by ``upto_s`` seconds into a round."""
        links = [x for link, at, _ in self.fail if at <= upto_s for x in (link, reverse_link(topology, link))]
        return np.unique(np.asarray(links, dtype=np.int64))

    @property
    def rerouted_at_s(self) -> float:
        """Seconds into a round when the network has routed around the last failure."""
        return max((at for _, at, _ in self.fail), default=0.0) + self.sweep_s

    def rate_factors(self, topology: Topology) -> np.ndarray:
        """Every link's fraction of its healthy rate."""
        factors = np.ones(topology.num_links)
        for link, factor, _ in self.slow:
            factors[[link, reverse_link(topology, link)]] = factor
        return factors

    def describe(self) -> str:
        """One sentence, or "" for a healthy network."""
        parts = [f"cable {name} at {factor:g} of its rate" for _, factor, name in self.slow]
        parts += [f"cable {name} fails {at:g} s into every measured round" for _, at, name in self.fail]
        if self.fail:
            parts.append(f"the network routes around a failed cable {self.sweep_s:g} s later (its subnet manager's "
                         f"sweep)")
        if self.loss_percent:
            parts.append(f"{self.loss_percent:g}% random loss on every link direction")
        return ("Conditions: " + "; ".join(parts) + ".") if parts else ""


def parse_slow(topology: Topology, specs: list[str] | tuple[str, ...]) -> tuple[tuple[int, float, str], ...]:
    """``CABLE:FACTOR`` specs as :attr:`Conditions.slow`'s ``(link, factor, name)``.

    Raises
    ------
    TestbedError
        Naming the spec: no ``:FACTOR``, a factor that is not a number, an unknown cable, or a
        cable given twice.
    """
    return _cable_specs(topology, specs, "--slow", ":", "CABLE:FACTOR, e.g. S0-S4:0.25 for a quarter of its rate",
                        "the factor")


def parse_fail(topology: Topology, specs: list[str] | tuple[str, ...]) -> tuple[tuple[int, float, str], ...]:
    """``CABLE@SECONDS`` specs as :attr:`Conditions.fail`'s ``(link, seconds, name)``.

    Raises
    ------
    TestbedError
        Naming the spec: no ``@SECONDS``, a time that is not a number, an unknown cable, or a
        cable given twice.

    Examples
    --------
    >>> from optiq.topology import from_spec
    >>> parse_fail(from_spec("torus:4x4"), ["H0-H1@0.5"])
    ((2, 0.5, 'H0-H1'),)
    """
    return _cable_specs(topology, specs, "--fail", "@", "CABLE@SECONDS, e.g. S0-S4@0.5 for half a second into "
                        "every measured round", "the time")


def _cable_specs(topology: Topology, specs: list[str] | tuple[str, ...], option: str, separator: str, form: str,
                 number: str) -> tuple[tuple[int, float, str], ...]:
    """``CABLE<separator>NUMBER`` specs as ``(link, number, cable)``, each cable once."""
    out, seen = [], set()
    for spec in specs:
        cable, sep, text = str(spec).rpartition(separator)
        if not sep or not cable:
            raise TestbedError(f"{option} {spec!r}: give {form}")
        try:
            value = float(text)
        except ValueError:
            raise TestbedError(f"{option} {spec!r}: {number} {text!r} is not a number") from None
        try:
            link = cable_link(topology, cable)
            both = frozenset((link, reverse_link(topology, link)))
        except TopologyError as exc:
            raise TestbedError(f"{option} {spec!r}: {exc}") from None
        if both in seen:
            raise TestbedError(f"{option} names cable {cable} twice")
        seen.add(both)
        out.append((link, value, cable))
    return tuple(out)
