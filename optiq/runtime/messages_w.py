"""The two messages of ``Comm.Alltoallw``, read as mpi4py reads them.

mpi4py's rules for ``Alltoallw`` (its ``message_vector_w``): ``[buf, types]`` (one element
of every rank's type, from the buffer's start), ``[buf, (counts, displs), types]`` or
``[buf, counts, displs, types]``, where ``counts`` are elements per rank, ``displs`` *bytes*
from the buffer's start (not extents, as for ``Alltoallv``), and ``types`` one
``MPI.Datatype`` per rank; ``None`` or ``MPI.BOTTOM`` as the buffer needs counts and
displacements (absolute addresses). Every part is then ``counts[i]`` elements of
``types[i]``: a :class:`~optiq.runtime.messages.Message` with a datatype per part, read in
place where the type's elements lie back to back and packed by the MPI library's own
``Pack`` otherwise (subarrays, vectors, indexed and struct types). Mistakes raise what
mpi4py raises, as the matching :mod:`optiq.errors` class.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import OptiqError
from ..mpi.comms import mpi_module
from .messages import Message, _buffer, _integers, _type_bounds, as_argument_error, datatype_key

__all__ = ["read_message_w", "spec_key_w"]


def read_message_w(spec: Any, *, readonly: bool, blocks: int) -> Message:
    """One side of ``Comm.Alltoallw`` as mpi4py reads it (module docstring), for ``blocks`` ranks.

    Raises
    ------
    ArgumentTypeError, ArgumentError, ArgumentKeyError, ArgumentBufferError
        Where mpi4py raises ``TypeError``, ``ValueError``, ``KeyError`` or ``BufferError``.

    Examples
    --------
    >>> import numpy as np
    >>> from mpi4py import MPI
    >>> column = MPI.DOUBLE.Create_vector(2, 1, 2).Commit()    # one column of a 2 x 2 array
    >>> m = read_message_w([np.zeros((2, 2)), ([1, 1], [0, 8]), [column, column]], readonly=True, blocks=2)
    >>> m.byte_counts.tolist(), m.byte_displs.tolist(), m.contiguous.tolist()
    ([16, 16], [0, 8], [False, False])
    >>> column.Free()
    """
    try:
        return _read_w(spec, readonly, blocks)
    except OptiqError:
        raise
    except Exception as exc:  # what mpi4py raises for the same mistake, as an optiq error of its kind
        raise as_argument_error(exc) from None


def _read_w(spec: Any, readonly: bool, blocks: int) -> Message:
    MPI = mpi_module()

    nargs = len(spec)  # mpi4py takes any sequence (no len: a TypeError, as it raises)
    o_counts = o_displs = None
    if nargs == 2:
        o_buf, o_types = spec
    elif nargs == 3:
        o_buf, (o_counts, o_displs), o_types = spec
    elif nargs == 4:
        o_buf, o_counts, o_displs, o_types = spec
    else:
        raise ValueError("message: expecting 2 to 4 items")
    if o_buf is None or o_buf is MPI.BOTTOM:
        if o_counts is None:
            raise ValueError("message: BOTTOM requires counts")
        if o_displs is None:
            raise ValueError("message: BOTTOM requires displs")
    place, data, _ = _buffer(o_buf, MPI.BYTE, readonly)
    if o_counts is None and o_displs is None:
        counts, displs = np.ones(blocks, dtype=np.int64), np.zeros(blocks, dtype=np.int64)
    else:
        counts, displs = _integers(o_counts, blocks), _integers(o_displs, blocks)
    if len(o_types) != blocks:
        raise ValueError(f"expecting {blocks} items, got {len(o_types)}")
    types = tuple(o_types[i] for i in range(blocks))
    for t in types:
        if not isinstance(t, MPI.Datatype):
            raise TypeError(f"Argument has incorrect type (expected mpi4py.MPI.Datatype, got {type(t).__name__})")
    if np.count_nonzero(counts < 0):
        raise ValueError(f"message: negative count {int(counts.min())}")
    bounds = np.array([_type_bounds(t) for t in types], dtype=np.int64).reshape(blocks, 5)
    null = np.array([t == MPI.DATATYPE_NULL for t in types], dtype=bool)
    if np.count_nonzero(null & (counts > 0)):
        r = int(np.argmax(null & (counts > 0)))
        raise ValueError(f"message: datatype of rank {r} is null, with a count of {int(counts[r])}")
    return Message(spec, o_buf, place, data, counts, displs, types, *(bounds[:, k].copy() for k in range(5)))


def spec_key_w(spec: Any) -> tuple[Any, ...] | None:
    """What an ``Alltoallw`` message's checks depend on, when cheap to tell (a numpy buffer,
    counts and displacements as numpy arrays or lists of integers, datatypes): two
    specifications with equal keys read alike and pass or fail the same checks, whatever
    buffers of that size and type they name. A datatype counts as in
    :func:`~optiq.runtime.messages.datatype_key` (a derived one as the very object: whoever
    keeps a key keeps those objects alive). None: read it every time.

    Examples
    --------
    >>> import numpy as np
    >>> from mpi4py import MPI
    >>> a = [np.zeros(4), ([1, 1], [0, 16]), [MPI.DOUBLE] * 2]
    >>> spec_key_w(a) == spec_key_w([np.ones(4), ([1, 1], [0, 16]), [MPI.DOUBLE] * 2])
    True
    >>> spec_key_w(a) == spec_key_w([np.zeros(4), ([1, 1], [0, 8]), [MPI.DOUBLE] * 2])
    False
    """
    MPI = mpi_module()

    if type(spec) not in (list, tuple) or not spec or type(spec[0]) is not np.ndarray:
        return None
    buf, flags = spec[0], spec[0].flags
    parts: list[Any] = [len(spec), buf.nbytes, buf.dtype.str, flags.writeable, flags.c_contiguous, flags.f_contiguous]
    if len(spec) == 3 and type(spec[1]) in (tuple, list) and len(spec[1]) == 2:
        where = spec[1]
    elif len(spec) == 4:
        where = spec[1:3]
    elif len(spec) == 2:
        where = ()
    else:
        return None
    for value in where:
        if isinstance(value, np.ndarray) and value.dtype.kind in "iu" and value.ndim == 1:
            parts.append(("array", value.dtype.str, value.tobytes()))
        elif isinstance(value, list) and all(type(v) is int for v in value):
            parts.append(("list", tuple(value)))
        else:
            return None
    types = spec[-1]
    if type(types) not in (list, tuple):
        return None
    for t in types:
        if type(t) is not MPI.Datatype:
            return None
        parts.append(datatype_key(t))
    return tuple(parts)
