"""Parsing and formatting of byte sizes and rates (``8MiB``, ``64KB``, ``200MB/s``)."""

from __future__ import annotations

import re

from .errors import OptiqError

_UNITS = {
    "": 1, "B": 1,
    "K": 1000, "KB": 1000, "M": 10**6, "MB": 10**6, "G": 10**9, "GB": 10**9, "T": 10**12, "TB": 10**12,
    "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


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
        If the text is not a size, has an unknown unit, is not positive or not a whole byte count.

    Examples
    --------
    >>> parse_size("8MiB")
    8388608
    >>> parse_size("64KB")
    64000
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        m = _SIZE.match(str(text))
        if not m:
            raise OptiqError(f"{what} {text!r} is not a size (examples: 8MiB, 64KB, 1048576)")
        value, unit = float(m.group(1)), m.group(2).upper()
    if unit not in _UNITS:
        raise OptiqError(f"{what} {text!r} has unknown unit {unit!r} (use B, KB, MB, GB, KiB, MiB, GiB)")
    nbytes = value * _UNITS[unit]
    if nbytes <= 0:
        raise OptiqError(f"{what} {text!r} must be positive")
    if abs(nbytes - round(nbytes)) > 1e-6:
        raise OptiqError(f"{what} {text!r} is not a whole number of bytes")
    return int(round(nbytes))


def parse_rate(text: str | int | float, *, what: str = "rate") -> float:
    """Parse a bandwidth such as ``"1.8GB/s"`` or ``"200MB/s"`` into bytes per second.

    Examples
    --------
    >>> parse_rate("1.8GB/s")
    1800000000.0
    """
    s = str(text).strip()
    if s.lower().endswith("/s"):
        s = s[:-2]
    m = _SIZE.match(s)
    if not m or m.group(2).upper() not in _UNITS:
        raise OptiqError(f"{what} {text!r} is not a rate (examples: 1.8GB/s, 200MB/s)")
    rate = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if rate <= 0:
        raise OptiqError(f"{what} {text!r} must be positive")
    return rate
