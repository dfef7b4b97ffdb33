"""Slurm's host-list syntax: ``node[001-064,070],gpu[1-4]`` to names and back.

A host list is a comma-separated list of items (commas inside brackets do not separate
items). An item is literal text with bracket groups; a group is a comma-separated list
of numbers and ranges ``LOW-HIGH``. A range keeps the zero padding of its first number:
``[010-012]`` gives ``010, 011, 012`` and ``[8-10]`` gives ``8, 9, 10``. Several groups
in one item give every combination, the leftmost group varying slowest
(``r[1-2]n[1-2]`` is ``r1n1, r1n2, r2n1, r2n2``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..errors import TopologyError

__all__ = ["expand_hostlist", "compress_hostlist", "MAX_HOSTS"]

#: The most names one host list may expand to (a guard against ``n[0-999999999]``).
MAX_HOSTS = 10_000_000


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            if depth:
                raise TopologyError(f"host list {text!r}: brackets inside brackets at character {i + 1}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise TopologyError(f"host list {text!r}: ']' without '[' at character {i + 1}")
            depth = 0
        elif ch == "," and not depth:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise TopologyError(f"host list {text!r}: '[' is never closed")
    items.append(text[start:])
    return items


def _group(body: str, text: str) -> list[str]:
    out: list[str] = []
    for part in body.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise TopologyError(f"host list {text!r}: [{body}] must hold numbers and ranges like 1-5 or 010-012, "
                                f"not {part!r}")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise TopologyError(f"host list {text!r}: range {part!r} runs backwards")
        if last - first + 1 + len(out) > MAX_HOSTS:
            raise TopologyError(f"host list {text!r} names more than {MAX_HOSTS:,} hosts")
        width = len(low)
        out.extend(str(v).zfill(width) for v in range(first, last + 1))
    return out


def expand_hostlist(text: str) -> list[str]:
    """The host names of a Slurm host list, in its order (repeats kept).

    Raises
    ------
    TopologyError
        For an empty item, unbalanced or nested brackets, a group that is not numbers and
        ranges, a range that runs backwards, or more than :data:`MAX_HOSTS` names.

    Examples
    --------
    >>> expand_hostlist("node[001-003,010],gpu[8-10]")
    ['node001', 'node002', 'node003', 'node010', 'gpu8', 'gpu9', 'gpu10']
    >>> expand_hostlist("r[1-2]n[01-02]-ib")
    ['r1n01-ib', 'r1n02-ib', 'r2n01-ib', 'r2n02-ib']
    """
    if not isinstance(text, str) or not text.strip():
        raise TopologyError(f"host list {text!r} is empty")
    names: list[str] = []
    for item in _split_top_level(text.strip()):
        item = item.strip()
        if not item:
            raise TopologyError(f"host list {text!r} has an empty item (two commas in a row, or one at an end)")
        expanded = [""]
        pos = 0
        for m in re.finditer(r"\[([^\]]*)\]", item):
            if not m.group(1).strip():
                raise TopologyError(f"host list {text!r}: empty brackets in {item!r}")
            choices = _group(m.group(1), text)
            if len(expanded) * len(choices) + len(names) > MAX_HOSTS:
                raise TopologyError(f"host list {text!r} names more than {MAX_HOSTS:,} hosts")
            literal = item[pos:m.start()]
            expanded = [e + literal + c for e in expanded for c in choices]
            pos = m.end()
        expanded = [e + item[pos:] for e in expanded]
        names.extend(expanded)
    return names


def compress_hostlist(names: Iterable[str]) -> str:
    """A short host list for ``names``, in their order: runs of consecutive numbers with the
    same prefix, suffix and padding share one bracket group.

    Examples
    --------
    >>> compress_hostlist(["node001", "node002", "node003", "node010", "gpu1", "login"])
    'node[001-003,010],gpu1,login'
    >>> expand_hostlist(compress_hostlist(["n9", "n10", "n11"]))
    ['n9', 'n10', 'n11']
    """
    groups: list[tuple[str, str, int, list[tuple[int, int]]] | str] = []
    for name in names:
        m = re.fullmatch(r"(.*?)(\d+)(\D*)", name)
        if not m:
            groups.append(name)
            continue
        prefix, digits, suffix = m.groups()
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        value = int(digits)
        last = groups[-1] if groups else None
        if (isinstance(last, tuple) and last[0] == prefix and last[1] == suffix
                and (last[2] == width == 0 or (last[2] > 0 and len(digits) == last[2]))):
            runs = last[3]
            if runs[-1][1] + 1 == value:
                runs[-1] = (runs[-1][0], value)
            else:
                runs.append((value, value))
        else:
            groups.append((prefix, suffix, width, [(value, value)]))
    out = []
    for g in groups:
        if isinstance(g, str):
            out.append(g)
            continue
        prefix, suffix, width, runs = g
        fmt = (lambda v: str(v).zfill(width)) if width else str
        parts = [fmt(a) if a == b else f"{fmt(a)}-{fmt(b)}" for a, b in runs]
        out.append(f"{prefix}{parts[0]}{suffix}" if len(runs) == 1 and runs[0][0] == runs[0][1]
                   else f"{prefix}[{','.join(parts)}]{suffix}")
    return ",".join(out)
