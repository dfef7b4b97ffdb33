"""What ails the emulated network for a whole run: random loss on every link, cables at a fraction of their rate.

``optiq testbed run --loss 1 --slow S0-S4:0.25`` measures every method on a network whose every
link direction drops 1% of its packets at random (nftables, at every interface's egress, before its queue) and whose
cable ``S0-S4`` runs at a quarter of its rate both ways. The plans are made for the healthy
network, as they would be on a real one; the report says how much slower each method ran than
its prediction there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TestbedError, TopologyError
from ..topology.cables import cable_link, reverse_link

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["Conditions", "parse_slow"]


@dataclass(frozen=True)
class Conditions:
    """Loss on every link direction (percent) and cables slowed: ``(link, factor, name)``, the
    link leaving the named end (both directions of its cable run at ``factor`` of their rate)
    and the cable as the user named it."""

    loss_percent: float = 0.0
    slow: tuple[tuple[int, float, str], ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.loss_percent < 100:
            raise TestbedError(f"--loss must be a percentage in [0, 100), got {self.loss_percent:g}")
        for _, factor, name in self.slow:
            if not 0 < factor <= 1:
                raise TestbedError(f"--slow {name}: the factor must be in (0, 1] (a fraction of the cable's rate), "
                                   f"got {factor:g}")

    @property
    def healthy(self) -> bool:
        return self.loss_percent == 0 and not self.slow

    def rate_factors(self, topology: Topology) -> np.ndarray:
        """Every link's fraction of its healthy rate."""
        factors = np.ones(topology.num_links)
        for link, factor, _ in self.slow:
            factors[[link, reverse_link(topology, link)]] = factor
        return factors

    def describe(self) -> str:
        """One sentence, or "" for a healthy network."""
        parts = [f"cable {name} at {factor:g} of its rate" for _, factor, name in self.slow]
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
    slow, seen = [], set()
    for spec in specs:
        cable, sep, factor_text = str(spec).rpartition(":")
        if not sep or not cable:
            raise TestbedError(f"--slow {spec!r}: give CABLE:FACTOR, e.g. S0-S4:0.25 for a quarter of its rate")
        try:
            factor = float(factor_text)
        except ValueError:
            raise TestbedError(f"--slow {spec!r}: the factor {factor_text!r} is not a number") from None
        try:
            link = cable_link(topology, cable)
            both = frozenset((link, reverse_link(topology, link)))
        except TopologyError as exc:
            raise TestbedError(f"--slow {spec!r}: {exc}") from None
        if both in seen:
            raise TestbedError(f"--slow names cable {cable} twice")
        seen.add(both)
        slow.append((link, factor, cable))
    return tuple(slow)
