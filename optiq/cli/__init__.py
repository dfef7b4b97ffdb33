"""The ``optiq`` command line: :mod:`.parser` and :mod:`.argtypes` read it, :mod:`.commands` runs
each subcommand through the library, :mod:`.main` maps errors to exit codes."""

from .main import main

__all__ = ["main"]
