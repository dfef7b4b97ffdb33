"""Host lists: which endpoints of a topology a pattern or a trace runs on, and in what order.

A host list is Slurm's syntax (``node[001-064,070],gpu[1-4]``,
:func:`optiq.topology.expand_hostlist`) or ``@FILE``, a file of such lists (one or more per
line, ``#`` comments). Names are the topology's host names: a fabric's or Slurm file's
host names, or ``H<i>`` for endpoint ``i`` of the built-in topologies. The pattern's
endpoint ``i`` is then the ``i``-th host of the list.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import TopologyError, WorkloadError
from ..topology.hostlist import expand_hostlist
from .demands import Demands

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["named_hosts", "on_hosts"]


def named_hosts(topology: Topology, expression: str) -> np.ndarray:
    """The endpoint ids of a host list (or ``@FILE``), in its order.

    Raises
    ------
    TopologyError
        For a malformed list or a name the topology does not have (naming it).
    WorkloadError
        For a host listed twice, or an unreadable ``@FILE``.

    Examples
    --------
    >>> from optiq.topology import torus
    >>> named_hosts(torus((4, 4)), "H[4-6],H0").tolist()
    [4, 5, 6, 0]
    """
    text = expression
    if expression.startswith("@"):
        path = Path(expression[1:])
        try:
            lines = path.read_text(encoding="utf-8-sig").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise WorkloadError(f"cannot read host file {str(path)!r}: {exc}") from None
        items = [line.split("#", 1)[0].strip() for line in lines]
        text = ",".join(item for item in items if item)
        if not text:
            raise WorkloadError(f"host file {str(path)!r} names no host")
    names = expand_hostlist(text)
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            raise WorkloadError(f"host {name!r} is listed twice in {expression!r} (positions {seen[name] + 1} and "
                                f"{i + 1})")
        seen[name] = i
    try:
        return topology.endpoints_named(names)
    except TopologyError as exc:
        raise TopologyError(f"host list {expression!r}: {exc}") from None


def on_hosts(demands: Demands, hosts: np.ndarray) -> Demands:
    """Demands between positions ``0..len(hosts)-1`` put on the endpoints ``hosts``.

    Raises
    ------
    WorkloadError
        If a job names a position beyond the list.

    Examples
    --------
    >>> on_hosts(Demands([0, 1], [2, 0], [5, 5]), np.array([7, 3, 9])).to_rows()
    [(7, 9, 5), (3, 7, 5)]
    """
    top = int(max(demands.src.max(), demands.dst.max()))
    if top >= hosts.size:
        raise WorkloadError(f"the demands name endpoint {top}, but the host list has {hosts.size} hosts")
    return Demands(hosts[demands.src], hosts[demands.dst], demands.nbytes, name=f"{demands.name}, {hosts.size} hosts")
