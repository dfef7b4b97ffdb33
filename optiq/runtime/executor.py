"""Run a plan on a communicator: the library call an application makes instead of its all-to-all."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PlanError, TransferError
from ..plan import Plan, load_plan
from ..utils.checks import check_rate
from .memory import job_buffers
from .schedule import RankSchedule, compile_schedule
from .slots import forwarding_slots, paced_message_chunks, path_slots
from .transport import TransferResult, transfer

if TYPE_CHECKING:
    from typing import Any

__all__ = ["Executor", "run_plan", "check_comm", "check_routes", "bcast_plan", "default_window", "default_chunk_size",
           "predicted_time", "path_rates"]

#: The smallest default window.
WINDOW = 4
#: Bytes a message carries at most when links are not emulated, by default: chunks ready
#: together on a path travel in one message, and MPI's cost per message, not per byte,
#: sets the pace of small chunks.
UNPACED_MESSAGE_BYTES = 4 * 2**20
#: Link time a message lasts at most by default, at the plan's slowest link rate: a rank that
#: forwards a path receives a whole message before it sends it on, so a message that lasts
#: long on the link holds the path back by as long at every stop.
UNPACED_MESSAGE_S = 0.02
#: Link time a chunk lasts at most by default, at the plan's slowest link (every stop of a path
#: stores a whole chunk before it sends it on).
CHUNK_S = 0.05
#: A plan that forwards: every stop of a path stores a whole chunk before it sends it on, so
#: the path's last byte arrives a chunk's link time per stop after a fluid flow's. By default
#: a chunk lasts at most this share of the plan's predicted time on its slowest link.
STOP_SHARE = 0.05
#: Paced paths: by default the median path is cut into at least this many chunks, so that its
#: pace can shape it (a path of one chunk is sent whole at once).
PACED_CHUNKS = 4
#: The smallest chunk :func:`default_chunk_size` chooses (bytes).
MIN_DEFAULT_CHUNK = 4096
#: Seconds of an emulated link's traffic the default window covers: oversubscribed ranks
#: wake late and MPI delivers late, and a link whose next chunk is not there stays idle.
PACED_SLACK_S = 0.02
#: The largest default window of emulated links.
MAX_DEFAULT_WINDOW = 64
#: Paced paths on a real network (links not emulated): seconds of the slowest link's traffic
#: the default window lets be in flight. A path's messages are cut by its own pace, not the
#: window, and a send completes only once the network has delivered it, through queues that
#: may hold a good part of a second: a window of a few chunks would hold the paths back.
PACED_INFLIGHT_S = 1.0
#: Forwarding memory a rank may take by default (bytes); a larger default window is
#: halved, on every rank alike, until the rank that forwards most fits.
FORWARDING_BYTES = 256 * 2**20


def default_window(chunk_size: int, link_bw: float | None, network_bw: float | None = None, *,
                   paced_paths: bool = False) -> int:
    """The window :class:`Executor` uses when none is given.

    Unpaced it holds two messages of :data:`UNPACED_MESSAGE_BYTES`, or of
    :data:`UNPACED_MESSAGE_S` at ``network_bw`` (the plan's slowest link, bytes/s) if that is
    less (at least :data:`WINDOW` chunks); with ``paced_paths`` (and links not emulated) at
    least :data:`PACED_INFLIGHT_S` of ``network_bw`` too (at most :data:`MAX_DEFAULT_WINDOW`
    chunks for that); with emulated links of ``link_bw`` bytes/s it holds
    :data:`PACED_SLACK_S` of a link's traffic (at least :data:`WINDOW`, at most
    :data:`MAX_DEFAULT_WINDOW` chunks), rounded to a whole number of paced messages per
    segment (:func:`~optiq.runtime.slots.paced_message_chunks`), so that no segment
    ends in a short message (a short last message costs a whole message's overhead; the
    4x4 opt plan of ``benchmarks/executor.py`` measures both choices).

    Examples
    --------
    >>> default_window(65536, None), default_window(2**20, None)
    (128, 8)
    >>> [default_window(65536, None, bw) for bw in (2.5e6, 12.5e6, 1.8e9)]   # 20 Mbit/s, 100 Mbit/s, Blue Gene/Q
    [4, 8, 128]
    >>> [default_window(65536, None, bw, paced_paths=True) for bw in (2.5e6, 12.5e6, 1.8e9)]
    [39, 64, 128]
    >>> [default_window(65536, bw) for bw in (25e6, 50e6, 100e6, 200e6)]
    [8, 18, 28, 60]
    """
    if link_bw is None:
        message = UNPACED_MESSAGE_BYTES if network_bw is None else min(UNPACED_MESSAGE_BYTES,
                                                                       UNPACED_MESSAGE_S * network_bw)
        window = max(WINDOW, 2 * math.ceil(message / chunk_size))
        if paced_paths and network_bw is not None:
            window = max(window, min(MAX_DEFAULT_WINDOW, math.ceil(PACED_INFLIGHT_S * network_bw / chunk_size)))
        return window
    pair = 2 * paced_message_chunks(chunk_size, link_bw)  # a segment of the window holds whole messages
    if pair > MAX_DEFAULT_WINDOW:
        return MAX_DEFAULT_WINDOW  # every message fills a segment
    wanted = max(WINDOW, math.ceil(PACED_SLACK_S * link_bw / chunk_size))
    return int(min(MAX_DEFAULT_WINDOW // pair, max(1, round(wanted / pair))) * pair)


def default_chunk_size(plan: Plan, *, paced: bool = False) -> int:
    """The chunk size :class:`Executor` uses when none is given: the plan's, or where one chunk
    would last more than :data:`CHUNK_S` on the plan's slowest link, or (a plan whose paths
    stop at ranks) more than :data:`STOP_SHARE` of the plan's predicted time, or (``paced``
    paths) more than a :data:`PACED_CHUNKS`-th of the median path's bytes, the largest power
    of two that does not (at least :data:`MIN_DEFAULT_CHUNK`). A chunk is the unit a forwarding
    rank stores before it sends on, and a slow path's pace is counted in whole chunks: a path
    of one chunk leaves at once, whatever its pace.

    Examples
    --------
    >>> from optiq import from_spec, Demands, make_plan
    >>> [default_chunk_size(make_plan(from_spec(f"mesh:3,bw={bw}"), Demands([0], [2], [2**20]), "default"))
    ...  for bw in ("10Mb/s", "20Mb/s", "100Mb/s", "1.8GB/s")]
    [32768, 65536, 65536, 65536]

    An all-to-all on a ring of 4: opt sends the pairs half the ring apart both ways round, some
    through a stop, and a whole pair in one chunk would wait at the stop for half the plan's time;
    a chunk of a twentieth of it delays the pair's last byte by that twentieth per stop.

    >>> from optiq.workloads import grid_transpose
    >>> ring = from_spec("torus:4,bw=20Mb/s")
    >>> [default_chunk_size(make_plan(ring, grid_transpose((4,), 0, 2**16), m)) for m in ("default", "opt")]
    [65536, 4096]
    """
    slowest = slowest_link(plan)
    fits = math.inf if slowest is None else CHUNK_S * slowest
    if slowest is not None and _forwards(plan):
        fits = min(fits, STOP_SHARE * plan.predicted_time_s * slowest)
    used = plan.path_bytes[plan.path_bytes > 0]
    if paced and used.size:
        fits = min(fits, float(np.median(used)) / PACED_CHUNKS)
    if plan.chunk_size <= fits:
        return int(plan.chunk_size)
    return int(max(MIN_DEFAULT_CHUNK, 2 ** int(math.floor(math.log2(fits)))))


def _forwards(plan: Plan) -> bool:
    """Whether a path with bytes stops at a rank between its ends (it has more than one leg)."""
    path = plan.paths.leg_entries()[0]
    legs = np.bincount(path, minlength=plan.paths.num_paths)
    return bool(np.count_nonzero((legs > 1) & (plan.path_bytes > 0)))


def slowest_link(plan: Plan) -> float | None:
    """The capacity (bytes/s) of the slowest link that carries bytes of ``plan`` (None: no bytes).

    Examples
    --------
    >>> from optiq import from_spec, Demands, make_plan
    >>> slowest_link(make_plan(from_spec("mesh:3,bw=1MB/s"), Demands([0], [2], [100]), "default"))
    1000000.0
    """
    used = plan.link_bytes > 0
    return float(plan.topology.capacity[used].min()) if used.any() else None


def _within_budget(schedule: RankSchedule, chunk_size: int, window: int) -> int:
    """``window``, halved until this rank's forwarding slots take at most :data:`FORWARDING_BYTES`."""
    forwarded = [s.num_chunks(chunk_size) for s in schedule.streams if s.prev >= 0 and s.next >= 0]
    while window > WINDOW and sum(min(path_slots(window), c) for c in forwarded) * chunk_size > FORWARDING_BYTES:
        window //= 2
    return window


def predicted_time(plan: Plan, link_bw: float | None) -> tuple[float, str]:
    """Flow-level completion time of ``plan``, at ``link_bw`` on every paced link if given.

    A rank paces the links its legs leave it by (the first link of every leg: a source's or
    a stop's); the network carries the rest of a leg. So with ``link_bw`` the busiest of
    those links sets the prediction.

    Examples
    --------
    >>> from optiq import from_spec, Demands, make_plan
    >>> plan = make_plan(from_spec("mesh:3,bw=1MB/s"), Demands([0, 1], [2, 2], [100, 50]), "default")
    >>> predicted_time(plan, 1e3)[0]     # legs 0 -> 2 and 1 -> 2 leave by links 0 and 1: 100 bytes each
    0.1
    """
    if link_bw is None:
        return plan.predicted_time_s, "plan link capacities"
    ps = plan.paths
    path, first, _ = ps.leg_entries()
    paced = np.bincount(ps.links[first], weights=plan.path_bytes[path].astype(float),
                        minlength=plan.topology.num_links)
    return float(paced.max() / link_bw), f"{link_bw:.6g} B/s per paced link"


def check_routes(plan: Plan) -> None:
    """Refuse a free plan that the network, routing every leg by its own rule, would carry more
    slowly than the plan predicts (:attr:`~optiq.Plan.realized_time_s`): it promises a time
    only a network that routes every path as planned can keep.

    Raises
    ------
    PlanError
        Naming both times and what to do.
    """
    if plan.routing != "free":
        return
    realized, predicted = plan.realized_time_s, plan.predicted_time_s
    if realized > predicted * (1 + 1e-9):
        raise PlanError(f"this {plan.method} plan is free: its paths must be routed as planned, but this network "
                        f"routes by {plan.topology.default_routing}, which carries it in {realized * 1e3:.4g} ms, not "
                        f"the predicted {predicted * 1e3:.4g} ms; plan it forwarded (the default, --routing "
                        f"forwarded), or if the network does route every path as planned (per-flow rules, source "
                        f"routing), run it with --routing free")


def path_rates(plan: Plan, link_bw: float | None) -> dict[int, float]:
    """Every path's planned rate: its bytes over the plan's predicted time (at ``link_bw``).

    Examples
    --------
    >>> from optiq import from_spec, Demands, make_plan
    >>> plan = make_plan(from_spec("mesh:3,bw=1MB/s"), Demands([0, 1], [2, 2], [100, 50]), "default")
    >>> {p: round(r) for p, r in path_rates(plan, None).items()}   # link 1 -> 2 carries 150 bytes: 150 us
    {0: 666667, 1: 333333}
    """
    seconds = predicted_time(plan, link_bw)[0]
    return {p: float(b) / seconds for p, b in enumerate(plan.path_bytes.tolist())}


def check_comm(comm: Any, plan: Plan) -> None:
    """Check that ``comm`` has a rank for every endpoint of ``plan``.

    Raises
    ------
    PlanError
        Naming how many ranks the plan needs and how many the communicator has.
    """
    needed = int(plan.ranks.max()) + 1
    if comm.Get_size() < needed:
        raise PlanError(f"the plan maps its {plan.topology.num_endpoints} endpoints onto ranks 0..{needed - 1}, "
                        f"but the communicator has {comm.Get_size()} rank(s); run it with mpiexec -n {needed}")


class Executor:
    """A plan compiled for this rank of ``comm``, ready to run many times.

    The executor works on a duplicate of ``comm`` (made here, collectively; released by
    :meth:`close` or at the end of a ``with`` block), so its messages can never match the
    application's, whatever tags those use.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        Every rank of it constructs the executor and calls :meth:`run` together.
    plan : Plan
    window : int, optional
        Source chunks in flight per outgoing link, and receive slots per path this rank
        forwards; a message carries at most half of it. Every rank must pass the same
        value (senders cut messages at the receivers' slot segments). By default :func:`default_window`
        for the plan's slowest link (:func:`slowest_link`), halved on every rank until each rank's forwarding slots take at most
        :data:`FORWARDING_BYTES`.
    link_bw : float or str, optional
        Emulate links of this many bytes/s, or of the rate a text names
        (:func:`~optiq.utils.units.parse_rate`); each rank paces what it sends on each link.
    chunk_size : int, optional
        Override the plan's chunk size (by default the plan's, smaller where a chunk would
        last long on its links: :func:`default_chunk_size`).
    pace_paths : bool
        Send every path at most at its planned rate (:func:`path_rates`), so that a
        network sharing links max-min fairly keeps the plan's predicted time
        (:mod:`optiq.runtime.transport`).
    routes_as_planned : bool
        The network routes every path as planned (per-flow rules, source routing): run a free
        plan even if the network's own routes would carry it more slowly
        (:func:`check_routes`).
    duplicate : bool
        Send on a duplicate of ``comm`` (made here, freed by :meth:`close`); False: on ``comm``
        itself, a private communicator of the caller's that carries no other point-to-point
        messages while the executor runs (``optiq.alltoallv``'s own).

    Raises
    ------
    PlanError
        If the communicator is too small for the plan, an argument is out of range, the
        ranks asked for different windows, the plan has more paths than the MPI library
        has tags (``MPI.TAG_UB``), or it is a free plan the network's own routes would carry
        more slowly than predicted (unless ``routes_as_planned``).
    """

    def __init__(self, comm: Any, plan: Plan, *, window: int | None = None, link_bw: float | str | None = None,
                 chunk_size: int | None = None, pace_paths: bool = False, routes_as_planned: bool = False,
                 duplicate: bool = True) -> None:
        check_comm(comm, plan)
        if not routes_as_planned:
            check_routes(plan)
        rate = check_rate("link bandwidth", link_bw, optional=True)  # bytes per second
        chunk = default_chunk_size(plan, paced=pace_paths) if chunk_size is None else int(chunk_size)
        if chunk < 1:
            raise PlanError(f"chunk size must be a positive number of bytes, got {chunk}")
        from mpi4py import MPI

        tag_ub = comm.Get_attr(MPI.TAG_UB)
        if tag_ub is not None and plan.paths.num_paths - 1 > tag_ub:
            raise PlanError(f"the plan has {plan.paths.num_paths:,} paths, one MPI tag each, but this MPI library's "
                            f"largest tag is {tag_ub:,}")
        self.schedule: RankSchedule = compile_schedule(plan, comm.Get_rank())
        # every rank must use the same window: senders cut messages at the receivers' segments.
        # What the ranks asked and the default's budget here, in one reduction (each costs a
        # round of every rank, which on a crowded node is a scheduler's time slice or more)
        asked = math.inf if window is None else window
        budget = window
        if window is None:
            budget = _within_budget(self.schedule, chunk, default_window(chunk, rate, slowest_link(plan),
                                                                         paced_paths=pace_paths))
        mine = np.array([asked, -asked, budget], dtype=float)
        least = np.empty(3)
        comm.Allreduce(mine, least, op=MPI.MIN)
        lowest, highest = least[0], -least[1]
        if lowest != highest:
            shown = sorted({"default" if w == math.inf else f"{w:g}" for w in (lowest, highest)})
            raise PlanError(f"the window must be the same on every rank, got {' and '.join(shown)}")
        if window is not None and window < 1:
            raise PlanError(f"window must be at least 1 chunk, got {window}")
        if window is None:
            window = int(least[2])
        self.plan, self.window, self.link_bw, self.chunk_size = plan, window, rate, chunk
        #: paced paths: the rate of every path this rank is the source of
        self.path_rate = None
        if pace_paths:
            rates = path_rates(plan, rate)
            self.path_rate = {s.path: rates[s.path] for s in self.schedule.streams if s.prev < 0}
        #: forwarding memory, allocated once and reused by every run
        self.slots = forwarding_slots(self.schedule, chunk, window)
        self.comm = comm.Dup() if duplicate else comm
        self._owned = duplicate

    def close(self) -> None:
        """Release the duplicated communicator (collective); the executor cannot run after."""
        if self.comm is not None:
            if self._owned:
                self.comm.Free()
            self.comm = None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Executor(rank={self.schedule.rank}, method={self.plan.method!r}, chunk_size={self.chunk_size}, "
                f"window={self.window}, link_bw={self.link_bw})")

    def empty_recv_buffers(self) -> dict[int, np.ndarray]:
        """Fresh receive buffers for the jobs this rank is the destination of, on huge pages.

        MPI copies into them faster than into most buffers an application allocates
        (:mod:`optiq.runtime.memory`); their pages are mapped in when first written.
        """
        return job_buffers(self.schedule.recv_jobs)

    def run(self, send: Mapping[int, np.ndarray], recv: Mapping[int, np.ndarray] | None = None, *,
            timeout: float = 60.0, start_at: float | None = None) -> TransferResult:
        """Move this rank's bytes; all ranks call it together.

        Parameters
        ----------
        send : mapping
            Job id -> send buffer (a contiguous numpy array of any dtype, viewed as bytes,
            holding exactly the job's bytes) for every job whose source is this rank.
        recv : mapping, optional
            Job id -> receive buffer likewise; allocated when not given
            (:meth:`empty_recv_buffers`). MPI copies from and into buffers on huge pages
            faster (:func:`optiq.runtime.memory.job_buffers` makes them).
        timeout : float
            Seconds before the transfer is abandoned with :class:`TransferError`.
        start_at : float, optional
            The moment the ranks agreed to start at (:func:`~optiq.mpi.waiting.start_together`):
            the emulated links earn their bytes from it and the elapsed time counts from it.
            By default, when the call begins.

        Returns
        -------
        TransferResult
            The receive buffers (as ``uint8`` views) and this rank's timings.

        Raises
        ------
        TransferError
            If a buffer is missing or has the wrong size, or on timeout.
        """
        if self.comm is None:
            raise TransferError("this executor is closed")
        sched = self.schedule
        send_views = _byte_views(send, sched.send_jobs, "send", sched.rank)
        recv_views = _byte_views(self.empty_recv_buffers() if recv is None else recv, sched.recv_jobs, "receive",
                                 sched.rank)
        return transfer(self.comm, sched, self.chunk_size, send_views, recv_views, window=self.window,
                        link_bw=self.link_bw, timeout=timeout, slots=self.slots, start_at=start_at,
                        path_rate=self.path_rate, describe_path=self.describe_path)

    def describe_path(self, path: int) -> str:
        """Path ``path`` of the plan by the nodes it crosses (``H0 -> S4 -> H5``): the cables between them."""
        t = self.plan.topology
        return " -> ".join(t.label(v) for v in self.plan.paths.nodes(path, t))


def run_plan(comm: Any, plan: Plan, send: Mapping[int, np.ndarray], recv: Mapping[int, np.ndarray] | None = None, *,
             window: int | None = None, link_bw: float | str | None = None, timeout: float = 60.0,
             routes_as_planned: bool = False) -> TransferResult:
    """Move the plan's bytes over ``comm``: one call on every rank, like an all-to-all.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    plan : Plan
    send : mapping
        Job id -> bytes to send, for the jobs whose source is this rank (numpy arrays).
    recv : mapping, optional
        Job id -> receive buffer, for the jobs whose destination is this rank.
    window, link_bw, timeout, routes_as_planned
        As in :class:`Executor` and :meth:`Executor.run`.

    Returns
    -------
    TransferResult

    Raises
    ------
    PlanError
        If the communicator does not fit the plan, or the network would not carry it as
        planned (:func:`check_routes`).
    TransferError
        If a buffer is wrong or the transfer times out.
    """
    with Executor(comm, plan, window=window, link_bw=link_bw, routes_as_planned=routes_as_planned) as executor:
        return executor.run(send, recv, timeout=timeout)


def _byte_views(buffers: Mapping[int, np.ndarray], sizes: dict[int, int], what: str,
                rank: int) -> dict[int, np.ndarray]:
    if not isinstance(buffers, Mapping):
        raise TransferError(f"rank {rank}: {what} buffers must be a mapping job id -> numpy array")
    extra = set(buffers) - set(sizes)
    if extra:
        j = min(extra)
        raise TransferError(f"rank {rank}: got a {what} buffer for job {j}, which rank {rank} does not {what}")
    views = {}
    for j, n in sizes.items():
        if j not in buffers:
            raise TransferError(f"rank {rank}: no {what} buffer for job {j} ({n} bytes)")
        buf = buffers[j]
        if not isinstance(buf, np.ndarray) or not buf.flags.c_contiguous:
            raise TransferError(f"rank {rank}: the {what} buffer of job {j} must be a contiguous numpy array")
        if buf.nbytes != n:
            raise TransferError(f"rank {rank}: the {what} buffer of job {j} has {buf.nbytes} bytes, the job has {n}")
        if what == "receive" and not buf.flags.writeable:
            raise TransferError(f"rank {rank}: the receive buffer of job {j} is read-only")
        views[j] = buf.reshape(-1).view(np.uint8)
    return views


def bcast_plan(comm: Any, path: str, root: int = 0) -> Plan:
    """Load a plan file on ``root`` and hand it to every rank of ``comm``.

    Collective. If the file is missing or invalid, every rank raises the same
    :class:`PlanError`, so all of them can exit cleanly together.
    """
    loaded: tuple[Plan | None, str | None] = (None, None)
    if comm.Get_rank() == root:
        try:
            loaded = (load_plan(path), None)
        except PlanError as exc:
            loaded = (None, str(exc))
        except Exception as exc:  # (MemoryError, a bug): the other ranks must not wait for a plan forever
            loaded = (None, f"cannot load plan {path!r}: {type(exc).__name__}: {exc}")
    plan, error = comm.bcast(loaded, root=root)
    if error is not None:
        raise PlanError(error)
    assert isinstance(plan, Plan)
    return plan
