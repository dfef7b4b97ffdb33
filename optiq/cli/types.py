"""Argument types of the ``optiq`` command line (shared with ``python -m optiq.runtime``).

The parser class and the types live in :mod:`optiq.argtypes` so that the runtime's own
launcher can parse without importing the command line; this module is where the CLI
finds them.
"""

from ..argtypes import (
                        Parser,
                        UsageError,
                        argument,
                        fraction,
                        gap,
                        int_at_least,
                        non_negative_float,
                        non_negative_int,
                        positive_float,
                        positive_int,
                        rate,
                        size,
                        size_list,
)

__all__ = ["Parser", "UsageError", "argument", "int_at_least", "size", "rate", "positive_int", "non_negative_int",
           "fraction", "positive_float", "gap", "non_negative_float", "size_list"]
