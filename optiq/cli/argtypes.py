"""Command-line parsing shared by every optiq command: the parser and the argument types.

Both ``optiq`` (:mod:`optiq.cli`) and ``python -m optiq.runtime`` parse with :class:`Parser`,
so a usage mistake is one ``optiq: error:`` line (rank 0 alone under ``mpiexec``) and exit
code 2 (:func:`optiq.mpi.launch.command_main`), and values such as ``-5MB/s`` reach their
option's check instead of being taken for an option.
"""

from __future__ import annotations

import argparse
import difflib
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import OptiqError
from ..mpi.launch import world_rank
from ..utils.units import parse_rate, parse_size

if TYPE_CHECKING:
    from typing import NoReturn

__all__ = ["UsageError", "Parser", "argument", "int_at_least", "size", "rate", "positive_int", "non_negative_int",
           "fraction", "percent", "positive_float", "gap", "non_negative_float", "size_list"]


class UsageError(Exception):
    """A malformed command line (exit code 2)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes raise :class:`UsageError` and print on rank 0 only."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._given = list(args) if args is not None else None
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        unknown = self._unknown_options()
        if unknown and "required" in message:  # a misspelled option is why the required one is missing
            close = difflib.get_close_matches(unknown[0].split("=")[0], self._long_options(), n=1)
            message = (f"unrecognized arguments: {' '.join(unknown)}"
                       + (f" (did you mean {close[0]}?)" if close else ""))
        raise UsageError(f"{message} (see {self.prog} --help)")

    def _long_options(self) -> list[str]:
        return [o for o in self._option_string_actions if o.startswith("--")]

    def _unknown_options(self) -> list[str]:
        """The options among the arguments this parser was given that it does not know."""
        unknown = []
        for token in getattr(self, "_given", None) or []:
            if token == "--":
                break
            name = token.split("=", 1)[0]
            if not name.startswith("-") or name == "-" or self._negative_number_matcher.match(name):
                continue
            known = name in self._option_string_actions or (
                self.allow_abbrev and name.startswith("--") and any(o.startswith(name) for o in self._long_options()))
            if not known:
                unknown.append(token)
        return unknown

    def _print_message(self, message: str, file: Any = None) -> None:
        if world_rank() == 0:
            super()._print_message(message, file)


def argument(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a parser that raises OptiqError or ValueError."""
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except (OptiqError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = parse.__name__
    return convert


def int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer ``>= low`` (and ``<= high`` if given)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an integer") from None
        if value < low:
            raise ValueError(f"{text!r} must be at least {low}")
        if high is not None and value > high:
            raise ValueError(f"{text!r} must be at most {high}")
        return value
    return argument(parse)


#: A size given as a bare number below this needs a unit: so small a number is more likely a
#: forgotten unit than a byte count (a bare rate is refused for the same reason).
BARE_SIZE_MIN = 1024


def _size(text: str) -> int:
    """A byte count with a unit (``8MiB``, ``64KB``, ``12B``), or a bare number of at least
    :data:`BARE_SIZE_MIN` bytes."""
    value = parse_size(text)
    if re.fullmatch(r"\s*[0-9.eE+]+\s*", text) and value < BARE_SIZE_MIN:
        raise ValueError(f"{text.strip()!r} has no unit: write {text.strip()}B for bytes, or {text.strip()}KiB, "
                         f"{text.strip()}MiB")
    return value


size = argument(_size)
rate = argument(parse_rate)
positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


@argument
def fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise ValueError(f"{text!r} must be a number in [0, 1]")
    return value


@argument
def percent(text: str) -> float:
    value = float(text.strip().removesuffix("%"))
    if not 0 <= value < 100:
        raise ValueError(f"{text!r} must be a percentage in [0, 100)")
    return value


@argument
def positive_float(text: str) -> float:
    value = float(text)
    if not 0 < value < math.inf:
        raise ValueError(f"{text!r} must be a finite number > 0")
    return value


@argument
def gap(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise ValueError(f"{text!r} must be a fraction in [0, 1), e.g. 0.01 for 1%")
    return value


@argument
def non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"{text!r} must be a finite number >= 0")
    return value


@argument
def size_list(text: str) -> list[int]:
    sizes = [_size(part) for part in text.split(",") if part.strip()]
    if not sizes:
        raise ValueError(f"{text!r} names no size")
    return sizes


def routed_spec(spec: str, routes: str | None, seed: int = 0, progress: Callable[[str], None] | None = None) -> str:
    """The topology spec of ``-t SPEC --routes ROUTES``: ``ecmp`` (with the run's ``--seed``) or
    ``ecmp:SEED`` on any network; on an InfiniBand fabric a tables file, or ``opensm:ENGINE``,
    the tables the real OpenSM's engine gives it (:func:`optiq.paths.opensm.opensm_tables`,
    which runs it on the fabric simulated, or takes them from its cache).

    Examples
    --------
    >>> routed_spec("fattree:k=4,n=2", "ecmp", 3), routed_spec("ibnet:f.txt", "lfts.txt")
    ('fattree:k=4,n=2,routes=ecmp:3', 'ibnet:f.txt,routes=lfts.txt')
    """
    if not routes:
        return spec
    word = routes.strip()
    if word.lower() == "ecmp":
        return f"{spec},routes=ecmp:{seed}"
    if word.lower().startswith("ecmp:"):
        return f"{spec},routes={word}"
    if not spec.strip().lower().startswith("ibnet:"):
        what = "OpenSM's engines route" if word.lower().startswith("opensm:") else "a tables file applies to"
        raise OptiqError(f"--routes {routes!r}: {what} InfiniBand fabrics (-t ibnet:FILE), not {spec!r}; every "
                         f"network takes --routes ecmp")
    if word.lower().startswith("opensm:"):
        from ..paths.opensm import opensm_tables
        from ..topology import from_spec

        return f"{spec},routes={opensm_tables(from_spec(spec), word.partition(':')[2], progress=progress)}"
    return f"{spec},routes={routes}"
