"""Chunk-level simulation: discrete-event store-and-forward of every chunk along its path.

Every path's bytes are cut into chunks of the plan's chunk size. A chunk crosses a link
in ``(bytes + header) / capacity`` seconds plus ``hop_latency``; each link serves the
chunks that reach it first come, first served. Where the path stops (``PathSet.stops``: a
rank that receives and sends on its chunks) a chunk waits for the rank to copy it
(``forward_cost`` per chunk, one chunk at a time per rank) before it queues for the next
link; elsewhere on a leg (a switch, or a rank the leg passes) it goes straight on, as the
executor and the network do (:mod:`optiq.paths.routing`). For one path of ``h`` hops, each
a leg of its own, and ``n`` equal chunks this gives the pipelined store-and-forward time
``h * (s + H) / c + h * L + (h - 1) * F + (n - 1) * max((s + H) / c, F)``.

:func:`simulate_direct` is the transfer MPI does without optiq: every path's message is
cut by the hardware into packets that cut through the routers, so no node copies
anything. Its time is the flow-level time of the bytes plus packet headers under max-min
fair sharing, plus the per-hop latency along the path.

Defaults describe Blue Gene/Q: 1.8 GB/s links come from the topology, 45 ns per hop,
a 32-byte header per chunk and per 512-byte packet, and 1 µs to forward a chunk in
software. ``link_rate_Bps`` replaces every link's capacity (an emulated or measured
rate). :func:`optiq.sim.fit_chunk_model` fits the model to executor runs.
"""

from __future__ import annotations

import heapq
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PlanError
from ..utils.jsonfile import read_tagged, write_tagged
from ..utils.progress import Progress, Ticker
from ..utils.resources import check_memory

if TYPE_CHECKING:
    from ..plan import Plan
    from ..topology import Topology

#: Memory of one pending event (a tuple on the heap), bytes.
EVENT_BYTES = 150
#: Events simulated per second, about (for the estimate printed before a long run).
EVENTS_PER_S = 1.5e5

__all__ = ["ChunkModel", "ChunkResult", "simulate_chunks", "simulate_direct", "load_chunk_model"]


@dataclass(frozen=True)
class ChunkModel:
    """Parameters of :func:`simulate_chunks` and :func:`simulate_direct` (seconds and bytes).

    ``link_rate_Bps=None`` keeps the topology's link capacities.
    """

    hop_latency_s: float = 45e-9
    header_bytes: int = 32
    forward_cost_s: float = 1e-6
    packet_bytes: int = 512
    link_rate_Bps: float | None = None

    def __post_init__(self) -> None:
        if min(self.hop_latency_s, self.header_bytes, self.forward_cost_s) < 0:
            raise PlanError(f"chunk model parameters must be non-negative: {self}")
        if self.packet_bytes < 1 or (self.link_rate_Bps is not None and not self.link_rate_Bps > 0):
            raise PlanError(f"packet size and link rate must be positive: {self}")

    def capacities(self, topology: Topology) -> np.ndarray:
        """Every link's rate under this model."""
        if self.link_rate_Bps is None:
            return topology.capacity
        return np.full(topology.num_links, float(self.link_rate_Bps))

    def save(self, path: str | Path) -> None:
        """Write the parameters as JSON (read back with :func:`load_chunk_model`)."""
        write_tagged(path, "optiq-chunk-model", asdict(self))


def load_chunk_model(path: str | Path) -> ChunkModel:
    """Read a :class:`ChunkModel` written by :meth:`ChunkModel.save`.

    Raises
    ------
    PlanError
        For a missing, corrupt or foreign file, naming it.
    """
    data = read_tagged(path, "optiq-chunk-model", "chunk model", PlanError, " (see optiq fit-chunk)")
    try:
        return ChunkModel(**data)
    except TypeError as exc:
        raise PlanError(f"chunk model {str(path)!r}: {exc}") from None


@dataclass(frozen=True)
class ChunkResult:
    """Completion times of a chunk-level simulation."""

    completion_time_s: float
    path_finish_s: np.ndarray = field(repr=False)
    chunks: int
    events: int
    copies: int = 0  #: chunk copies at intermediate ranks (the executor's forwarded chunks)


def simulate_chunks(plan: Plan, model: ChunkModel = ChunkModel(), chunk_size: int | None = None, *,
                    progress: Progress | None = None) -> ChunkResult:
    """Simulate every chunk of ``plan`` (see the module docstring).

    ``progress`` receives the events processed every couple of seconds (two per chunk and
    hop).

    Raises
    ------
    PlanError
        If ``chunk_size`` is not positive.

    Examples
    --------
    One path of 2 hops, 4 chunks of 1,000 bytes, 1 MB/s links, no header, latency or copy
    cost: the first chunk needs 2 ms, each later one 1 ms more.

    >>> from optiq import Demands, make_plan
    >>> from optiq.topology import mesh
    >>> plan = make_plan(mesh((3,), bandwidth=1e6), Demands([0], [2], [4000]), "default", chunk_size=1000,
    ...                  routing="free")             # free plans stop at every rank: here at node 1
    >>> round(simulate_chunks(plan, ChunkModel(0, 0, 0)).completion_time_s, 9)
    0.005
    """
    chunk = plan.chunk_size if chunk_size is None else int(chunk_size)
    if chunk < 1:
        raise PlanError(f"chunk size must be positive, got {chunk}")
    ps, topo = plan.paths, plan.topology
    nchunks = -(-plan.path_bytes // chunk)
    check_memory(float(nchunks.sum()) * EVENT_BYTES, f"simulating {int(nchunks.sum()):,} chunks of {chunk:,} bytes",
                 hint="simulate larger chunks")
    cap = model.capacities(topo)
    offsets = ps.offsets
    link_free = np.zeros(topo.num_links)
    node_free = np.zeros(topo.num_nodes)
    finish = np.zeros(ps.num_paths)
    # (time, order, kind, path, chunk, hop): kind 0 = ready for link ``hop``, 1 = arrived at its head
    events: list[tuple[float, int, int, int, int, int]] = []
    order = 0
    # sources offer chunk i of all their paths before chunk i + 1 of any
    for i in range(int(nchunks.max(initial=0))):
        for p in np.flatnonzero(nchunks > i).tolist():
            events.append((0.0, order, 0, p, i, 0))
            order += 1
    heapq.heapify(events)
    processed = 0
    total = chunk_events(plan, chunk)
    if progress is not None and total > 10 * EVENTS_PER_S:
        progress(f"chunk simulation: {total:,} events, about {total / EVENTS_PER_S:.0f} s")
    tick = Ticker(progress, "chunk simulation: events", total)
    header, latency, forward = model.header_bytes, model.hop_latency_s, model.forward_cost_s
    stops, copies = ps.stops, 0
    while events:
        now, _, kind, p, i, hop = heapq.heappop(events)
        processed += 1
        if processed % 65536 == 0:
            tick(processed)
        e = int(ps.links[offsets[p] + hop])
        if kind == 0:  # the link serves chunks in the order they reach it
            size = min(chunk, int(plan.path_bytes[p]) - i * chunk)
            link_free[e] = max(now, link_free[e]) + (size + header) / cap[e]
            arrive = link_free[e] + latency
            if hop + 1 == offsets[p + 1] - offsets[p]:
                finish[p] = max(finish[p], arrive)
            else:
                heapq.heappush(events, (arrive, order, 1, p, i, hop))
                order += 1
        else:  # a stop copies one chunk at a time, in arrival order; elsewhere the leg goes on
            v = int(topo.link_dst[e])
            if stops[offsets[p] + hop]:
                node_free[v] = max(now, node_free[v]) + forward
                copies += 1
                now = node_free[v]
            heapq.heappush(events, (now, order, 0, p, i, hop + 1))
            order += 1
    tick(processed)
    return ChunkResult(float(finish.max(initial=0.0)), finish, int(nchunks.sum()), processed, copies)


def simulate_direct(plan: Plan, model: ChunkModel = ChunkModel()) -> float:
    """Completion time of ``plan``'s paths sent directly, cut through by the hardware.

    Each path's bytes grow by one ``header_bytes`` per ``packet_bytes`` packet and share
    links max-min fairly (:func:`optiq.sim.simulate_flows`); a path finishes its
    ``hops * hop_latency_s`` after its last byte leaves.

    Examples
    --------
    4,000 bytes over 2 links of 1 MB/s, 1,000-byte packets with 100-byte headers, 1 ms per
    hop: 4.4 ms of transmission and 2 ms of latency.

    >>> from optiq import Demands, make_plan
    >>> from optiq.topology import mesh
    >>> plan = make_plan(mesh((3,), bandwidth=1e6), Demands([0], [2], [4000]), "default")
    >>> round(simulate_direct(plan, ChunkModel(1e-3, 100, 0, packet_bytes=1000)), 9)
    0.0064
    """
    from .flow import flow_finish_times

    packets = -(-plan.path_bytes // model.packet_bytes)
    wire_bytes = plan.path_bytes + packets * model.header_bytes
    finish, _ = flow_finish_times(plan.paths, wire_bytes, model.capacities(plan.topology))
    moving = plan.path_bytes > 0
    return float((finish + plan.paths.hops * model.hop_latency_s)[moving].max(initial=0.0))


def chunk_events(plan: Plan, chunk_size: int) -> int:
    """Events :func:`simulate_chunks` processes: per chunk one per link and one per copy."""
    nchunks = -(-plan.path_bytes // int(chunk_size))
    return int((nchunks * (2 * plan.paths.hops - 1)).sum())
