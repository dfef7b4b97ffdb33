"""Buffers that the kernel can back with transparent huge pages.

Between ranks of one host MPICH copies a large message once, with the receiver reading
the sender's pages (cross-memory attach), and that copy costs less per byte from and into
2 MiB pages than 4 KiB ones. The kernel backs only the 2 MiB-aligned parts of a region
with huge pages, and a numpy array of 8 MiB starts wherever ``malloc`` put it: 6 of its
8 MiB landed on huge pages, 2 of 4 MiB. So the executor takes its job buffers and
forwarding slots from one huge-page-aligned region per kind, asked for huge pages
(``MADV_HUGEPAGE``) where the system offers them.

The executor's replays run faster on them (``benchmarks/executor.py``; figures in
``benchmarks/RESULTS.md``). The buffers are private memory: a shared anonymous mapping is shmem, which
got no huge pages and slowed ``MPI_Alltoallv`` down.
"""

from __future__ import annotations

import mmap
from collections.abc import Mapping

import numpy as np

__all__ = ["HUGE_PAGE", "huge_page_buffer", "job_buffers"]

#: Bytes of a transparent huge page (x86-64 and arm64 with 4 KiB base pages).
HUGE_PAGE = 2 * 2**20
#: Where every buffer of :func:`job_buffers` starts, relative to the region's start: a cache
#: line, so that a rank receiving 49,151 small jobs does not pay a page for each.
BUFFER_ALIGN = 64


def huge_page_buffer(nbytes: int) -> np.ndarray:
    """A ``uint8`` array of ``nbytes`` that starts on a huge-page boundary and asked for huge pages.

    Buffers under :data:`HUGE_PAGE` are ordinary numpy arrays. The pages are not touched.

    Parameters
    ----------
    nbytes : int

    Returns
    -------
    ndarray
        Writable, contiguous, of ``nbytes`` bytes; its memory lives as long as the array
        (or a view of it) does.

    Raises
    ------
    ValueError
        If ``nbytes`` is negative.

    Examples
    --------
    >>> a = huge_page_buffer(3 * 2**20)
    >>> a.nbytes, a.dtype, a.ctypes.data % HUGE_PAGE
    (3145728, dtype('uint8'), 0)
    """
    if nbytes < 0:
        raise ValueError(f"a buffer cannot have {nbytes} bytes")
    if nbytes < HUGE_PAGE or not hasattr(mmap, "MAP_PRIVATE"):
        return np.empty(nbytes, dtype=np.uint8)
    whole = -(-nbytes // HUGE_PAGE) * HUGE_PAGE
    # private: mmap's default, a shared mapping, is shmem, which gets no huge pages (nor does CMA
    # copy it as fast); page-aligned, so one huge page of slack to align the start
    region = mmap.mmap(-1, whole + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        region.madvise(mmap.MADV_HUGEPAGE)
    raw = np.frombuffer(region, dtype=np.uint8)
    skip = -raw.ctypes.data % HUGE_PAGE
    return raw[skip:skip + nbytes]


def job_buffers(sizes: Mapping[int, int]) -> dict[int, np.ndarray]:
    """One ``uint8`` buffer per key of ``sizes`` (key -> bytes), all in one :func:`huge_page_buffer`.

    Each buffer starts :data:`BUFFER_ALIGN`-aligned and none overlaps another; the pages
    are not touched.

    Raises
    ------
    ValueError
        If a size is negative.

    Examples
    --------
    >>> bufs = job_buffers({3: 10, 7: 5000})
    >>> {j: b.nbytes for j, b in bufs.items()}, bufs[7].ctypes.data - bufs[3].ctypes.data
    ({3: 10, 7: 5000}, 64)
    """
    starts, end = {}, 0
    for key, n in sizes.items():
        if n < 0:
            raise ValueError(f"buffer {key} cannot have {n} bytes")
        starts[key] = end
        end += -(-n // BUFFER_ALIGN) * BUFFER_ALIGN
    region = huge_page_buffer(end)
    return {key: region[start:start + sizes[key]] for key, start in starts.items()}
