"""Spec strings for topologies: ``bgq:1024``, ``torus:4x4x4x8x2``, ``fattree:k=4`` ..."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import OptiqError, TopologyError
from ..utils.names import close_names
from ..utils.units import parse_rate
from .base import Topology
from .dragonfly import balanced_dragonfly, dragonfly
from .fattree import cluster, kary_ntree
from .graph import read_graphml
from .ibnet import read_ibnetdiscover
from .slurm import read_topology_conf
from .torus import BGQ_SHAPES, bgq, mesh, torus

__all__ = ["from_spec", "SPEC_HELP"]

#: The kinds a spec may name, before the colon.
KINDS = ("bgq", "torus", "mesh", "fattree", "cluster", "dragonfly", "ibnet", "slurm", "graphml")
SPEC_HELP = (
    f"bgq:NODES ({', '.join(map(str, BGQ_SHAPES))}) | torus:AxBx.. | mesh:AxB.. | "
    "fattree:k=K[,n=N] | cluster:hosts=H,edges=E,cores=C[,core_bw=RATE] | dragonfly:p=P,a=A,h=H[,g=G][,global=relative] or "
    "dragonfly:HOSTS (balanced) | ibnet:FILE[,names=MAP][,routes=LFTS] (ibnetdiscover output) | "
    "slurm:topology.conf | graphml:FILE; append ,bw=RATE (e.g. ,bw=1.8GB/s) to set the link bandwidth, "
    ",routes=ecmp[:SEED] for a network that hashes flows over its equal-cost next hops")


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


def _file(text: str, spec: str, what: str) -> str:
    if not text:
        raise TopologyError(f"topology {spec!r}: give the {what}, e.g. {spec.split(':')[0]}:FILE")
    return str(Path(text).expanduser().resolve())


def _rate(opts: dict[str, str], key: str, spec: str) -> float | None:
    if key not in opts:
        return None
    try:
        return parse_rate(opts[key], what="bandwidth" if key == "bw" else key)
    except OptiqError as exc:
        raise TopologyError(f"topology {spec!r}: {exc}") from None


def _fabric(rest: str, spec: str) -> Topology:
    """``ibnet:FILE[,names=MAP][,routes=LFTS][,bw=RATE][,SPEED=RATE]``: paths made absolute in the spec."""
    head, _, tail = rest.partition(",")
    speeds = {part.partition("=")[0].strip() for part in tail.split(",")
              if re.fullmatch(r"[A-Z][A-Z0-9]*", part.partition("=")[0].strip())}
    opts = _options(tail, spec, {"names", "routes", "bw"} | speeds)
    path = _file(head.strip(), spec, "ibnetdiscover file")
    files: dict[str, str] = {key: _file(opts[key], spec, key) for key in ("names", "routes") if key in opts}
    given: dict[str, str] = {**opts, **files}
    canonical = ",".join([f"ibnet:{path}"] + [f"{k}={v}" for k, v in given.items()])
    return read_ibnetdiscover(path, names=files.get("names"), routes=files.get("routes"),
                              bandwidth=_rate(opts, "bw", spec), lane_rates={k: opts[k] for k in speeds},
                              spec=canonical)


def _dragonfly(rest: str, spec: str) -> Topology:
    """``dragonfly:p=P,a=A,h=H[,g=G][,global=ARR][,bw=RATE][,gbw=RATE]`` or ``dragonfly:HOSTS``."""
    head, _, tail = rest.partition(",")
    if head.strip().isdigit():
        opts = _options(tail, spec, {"global", "bw", "gbw"})
        extra = _dragonfly_extra(opts, spec)
        return balanced_dragonfly(int(head), spec=spec, **extra)
    opts = _options(rest, spec, {"p", "a", "h", "g", "global", "bw", "gbw"})
    missing = [key for key in ("p", "a", "h") if key not in opts]
    if missing:
        raise TopologyError(f"topology {spec!r}: dragonfly needs p=, a= and h= (missing {', '.join(missing)}), "
                            f"e.g. dragonfly:p=4,a=8,h=4, or a balanced size, e.g. dragonfly:1056")
    g = _int(opts, "g", 0, spec) if "g" in opts else None
    return dragonfly(_int(opts, "p", 0, spec), _int(opts, "a", 0, spec), _int(opts, "h", 0, spec), g, spec=spec,
                     **_dragonfly_extra(opts, spec))


def _dragonfly_extra(opts: dict[str, str], spec: str) -> dict[str, Any]:
    extra: dict[str, Any] = {"arrangement": opts.get("global", "relative")}
    for key, name in (("bw", "bandwidth"), ("gbw", "global_bandwidth")):
        rate = _rate(opts, key, spec)
        if rate is not None:
            extra[name] = rate
    return extra


def from_spec(spec: str) -> Topology:
    """Build a topology from its spec string.

    Parameters
    ----------
    spec : str
        One of ``bgq:NODES``, ``torus:AxBx..``, ``mesh:AxB..``, ``fattree:k=K[,n=N]`` (a
        k-ary n-tree, ``n`` defaults to 3), ``cluster:hosts=H,edges=E,cores=C`` (defaults
        20, 4, 2), ``dragonfly:p=P,a=A,h=H[,g=G][,global=absolute|relative|circulant]
        [,gbw=RATE]`` or ``dragonfly:HOSTS`` (the balanced one of that size,
        :mod:`optiq.topology.dragonfly`), ``ibnet:FILE[,names=MAP][,routes=LFTS]
        [,SPEED=RATE]`` (``ibnetdiscover`` output, :mod:`optiq.topology.ibnet`),
        ``slurm:FILE`` (a tree-plugin ``topology.conf``, :mod:`optiq.topology.slurm`) or
        ``graphml:FILE``. Every kind but graphml accepts ``,bw=RATE``, and every kind
        ``,routes=ecmp[:SEED]``: the network hashes each flow onto one of its equal-cost
        next hops (:mod:`optiq.paths.ecmp`; seed 0 by default).

    Returns
    -------
    Topology
        With ``spec`` set to the string that rebuilds it (the given one; for ``ibnet:``
        and ``slurm:`` with absolute file names), so a plan can rebuild it.

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
    >>> from_spec("fattree:k=4,n=2,routes=ecmp:7").default_routing
    'ECMP (hash seed 7)'
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise TopologyError(f"topology spec {spec!r} is not KIND:ARGS; expected {SPEC_HELP}")
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    rest, seed = _ecmp_option(rest, spec)
    topo = _build(kind, rest, spec if seed is None else f"{kind}:{rest}")
    if seed is not None:
        topo.ecmp_seed = seed
        topo.spec = f"{topo.spec},routes=ecmp:{seed}"
    return topo


def _ecmp_option(rest: str, spec: str) -> tuple[str, int | None]:
    """``rest`` without its ``routes=ecmp[:SEED]`` option, and the seed (None: no such option)."""
    parts = rest.split(",")
    found = [i for i, part in enumerate(parts) if i > 0 and part.replace(" ", "").lower().startswith("routes=ecmp")]
    if not found:
        return rest, None
    value = parts[found[-1]].partition("=")[2].strip()
    word, _, seed = value.partition(":")
    if word.lower() != "ecmp" or (seed and not seed.strip().isdigit()):
        raise TopologyError(f"topology {spec!r}: routes={value!r} is neither a tables file nor ecmp[:SEED] (a seed is "
                            f"a non-negative integer)")
    return ",".join(p for i, p in enumerate(parts) if i not in found), int(seed or 0)


def _build(kind: str, rest: str, spec: str) -> Topology:
    """The topology of ``kind:rest`` (``spec`` names it in errors)."""
    if kind == "graphml":
        return read_graphml(rest, spec=spec)
    if kind == "ibnet":
        return _fabric(rest, spec)
    if kind == "dragonfly":
        return _dragonfly(rest, spec)
    if kind == "slurm":
        head, _, tail = rest.partition(",")
        opts = _options(tail, spec, {"bw"})
        path = _file(head.strip(), spec, "topology.conf")
        bw = _rate(opts, "bw", spec)
        return read_topology_conf(path, spec=f"slurm:{path}" + (f",bw={opts['bw']}" if "bw" in opts else ""),
                                  **({} if bw is None else {"bandwidth": bw}))
    head, _, tail = rest.partition(",")
    if kind in ("fattree", "cluster"):
        head, tail = "", rest
    allowed = {"bw"} | ({"k", "n"} if kind == "fattree" else set()) | (
        {"hosts", "edges", "cores", "core_bw"} if kind == "cluster" else set())
    opts = _options(tail, spec, allowed)
    extra: dict[str, Any] = {}
    for key, arg in (("bw", "bandwidth"), ("core_bw", "core_bandwidth")):
        if key in opts:
            try:
                extra[arg] = parse_rate(opts[key], what=arg.replace("_", " "))
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
        close = close_names(kind, KINDS)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise TopologyError(f"unknown topology kind {kind!r} in {spec!r}{hint}; expected {SPEC_HELP}")
    topo.spec = spec
    return topo
