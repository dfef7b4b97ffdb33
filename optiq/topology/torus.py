"""N-D tori and meshes, and the Blue Gene/Q partitions."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import TopologyError
from ..utils.resources import TOPOLOGY_BYTES_PER_LINK, check_memory
from .base import Topology, spec_rate

__all__ = ["torus", "mesh", "bgq", "BGQ_SHAPES", "BGQ_LINK_BANDWIDTH"]

#: Usable bandwidth of one Blue Gene/Q torus link, per direction, in bytes/s.
BGQ_LINK_BANDWIDTH = 1.8e9

#: Blue Gene/Q partition shapes (A, B, C, D, E) by node count.
BGQ_SHAPES: dict[int, tuple[int, ...]] = {
    32: (2, 2, 2, 2, 2),
    64: (2, 2, 4, 2, 2),
    128: (2, 2, 4, 4, 2),
    256: (4, 2, 4, 4, 2),
    512: (4, 4, 4, 4, 2),
    1024: (4, 4, 4, 8, 2),
    2048: (4, 4, 4, 16, 2),
    4096: (4, 4, 8, 16, 2),
    8192: (4, 4, 16, 16, 2),
    49152: (8, 12, 16, 16, 2),
}


def torus(dims: Sequence[int], *, wrap: bool | Sequence[bool] = True,
          bandwidth: float = BGQ_LINK_BANDWIDTH, spec: str | None = None,
          name: str | None = None) -> Topology:
    """An N-D torus (or mesh, where ``wrap`` is False) with one link per direction per dimension.

    Node ids number coordinates with the last dimension varying fastest, as on Blue Gene/Q:
    ``id = ((c0 * d1 + c1) * d2 + c2) ...``. Each node has a ``+`` and a ``-`` link in every
    dimension that has a neighbour that way. A wrapped dimension of length 2 gives two
    distinct links between the same pair (the ``+`` and the ``-`` link), as Blue Gene/Q's E
    dimension does; a dimension of length 1 has no links.

    Parameters
    ----------
    dims : sequence of int
        Length of every dimension (each at least 1).
    wrap : bool or sequence of bool
        Wrap-around per dimension (True for a torus dimension, False for a mesh one).
    bandwidth : float
        Capacity of every link in bytes/s.

    Returns
    -------
    Topology

    Raises
    ------
    TopologyError
        If a dimension is not a positive integer or ``wrap`` has the wrong length.

    Examples
    --------
    >>> t = torus((4, 2))
    >>> t.num_nodes, t.num_links
    (8, 32)
    >>> len(t.links_between(0, 1))   # the length-2 dimension: two parallel links
    2
    """
    dims = tuple(int(d) for d in dims)
    if not dims or any(d < 1 for d in dims):
        raise TopologyError(f"torus dimensions must be positive integers, got {dims}")
    if isinstance(wrap, bool):
        wrap = (wrap,) * len(dims)
    wrap = tuple(bool(w) for w in wrap)
    if len(wrap) != len(dims):
        raise TopologyError(f"wrap has {len(wrap)} entries for {len(dims)} dimensions")
    n = math.prod(dims)
    links = 2 * n * sum(length > 1 for length in dims)
    check_memory(links * TOPOLOGY_BYTES_PER_LINK, f"a {'x'.join(map(str, dims))} torus ({n:,} nodes, {links:,} links)")
    coords = np.stack(np.unravel_index(np.arange(n), dims), axis=1)
    src, dst, dim_of, sign_of = [], [], [], []
    for d, (length, w) in enumerate(zip(dims, wrap)):
        if length == 1:
            continue
        for sign in (+1, -1):
            nxt = coords[:, d] + sign
            ok = np.ones(n, bool) if w else (nxt >= 0) & (nxt < length)
            moved = coords.copy()
            moved[:, d] = nxt % length
            nodes = np.flatnonzero(ok)
            src.append(nodes)
            dst.append(np.ravel_multi_index(moved[nodes].T, dims))
            dim_of.append(np.full(nodes.size, d))
            sign_of.append(np.full(nodes.size, sign))
    if not src:
        raise TopologyError(f"torus {dims} has a single node")
    tails, heads = np.concatenate(src), np.concatenate(dst)
    dims_of, signs_of = np.concatenate(dim_of), np.concatenate(sign_of)
    order = np.lexsort((-signs_of, dims_of, tails))  # node-major, then dimension, then + before -
    kind = "torus" if all(wrap) else ("mesh" if not any(wrap) else "torus/mesh")
    shape = "x".join(map(str, dims))
    if spec is None and kind != "torus/mesh":  # the spec rebuilds it, routes included, from a plan file
        spec = f"{kind}:{shape}" + spec_rate("bw", bandwidth, BGQ_LINK_BANDWIDTH)
    return Topology(name=name or f"{kind} {shape}", num_nodes=n, link_src=tails[order],
                    link_dst=heads[order], capacity=np.full(tails.size, float(bandwidth)),
                    spec=spec, dims=dims, wrap=wrap, link_dim=dims_of[order], link_sign=signs_of[order])


def mesh(dims: Sequence[int], *, bandwidth: float = BGQ_LINK_BANDWIDTH, spec: str | None = None) -> Topology:
    """An N-D mesh: a torus without wrap-around links.

    Examples
    --------
    >>> mesh((3, 3)).num_links
    24
    """
    return torus(dims, wrap=False, bandwidth=bandwidth, spec=spec)


def bgq(nodes: int, *, bandwidth: float = BGQ_LINK_BANDWIDTH) -> Topology:
    """A Blue Gene/Q partition by node count (a 5-D torus A x B x C x D x E, E = 2).

    Parameters
    ----------
    nodes : int
        One of the keys of :data:`BGQ_SHAPES` (512 = 4x4x4x4x2, 1024 = 4x4x4x8x2,
        2048 = 4x4x4x16x2, ..., 49152 = full Mira 8x12x16x16x2).

    Raises
    ------
    TopologyError
        If there is no preset of that size.

    Examples
    --------
    >>> t = bgq(1024)
    >>> t.dims, t.num_links, t.diameter
    ((4, 4, 4, 8, 2), 10240, 11)
    """
    if nodes not in BGQ_SHAPES:
        sizes = ", ".join(map(str, BGQ_SHAPES))
        raise TopologyError(f"no Blue Gene/Q preset with {nodes} nodes (known: {sizes})")
    shape = BGQ_SHAPES[nodes]
    return torus(shape, bandwidth=bandwidth, spec=f"bgq:{nodes}",
                 name=f"Blue Gene/Q {nodes} ({'x'.join(map(str, shape))})")
