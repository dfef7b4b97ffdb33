"""Candidate paths kept for the pairs a process plans again.

An application plans the same pairs again and again with other bytes (an all-to-all-v whose
counts change from call to call), and every candidate generator's paths depend on the pairs
and its parameters, never on the bytes. So the last set made for a topology is kept with what
made it (its recipe: the kind and parameters) and its pairs, and a plan of the same pairs by
the same recipe gets it back instead of searching again. Other things that depend on the pairs
alone (the cuts of the lower bound, the mean hops of the memory estimate) are kept with them
(:func:`kept_for_pairs`). What is derived from a set (its paths in a plan's space, their
stops) is kept with the very set while it lives (:func:`derived_from`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..topology import Topology
    from ..workloads import Demands
    from .pathset import PathSet

__all__ = ["kept_candidates", "kept_for_pairs", "forget_candidates", "derived_from", "KEPT_LINKS", "FORWARDED_STOPS"]

#: The key in :func:`derived_from`'s dict of the forwarded stops a generator made with its set
#: (coordinate-built torus routes, which tell them from their recipes).
FORWARDED_STOPS = "forwarded stops"

#: The most links a kept set may hold (about 11 bytes each with its offsets, jobs and stops:
#: 8 million hold a 512-host all-to-all-v's shortest torus routes); a larger one is not kept.
#: Other things kept for the pairs hold at most as many entries.
KEPT_LINKS = 8_000_000

#: Per topology: the last pairs asked for and what was kept for them.
_PAIRS: weakref.WeakKeyDictionary[Topology, tuple[np.ndarray, np.ndarray, dict[Hashable, Any]]] = \
    weakref.WeakKeyDictionary()


def kept_for_pairs(topology: Topology, demands: Demands) -> dict[Hashable, Any]:
    """What was kept on ``topology`` for the pairs of ``demands`` (``demands.src``,
    ``demands.dst``, in order), a dict to fill; where the pairs differ from the last ones asked
    for on ``topology``, what was kept for those is dropped and the dict is new. A value must
    depend on the pairs alone (never on the bytes) and never hold ``topology``, or the topology
    would never be freed.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> t = torus((4, 4))
    >>> kept_for_pairs(t, Demands([0], [5], [10]))["hops"] = 2
    >>> kept_for_pairs(t, Demands([0], [5], [99])), kept_for_pairs(t, Demands([0], [6], [10]))
    ({'hops': 2}, {})
    """
    kept = _PAIRS.get(topology)
    if kept is None or not (np.array_equal(kept[0], demands.src) and np.array_equal(kept[1], demands.dst)):
        kept = (demands.src.copy(), demands.dst.copy(), {})
        _PAIRS[topology] = kept
    return kept[2]


def kept_candidates(topology: Topology, demands: Demands, recipe: Hashable,
                    make: Callable[[], PathSet], *, slot: str = "candidates") -> PathSet:
    """``make()``, or the very paths it made last on ``topology`` where ``recipe``, the pairs
    (``demands.src``, ``demands.dst``, in order) and the topology's fabric (its forwarding
    tables, which chains of the network's routes follow) are the same as then. One set is kept
    per ``slot`` (the candidates; the planner keeps the default routes in another).

    Examples
    --------
    >>> from optiq.topology import torus
    >>> from optiq.workloads import Demands
    >>> from optiq.paths import diverse_paths
    >>> t, d = torus((4, 4)), Demands([0], [5], [10])
    >>> a = kept_candidates(t, d, ("diverse", 4), lambda: diverse_paths(t, d, 4))
    >>> kept_candidates(t, Demands([0], [5], [99]), ("diverse", 4), lambda: 1 / 0) is a   # other bytes
    True
    """
    kept = kept_for_pairs(topology, demands)
    last = kept.get(slot)
    if last is not None and last[0] == recipe and last[1] is topology.fabric:
        return last[2]
    paths = make()
    if paths.links.size <= KEPT_LINKS:
        kept[slot] = (recipe, topology.fabric, paths)
    else:
        kept.pop(slot, None)
    return paths


def forget_candidates() -> None:
    """Drop the candidate sets and all else kept for pairs (for timing a cold start, or memory)."""
    _PAIRS.clear()


#: What was derived from a set on a topology, by the set's identity: the set, its topology as
#: weak references, the fabric, and the derived values.
_DERIVED: dict[int, tuple[weakref.ref, weakref.ref, object, dict[str, Any]]] = {}


def derived_from(paths: PathSet, topology: Topology) -> dict[str, Any]:
    """What was kept for the very object ``paths`` on ``topology`` and its fabric as it is now
    (an empty dict to fill where nothing was), freed with ``paths``. A value must never hold
    ``paths`` itself, or it would never be freed."""
    key = id(paths)
    kept = _DERIVED.get(key)
    if kept is None or kept[0]() is not paths or kept[1]() is not topology or kept[2] is not topology.fabric:
        def drop(_: weakref.ref, table: dict = _DERIVED) -> None:   # the set is freed: so is what was kept for it
            table.pop(key, None)   # (the table bound here: the module's names are gone at exit)

        kept = (weakref.ref(paths, drop), weakref.ref(topology), topology.fabric, {})
        _DERIVED[key] = kept
    return kept[3]
