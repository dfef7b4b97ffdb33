"""Stand-ins for ``Comm.Alltoallv``, ``Ialltoallv``, ``Alltoallv_init`` and their ``w`` forms that
check optiq's calls against MPI's, byte for byte (imported by mpi4py's own tests as
``scripts/check_mpi4py_suite.py`` rewrites them).

Every call runs twice on the same arguments: first MPI's (the reference), then optiq's, the
receive buffer's bytes put back in between. The outcome is ``planned`` (optiq's plan moved
the bytes), ``local`` (no rank sends to another), ``mpi`` (optiq handed the call to MPI),
``refused`` (both raised: optiq's exception is raised on, so the test sees it) or
``mismatch`` (different bytes, or only one of them raised). Every rank writes its tally to
``$OPTIQ_SWAP_OUT/rank<R>-<pid>.json`` at exit.

The network is a ring of the communicator's ranks (``torus:N``), planned with
``$OPTIQ_SWAP_METHOD`` (default ``heu2``), so the executor moves the bytes whenever
ranks exchange any.
"""

from __future__ import annotations

import atexit
import collections
import json
import os

import numpy as np
from mpi4py import MPI

import optiq

METHOD = os.environ.get("OPTIQ_SWAP_METHOD", "heu2")
TALLY: collections.Counter = collections.Counter()
MISMATCHES: list[str] = []


def _buffer_of(spec):
    """The buffer object of a message specification (mpi4py's rule: a buffer, or the first item)."""
    try:
        memoryview(spec)
        return spec
    except TypeError:
        pass
    if isinstance(spec, (list, tuple)):
        return spec[0] if spec else None
    return spec


def _raw(spec):
    """The receive buffer's bytes as a writable uint8 array (None where there is no host buffer)."""
    buf = _buffer_of(spec)
    if buf is None or buf is MPI.BOTTOM or buf is MPI.IN_PLACE:
        return None
    try:
        mem = MPI.buffer.frombuffer(buf, readonly=False)
    except Exception:
        try:
            mem = MPI.buffer.frombuffer(np.asarray(buf).reshape(-1, order="A"), readonly=False)
        except Exception:
            return None
    if not mem.nbytes:
        return np.zeros(0, np.uint8)
    return np.frombuffer(MPI.buffer.fromaddress(mem.address, mem.nbytes), dtype=np.uint8)


def _options(comm):
    size = comm.Get_size()
    return {"network": f"torus:{size}" if size > 1 else None, "method": METHOD if size > 1 else "auto"}


def _compare(what, mpi_exc, opt_exc, expected, got, result_method):
    if mpi_exc is not None and opt_exc is not None:
        same_kind = isinstance(opt_exc, type(mpi_exc)) or isinstance(mpi_exc, MPI.Exception)
        TALLY["refused" if same_kind else "mismatch"] += 1
        if not same_kind:
            MISMATCHES.append(f"{what}: MPI raised {type(mpi_exc).__name__} ({mpi_exc}), optiq "
                              f"{type(opt_exc).__name__} ({opt_exc})")
        raise opt_exc
    if mpi_exc is not None or opt_exc is not None:
        TALLY["mismatch"] += 1
        MISMATCHES.append(f"{what}: only {'MPI' if mpi_exc is not None else 'optiq'} raised: {mpi_exc or opt_exc!r}")
        raise mpi_exc or opt_exc
    if expected is not None and got is not None and not np.array_equal(expected, got):
        TALLY["mismatch"] += 1
        MISMATCHES.append(f"{what}: received bytes differ from MPI's "
                          f"({int((expected != got).sum())} of {expected.size})")
        return
    TALLY["unchecked" if expected is None else
          "planned" if result_method not in ("mpi", "local") else result_method] += 1


def _twice(what, comm, sendbuf, recvbuf, reference, ours):
    """Run MPI's call, then optiq's on the same arguments, and compare what arrived."""
    raw = _raw(recvbuf)
    before = None if raw is None else raw.copy()
    mpi_exc = opt_exc = None
    try:
        reference()
    except Exception as exc:
        mpi_exc = exc
    expected = None if raw is None else raw.copy()
    if raw is not None:
        raw[...] = before
    method = None
    try:
        method = ours()
    except Exception as exc:
        opt_exc = exc
    got = None if raw is None else raw.copy()
    _compare(what, mpi_exc, opt_exc, expected, got, method)


def _blocking(name):
    def swapped(comm, sendbuf, recvbuf):
        def ours():
            return getattr(optiq, name.lower())(comm, sendbuf, recvbuf, **_options(comm)).method

        _twice(name, comm, sendbuf, recvbuf, lambda: getattr(comm, name)(sendbuf, recvbuf), ours)

    return swapped


def _nonblocking(name):
    def swapped(comm, sendbuf, recvbuf):
        def ours():
            getattr(optiq, "i" + name.lower())(comm, sendbuf, recvbuf, **_options(comm)).Wait()
            return "i" + name.lower()

        _twice("I" + name.lower(), comm, sendbuf, recvbuf, lambda: getattr(comm, "I" + name.lower())(sendbuf, recvbuf)
               .Wait(), ours)
        return MPI.Request()  # the test's Wait() on a null request returns at once

    return swapped


class _Persistent:
    """``Alltoallv_init``'s stand-in (or ``Alltoallw_init``'s): optiq's persistent request, and at
    every start MPI's blocking call on the same arguments first."""

    def __init__(self, name, comm, sendbuf, recvbuf):
        self.name, self.comm, self.sendbuf, self.recvbuf = name, comm, sendbuf, recvbuf
        self.request = getattr(optiq, name.lower() + "_init")(comm, sendbuf, recvbuf, **_options(comm))

    def Start(self):  # noqa: N802
        def ours():
            self.request.Start()
            self.request.Wait()
            return self.request.method

        _twice(self.name + "_init", self.comm, self.sendbuf, self.recvbuf,
               lambda: getattr(self.comm, self.name)(self.sendbuf, self.recvbuf), ours)

    def Wait(self, status=None):  # noqa: N802
        return True

    def Test(self, status=None):  # noqa: N802
        return True

    def Free(self):  # noqa: N802
        self.request.Free()


def _persistent(name):
    def swapped(comm, sendbuf, recvbuf):
        try:
            return _Persistent(name, comm, sendbuf, recvbuf)
        except Exception as exc:
            TALLY["refused"] += 1
            raise exc

    return swapped


Alltoallv, Ialltoallv, Alltoallv_init = _blocking("Alltoallv"), _nonblocking("Alltoallv"), _persistent("Alltoallv")
Alltoallw, Ialltoallw, Alltoallw_init = _blocking("Alltoallw"), _nonblocking("Alltoallw"), _persistent("Alltoallw")


@atexit.register
def _write() -> None:
    out = os.environ.get("OPTIQ_SWAP_OUT")
    if out:
        path = os.path.join(out, f"rank{MPI.COMM_WORLD.Get_rank()}-{os.getpid()}.json")
        with open(path, "w") as f:
            json.dump({"tally": dict(TALLY), "mismatches": MISMATCHES[:50]}, f)
