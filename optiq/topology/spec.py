"""Spec strings for topologies: ``bgq:1024``, ``torus:4x4x4x8x2``, ``fattree:k=4`` ..."""

from __future__ import annotations

from typing import Any

from ..errors import OptiqError, TopologyError
from ..units import parse_rate
from .base import Topology
from .fattree import cluster, kary_ntree
from .graph import read_graphml
from .torus import bgq, mesh, torus

__all__ = ["from_spec", "SPEC_HELP"]

SPEC_HELP = (
    "bgq:NODES (512, 1024, 2048, 4096, 8192, 49152) | torus:AxBx.. | mesh:AxB.. | "
    "fattree:k=K[,n=N] | cluster:hosts=H,edges=E,cores=C | graphml:FILE; "
    "append ,bw=RATE (e.g. ,bw=1.8GB/s) to set the link bandwidth")


def _options(text: str, spec: str, allowed: set[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    for part in filter(None, text.split(",")):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or key not in allowed:
            raise TopologyError(f"topology {spec!r}: unknown option {part!r} (allowed: {', '.join(sorted(allowed))})")
        opts[key] = value.strip()
    return opts


def _int(opts: dict[str, str], key: str, default: int, spec: str) -> int:
    try:
        return int(opts.get(key, default))
    except ValueError:
        raise TopologyError(f"topology {spec!r}: {key}={opts[key]!r} is not an integer") from None


def _dims(text: str, spec: str) -> list[int]:
    try:
        dims = [int(x) for x in text.lower().split("x")]
    except ValueError:
        raise TopologyError(f"topology {spec!r}: dimensions {text!r} are not like 4x4x8") from None
    if any(d < 1 for d in dims):
        raise TopologyError(f"topology {spec!r}: every dimension must be at least 1")
    return dims


def from_spec(spec: str) -> Topology:
    """Build a topology from its spec string.

    Parameters
    ----------
    spec : str
        One of ``bgq:NODES``, ``torus:AxBx..``, ``mesh:AxB..``, ``fattree:k=K[,n=N]`` (a
        k-ary n-tree, ``n`` defaults to 3), ``cluster:hosts=H,edges=E,cores=C`` (defaults
        20, 4, 2) or ``graphml:FILE``. Every kind but graphml accepts ``,bw=RATE``.

    Returns
    -------
    Topology
        With ``spec`` set to the given string, so a plan can rebuild it.

    Raises
    ------
    TopologyError
        For an unknown kind, preset or option.

    Examples
    --------
    >>> from_spec("torus:4x4x2").num_nodes
    32
    >>> from_spec("cluster:hosts=20,edges=4,cores=2").num_endpoints
    20
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise TopologyError(f"topology spec {spec!r} is not KIND:ARGS; expected {SPEC_HELP}")
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "graphml":
        return read_graphml(rest, spec=spec)
    head, _, tail = rest.partition(",")
    if kind in ("fattree", "cluster"):
        head, tail = "", rest
    allowed = {"bw"} | ({"k", "n"} if kind == "fattree" else set()) | (
        {"hosts", "edges", "cores"} if kind == "cluster" else set())
    opts = _options(tail, spec, allowed)
    extra: dict[str, Any] = {}
    if "bw" in opts:
        try:
            extra["bandwidth"] = parse_rate(opts["bw"], what="bandwidth")
        except OptiqError as exc:
            raise TopologyError(f"topology {spec!r}: {exc}") from None
    if kind == "bgq":
        try:
            nodes = int(head)
        except ValueError:
            raise TopologyError(f"topology {spec!r}: bgq takes a node count, e.g. bgq:1024") from None
        topo = bgq(nodes, **extra)
    elif kind == "torus":
        topo = torus(_dims(head, spec), **extra)
    elif kind == "mesh":
        topo = mesh(_dims(head, spec), **extra)
    elif kind == "fattree":
        if "k" not in opts:
            raise TopologyError(f"topology {spec!r}: fattree needs k=, e.g. fattree:k=4")
        topo = kary_ntree(_int(opts, "k", 0, spec), _int(opts, "n", 3, spec), **extra)
    elif kind == "cluster":
        topo = cluster(_int(opts, "hosts", 20, spec), _int(opts, "edges", 4, spec),
                       _int(opts, "cores", 2, spec), **extra)
    else:
        raise TopologyError(f"unknown topology kind {kind!r} in {spec!r}; expected {SPEC_HELP}")
    topo.spec = spec
    return topo
