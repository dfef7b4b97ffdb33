"""Command-line parsing shared by every optiq command: the parser and the argument types.

Both ``optiq`` (:mod:`optiq.cli`) and ``python -m optiq.runtime`` parse with :class:`Parser`,
so a usage mistake is one ``optiq: error:`` line (rank 0 alone under ``mpiexec``) and exit
code 2 (:func:`optiq.mpi.launch.command_main`), and values such as ``-5MB/s`` reach their
option's check instead of being taken for an option.
"""

from __future__ import annotations

import argparse
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
           "fraction", "positive_float", "gap", "non_negative_float", "size_list"]


class UsageError(Exception):
    """A malformed command line (exit code 2)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes raise :class:`UsageError` and print on rank 0 only."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")

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


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer ``>= low``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an integer") from None
        if value < low:
            raise ValueError(f"{text!r} must be at least {low}")
        return value
    return argument(parse)


size = argument(parse_size)
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
    sizes = [parse_size(part) for part in text.split(",") if part.strip()]
    if not sizes:
        raise ValueError(f"{text!r} names no size")
    return sizes
