"""Application-like demands: HACC I/O aggregation and CESM coupling (the OPTIQ thesis), a parallel FFT's transposes.

Neither application's exact traffic is published, so both are generated from what the
thesis states (seed 003), by rules documented here.

**HACC** writes ~6 MB per compute node after each phase, aggregated to bridge nodes. On
Blue Gene/Q every 128 compute nodes share 2 bridge nodes, i.e. one bridge node per 64.
Endpoints are cut into consecutive groups of ``nodes_per_bridge``; the middle node of
each group is its bridge node, and every other node of the group sends it ``nbytes``.
(The bridge nodes' real coordinates are not given; the middle of the group keeps default
routes short without making the bridge a corner of the block.)

**CESM** couples its models through the coupler (CPL) on 512 nodes, 4 ranks per node.
The thesis gives each model's ranks (ATM 0–1791, LND 0–515, ICE 516–1791, OCN 1792–2047,
CPL 0–1791) and its node pairs with CPL (ATM 2,233, LND 2,911, ICE 765, OCN 502).
:func:`cesm_coupling` scales those node ranges to ``num_endpoints`` and redistributes a
1-D field from the model's block decomposition to the coupler's block-cyclic one: each
model node holds ``nbytes`` contiguous bytes; the coupler's blocks are ``fan_out`` times
smaller and dealt round-robin to its nodes, so each model node talks to about
``fan_out + 1`` coupler nodes (the defaults give, at 512 nodes, 2,238 / 2,908 / 765 / 499 pairs against the
thesis's 2,233 / 2,911 / 765 / 502). A model node's bytes for its own node stay local and are not demands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import WorkloadError
from .demands import Demands

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["hacc_aggregation", "cesm_coupling", "mxn_redistribution", "grid_transpose", "CESM_MODELS"]

# node ranges at 512 nodes (ranks / 4) and the fan-out giving the thesis's node pairs
CESM_MODELS = {"ATM": ((0, 448), 4.01), "LND": ((0, 129), 21.6), "ICE": ((129, 448), 1.4), "OCN": ((448, 512), 6.8)}
CESM_COUPLER = (0, 448)


def hacc_aggregation(num_endpoints: int, *, nodes_per_bridge: int = 64, nbytes: int = 6 * 10**6) -> Demands:
    """Every node sends ``nbytes`` to the bridge node of its group (see the module docstring).

    Raises
    ------
    WorkloadError
        If the groups do not divide the endpoints or hold fewer than 2 nodes.

    Examples
    --------
    >>> d = hacc_aggregation(8, nodes_per_bridge=4, nbytes=10)
    >>> d.src.tolist(), d.dst.tolist()
    ([0, 1, 3, 4, 5, 7], [2, 2, 2, 6, 6, 6])
    """
    if nodes_per_bridge < 2 or num_endpoints % nodes_per_bridge:
        raise WorkloadError(f"nodes_per_bridge={nodes_per_bridge} must be at least 2 and divide the "
                            f"{num_endpoints} endpoints")
    nodes = np.arange(num_endpoints)
    bridge = nodes - nodes % nodes_per_bridge + nodes_per_bridge // 2
    senders = nodes != bridge
    return Demands(nodes[senders], bridge[senders], np.full(int(senders.sum()), nbytes),
                   name=f"HACC aggregation to 1 bridge node per {nodes_per_bridge}")


def mxn_redistribution(sources: ArrayLike, destinations: ArrayLike, nbytes: int, fan_out: float) -> Demands:
    """Block to block-cyclic redistribution of a 1-D field from ``sources`` to ``destinations``.

    Source ``i`` holds bytes ``[i*nbytes, (i+1)*nbytes)``; the destinations hold blocks of
    ``ceil(nbytes / fan_out)`` bytes dealt round-robin (``fan_out`` may be fractional). Bytes a node would send to itself
    stay local.

    Raises
    ------
    WorkloadError
        For empty node lists, ``nbytes < 1`` or ``fan_out < 1``.

    Examples
    --------
    Two sources of 4 bytes, blocks of 2 bytes dealt to nodes 5 and 6:

    >>> d = mxn_redistribution([0, 1], [5, 6], 4, 2)
    >>> list(zip(d.src.tolist(), d.dst.tolist(), d.nbytes.tolist()))
    [(0, 5, 2), (0, 6, 2), (1, 5, 2), (1, 6, 2)]
    """
    src, dst = np.asarray(sources, dtype=np.int64), np.asarray(destinations, dtype=np.int64)
    if src.size == 0 or dst.size == 0 or nbytes < 1 or fan_out < 1:
        raise WorkloadError(f"redistribution needs nodes on both sides, nbytes >= 1 and fan_out >= 1 "
                            f"(got {src.size} sources, {dst.size} destinations, nbytes={nbytes}, "
                            f"fan_out={fan_out})")
    block = int(np.ceil(nbytes / fan_out))
    total = src.size * nbytes
    starts = np.arange(0, total, block)
    edges = np.union1d(starts, np.arange(0, total + 1, nbytes))  # cut at both decompositions' borders
    edges = edges[edges <= total]
    if edges[-1] != total:
        edges = np.append(edges, total)
    lo, size = edges[:-1], np.diff(edges)
    s_node = src[lo // nbytes]
    d_node = dst[(lo // block) % dst.size]
    remote = s_node != d_node
    pair = s_node[remote] * (int(dst.max()) + 1) + d_node[remote]
    keys, inverse = np.unique(pair, return_inverse=True)
    sizes = np.bincount(inverse, weights=size[remote]).astype(np.int64)
    width = int(dst.max()) + 1
    return Demands(keys // width, keys % width, sizes, name="MxN block to block-cyclic")


def cesm_coupling(num_endpoints: int, model: str, *, nbytes: int = 2 * 2**20) -> Demands:
    """The ``model`` -> coupler exchange of the CESM-like coupling (see the module docstring).

    Parameters
    ----------
    num_endpoints : int
        Nodes of the partition; the thesis ran 512. Must be a multiple of 8.
    model : {"ATM", "LND", "ICE", "OCN"}
    nbytes : int
        Bytes per model node.

    Raises
    ------
    WorkloadError
        For an unknown model or a partition size that is not a multiple of 8.

    Examples
    --------
    >>> d = cesm_coupling(512, "OCN")
    >>> d.num_jobs, int(d.src.min()), int(d.dst.max())
    (499, 448, 435)
    """
    if model not in CESM_MODELS:
        raise WorkloadError(f"unknown CESM model {model!r}; expected one of {', '.join(CESM_MODELS)}")
    if num_endpoints < 8 or num_endpoints % 8:
        raise WorkloadError(f"the CESM layout needs a multiple of 8 nodes, got {num_endpoints}")
    (lo, hi), fan_out = CESM_MODELS[model]

    def nodes(a: int, b: int) -> np.ndarray:
        return np.arange(a * num_endpoints // 512, max(b * num_endpoints // 512, a * num_endpoints // 512 + 1))

    d = mxn_redistribution(nodes(lo, hi), nodes(*CESM_COUPLER), nbytes, fan_out)
    return Demands(d.src, d.dst, d.nbytes, name=f"CESM {model} -> CPL")


def grid_transpose(grid: tuple[int, ...], axis: int, nbytes: int) -> Demands:
    """One transpose of a parallel FFT on a process grid (mpi4py-fft's pencils): every group of
    ranks that differ in coordinate ``axis`` of the grid alone exchanges ``nbytes`` between every
    two of its members, every group at once. Ranks are numbered row-major over ``grid``, as
    ``Create_cart`` numbers them; rank ``i`` is endpoint ``i``.

    Parameters
    ----------
    grid : tuple of int
        The process grid's shape (``(4, 4)`` for a 4 x 4 grid of pencils, ``(16, 1)`` for slabs).
    axis : int
        The grid axis along which the groups exchange (the rows: the last axis).
    nbytes : int
        Bytes every member sends every other member of its group.

    Returns
    -------
    Demands

    Raises
    ------
    WorkloadError
        If the grid or the axis is out of range, or ``nbytes`` is not positive.

    Examples
    --------
    >>> d = grid_transpose((2, 3), 1, 8)         # the two rows of a 2 x 3 grid: 0-2 and 3-5
    >>> d.num_jobs, sorted({(int(s), int(t)) for s, t in zip(d.src, d.dst) if s < 3})
    (12, [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)])
    >>> grid_transpose((4, 4), 0, 8).num_jobs    # the four columns
    48
    """
    shape = tuple(int(n) for n in grid)
    if not shape or min(shape) < 1:
        raise WorkloadError(f"a process grid has one or more axes of 1 rank or more, got {grid!r}")
    if not -len(shape) <= axis < len(shape):
        raise WorkloadError(f"axis {axis} is not an axis of the {len(shape)}-D grid {grid!r}")
    if nbytes < 1:
        raise WorkloadError(f"a transpose sends 1 byte or more between two ranks, got {nbytes}")
    axis %= len(shape)
    ranks = np.arange(int(np.prod(shape))).reshape(shape)
    groups = np.moveaxis(ranks, axis, -1).reshape(-1, shape[axis])  # one row per group
    n = shape[axis]
    a, b = np.nonzero(~np.eye(n, dtype=bool))
    src, dst = groups[:, a].reshape(-1), groups[:, b].reshape(-1)
    return Demands(src, dst, np.full(src.size, int(nbytes), dtype=np.int64))
