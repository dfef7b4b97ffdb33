"""The :class:`Demands` type: a set of jobs (source, destination, bytes)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

import numpy as np

from ..errors import WorkloadError
from ..utils.units import MAX_BYTES

if TYPE_CHECKING:
    from typing import Any

    from numpy.typing import ArrayLike

    from ..topology import Topology

__all__ = ["Demands"]


@dataclass(frozen=True, eq=False)
class Demands:
    """Jobs of a data exchange: job ``j`` sends ``nbytes[j]`` bytes from ``src[j]`` to ``dst[j]``.

    Parameters
    ----------
    src, dst : array of int
        Endpoint ids.
    nbytes : array of int
        Positive byte counts.
    name : str
        A short description of how the demands were made.

    Raises
    ------
    WorkloadError
        If lengths differ, a node id or size is not an integer (``0.7`` is not node 0), a
        node id is negative, a size is not positive, the sizes add up to 2^63 bytes or more,
        a source equals its destination, or a (source, destination) pair appears twice.

    Examples
    --------
    >>> d = Demands([0, 1], [2, 3], [8, 8])
    >>> d.num_jobs, d.total_bytes
    (2, 16)
    """

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    name: str = "demands"

    def __post_init__(self) -> None:
        src, dst = _integers(self.src, "source"), _integers(self.dst, "destination")
        nbytes = _integers(self.nbytes, "size")
        if not (src.size == dst.size == nbytes.size):
            raise WorkloadError(f"src, dst and nbytes differ in length: {src.size}, {dst.size}, {nbytes.size}")
        if src.size == 0:
            raise WorkloadError("the demand set is empty")
        bad = np.flatnonzero(nbytes <= 0)
        if bad.size:
            j = bad[0]
            raise WorkloadError(f"job {j} ({src[j]} -> {dst[j]}) has size {nbytes[j]}: sizes must be positive integers")
        for arr, what in ((src, "source"), (dst, "destination")):
            if arr.min() < 0:
                j = int(np.argmin(arr))
                raise WorkloadError(f"job {j} has a negative {what} {arr[j]}")
        if nbytes.sum(dtype=float) >= 2.0**62 and sum(nbytes.tolist()) > MAX_BYTES:
            raise WorkloadError(f"the jobs' sizes add up to more than 2^63 - 1 bytes ({nbytes.sum(dtype=float):.3g})")
        same = np.flatnonzero(src == dst)
        if same.size:
            raise WorkloadError(f"job {same[0]} has source = destination = {src[same[0]]}")
        key = src * (int(max(src.max(), dst.max())) + 1) + dst
        # a stable sort: pairs given in order (an all-to-all's, a matrix's nonzeros) cost one pass
        order = np.argsort(key, kind="stable")
        twice = np.flatnonzero(key[order[1:]] == key[order[:-1]])
        if twice.size:
            j = order[twice[0]]   # the first job of the least pair given twice
            raise WorkloadError(f"pair {src[j]} -> {dst[j]} appears more than once; merge its sizes into one job")
        object.__setattr__(self, "src", src)
        object.__setattr__(self, "dst", dst)
        object.__setattr__(self, "nbytes", nbytes)

    def __len__(self) -> int:
        return int(self.src.size)

    def __repr__(self) -> str:
        return (f"Demands({self.name!r}, jobs={self.num_jobs}, sources={np.unique(self.src).size}, "
                f"destinations={np.unique(self.dst).size}, total_bytes={self.total_bytes})")

    @property
    def num_jobs(self) -> int:
        return int(self.src.size)

    @property
    def total_bytes(self) -> int:
        return int(self.nbytes.sum())

    def check_against(self, topology: Topology) -> None:
        """Raise :class:`~optiq.errors.TopologyError` if a job names a node that is not an endpoint."""
        for arr, what in ((self.src, "source"), (self.dst, "destination")):
            bad = np.flatnonzero((arr < 0) | (arr >= topology.num_endpoints))
            if bad.size:
                topology.check_endpoint(int(arr[bad[0]]), what=f"job {bad[0]} {what}")

    def with_sizes(self, nbytes: ArrayLike) -> Demands:
        """The same pairs with new sizes (a scalar or one size per job)."""
        sizes = np.broadcast_to(np.asarray(nbytes), self.src.shape)
        return Demands(self.src, self.dst, sizes, self.name)

    def to_rows(self) -> list[tuple[int, int, int]]:
        return list(zip(self.src.tolist(), self.dst.tolist(), self.nbytes.tolist()))


def _integers(values: ArrayLike, what: str) -> np.ndarray:
    """``values`` as a flat int64 array, refusing anything that is not exactly an integer below 2^63."""
    raw = np.asarray(values).ravel()
    if raw.dtype.kind in "biu":
        if raw.dtype.kind == "u" and raw.size and raw.max() > MAX_BYTES:
            raise WorkloadError(f"{what} {raw.max()} is too large (at most 2^63 - 1)")
        return raw.astype(np.int64)
    if raw.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(raw) | (raw != np.round(raw)) | (np.abs(raw) >= 2.0**63))
        if bad.size:
            raise WorkloadError(f"job {bad[0]} has {what} {_plain(raw[bad[0]])!r}: it must be an integer below 2^63")
        return raw.astype(np.int64)
    out = np.empty(raw.size, dtype=np.int64)  # Python ints beyond int64, strings: each exactly
    for j, value in enumerate(raw.tolist()):
        exact = _exact_integer(value)
        if exact is None or not -MAX_BYTES <= exact <= MAX_BYTES:
            raise WorkloadError(f"job {j} has {what} {value!r}: it must be an integer below 2^63")
        out[j] = exact
    return out


def _exact_integer(value: Any) -> int | None:
    try:
        exact = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None
    return int(exact) if exact.is_finite() and exact == exact.to_integral_value() else None


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
