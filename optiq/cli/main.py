"""``optiq``: parse, dispatch to the subcommand, map errors to exit codes (0, 1, 2, 130)."""

from __future__ import annotations

import sys

from ..mpi.launch import command_main
from .argtypes import UsageError
from .commands import COMMANDS
from .parser import build_parser, check_arguments
from .testbed import testbed

__all__ = ["main"]

#: Subcommand name -> the function that runs it.
RUNS = {**COMMANDS, "testbed": testbed}


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 bad input or failure, 2 usage)."""
    parser = build_parser()
    return command_main(lambda: check_arguments(parser.parse_args(argv)), lambda args: RUNS[args.command](args), UsageError)


if __name__ == "__main__":
    sys.exit(main())
