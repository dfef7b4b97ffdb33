"""Parsing and formatting of byte sizes and rates (``8MiB``, ``64KB``, ``200MB/s``)."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

import numpy as np

from ..errors import OptiqError

#: Every byte count must be below this (it is summed and indexed as a 64-bit integer).
MAX_BYTES = 2**63 - 1

_UNITS = {
    "": 1, "B": 1,
    "K": 1000, "KB": 1000, "M": 10**6, "MB": 10**6, "G": 10**9, "GB": 10**9, "T": 10**12, "TB": 10**12,
    "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
}
#: What may stand before the B or b of a rate (``KiB/s``: ``Ki``).
_PREFIXES = ("", "B", "K", "M", "G", "T", "KI", "MI", "GI", "TI")
_SIZE = re.compile(r"^\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int | float, *, what: str = "size") -> int:
    """Parse a byte count with an optional unit into a positive integer.

    Decimal units (KB, MB, GB) are powers of 1000, binary units (KiB, MiB, GiB) powers of 1024.

    Parameters
    ----------
    text : str or int or float
        For example ``"8MiB"``, ``"64KB"``, ``"1e6"`` or ``4096``.
    what : str
        Name of the quantity, used in the error message.

    Returns
    -------
    int
        The number of bytes.

    Raises
    ------
    OptiqError
        If the text is not a size, has an unknown unit, is not positive, not a whole byte
        count, or not below 2^63 bytes.

    Examples
    --------
    >>> parse_size("8MiB")
    8388608
    >>> parse_size("64KB")
    64000
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if not math.isfinite(text):
            raise OptiqError(f"{what} {text!r} is not a size (examples: 8MiB, 64KB, 1048576)")
        value, unit = Decimal(text), ""
    else:
        m = _SIZE.match(str(text))
        if not m:
            raise OptiqError(f"{what} {text!r} is not a size (examples: 8MiB, 64KB, 1048576)")
        value, unit = Decimal(m.group(1)), m.group(2).upper()
    if unit not in _UNITS:
        raise OptiqError(f"{what} {text!r} has unknown unit {unit!r} (use B, KB, MB, GB, KiB, MiB, GiB)")
    nbytes = value * _UNITS[unit]  # exact: no float rounding of large counts
    if nbytes <= 0:
        raise OptiqError(f"{what} {text!r} must be positive")
    if nbytes > MAX_BYTES:
        raise OptiqError(f"{what} {text!r} is too large (at most 2^63 - 1 bytes)")
    if nbytes != nbytes.to_integral_value():
        raise OptiqError(f"{what} {text!r} is not a whole number of bytes")
    return int(nbytes)


def parse_rate(text: str | int | float, *, what: str = "rate") -> float:
    """Parse a bandwidth such as ``"1.8GB/s"``, ``"200MB/s"`` or ``"100Gb/s"`` into bytes per second.

    Units in bytes end in ``B`` (``KB``, ``MB``, ``GB``, ``MiB``, ...); units in bits end in a
    lowercase ``b`` or ``bit`` (``Kb``, ``Mb``, ``Gb``, ``Tb``, ``Gbit``) and are divided by 8.
    Text must name one or the other (``"1.8"`` or ``"1.8G"`` could mean either, and the two
    differ eightfold); a number is bytes per second. ``25MBps`` and ``25Mbps`` are ``25MB/s``
    and ``25Mb/s``.

    Examples
    --------
    >>> parse_rate("1.8GB/s")
    1800000000.0
    >>> parse_rate("100Gb/s")
    12500000000.0
    >>> parse_rate(2e9), parse_rate("25Mbps"), parse_rate("1MiB/s")
    (2000000000.0, 3125000.0, 1048576.0)
    >>> parse_rate("1.8")
    Traceback (most recent call last):
    ...
    optiq.errors.OptiqError: rate '1.8' needs a unit in bytes or bits: 1.8GB/s or 1.8Gb/s, say
    """
    s = str(text).strip()
    if s.lower().endswith("/s"):
        s = s[:-2]
    elif s.endswith(("ps", "PS")):  # "per second" written as in MBps and Gbps
        s = s[:-2]
    m = _SIZE.match(s)
    unit = m.group(2) if m else ""
    bits = unit.endswith("bit") or unit.endswith("b")
    if bits:
        unit = unit[:-3] if unit.endswith("bit") else unit[:-1]
    elif unit.upper().endswith("B"):
        unit = unit[:-1] or "B"
    if m and isinstance(text, str) and not bits and not m.group(2).upper().endswith("B") \
            and unit.upper() in _PREFIXES:
        number, prefix = m.group(1), unit.upper() or "G"
        raise OptiqError(f"{what} {text!r} needs a unit in bytes or bits: {number}{prefix}B/s or "
                         f"{number}{prefix}b/s, say")
    if not m or unit.upper() not in _PREFIXES or (bits and (unit.upper() == "B" or "I" in unit.upper())):
        raise OptiqError(f"{what} {text!r} is not a rate (examples: 1.8GB/s, 200MB/s, 100Gb/s, 25Mbps)")
    unit = "" if unit.upper() == "B" else unit
    rate = float(m.group(1)) * _UNITS[unit.upper() + ("B" if unit.upper().endswith("I") else "")] / (8 if bits else 1)
    if not math.isfinite(rate):
        raise OptiqError(f"{what} {text!r} is not a finite rate")
    if rate <= 0:
        raise OptiqError(f"{what} {text!r} must be positive")
    return rate


_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_bytes(nbytes: float) -> str:
    """A byte count in the largest binary unit that keeps it at 1 or more, to 3 significant digits.

    Examples
    --------
    >>> format_bytes(8 * 2**40), format_bytes(512 * 2**20), format_bytes(1536), format_bytes(12)
    ('8 TiB', '512 MiB', '1.5 KiB', '12 B')
    """
    value, unit = float(nbytes), 0
    while abs(value) >= 1024 and unit < len(_BINARY) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:.3g} {_BINARY[unit]}"


#: Time units, largest first: (name, seconds).
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6))


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit to show times up to ``seconds`` in: ``ms`` in the middle range, ``s`` above it
    and ``us`` below (so that a column of times keeps a few digits and never grows past a few).

    Examples
    --------
    >>> time_unit(0.0093), time_unit(2443.4), time_unit(4e-6)
    (('ms', 0.001), ('s', 1.0), ('us', 1e-06))
    """
    if seconds >= 10:
        return TIME_UNITS[0]
    return TIME_UNITS[1] if seconds >= 1e-5 else TIME_UNITS[2]


def format_seconds(seconds: float) -> str:
    """A time in the unit of :func:`time_unit`, to 3 decimals.

    Examples
    --------
    >>> format_seconds(0.0093207), format_seconds(2443.359173), format_seconds(4.66e-6)
    ('9.321 ms', '2443.359 s', '4.660 us')
    """
    name, scale = time_unit(seconds)
    return f"{seconds / scale:.3f} {name}"


def as_rate(value: Any) -> Any:
    """``value`` as bytes per second where it is one: a rate's text parsed (:func:`parse_rate`), a
    number as a float (an ``int`` and a ``float`` of one rate are then one option), anything else,
    text that is no rate included, as given, for a check (:func:`~optiq.utils.checks.check_rate`)
    to refuse.

    Examples
    --------
    >>> as_rate("8Gb/s"), as_rate(3), as_rate(None), as_rate("fast")
    (1000000000.0, 3.0, None, 'fast')
    """
    if isinstance(value, str):
        try:
            return parse_rate(value)
        except OptiqError:
            return value
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        try:
            return float(value)
        except OverflowError:  # an int beyond any float: left for the check to refuse
            return value
    return value
