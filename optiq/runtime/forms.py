"""The collectives an application hands to optiq, and how each reads its arguments.

``optiq.alltoallv`` stands in for ``Comm.Alltoallv`` and ``optiq.alltoallw`` for
``Comm.Alltoallw``. Both read their two messages into
:class:`~optiq.runtime.messages.Message` objects (every part's bytes, in place or packed by
its datatype) and from then on share every step: the agreement, ``auto``'s policy, the
cache, the plan and the transfer. A :class:`Collective` is what differs: how a message is
read (:func:`~optiq.runtime.messages.read_message`,
:func:`~optiq.runtime.messages_w.read_message_w`), what its checks depend on (the memo's
key), and which of MPI's calls a call handed to MPI makes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..mpi.comms import mpi_module
from .messages import Message, from_template, quick_parts, read_message, spec_key
from .messages_w import read_message_w, spec_key_w

__all__ = ["Collective", "VECTOR", "GENERAL", "TEMPLATES_KEPT"]

#: Messages kept as templates of specifications of the same key (the least recently read leave).
TEMPLATES_KEPT = 64
_TEMPLATES: OrderedDict[tuple[Any, ...], Message] = OrderedDict()
#: A specification whose key is not made yet (None is a key: "read it every time").
UNKEYED: Any = object()


@dataclass(frozen=True)
class Collective:
    """One of MPI's all-to-all calls with per-peer parts.

    Attributes
    ----------
    name : str
        ``"alltoallv"`` or ``"alltoallw"`` (what errors and results name).
    reader : callable
        ``reader(spec, readonly=, blocks=)``: one message (raises as mpi4py raises).
    key : callable
        ``key(spec)``: what the message's checks depend on, or None (read it every time).
    quick : callable or None
        ``quick(spec, blocks, readonly=)``: the commonest message's byte counts, byte
        displacements and buffer size without a :class:`Message`, or None (read it fully).
    mpi_name : str
        The ``Comm`` method: ``"Alltoallv"`` or ``"Alltoallw"``.
    """

    name: str
    reader: Callable[..., Message]
    key: Callable[[Any], tuple[Any, ...] | None]
    quick: Callable[..., tuple[np.ndarray, np.ndarray, int] | None] | None
    mpi_name: str

    def read(self, spec: Any, *, readonly: bool, blocks: int, key: Any = UNKEYED) -> Message:
        """One message, as ``reader`` reads it; a specification of a key read before (a numpy
        buffer: :func:`~optiq.runtime.messages.spec_key`) is laid out as that one was, on its
        own buffer, without reading its counts and datatypes again. ``key``: the spec's key
        (None too: read it every time), where the call has it already (the key of a datatype
        per peer costs a call of each)."""
        if key is UNKEYED:
            key = self.key(spec)
        if key is None:
            return self.reader(spec, readonly=readonly, blocks=blocks)
        known = (self.name, readonly, blocks, key)
        template = _TEMPLATES.get(known)
        if template is not None:
            _TEMPLATES.move_to_end(known)
            return from_template(template, spec, spec if isinstance(spec, np.ndarray) else spec[0])
        message = self.reader(spec, readonly=readonly, blocks=blocks)
        _TEMPLATES[known] = message  # it holds the datatypes its key names (their ids stay theirs)
        while len(_TEMPLATES) > TEMPLATES_KEPT:
            _TEMPLATES.popitem(last=False)
        return message

    def mpi(self, comm: Any, sendbuf: Any, recvbuf: Any) -> None:
        """``comm.Alltoallv(sendbuf, recvbuf)`` (or ``Alltoallw``): MPI with the caller's arguments."""
        getattr(comm, self.mpi_name)(sendbuf, recvbuf)

    def mpi_start(self, comm: Any, sendbuf: Any, recvbuf: Any) -> Any:
        """``comm.Ialltoallv(sendbuf, recvbuf)`` (or ``Ialltoallw``): its request."""
        return getattr(comm, "I" + self.mpi_name[0].lower() + self.mpi_name[1:])(sendbuf, recvbuf)

    def mpi_init(self, comm: Any, sendbuf: Any, recvbuf: Any) -> Any:
        """``comm.Alltoallv_init(sendbuf, recvbuf)`` (or ``Alltoallw_init``): its persistent request."""
        return getattr(comm, self.mpi_name + "_init")(sendbuf, recvbuf)

    def messages(self, sendbuf: Any, recvbuf: Any, blocks: int,
                 keys: tuple[Any, Any] | None = None) -> tuple[Message | None, Message]:
        """The call's two messages, read (``None`` for ``MPI.IN_PLACE``); ``keys``: the two
        specifications' keys, where the call has them already."""
        MPI = mpi_module()

        send_key, recv_key = (UNKEYED, UNKEYED) if keys is None else keys
        recv = self.read(recvbuf, readonly=False, blocks=blocks, key=recv_key)
        if sendbuf is MPI.IN_PLACE:
            return None, recv
        return self.read(sendbuf, readonly=True, blocks=blocks, key=send_key), recv

    def scratch(self, comm: Any, send_counts: np.ndarray, recv_counts: np.ndarray) -> tuple[Any, list[np.ndarray]]:
        """A stand-in transfer of zero bytes of the sizes its peers send and expect (a rank whose
        own arguments are wrong, while its peers went ahead): the request, and the buffers it
        holds until it ends."""
        MPI = mpi_module()

        counts = [np.asarray(send_counts, np.int64), np.asarray(recv_counts, np.int64)]
        buffers = [np.zeros(int(n.sum()), np.uint8) for n in counts]
        displs = [np.concatenate(([0], np.cumsum(n)[:-1])).astype(np.int64) for n in counts]
        if self is VECTOR:
            specs = [[b, (n, d), MPI.BYTE] for b, n, d in zip(buffers, counts, displs)]
        else:
            specs = [[b, (n, d), [MPI.BYTE] * n.size] for b, n, d in zip(buffers, counts, displs)]
        return self.mpi_start(comm, specs[0], specs[1]), buffers


#: ``Comm.Alltoallv``'s messages: one datatype, counts and displacements in its extents.
VECTOR = Collective("alltoallv", read_message, spec_key, quick_parts, "Alltoallv")
#: ``Comm.Alltoallw``'s messages: a datatype per peer, displacements in bytes.
GENERAL = Collective("alltoallw", read_message_w, spec_key_w, None, "Alltoallw")
