"""The two messages of ``Comm.Alltoallv``, read as mpi4py reads them, and the bytes they name.

:func:`read_message` follows mpi4py's own rules for a vector message specification (its
``message_vector``): a buffer alone; ``[buf, counts]``; ``[buf, (counts, displs)]``;
``[buf, T]``; ``[buf, counts, T]``; ``[buf, (counts, displs), T]``; ``[buf, counts, displs,
T]``, where a datatype ``T`` is an ``MPI.Datatype`` or a typecode string (``"i"``), counts
and displacements are a sequence per rank or one integer (every rank the same count; the
displacement of rank ``i`` is ``i`` times the integer), and left out they follow from the
buffer (its length split evenly; the parts back to back). A buffer is any object exporting
the buffer protocol (numpy arrays in either order, ``bytes``, ``bytearray``,
``array.array``, mpi4py's ``buffer``/``memory``), a DLPack tensor, an object with a
``__cuda_array_interface__``, or ``None``/``MPI.BOTTOM`` (with an explicit datatype). Its
datatype, when not given, is the one mpi4py maps the buffer's format to. Every mistake
raises what mpi4py raises for it (a ``TypeError``, ``ValueError``, ``KeyError`` or
``BufferError``), as the matching :mod:`optiq.errors` class.

A :class:`Message` then names the bytes of every rank's part: in place in host memory when
the datatype's elements lie back to back (a *contiguous* type), or packed and unpacked with
the MPI library's own ``Pack``/``Unpack`` otherwise (a vector, a resized type, a type with
a lower bound): the bytes a rank sends are always the type map's, in order, as MPI's own
transfer moves them. Device memory and ``MPI.BOTTOM`` with data are not read here: a call
with them is handed to ``comm.Alltoallv`` as given.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import ArgumentBufferError, ArgumentError, ArgumentKeyError, ArgumentTypeError, OptiqError
from ..mpi.comms import mpi_module

__all__ = ["Message", "read_message", "quick_parts", "overlapping", "as_argument_error", "spec_key", "datatype_key",
           "from_template", "HOST", "DEVICE", "NONE"]

HOST, DEVICE, NONE = "host", "device", "none"
#: DLPack's device type of host memory.
_DLPACK_CPU = 1


def as_argument_error(exc: BaseException) -> OptiqError:
    """``exc`` as the :mod:`optiq.errors` class of the same kind (a ``TypeError`` stays one ...)."""
    if isinstance(exc, OptiqError):
        return exc
    message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    kind: type[OptiqError] = (ArgumentKeyError if isinstance(exc, KeyError) else ArgumentTypeError
                              if isinstance(exc, TypeError) else ArgumentBufferError if isinstance(exc, BufferError)
                              else ArgumentError)
    return kind(message or type(exc).__name__)


@dataclass(eq=False)
class Message:
    """One side of the call: the caller's specification and what it names.

    Every rank's *part* is ``counts[i]`` elements of ``datatypes[i]`` from byte
    ``byte_displs[i]`` of the buffer: ``Alltoallv``'s parts share one datatype and their
    displacements are in its extents; ``Alltoallw``'s each have their own, at byte
    displacements (:mod:`optiq.runtime.messages_w`).

    Attributes
    ----------
    spec : object
        The argument as the caller gave it (what a call handed to MPI passes on).
    buffer : object
        The buffer object (``None`` or ``MPI.BOTTOM`` for none).
    place : {"host", "device", "none"}
        Where its memory is: host memory this module reads and writes, device memory (handed
        to MPI), or no buffer.
    data : ndarray of uint8, optional
        The buffer's memory, for host buffers.
    counts : ndarray of int
        Elements of every rank's part.
    byte_displs : ndarray of int
        Where every rank's part starts, in bytes from the buffer's start.
    datatypes : tuple of mpi4py.MPI.Datatype
        Every rank's part's datatype.
    sizes, lbs, extents, true_lbs, true_extents : ndarray of int
        Every part's datatype's size and bounds, in bytes.
    """

    spec: Any
    buffer: Any
    place: str
    data: np.ndarray | None
    counts: np.ndarray
    byte_displs: np.ndarray
    datatypes: tuple[Any, ...]
    sizes: np.ndarray
    lbs: np.ndarray
    extents: np.ndarray
    true_lbs: np.ndarray
    true_extents: np.ndarray

    @classmethod
    def of_one_type(cls, spec: Any, buffer: Any, place: str, data: np.ndarray | None, counts: np.ndarray,
                    displs: np.ndarray, datatype: Any, blocks: int) -> Message:
        """``Alltoallv``'s message: every part of ``datatype``, ``displs`` in its extents."""
        bounds = _type_bounds(datatype)
        size, lb, extent, true_lb, true_extent = (np.full(blocks, b, dtype=np.int64) for b in bounds)
        return cls(spec, buffer, place, data, counts, displs * bounds[2], (datatype,) * blocks, size, lb, extent,
                   true_lb, true_extent)

    @cached_property
    def contiguous(self) -> np.ndarray:
        """Per part, whether its elements' bytes lie back to back, one element after the other."""
        flags: np.ndarray = (self.sizes == self.extents) & (self.lbs == 0) & (self.true_lbs == 0) \
            & (self.true_extents == self.sizes)
        return flags

    @cached_property
    def all_contiguous(self) -> bool:
        """Whether every part's elements lie back to back (then every part is read in place)."""
        return bool(self.contiguous.all())

    @cached_property
    def byte_counts(self) -> np.ndarray:
        """Bytes of every rank's part (its elements' data)."""
        nbytes: np.ndarray = self.counts * self.sizes
        return nbytes

    @cached_property
    def _parts(self) -> list[tuple[int, int, bool]]:
        """Every rank's part as (first byte, bytes, contiguous): where a contiguous part lies,
        and how much any part packs into."""
        return list(zip(self.byte_displs.tolist(), self.byte_counts.tolist(), self.contiguous.tolist()))

    def readable(self) -> bool:
        """Whether this module can read and write every part itself (host memory, or no data)."""
        if self.place == HOST:
            return True
        return self.place == NONE and not np.count_nonzero(self.byte_counts)

    def check_bounds(self, what: str) -> None:
        """Refuse a part that reaches outside the buffer.

        Raises
        ------
        ArgumentError
            Naming the rank whose part does not fit.
        """
        if self.place != HOST or self.data is None:
            return
        live = self.counts > 0
        if not np.count_nonzero(live):  # count_nonzero: far cheaper than any() on arrays this small
            return
        step = (self.counts - 1) * self.extents  # the last element's offset from the first (an extent may be negative)
        start = self.byte_displs + self.true_lbs + np.minimum(step, 0)
        stop = self.byte_displs + self.true_lbs + self.true_extents + np.maximum(step, 0)
        bad = live & ((start < 0) | (stop > self.data.size))
        if np.count_nonzero(bad):
            r = int(np.argmax(bad))
            raise ArgumentError(f"the {what} buffer holds {self.data.size} bytes, but rank {r}'s part spans bytes "
                                f"{int(start[r])} to {int(stop[r])}")

    def check_overlaps(self, what: str) -> None:
        """Refuse receive parts that share bytes (contiguous types: every byte is written)."""
        if not self.all_contiguous or self.place != HOST:
            return
        both = overlapping(self.byte_counts, self.byte_displs)
        if both is not None:
            raise ArgumentError(f"the {what} regions of ranks {both[0]} and {both[1]} overlap")

    def read(self, i: int) -> np.ndarray:
        """Rank ``i``'s part as bytes: a view of the buffer (contiguous types) or packed."""
        start, n, contiguous = self._parts[i]
        if n == 0:
            return np.zeros(0, np.uint8)
        assert self.data is not None
        if contiguous:
            return self.data[start:start + n]
        out = np.empty(n, np.uint8)
        self._pack(i, out)
        return out

    def copy(self, i: int) -> np.ndarray:
        """Rank ``i``'s part as bytes of its own (kept when the buffer is overwritten: ``IN_PLACE``)."""
        part = self.read(i)
        return part.copy() if self._parts[i][2] else part

    def target(self, i: int) -> tuple[np.ndarray, Callable[[], None] | None]:
        """Where rank ``i``'s part is received: a view of the buffer, or a staging array and the
        step that unpacks it into the buffer once it is full."""
        start, n, contiguous = self._parts[i]
        if n == 0:
            return np.zeros(0, np.uint8), None
        assert self.data is not None
        if contiguous:
            return self.data[start:start + n], None
        staging = np.empty(n, np.uint8)
        return staging, lambda: self._unpack(i, staging)

    def write(self, i: int, part: np.ndarray) -> None:
        """Put bytes (one part, as :meth:`read` gives them) into rank ``i``'s part."""
        if not part.size:
            return
        target, finish = self.target(i)
        target[...] = part
        if finish is not None:
            finish()

    def _elements(self, i: int, readonly: bool, count: int, extent: int, first: int = 0) -> Any:
        """Elements ``first ..`` of rank ``i``'s part as MPI's ``Pack`` and ``Unpack`` take them:
        memory from that element's start, ``count`` extents long (the type map may reach before
        or past that span; :meth:`check_bounds` checked the bytes it does reach)."""
        MPI = mpi_module()

        start = self._address + int(self.byte_displs[i]) + first * int(self.extents[i])
        return MPI.buffer.fromaddress(start, count * extent, readonly=readonly)

    @cached_property
    def _address(self) -> int:
        """Where the buffer's memory starts."""
        assert self.data is not None
        return int(self.data.__array_interface__["data"][0])

    def _one_by_one(self, i: int) -> tuple[Any, int] | None:
        """A part's datatype resized to an extent of one byte, for a type whose own extent is not
        positive (``Pack`` counts elements by the extent): its elements then go one at a time."""
        if self.extents[i] > 0:
            return None
        return self.datatypes[i].Create_resized(int(self.lbs[i]), 1).Commit(), int(self.counts[i])

    def _pack(self, i: int, out: np.ndarray) -> None:
        MPI = mpi_module()

        one = self._one_by_one(i)
        if one is None:
            end = self.datatypes[i].Pack(self._elements(i, True, int(self.counts[i]), int(self.extents[i])), out, 0,
                                         MPI.COMM_SELF)
        else:
            end = 0
            try:
                for k in range(one[1]):
                    end = one[0].Pack(self._elements(i, True, 1, 1, k), out, end, MPI.COMM_SELF)
            finally:
                one[0].Free()
        if end != out.size:
            raise ArgumentError(f"MPI packed {end} bytes of rank {i}'s part, not the {out.size} of its type's size")

    def _unpack(self, i: int, staging: np.ndarray) -> None:
        MPI = mpi_module()

        one = self._one_by_one(i)
        if one is None:
            self.datatypes[i].Unpack(staging, 0, self._elements(i, False, int(self.counts[i]), int(self.extents[i])),
                                     MPI.COMM_SELF)
            return
        try:
            position = 0
            for k in range(one[1]):
                position = one[0].Unpack(staging, position, self._elements(i, False, 1, 1, k), MPI.COMM_SELF)
        finally:
            one[0].Free()


def overlapping(byte_counts: np.ndarray, byte_displs: np.ndarray) -> tuple[int, int] | None:
    """Two ranks whose parts (of bytes, not empty) share bytes, or None."""
    order = np.argsort(byte_displs, kind="stable")
    live = order[byte_counts[order] > 0]
    overlap = np.flatnonzero(byte_displs[live][1:] < (byte_displs + byte_counts)[live][:-1])
    return (int(live[overlap[0]]), int(live[overlap[0] + 1])) if overlap.size else None


#: Itemsizes of the numpy dtypes met so far whose elements mpi4py sends as one predefined,
#: contiguous datatype of the same size (0: a dtype the quick reading leaves to :func:`read_message`).
_QUICK_ITEMSIZE: dict[np.dtype, int] = {}


def quick_parts(spec: Any, blocks: int, *, readonly: bool) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The commonest message, ``[array, (counts, displs)]`` (a C-contiguous numpy array, counts
    and displacements as numpy integer arrays), read without building a :class:`Message`:
    every part's bytes and byte displacement, and the buffer's size in bytes. None for any other
    form, and for one :func:`read_message` would refuse or whose parts reach outside the
    buffer: the full reading then names the mistake.

    Examples
    --------
    >>> import numpy as np
    >>> counts, displs = np.array([2, 1]), np.array([0, 2])
    >>> c, d, n = quick_parts([np.zeros(3), (counts, displs)], 2, readonly=True)
    >>> c.tolist(), d.tolist(), n
    ([16, 8], [0, 16], 24)
    >>> quick_parts([np.zeros(2), (counts, displs)], 2, readonly=True) is None  # rank 1's part is outside
    True
    """
    if type(spec) is not list and type(spec) is not tuple or len(spec) != 2:
        return None
    buf, where = spec
    if type(buf) is not np.ndarray or type(where) is not tuple or len(where) != 2:
        return None
    counts, displs = where
    if type(counts) is not np.ndarray or type(displs) is not np.ndarray or counts.shape != (blocks,) \
            or displs.shape != (blocks,) or counts.dtype.kind not in "iu" or displs.dtype.kind not in "iu":
        return None
    flags = buf.flags
    if not flags.c_contiguous or not (readonly or flags.writeable):
        return None
    itemsize = _QUICK_ITEMSIZE.get(buf.dtype)
    if itemsize is None:
        itemsize = _QUICK_ITEMSIZE[buf.dtype] = _quick_itemsize(buf)
    if not itemsize:
        return None
    c = np.multiply(counts, itemsize, dtype=np.int64)
    d = np.multiply(displs, itemsize, dtype=np.int64)
    nbytes = buf.nbytes
    if np.count_nonzero((c < 0) | ((c > 0) & ((d < 0) | (d + c > nbytes)))):
        return None
    return c, d, nbytes


def _quick_itemsize(buf: np.ndarray) -> int:
    """The itemsize of ``buf``'s dtype if mpi4py sends its elements as a predefined, contiguous
    datatype of that size, else 0."""
    if buf.dtype.hasobject:
        return 0
    try:
        datatype = _datatype_of(memoryview(buf).format)  # type: ignore[arg-type]
    except Exception:  # a format mpi4py does not map: the full reading raises its error
        return 0
    size, lb, extent, true_lb, true_extent = _type_bounds(datatype)
    simple = datatype.is_predefined and size == extent == true_extent == buf.itemsize and lb == true_lb == 0
    return buf.itemsize if simple else 0


def spec_key(spec: Any) -> tuple[Any, ...] | None:
    """What a message specification's checks depend on, when cheap to tell (a numpy buffer,
    counts and displacements as numpy arrays, lists or integers, a datatype or none): two
    specifications with equal keys read alike and pass or fail the same checks, whatever
    buffers of that size and type they name. A derived datatype counts as the very object
    (its ``id`` and handle, which freeing it changes): whoever keeps a key keeps the
    objects it names alive (:func:`datatype_key`). None: read it every time."""
    MPI = mpi_module()

    if type(spec) is list and len(spec) == 2 and type(spec[0]) is np.ndarray and type(spec[1]) is tuple \
            and len(spec[1]) == 2 and type(spec[1][0]) is np.ndarray and type(spec[1][1]) is np.ndarray:
        buf, (counts, displs) = spec  # the commonest form, keyed without the loop below
        flags = buf.flags
        return ("[array, (array, array)]", buf.nbytes, buf.dtype.str, flags.writeable, flags.c_contiguous,
                flags.f_contiguous, counts.dtype.str, counts.shape, counts.tobytes(), displs.dtype.str,
                displs.shape, displs.tobytes())
    if isinstance(spec, np.ndarray):
        buf, rest = spec, ()
    elif isinstance(spec, (list, tuple)) and spec and isinstance(spec[0], np.ndarray):
        buf, rest = spec[0], tuple(spec[1:])
    else:
        return None
    parts: list[Any] = [buf.nbytes, buf.dtype.str, buf.flags.writeable, buf.flags.c_contiguous,
                        buf.flags.f_contiguous, type(spec), len(rest)]
    item: Any
    for item in rest:
        if isinstance(item, tuple):
            parts.append(("tuple", *[_value_key(value) for value in item]))
        elif isinstance(item, MPI.Datatype):
            parts.append(datatype_key(item))
        else:
            parts.append(_value_key(item))
    unknown = any(p is _UNKNOWN or (isinstance(p, tuple) and _UNKNOWN in p) for p in parts)
    return None if unknown else tuple(parts)


_UNKNOWN = object()


def datatype_key(datatype: Any) -> tuple[Any, ...]:
    """A datatype in a message's key: a predefined one by its handle, a derived one as the very
    object (``id`` and handle: while the object lives no other has its ``id``, and freeing it
    changes its handle), so no MPI call is made per key."""
    if datatype.is_predefined:
        return ("type", datatype.handle)
    return ("derived", id(datatype), datatype.handle)


def from_template(template: Message, spec: Any, buffer: np.ndarray) -> Message:
    """A message laid out as ``template`` (read from a specification of the same key), on
    ``buffer``, a numpy array: its counts, datatypes and bounds, and what was derived from
    them, without reading them again."""
    message = object.__new__(Message)
    fields = message.__dict__
    fields.update(template.__dict__)
    fields.pop("_address", None)  # the template's buffer's: this one's is its own
    fields["spec"], fields["buffer"], fields["data"] = spec, buffer, buffer.reshape(-1, order="A").view(np.uint8)
    return message


def _value_key(value: Any) -> Any:
    if value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, list) and all(type(v) is int for v in value):
        return ("list", tuple(value))
    return _UNKNOWN


def read_message(spec: Any, *, readonly: bool, blocks: int) -> Message:
    """One side of ``Comm.Alltoallv`` as mpi4py reads it (module docstring), for ``blocks`` ranks.

    Raises
    ------
    ArgumentTypeError, ArgumentError, ArgumentKeyError, ArgumentBufferError
        Where mpi4py raises ``TypeError``, ``ValueError``, ``KeyError`` or ``BufferError``.

    Examples
    --------
    >>> import numpy as np
    >>> m = read_message([np.arange(6, dtype="i"), (2, [0, 3])], readonly=True, blocks=2)
    >>> m.counts.tolist(), m.byte_displs.tolist(), m.byte_counts.tolist(), m.all_contiguous
    ([2, 2], [0, 12], [8, 8], True)
    >>> read_message([b"abc", "c"], readonly=True, blocks=1).counts.tolist()
    [3]
    """
    try:
        return _read(spec, readonly, blocks)
    except OptiqError:
        raise
    except Exception as exc:  # what mpi4py raises for the same mistake, as an optiq error of its kind
        raise as_argument_error(exc) from None


def _read(spec: Any, readonly: bool, blocks: int) -> Message:
    MPI = mpi_module()

    o_buf = o_counts = o_displs = o_type = None
    if isinstance(spec, (list, tuple)):  # never a buffer itself: no export is tried
        if len(spec) == 2:
            o_buf, o_counts = spec
            if _is_datatype(o_counts):
                o_counts, o_type = None, o_counts
            elif isinstance(o_counts, tuple):
                o_counts, o_displs = o_counts
        elif len(spec) == 3:
            o_buf, o_counts, o_type = spec
            if isinstance(o_counts, tuple):
                o_counts, o_displs = o_counts
        elif len(spec) == 4:
            o_buf, o_counts, o_displs, o_type = spec
        else:
            raise ValueError("message: expecting 2 to 4 items")
    elif _is_buffer(spec) or hasattr(spec, "__dlpack__") or hasattr(spec, "__cuda_array_interface__"):
        o_buf = spec
    else:
        raise TypeError("message: expecting buffer or list/tuple")
    place, data, datatype = _buffer(o_buf, o_type, readonly)
    size, lb, extent, true_lb, true_extent = _type_bounds(datatype)
    nbytes = 0 if data is None else data.size
    if place == DEVICE:
        nbytes = _device_nbytes(o_buf)
    if o_counts is None:
        csize = 0
        if nbytes > 0:
            if datatype == MPI.DATATYPE_NULL:
                raise ValueError("message: cannot infer count, datatype is null")
            if extent <= 0:
                raise ValueError(f"message: cannot infer count, datatype extent {extent} (lb:{lb}, ub:{lb + extent})")
            if nbytes % extent:
                raise ValueError(f"message: cannot infer count, buffer length {nbytes} is not a multiple of datatype "
                                 f"extent {extent} (lb:{lb}, ub:{lb + extent})")
            csize = nbytes // extent
        counts = np.array([csize // blocks + (csize % blocks > i) for i in range(blocks)], dtype=np.int64)
    elif _is_integral(o_counts):
        counts = np.full(blocks, operator.index(o_counts), dtype=np.int64)
    else:
        counts = _integers(o_counts, blocks)
    if o_displs is None:
        displs = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    elif _is_integral(o_displs):
        displs = operator.index(o_displs) * np.arange(blocks, dtype=np.int64)
    else:
        displs = _integers(o_displs, blocks)
    if np.count_nonzero(counts < 0):
        raise ValueError(f"message: negative count {int(counts.min())}")
    if datatype == MPI.DATATYPE_NULL and np.count_nonzero(counts):
        raise ValueError(f"message: datatype is null, with a count of {int(counts.max())}")
    return Message.of_one_type(spec, o_buf, place, data, counts, displs, datatype, blocks)


#: The size and bounds of the predefined datatypes met so far, by handle.
_PREDEFINED_BOUNDS: dict[int, tuple[int, int, int, int, int]] = {}


def _type_bounds(datatype: Any) -> tuple[int, int, int, int, int]:
    """A datatype's size, lower bound, extent, true lower bound and true extent, in bytes
    (zeros for ``MPI.DATATYPE_NULL``); remembered for the predefined types, which never change."""
    MPI = mpi_module()

    if datatype == MPI.DATATYPE_NULL:
        return 0, 0, 0, 0, 0
    known = _PREDEFINED_BOUNDS.get(datatype.handle)
    if known is not None:
        return known
    lb, extent = datatype.Get_extent()
    true_lb, true_extent = datatype.Get_true_extent()
    bounds = int(datatype.Get_size()), int(lb), int(extent), int(true_lb), int(true_extent)
    if datatype.is_predefined:
        _PREDEFINED_BOUNDS[datatype.handle] = bounds
    return bounds


def _buffer(o_buf: Any, o_type: Any, readonly: bool) -> tuple[str, np.ndarray | None, Any]:
    """Where the buffer's memory is, its bytes (host), and the message's datatype."""
    MPI = mpi_module()

    if o_buf is None or o_buf is MPI.BOTTOM:  # an explicit datatype is required
        return NONE, None, _datatype(o_type)
    if isinstance(o_buf, np.ndarray) and (o_buf.flags.c_contiguous or o_buf.flags.f_contiguous):
        form = memoryview(o_buf).format if o_type is None else ""  # type: ignore[arg-type]
        datatype = _datatype(o_type) if o_type is not None else _datatype_of(form)  # 'O' has none
        if o_buf.dtype.hasobject:
            raise TypeError("an array of Python objects holds references, not data to send")
        if not readonly and not o_buf.flags.writeable:
            raise BufferError("Object is not writable.")
        return HOST, o_buf.reshape(-1, order="A").view(np.uint8), datatype  # the memory in its own order
    elif _is_buffer(o_buf):
        data = _host_bytes(o_buf, readonly)
        form = memoryview(o_buf).format if o_type is None else ""
    elif hasattr(o_buf, "__dlpack__") and _dlpack_device(o_buf) == _DLPACK_CPU:
        data = _host_bytes(o_buf, readonly)
        form = _dlpack_format(o_buf) if o_type is None else ""
    else:  # device memory: the MPI library reads it, this module does not
        MPI.buffer.frombuffer(o_buf, readonly=readonly)  # what mpi4py refuses, refused alike
        datatype = _datatype(o_type) if o_type is not None else _datatype_of(_device_format(o_buf))
        return DEVICE, None, datatype
    return HOST, data, _datatype(o_type) if o_type is not None else _datatype_of(form)


def _host_bytes(obj: Any, readonly: bool) -> np.ndarray:
    MPI = mpi_module()

    buf: Any = MPI.buffer.frombuffer(obj, readonly=readonly)
    if not buf.nbytes:
        return np.zeros(0, np.uint8)
    data: np.ndarray = np.frombuffer(buf, dtype=np.uint8)
    if not readonly and not data.flags.writeable:
        data = np.frombuffer(MPI.buffer.fromaddress(buf.address, buf.nbytes), dtype=np.uint8)
    return data


def _dlpack_device(obj: Any) -> int:
    try:
        return int(obj.__dlpack_device__()[0])
    except Exception:  # no device query: take it for device memory (handed to MPI)
        return -1


def _dlpack_format(obj: Any) -> str:
    """The buffer format mpi4py gives a DLPack tensor (its element type, read from the capsule)."""
    import ctypes

    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int), ("device_id", ctypes.c_int),
                    ("ndim", ctypes.c_int), ("dtype", DLDataType)]

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    capsule = obj.__dlpack__()
    dtype = DLTensor.from_address(get(capsule, b"dltensor")).dtype
    code, bits, lanes = int(dtype.code), int(dtype.bits), int(dtype.lanes)
    size = {name: 8 * ctypes.sizeof(kind) for name, kind in (("b", ctypes.c_char), ("h", ctypes.c_short),
                                                            ("i", ctypes.c_int), ("l", ctypes.c_long),
                                                            ("q", ctypes.c_longlong), ("f", ctypes.c_float),
                                                            ("d", ctypes.c_double), ("g", ctypes.c_longdouble))}
    if lanes != 1:
        pairs = {size["f"]: "Zf", size["d"]: "Zd", size["g"]: "Zg"}
        return pairs.get(bits, "B") if code == 2 and lanes == 2 else "B"
    by_code = {6: {8: "?"},  # bool, int, uint, float, complex (DLPack's codes)
               0: {size[c]: c for c in "qlihb"}, 1: {size[c]: c.upper() for c in "qlihb"},
               2: {size["f"] // 2: "e", size["f"]: "f", size["d"]: "d", size["g"]: "g"},
               5: {size["f"]: "Ze", 2 * size["f"]: "Zf", 2 * size["d"]: "Zd", 2 * size["g"]: "Zg"}}
    return by_code.get(code, {}).get(bits, "B")


def _device_nbytes(obj: Any) -> int:
    MPI = mpi_module()

    return int(MPI.buffer.frombuffer(obj, readonly=True).nbytes)


def _device_format(obj: Any) -> str:
    cai = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(cai, dict) and "typestr" in cai:
        return str(np.dtype(cai["typestr"]).char) if cai["typestr"][0] in "<>|=" else "B"
    return "B"


def _datatype(o_type: Any) -> Any:
    """An explicit datatype: an ``MPI.Datatype``, or a typecode mpi4py knows."""
    MPI = mpi_module()

    if isinstance(o_type, MPI.Datatype):
        return o_type
    try:
        return MPI._typedict[o_type]
    except (KeyError, TypeError):
        raise KeyError(f"cannot map {o_type!r} to MPI datatype") from None


def _datatype_of(form: str) -> Any:
    """The datatype mpi4py maps a buffer's format to (``"B"`` is ``MPI.BYTE``)."""
    MPI = mpi_module()

    if form == "B":
        return MPI.BYTE
    if form[:1] == "@":
        form = form[1:]
    elif form[:1] in "<>":
        native = "<" if sys.byteorder == "little" else ">"
        if form[0] != native:
            raise BufferError(f"format string {form!r} with non-native byte order")
        form = form[1:]
    return _datatype(form)


def _is_buffer(obj: Any) -> bool:
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True


def _is_datatype(obj: Any) -> bool:
    MPI = mpi_module()

    return isinstance(obj, (MPI.Datatype, str))


def _is_integral(obj: Any) -> bool:
    """mpi4py's test: an index that is not a sequence (a 0-d integer array is one)."""
    if not hasattr(type(obj), "__index__"):
        return False
    try:
        len(obj)
    except TypeError:
        pass
    else:
        return False
    try:
        operator.index(obj)
    except TypeError:
        return False
    return True


def _integers(obj: Any, blocks: int) -> np.ndarray:
    if isinstance(obj, np.ndarray) and obj.ndim == 1 and obj.dtype.kind in "iu":  # every item an index already
        if obj.size != blocks:
            raise ValueError(f"expecting {blocks} items, got {obj.size}")
        return obj.astype(np.int64, copy=False)
    n = len(obj)
    values = [operator.index(obj[i]) for i in range(n)]
    if len(values) != blocks:
        raise ValueError(f"expecting {blocks} items, got {len(values)}")
    return np.asarray(values, dtype=np.int64).reshape(blocks)
