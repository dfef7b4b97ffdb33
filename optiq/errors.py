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
