"""Memory guards: refuse a request that cannot fit before it starts, with the estimate.

The estimates are per element of the structures that grow with the problem, measured on
this code (peak resident memory over the step, divided by its element count): a torus
topology holds about 110 bytes per link while it is built; a plan about 150 bytes per
(path, hop) entry through planning, metrics and its JSON file (the file's Python objects
dominate).
"""

from __future__ import annotations

import os

from ..errors import OptiqError

__all__ = ["ResourceError", "available_memory", "check_memory", "peak_memory_mib", "usable_cores",
           "TOPOLOGY_BYTES_PER_LINK", "PLAN_BYTES_PER_ENTRY"]

TOPOLOGY_BYTES_PER_LINK = 110
PLAN_BYTES_PER_ENTRY = 150


class ResourceError(OptiqError):
    """A request would need more memory than this machine has."""


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; else every core the machine has)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def available_memory() -> int:
    """Bytes of memory available to a new allocation (``MemAvailable``; else all of it)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def peak_memory_mib() -> float:
    """The most resident memory this process has held so far, MiB (0 where unknown)."""
    try:
        import resource
    except ImportError:  # not on every platform
        return 0.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


#: Estimates below this many bytes are not checked: reading the available memory costs a small
#: plan more than its other checks together, and every machine this runs on has that much.
CHECK_MEMORY_FROM = 64 * 2**20


def check_memory(estimate: float, what: str, hint: str = "") -> None:
    """Raise :class:`ResourceError` when ``estimate`` bytes exceed the available memory
    (estimates under :data:`CHECK_MEMORY_FROM` pass unread).

    Examples
    --------
    >>> check_memory(1e3, "a small torus")
    >>> check_memory(1e20, "a huge torus")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ResourceError: a huge torus would need about 1e+11 GB of memory ...
    """
    if estimate < CHECK_MEMORY_FROM:
        return
    free = available_memory()
    if estimate > free:
        raise ResourceError(f"{what} would need about {estimate / 1e9:.3g} GB of memory, and {free / 1e9:.3g} GB "
                            f"are available{'; ' + hint if hint else ''}")


def cpu_times() -> tuple[float, float]:
    """``(idle, total)`` CPU time of the whole machine so far, from ``/proc/stat`` (clock ticks);
    ``(0, 0)`` where there is no such file."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    return fields[3] + fields[4], sum(fields[:8])


def idle_share(before: tuple[float, float], after: tuple[float, float]) -> float | None:
    """The machine's idle share of its CPU time between two :func:`cpu_times` (None: unknown)."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else None
