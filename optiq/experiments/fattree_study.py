"""The fat-tree routing study of seed 001: node selection x process placement x routing.

An application's ranks run ``ranks_per_node`` to a host (8 by default) on a fat-tree (by
default the published 20-host cluster, ``cluster:hosts=20,edges=4,cores=2``, where 128
ranks use 16 hosts). Node selection is *linear* or *random* (seeded); process placement is
*block* or *cyclic* (:mod:`optiq.workloads.placement`). The ranks' traffic is summed per
host pair (traffic within a host is left out) and routed by D-mod-K or by dynamic routing
(heaviest pair first, least-loaded path). The result is the busiest link's bytes,
normalised to linear / block / D-mod-K, as in the paper's figures.

Dynamic routing is per-pair rules, which the study's OpenFlow cluster installs: a free plan
(``plan_routing``), an upper bound on what a network that routes by destination alone can
do. ``realized_max_link_bytes`` is its busiest link when every pair takes the network's own
route instead (D-mod-K, or a fabric's tables): what it is worth without the rules.

The traffic is the CG and MILC models of :mod:`optiq.workloads.traffic` (1 MiB per
exchange), or a measured trace: ``optiq experiment fattree --traffic PATH`` takes a PFProf
directory or tarball, a rank-triple CSV or a matrix (:func:`optiq.workloads.read_traffic`),
and ``--topology`` any fat-tree or cluster spec, or a fabric (``ibnet:``, routed by its
forwarding tables or minhop; the routing column then says ``default``) or a Slurm
``topology.conf``. Every row names the hosts used (a host list) and its busiest link.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import WorkloadError
from ..paths import realized_link_bytes
from ..planner import make_plan, planner_named
from ..topology import compress_hostlist, from_spec
from ..workloads import host_demands, milc_traffic, nas_cg_traffic, read_traffic
from .figures import set_title
from .registry import register

if TYPE_CHECKING:
    from collections.abc import Callable

#: The published cluster of seed 001.
DEFAULT_TOPOLOGY = "cluster:hosts=20,edges=4,cores=2"
RANKS_PER_NODE = 8


def _plot(rows, ax):
    labels = list(dict.fromkeys((r["app"], r["selection"], r["placement"]) for r in rows))
    x = np.arange(len(labels))
    routings = list(dict.fromkeys(r["routing"] for r in rows))
    width = 0.8 / len(routings)
    for i, routing in enumerate(routings):
        vals = [next(r["normalised_max_load"] for r in rows if (r["app"], r["selection"], r["placement"]) == lab
                     and r["routing"] == routing) for lab in labels]
        ax.bar(x + (i - (len(routings) - 1) / 2) * width, vals, width=width, label=routing)
    ax.set_xticks(x, [f"{s}\n{p}" for _, s, p in labels], fontsize=8)
    apps = list(dict.fromkeys(a for a, _, _ in labels))
    for app in apps:  # the application under its group of bars
        at = [i for i, lab in enumerate(labels) if lab[0] == app]
        ax.annotate(app, xy=(np.mean(at), 0), xycoords=("data", "axes fraction"), xytext=(0, -30),
                    textcoords="offset points", ha="center", va="top", fontsize=9, fontweight="bold")
    for i in range(1, len(labels)):
        if labels[i][0] != labels[i - 1][0]:
            ax.axvline(i - 0.5, color="grey", linewidth=0.8)
    ax.axhline(1.0, color="black", linewidth=0.6, linestyle=":")
    ax.set_xlabel("node selection / process placement", labelpad=18)
    ax.set_ylabel("busiest link / linear-block default")
    set_title(ax, f"{rows[0]['topology']}: busiest link by node selection, placement and routing")
    ax.legend(fontsize=8)


@register("fattree", "fat-tree: max link load by node selection, placement and routing (seed 001)", _plot)
def fattree_study(quick: bool, say: Callable[[str], None], traffic: str | None = None, topology: str | None = None,
                  ranks_per_node: int = RANKS_PER_NODE, traffic_unit: float = 1.0, seed: int = 0) -> list[dict]:
    spec = topology or DEFAULT_TOPOLOGY
    if spec.split(":")[0] not in ("fattree", "cluster", "ibnet", "slurm"):
        raise WorkloadError(f"the fat-tree study needs a fattree:, cluster:, ibnet: or slurm: topology, got {spec!r}")
    topo = from_spec(spec)
    default = "dmodk" if topo.default_routing == "D-mod-K" else "default"
    apps = [("CG", nas_cg_traffic()), ("MILC", milc_traffic())] if traffic is None else \
        [(_trace_name(traffic), read_traffic(traffic, unit=traffic_unit))]
    rows = []
    for app, matrix in apps:
        base = None
        for selection in ("linear", "random"):
            for placement in ("block", "cyclic"):
                try:
                    hosts = host_demands(matrix, topo.num_endpoints, ranks_per_node=ranks_per_node,
                                         selection=selection, placement=placement, seed=seed)
                except WorkloadError as exc:
                    raise WorkloadError(f"{traffic or app} on {topo.name}: {exc}") from None
                used = compress_hostlist(topo.endpoint_names[h] for h in dict.fromkeys(hosts.host_of.tolist()))
                for routing, method in ((default, "default"), ("dynamic", "dynamic")):
                    say(f"{app} {selection}/{placement} {routing}")
                    plan = make_plan(topo, hosts.demands, planner_named(method, k=4 if quick else 8)[0])
                    busiest = int(np.argmax(plan.link_bytes))
                    load = float(plan.link_bytes[busiest])
                    base = load if base is None else base
                    realized = realized_link_bytes(plan.paths, plan.path_bytes, topo)
                    rows.append({"app": app, "topology": topo.name, "ranks": matrix.shape[0],
                                 "selection": selection, "placement": placement, "routing": routing,
                                 "network_bytes": int(hosts.demands.nbytes.sum()),
                                 "intra_host_bytes": round(hosts.intra_host_bytes),
                                 "plan_routing": plan.routing, "max_link_bytes": load,
                                 "normalised_max_load": load / base,
                                 "realized_max_link_bytes": float(realized.max()),
                                 "busiest_link": topo.link_label(busiest), "hosts": used})
    return rows


def _trace_name(path: str) -> str:
    name = Path(path).name
    for suffix in (".tar.gz", ".tgz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return Path(name).stem or name
