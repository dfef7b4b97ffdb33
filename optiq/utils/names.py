"""Close names for "did you mean" hints: the same name with other zero padding first
(``node001`` for ``node00001``), then names that are spelled alike."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

__all__ = ["close_names"]

_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def close_names(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``choices`` the user may have meant by ``name``.

    A name ending in a number matches first the choices with the same stem and the same
    number in another zero padding, as host names differ between clusters; then
    :func:`difflib.get_close_matches` adds the names spelled alike.

    Parameters
    ----------
    name : str
        The name that matched nothing.
    choices : iterable of str
        The names there are.
    n : int
        At most this many suggestions.

    Returns
    -------
    list of str
        The suggestions, best first (empty if nothing is close).

    Examples
    --------
    >>> close_names("node001", ["node00001", "node00061", "node00010"])
    ['node00001', 'node00061', 'node00010']
    >>> close_names("fatree", ["torus", "fattree", "bgq"])
    ['fattree']
    """
    choices = list(choices)
    found: list[str] = []
    numbered = _NUMBERED.match(name)
    if numbered:
        stem, number = numbered.group(1), int(numbered.group(2))
        for choice in choices:
            other = _NUMBERED.match(choice)
            if other and other.group(1) == stem and int(other.group(2)) == number:
                found.append(choice)
    for choice in difflib.get_close_matches(name, choices, n=n):
        if choice not in found:
            found.append(choice)
    return found[:n]
