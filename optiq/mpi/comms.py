"""A private duplicate of a caller's communicator: made once, freed with the original.

Library code that sends messages on a communicator it was given works on a duplicate, so
its tags never meet the application's messages. Duplicating on every call would cost a
collective each time; so the duplicate is cached on the original as an MPI attribute, one
per purpose, and MPI frees it when the original is freed (the attribute's delete
callback), so no handle outlives its communicator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["private_comm", "cached_on", "forget", "mpi_module"]

_KEYVALS: dict[str, int] = {}
_RELEASE: dict[str, Callable[[Any], None]] = {}


@functools.cache
def mpi_module() -> Any:
    """``mpi4py.MPI``, imported (and MPI initialised) on the first call: for calls made many
    times a second, where an ``import`` statement of its own costs more than the lookup."""
    from mpi4py import MPI

    return MPI


def cached_on(comm: Any, purpose: str, make: Callable[[], Any], release: Callable[[Any], None]) -> Any:
    """The object ``purpose`` keeps on ``comm``: made by ``make()`` on the first call and
    released by ``release(obj)`` when ``comm`` is freed (or :func:`forget` is called).

    ``make`` and ``release`` may be collective: every rank calls this with the same ``comm``
    and ``purpose`` at the same point. One ``release`` per purpose (the first one given).
    """
    from mpi4py import MPI

    keyval = _KEYVALS.get(purpose)
    if keyval is None:
        _RELEASE[purpose] = release
        keyval = _KEYVALS[purpose] = MPI.Comm.Create_keyval(delete_fn=lambda c, k, obj: _RELEASE[purpose](obj))
    obj = comm.Get_attr(keyval)
    if obj is None:
        obj = make()
        comm.Set_attr(keyval, obj)
    return obj


def forget(comm: Any, purpose: str) -> None:
    """Release what ``purpose`` keeps on ``comm`` now (collective), if anything."""
    keyval = _KEYVALS.get(purpose)
    if keyval is not None and comm.Get_attr(keyval) is not None:
        comm.Delete_attr(keyval)


def private_comm(comm: Any, purpose: str) -> Any:
    """The duplicate of ``comm`` reserved for ``purpose``; collective the first time.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The caller's communicator; it is not used for any message.
    purpose : str
        Who uses the duplicate (e.g. ``"optiq.collectives"``); each purpose gets its own.

    Returns
    -------
    mpi4py.MPI.Comm
        The same duplicate on every later call with this ``comm`` and ``purpose``.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> comm = MPI.COMM_SELF.Dup()
    >>> a, b = private_comm(comm, "example"), private_comm(comm, "example")
    >>> a is b and a != comm
    True
    >>> comm.Free()     # frees the duplicate too
    >>> a == MPI.COMM_NULL
    True
    """
    return cached_on(comm, purpose, comm.Dup, lambda duplicate: duplicate.Free())
