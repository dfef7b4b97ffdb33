"""Typed exceptions. Every user mistake raises one of these, never a bare error."""


class OptiqError(Exception):
    """Base class of every error optiq raises for bad input."""


class TopologyError(OptiqError):
    """A topology spec, graph or node reference is invalid."""


class WorkloadError(OptiqError):
    """A demand set or pattern is invalid (bad node, size, or pairing)."""


class PathError(OptiqError):
    """Candidate paths cannot be generated (e.g. no route within the hop limit)."""


class PlanError(OptiqError):
    """A plan is malformed or inconsistent with its topology and demands."""


class ParameterError(PlanError):
    """A function was given a parameter it does not take, or a value outside its range
    (an unknown method, solver or candidate kind, a gap of 2, a cache size of 0).

    A :class:`PlanError`, so handlers of plan mistakes catch it too."""


class SolverError(OptiqError):
    """The LP solver failed or returned no usable solution."""


class TransferError(OptiqError):
    """The executor could not complete a transfer: timeout, a stopped rank, or a bad buffer."""


class OutputError(OptiqError):
    """An output file or directory cannot be written."""


class ArgumentError(OptiqError, ValueError):
    """An argument of a call that stands in for an MPI one (``optiq.alltoallv``) has a bad
    value: also a :class:`ValueError`, as mpi4py's own errors for that argument are."""


class ArgumentTypeError(OptiqError, TypeError):
    """An argument of such a call has the wrong type (a :class:`TypeError` too, as mpi4py's)."""


class ArgumentKeyError(OptiqError, KeyError):
    """An argument of such a call names what has no MPI datatype (a :class:`KeyError` too, as
    mpi4py's ``cannot map 'x' to MPI datatype``)."""

    def __str__(self) -> str:  # KeyError quotes its argument; the message is a sentence
        return str(self.args[0]) if self.args else ""


class ArgumentBufferError(OptiqError, BufferError):
    """A buffer of such a call cannot be used as given (read-only where it is written, not
    contiguous): a :class:`BufferError` too, as mpi4py's."""


class TestbedError(OptiqError):
    """The emulated network cannot be built, routed, launched or measured: no privilege to make
    network namespaces, a missing tool, a route the kernel does not take as installed."""

    __test__ = False  # a name pytest would otherwise collect
