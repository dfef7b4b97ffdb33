"""Dragonfly networks (Kim, Dally, Scott, Abts 2008).

``g`` groups of ``a`` routers; the routers of a group are fully connected by local links;
every router has ``p`` hosts and ``h`` global links to other groups, so a group has
``a*h`` global ports and at most ``g = a*h + 1`` groups fit, one global link between every
pair of groups. The network is balanced when ``a = 2p = 2h``.

Numbering: router ``r`` of group ``G`` is router ``G*a + r``; host ``i`` of router ``R`` is
endpoint ``R*p + i``; router ``R`` is node ``hosts + R``. Global port ``k`` of a group
(``0 <= k < a*h``) belongs to its router ``k // h``.

**Global links.** With ``g`` groups, every pair of groups gets ``m = (a*h) // (g-1)`` global
links, and a group's ports ``0 .. m*(g-1) - 1`` are used (the others stay unconnected when
``g - 1`` does not divide ``a*h``): port ``k`` of group ``G`` leads to the group at position
``k mod (g-1)`` of ``G``'s list of the other groups, and the ``c``-th port of ``G`` that
leads to ``H`` is cabled to the ``c``-th port of ``H`` that leads to ``G``. The
arrangement decides the list:

* ``absolute``: the other groups in increasing order (port ``k`` of group ``G`` leads to
  group ``k`` if ``k < G``, else ``k + 1``);
* ``relative`` (the default, the "palm tree"): ``G+1, G+2, ..., G+g-1`` modulo ``g``;
* ``circulant``: ``G+1, G-1, G+2, G-2, ...`` modulo ``g``.

Host and local links have capacity ``bw``, global links ``gbw`` (default: ``bw``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import TopologyError
from .base import Topology, spec_rate

__all__ = ["DragonflyShape", "dragonfly", "ARRANGEMENTS", "DRAGONFLY_LINK_BANDWIDTH", "balanced_dragonfly"]

ARRANGEMENTS = ("absolute", "relative", "circulant")

#: Default link capacity of dragonflies: 100 Gbit/s, in bytes/s.
DRAGONFLY_LINK_BANDWIDTH = 12.5e9


@dataclass(frozen=True, eq=False)
class DragonflyShape:
    """The structure of a dragonfly that routing needs.

    Attributes
    ----------
    p, a, h, g : int
        Hosts per router, routers per group, global links per router, groups.
    arrangement : str
        How global links are laid out (module docstring).
    host_up, host_down : ndarray of int
        Per host: the link to its router, and the link from its router to it.
    local : ndarray of int, shape (g, a, a)
        ``local[G, r, s]``: the link from router ``r`` to router ``s`` of group ``G`` (-1 on
        the diagonal).
    between : ndarray of int, shape (g, g, m)
        ``between[G, H, c]``: the ``c``-th global link from group ``G`` to group ``H``, in
        the order of ``G``'s ports (-1 on the diagonal).
    """

    p: int
    a: int
    h: int
    g: int
    arrangement: str
    host_up: np.ndarray
    host_down: np.ndarray
    local: np.ndarray
    between: np.ndarray

    @property
    def routers(self) -> int:
        return self.a * self.g

    @property
    def hosts(self) -> int:
        return self.p * self.routers

    @property
    def links_per_pair(self) -> int:
        return int(self.between.shape[2])


def _other_groups(G: int, g: int, arrangement: str) -> list[int]:
    if arrangement == "absolute":
        return [H for H in range(g) if H != G]
    if arrangement == "relative":
        return [(G + d) % g for d in range(1, g)]
    out: list[int] = []
    d = 1
    while len(out) < g - 1:
        for H in ((G + d) % g, (G - d) % g):
            if H != G and H not in out:
                out.append(H)
        d += 1
    return out[: g - 1]


def dragonfly(p: int, a: int, h: int, g: int | None = None, *, arrangement: str = "relative",
              bandwidth: float = DRAGONFLY_LINK_BANDWIDTH, global_bandwidth: float | None = None,
              spec: str | None = None) -> Topology:
    """A dragonfly of ``g`` groups (default the largest, ``a*h + 1``); see the module docstring.

    Raises
    ------
    TopologyError
        If a count is below 1, ``g`` is below 2 or above ``a*h + 1``, or the arrangement is unknown.

    Examples
    --------
    >>> t = dragonfly(2, 4, 2)          # balanced: a = 2p = 2h, g = 9 groups
    >>> t.num_endpoints, t.num_nodes - t.num_endpoints, t.dragonfly.g
    (72, 36, 9)
    >>> t.diameter                       # host, router, local, global, local, router, host
    5
    """
    for name, value in (("p", p), ("a", a), ("h", h)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise TopologyError(f"dragonfly: {name} must be an integer >= 1, got {value!r}")
    g = a * h + 1 if g is None else g
    if not 2 <= g <= a * h + 1:
        raise TopologyError(f"dragonfly: g must be in 2..a*h+1 = {a * h + 1} groups, got {g}")
    if arrangement not in ARRANGEMENTS:
        raise TopologyError(f"dragonfly: unknown arrangement {arrangement!r}; expected one of "
                            f"{', '.join(ARRANGEMENTS)}")
    gbw = bandwidth if global_bandwidth is None else global_bandwidth
    R = a * g
    H = p * R
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    cap: list[np.ndarray] = []

    def add(u: np.ndarray, v: np.ndarray, c: float) -> np.ndarray:
        first = sum(x.size for x in src)
        src.append(np.asarray(u, dtype=np.int64))
        dst.append(np.asarray(v, dtype=np.int64))
        cap.append(np.full(np.size(u), float(c)))
        return first + np.arange(np.size(u))

    hosts = np.arange(H)
    host_up = add(hosts, H + hosts // p, bandwidth)
    host_down = add(H + hosts // p, hosts, bandwidth)
    local = np.full((g, a, a), -1, dtype=np.int64)
    G_, r_, s_ = np.nonzero(~np.eye(a, dtype=bool)[None, :, :].repeat(g, axis=0))
    local[G_, r_, s_] = add(H + G_ * a + r_, H + G_ * a + s_, bandwidth)
    m = (a * h) // (g - 1)
    ports_to: dict[tuple[int, int], list[int]] = {}
    for G in range(g):
        others = _other_groups(G, g, arrangement)
        for k in range(m * (g - 1)):
            ports_to.setdefault((G, others[k % (g - 1)]), []).append(k)
    between = np.full((g, g, m), -1, dtype=np.int64)
    tails, heads, where = [], [], []
    for (G, K), ports in ports_to.items():
        back = ports_to[(K, G)]
        for c, (k, k_back) in enumerate(zip(ports, back)):
            tails.append(H + G * a + k // h)
            heads.append(H + K * a + k_back // h)
            where.append((G, K, c))
    ids = add(np.array(tails), np.array(heads), gbw)
    for (G, K, c), e in zip(where, ids):
        between[G, K, c] = e
    shape = DragonflyShape(p, a, h, g, arrangement, host_up, host_down, local, between)
    name = f"dragonfly p={p} a={a} h={h} g={g} ({arrangement})"
    names = [f"H{i}" for i in range(H)] + [f"G{G}R{r}" for G in range(g) for r in range(a)]
    return Topology(name=name, num_nodes=H + R, link_src=np.concatenate(src), link_dst=np.concatenate(dst),
                    capacity=np.concatenate(cap), num_endpoints=H,
                    spec=spec or (f"dragonfly:p={p},a={a},h={h},g={g}" + ("" if arrangement == "relative" else
                                  f",global={arrangement}") + spec_rate("bw", bandwidth, DRAGONFLY_LINK_BANDWIDTH)
                                  + spec_rate("gbw", gbw, bandwidth)),
                    names=names, dragonfly=shape)


def balanced_dragonfly(hosts: int, **kwargs: Any) -> Topology:
    """The largest balanced dragonfly (``a = 2p = 2h``, ``g = a*h + 1``) with ``hosts`` hosts:
    72, 342, 1,056, 2,550, 5,256, 9,702, 16,512 ... (``p = 2, 3, 4, ...``).

    Raises
    ------
    TopologyError
        If no balanced dragonfly has exactly that many hosts.

    Examples
    --------
    >>> balanced_dragonfly(1056).name
    'dragonfly p=4 a=8 h=4 g=33 (relative)'
    """
    sizes = {q * 2 * q * (2 * q * q + 1): q for q in range(1, 40)}
    if hosts not in sizes:
        raise TopologyError(f"no balanced dragonfly has {hosts} hosts; choose one of "
                            f"{', '.join(f'{n:,}' for n in sorted(sizes)[:10])}, ... or give p=,a=,h=")
    q = sizes[hosts]
    return dragonfly(q, 2 * q, q, **kwargs)
