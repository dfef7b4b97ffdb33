"""A split file: which LID of its destination each pair sends how many of its bytes to.

``optiq tables --lmc`` writes one beside the tables (``src,dst,lid,bytes``; hosts by name,
LIDs in hex or decimal). On a fabric routed with LMC = L every host port owns 2^L LIDs
(base .. base + 2^L - 1), each with its own routes; a sender that spreads a pair's messages
over them as the file says (UCX: ``UCX_IB_LID_PATH_BITS``) splits the pair over those routes.
:func:`read_split` reads it for a workload, so that ``optiq compare`` and ``eval`` see the
job as the loaded tables and the senders carry it.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import WorkloadError

if TYPE_CHECKING:
    from ..topology import Topology
    from .demands import Demands

__all__ = ["read_split"]


def read_split(path: str | Path, topology: Topology, demands: Demands) -> np.ndarray:
    """The bytes every job sends to each of its destination's LIDs, from a split file.

    Returns
    -------
    ndarray of int, shape (jobs, 2**lmc)
        ``split[j, k]``: bytes of job ``j`` sent to its destination's base LID + ``k``. Each
        row sums to the job's bytes.

    Raises
    ------
    WorkloadError
        If the file cannot be read, the topology is not a fabric, or, naming the line: a
        malformed line, an unknown host, a pair that is not a job of ``demands``, a LID that
        is not one of the destination's. Naming the pair: a pair whose bytes do not add up to
        its own (a pair without a line included).

    Examples
    --------
    >>> from optiq.topology import torus
    >>> read_split("split.csv", torus((2, 2)), None)
    Traceback (most recent call last):
    ...
    optiq.errors.WorkloadError: a split file applies to an InfiniBand fabric (-t ibnet:FILE), not torus 2x2
    """
    fabric = topology.fabric
    if fabric is None:
        raise WorkloadError(f"a split file applies to an InfiniBand fabric (-t ibnet:FILE), not {topology.name}")
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"split file {str(path)!r} " + ("is a directory" if path.is_dir() else "does not exist"))
    lids = 1 << fabric.lmc
    host = {name: i for i, name in enumerate(topology.endpoint_names)}
    job = {(int(s), int(d)): j for j, (s, d) in enumerate(zip(demands.src, demands.dst))}
    split = np.zeros((demands.num_jobs, lids), dtype=np.int64)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"cannot read split file {str(path)!r}: {exc}") from None
    if not rows or [c.strip().lower() for c in rows[0]] != ["src", "dst", "lid", "bytes"]:
        raise WorkloadError(f"split file {str(path)!r}: the first line must be src,dst,lid,bytes")
    for number, row in enumerate(rows[1:], start=2):
        where = f"split file {str(path)!r} line {number}"
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != 4:
            raise WorkloadError(f"{where}: expected src,dst,lid,bytes, got {','.join(row)!r}")
        src, dst = (c.strip() for c in row[:2])
        for name in (src, dst):
            if name not in host:
                raise WorkloadError(f"{where}: no host {name!r} in {topology.name}")
        j = job.get((host[src], host[dst]))
        if j is None:
            raise WorkloadError(f"{where}: {src} -> {dst} is not a pair of the workload")
        try:
            lid, nbytes = int(row[2].strip(), 0), int(row[3].strip())
        except ValueError:
            raise WorkloadError(f"{where}: LID {row[2].strip()!r} or bytes {row[3].strip()!r} is not an integer") from None
        base = int(fabric.endpoint_lid[host[dst]])
        if not base <= lid < base + lids or nbytes < 0:
            raise WorkloadError(f"{where}: " + (f"LID {lid:#06x} is not one of {dst}'s ({base:#06x} .. "
                                               f"{base + lids - 1:#06x}, LMC {fabric.lmc})" if nbytes >= 0 else
                                               f"bytes {nbytes} is negative"))
        split[j, lid - base] += nbytes
    wrong = np.flatnonzero(split.sum(axis=1) != demands.nbytes)
    if wrong.size:
        j = int(wrong[0])
        names = topology.endpoint_names
        raise WorkloadError(f"split file {str(path)!r}: {names[demands.src[j]]} -> {names[demands.dst[j]]} sends "
                            f"{int(split[j].sum()):,} bytes over its LIDs, the workload {int(demands.nbytes[j]):,}"
                            + (f" ({wrong.size - 1} more pairs differ)" if wrong.size > 1 else ""))
    return split
