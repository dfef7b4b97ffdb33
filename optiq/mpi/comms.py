"""A private duplicate of a caller's communicator: made once, freed with the original.

Library code that sends messages on a communicator it was given works on a duplicate, so
its tags never meet the application's messages. Duplicating on every call would cost a
collective each time; so the duplicate is cached on the original as an MPI attribute, one
per purpose, and MPI frees it when the original is freed (the attribute's delete
callback), so no handle outlives its communicator.
"""

from __future__ import annotations

from typing import Any

__all__ = ["private_comm"]

_KEYVALS: dict[str, int] = {}


def _free_duplicate(comm: Any, keyval: int, duplicate: Any) -> None:
    duplicate.Free()


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
    from mpi4py import MPI

    keyval = _KEYVALS.get(purpose)
    if keyval is None:
        keyval = _KEYVALS[purpose] = MPI.Comm.Create_keyval(delete_fn=_free_duplicate)
    duplicate = comm.Get_attr(keyval)
    if duplicate is None:
        duplicate = comm.Dup()
        comm.Set_attr(keyval, duplicate)
    return duplicate
