"""Checks of numeric parameters, shared by every layer, each raising a
:class:`~optiq.errors.ParameterError` that names the parameter and the value it got."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import OptiqError, ParameterError
from .units import parse_rate

__all__ = ["check_count", "check_range", "check_rate", "check_seconds", "check_progress"]


def _prefix(where: str) -> str:
    return f"{where}: " if where else ""


def check_count(name: str, value: Any, low: int, *, where: str = "", optional: bool = False) -> None:
    """Refuse ``value`` unless it is an integer (not a bool) of at least ``low``; ``None`` too if ``optional``.

    Examples
    --------
    >>> check_count("k", 3, 1)
    >>> check_count("k", 0, 1, where="diverse paths")
    Traceback (most recent call last):
    ...
    optiq.errors.ParameterError: diverse paths: k must be an integer >= 1, got 0
    """
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ParameterError(f"{_prefix(where)}{name} must be an integer >= {low}, got {value!r}")


def check_range(name: str, value: Any, low: float, high: float = math.inf, *, where: str = "",
                low_open: bool = False, high_open: bool = True, optional: bool = False) -> None:
    """Refuse ``value`` unless it is a number (not a bool) in the interval from ``low`` to ``high``,
    each end open or closed as asked; ``None`` too if ``optional``. NaN is never in range.

    Examples
    --------
    >>> check_range("gap", 0.0, 0.0, 1.0)
    >>> check_range("gap", 1.0, 0.0, 1.0)
    Traceback (most recent call last):
    ...
    optiq.errors.ParameterError: gap must be in [0, 1), got 1.0
    """
    if value is None and optional:
        return
    ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and \
        (low < value if low_open else low <= value) and (value < high if high_open else value <= high)
    if not ok:
        raise ParameterError(f"{_prefix(where)}{name} must be in {'(' if low_open else '['}{low:g}, {high:g}"
                             f"{')' if high_open else ']'}, got {value!r}")


def check_rate(name: str, value: Any, *, optional: bool = False) -> float | None:
    """Refuse ``value`` unless it is a rate above 0 and finite: bytes per second, or a rate's text
    (:func:`~optiq.utils.units.parse_rate`, whose reason a text it cannot read is refused with);
    ``None`` too if ``optional``. Returns the rate in bytes per second (``None`` for ``None``).

    Examples
    --------
    >>> check_rate("link_bw", None, optional=True)
    >>> check_rate("link_bw", "8Gb/s"), check_rate("link_bw", 3)
    (1000000000.0, 3.0)
    >>> check_rate("link_bw", 10**400)
    Traceback (most recent call last):
    ...
    optiq.errors.ParameterError: link_bw must be a finite rate, got an integer of 1329 bits
    >>> check_rate("link_bw", 0)
    Traceback (most recent call last):
    ...
    optiq.errors.ParameterError: link_bw must be in (0, inf), got 0
    """
    if isinstance(value, str):
        try:
            value = parse_rate(value, what=name)
        except OptiqError as exc:
            raise ParameterError(str(exc)) from None
    check_range(name, value, 0, low_open=True, optional=optional)
    if value is None:
        return None
    try:
        return float(value)
    except OverflowError:  # an int beyond any float, which the range's infinite end lets by
        raise ParameterError(f"{name} must be a finite rate, got an integer of {int(value).bit_length()} bits") from None


def check_seconds(name: str, value: Any, *, where: str = "", optional: bool = True) -> None:
    """Refuse a time limit that is not a finite number of seconds above 0 (``None``: no limit).

    Examples
    --------
    >>> check_seconds("time_limit", None)
    >>> check_seconds("time_limit", float("inf"))
    Traceback (most recent call last):
    ...
    optiq.errors.ParameterError: time_limit must be a finite number of seconds > 0, got inf
    """
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not 0 < value < math.inf:
        raise ParameterError(f"{_prefix(where)}{name} must be a finite number of seconds > 0, got {value!r}")


def check_progress(progress: Any, *, where: str = "") -> None:
    """Refuse a ``progress`` that is neither ``None`` nor a callable taking one message (``print``
    serves), before any work: it is first called deep inside a long step.

    Examples
    --------
    >>> check_progress(print)
    >>> check_progress(True)
    Traceback (most recent call last):
    ...
    optiq.errors.ParameterError: progress must be a callable that takes one message (e.g. print) or None, got True
    """
    if progress is not None and not callable(progress):
        raise ParameterError(f"{_prefix(where)}progress must be a callable that takes one message (e.g. print) or "
                             f"None, got {progress!r}")
