"""Seeded per-job byte patterns, and the check of every received byte against them."""

from __future__ import annotations

import numpy as np

from .memory import job_buffers

__all__ = ["job_pattern", "fill_send_buffers", "find_mismatches"]


def job_pattern(job: int, nbytes: int, seed: int = 0) -> np.ndarray:
    """The bytes job ``job`` carries in a verified run: random, from ``(seed, job)``.

    A chunk written at the wrong offset, or a job's data swapped with another's, differs
    from the pattern almost everywhere.

    Examples
    --------
    >>> a = job_pattern(3, 10, seed=1)
    >>> a.dtype, a.size, bool((a == job_pattern(3, 10, seed=1)).all()), bool((a == job_pattern(4, 10, seed=1)).all())
    (dtype('uint8'), 10, True, False)
    """
    return _pattern(job, nbytes, seed).copy()


def _pattern(job: int, nbytes: int, seed: int) -> np.ndarray:
    """:func:`job_pattern` as a read-only view of the generator's bytes, for reading or copying once."""
    return np.frombuffer(np.random.default_rng([seed, job]).bytes(nbytes), dtype=np.uint8)


def fill_send_buffers(send_jobs: dict[int, int], seed: int | None = 0) -> dict[int, np.ndarray]:
    """Send buffers for the given ``job -> bytes`` on huge pages, filled with :func:`job_pattern`.

    With ``seed=None`` they are filled with zeros instead: every page is still written, so
    MPI reads real memory, not the kernel's shared zero page.

    Examples
    --------
    >>> bufs = fill_send_buffers({2: 100, 5: 10})
    >>> bool((bufs[5] == job_pattern(5, 10)).all()), int(fill_send_buffers({2: 100}, None)[2].sum())
    (True, 0)
    """
    bufs = job_buffers(send_jobs)
    for j, buf in bufs.items():
        buf[:] = 0 if seed is None else _pattern(j, buf.size, seed)
    return bufs


def find_mismatches(recv: dict[int, np.ndarray], seed: int = 0, *, limit: int = 5) -> list[str]:
    """Compare every received job with its pattern.

    Returns
    -------
    list of str
        Up to ``limit`` messages, each naming a job, the first wrong offset and how many
        bytes are wrong; empty when every byte matches.

    Examples
    --------
    >>> got = {7: job_pattern(7, 100)}
    >>> find_mismatches(got)
    []
    >>> got[7][40:42] ^= 1
    >>> find_mismatches(got)
    ['job 7: 2 of 100 bytes differ, first at offset 40']
    """
    problems = []
    for j in sorted(recv):
        bad = np.flatnonzero(recv[j] != _pattern(j, recv[j].size, seed))
        if bad.size:
            problems.append(f"job {j}: {bad.size} of {recv[j].size} bytes differ, first at offset {bad[0]}")
            if len(problems) >= limit:
                break
    return problems
