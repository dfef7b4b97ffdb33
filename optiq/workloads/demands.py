"""The :class:`Demands` type: a set of jobs (source, destination, bytes)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import WorkloadError

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
        If lengths differ, a source equals its destination, a size is not a positive
        integer, or a (source, destination) pair appears twice.

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
        src = np.asarray(self.src, dtype=np.int64).ravel()
        dst = np.asarray(self.dst, dtype=np.int64).ravel()
        raw = np.asarray(self.nbytes).ravel()
        if not (src.size == dst.size == raw.size):
            raise WorkloadError(f"src, dst and nbytes differ in length: {src.size}, {dst.size}, {raw.size}")
        if src.size == 0:
            raise WorkloadError("the demand set is empty")
        nbytes = raw.astype(np.int64)
        bad = np.flatnonzero((nbytes != raw) | (nbytes <= 0))
        if bad.size:
            j = bad[0]
            raise WorkloadError(f"job {j} ({src[j]} -> {dst[j]}) has size {raw[j]!r}: sizes must be positive integers")
        same = np.flatnonzero(src == dst)
        if same.size:
            raise WorkloadError(f"job {same[0]} has source = destination = {src[same[0]]}")
        key = src * (int(max(src.max(), dst.max())) + 1) + dst
        uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
        if (counts > 1).any():
            j = first[np.flatnonzero(counts > 1)[0]]
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

    def check_against(self, topology) -> None:
        """Raise :class:`~optiq.errors.TopologyError` if a job names a node that is not an endpoint."""
        for arr, what in ((self.src, "source"), (self.dst, "destination")):
            bad = np.flatnonzero((arr < 0) | (arr >= topology.num_endpoints))
            if bad.size:
                topology.check_endpoint(int(arr[bad[0]]), what=f"job {bad[0]} {what}")

    def with_sizes(self, nbytes) -> "Demands":
        """The same pairs with new sizes (a scalar or one size per job)."""
        sizes = np.broadcast_to(np.asarray(nbytes), self.src.shape)
        return Demands(self.src, self.dst, sizes, self.name)

    def to_rows(self) -> list[tuple[int, int, int]]:
        return list(zip(self.src.tolist(), self.dst.tolist(), self.nbytes.tolist()))


