"""Slurm's ``topology.conf`` of the tree plugin.

One line per switch: ``SwitchName=S`` with its children, ``Nodes=<host list>`` (hosts)
and/or ``Switches=<host list>`` (switches), in Slurm's host-list syntax
(:mod:`optiq.topology.hostlist`); parameter names are case-insensitive, ``#`` starts a
comment. ``LinkSpeed=`` is accepted and not used: Slurm gives it no unit.

Every switch is a node named by its ``SwitchName``, every host a node named by its host
name (hosts first, in natural order of their names, then the switches in file order); a
parent-child pair is a cable, two directed links of capacity ``bw`` (the file gives no
speeds; default :data:`SLURM_LINK_BANDWIDTH`). A host under two switches is cabled to
both. The default routes are D-mod-K (:func:`optiq.paths.system_routes`): the file says
nothing of the fabric's forwarding tables.

Refused, naming the line: a line without ``SwitchName=``, an unknown parameter, a switch
defined twice, a child switch never defined, a switch that is its own child, a name used
for both a switch and a host, and the block plugin's ``BlockName=`` lines.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import TopologyError
from .base import Topology
from .hostlist import expand_hostlist
from .ibnet import natural_key

__all__ = ["read_topology_conf", "SLURM_LINK_BANDWIDTH"]

#: Default link capacity of a Slurm topology: 100 Gbit/s, in bytes/s.
SLURM_LINK_BANDWIDTH = 12.5e9

_KEYS = {"switchname", "switches", "nodes", "linkspeed"}


def read_topology_conf(path: str | Path, *, bandwidth: float = SLURM_LINK_BANDWIDTH,
                       spec: str | None = None) -> Topology:
    """Read a ``topology.conf`` (tree plugin) into a :class:`Topology` (module docstring).

    Raises
    ------
    TopologyError
        Naming the file and line of the first problem, or if the hosts are not connected.

    Examples
    --------
    >>> import tempfile, os
    >>> f = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    >>> _ = f.write("SwitchName=s0 Nodes=tux[0-3]\\nSwitchName=s1 Nodes=tux[4-7]\\n"
    ...             "SwitchName=s2 Switches=s[0-1]  # the top\\n"); f.close()
    >>> t = read_topology_conf(f.name); os.unlink(f.name)
    >>> t.num_endpoints, t.num_nodes, t.num_links, t.node_names[-3:]
    (8, 11, 20, ['s0', 's1', 's2'])
    """
    p = Path(path)
    name = f"topology file {str(p)!r}"
    if not p.is_file():
        raise TopologyError(f"{name} " + ("is a directory" if p.is_dir() else "does not exist"))
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"cannot read {name}: {exc}") from None
    switches: dict[str, int] = {}  # name -> line
    children: list[tuple[str, list[str], list[str], int]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{name}, line {number}"
        params: dict[str, str] = {}
        for token in line.split():
            key, eq, value = token.partition("=")
            key = key.lower()
            if key in ("blockname", "blocksizes"):
                raise TopologyError(f"{where}: {token.split('=')[0]}= belongs to the block plugin; optiq reads the "
                                    f"tree plugin's SwitchName= lines")
            if not eq or key not in _KEYS:
                raise TopologyError(f"{where}: unknown parameter {token!r} (expected SwitchName=, Switches=, Nodes=, "
                                    f"LinkSpeed=)")
            if key in params:
                raise TopologyError(f"{where}: {token.split('=')[0]}= given twice")
            params[key] = value
        if "switchname" not in params or not params["switchname"]:
            raise TopologyError(f"{where}: a line without SwitchName=")
        switch = params["switchname"]
        if switch in switches:
            raise TopologyError(f"{where}: switch {switch!r} is defined again (first on line {switches[switch]})")
        switches[switch] = number
        try:
            hosts = expand_hostlist(params["nodes"]) if "nodes" in params else []
            subs = expand_hostlist(params["switches"]) if "switches" in params else []
        except TopologyError as exc:
            raise TopologyError(f"{where}: {exc}") from None
        if switch in subs:
            raise TopologyError(f"{where}: switch {switch!r} lists itself in Switches=")
        children.append((switch, hosts, subs, number))
    if not switches:
        raise TopologyError(f"{name} has no SwitchName= lines")
    host_names = sorted({h for _, hosts, _, _ in children for h in hosts}, key=natural_key)
    clash = next((h for h in host_names if h in switches), None)
    if clash is not None:
        raise TopologyError(f"{name}: {clash!r} names both a switch (line {switches[clash]}) and a host")
    if len(host_names) < 2:
        raise TopologyError(f"{name} has {len(host_names)} host(s) under Nodes=; at least 2 are needed")
    index = {h: i for i, h in enumerate(host_names)}
    index.update((s, len(host_names) + i) for i, s in enumerate(switches))
    pairs: list[tuple[int, int]] = []
    for switch, hosts, subs, number in children:
        for sub in subs:
            if sub not in switches:
                raise TopologyError(f"{name}, line {number}: switch {switch!r} lists {sub!r} in Switches=, which no "
                                    f"SwitchName= line defines")
            pairs.append((index[switch], index[sub]))
        pairs.extend((index[switch], index[h]) for h in hosts)
    edges = np.array(sorted(set(pairs)), dtype=np.int64)
    src = np.concatenate((edges[:, 0], edges[:, 1]))
    dst = np.concatenate((edges[:, 1], edges[:, 0]))
    order = np.lexsort((dst, src))
    topology = Topology(name=f"slurm {p.name}: {len(host_names)} hosts, {len(switches)} switches",
                        num_nodes=len(index), link_src=src[order], link_dst=dst[order],
                        capacity=np.full(src.size, float(bandwidth)), num_endpoints=len(host_names),
                        spec=spec or f"slurm:{p}", names=host_names + list(switches))
    topology.check_connected()
    return topology
