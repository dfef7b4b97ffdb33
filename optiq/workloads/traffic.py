"""Rank-level traffic: who sends how many bytes to whom, from models or measured traces.

A traffic matrix ``T`` is an ``N x N`` array of bytes, ``T[i, j]`` what rank ``i`` sends rank
``j`` (float64, exact for integers below 2^53). It is per *rank*; :mod:`.placement` maps
ranks to hosts of a topology.

Readers (:func:`read_traffic` picks one from the path):

- a PFProf trace: a directory of per-rank JSON files, or a ``.tar.gz``/``.tgz`` of them,
  each ``{"rank": r, "n_procs": N, "tx_bytes": [N numbers], "tx_messages": [...], ...}``
  (rank ``r`` sent ``tx_bytes[j]`` bytes to rank ``j``);
- a rank-triple CSV: lines ``src_rank,dst_rank,bytes`` (a header line is allowed; repeated
  pairs add up);
- a plain matrix: ``N`` lines of ``N`` numbers (spaces or commas, ``#`` comments), in
  ``unit`` bytes each (default 1).

Models of the applications of seed 001's fat-tree study, from their known structure:

- NAS CG: a 2-D process grid of ``rows`` x ``cols`` ranks (8 x 16 for 128, as NPB sets
  it: ``cols = 2 rows`` for an odd power of two); every rank exchanges with the ranks
  ``r xor 2^k`` of its row (the recursive-doubling sums) and with its transpose partner,
  NPB's ``exch_proc``: ``(r mod rows) * rows + r div rows`` on a square grid, else
  ``2 * ((r div 2 mod rows) * rows + r div 2 div rows) + r mod 2``; all messages of equal
  size (NPB's are all ``na / cols`` words).
- MILC: a 4-D lattice of 4x4x4x2 ranks; every rank exchanges halos with its +-1
  neighbours in every dimension (periodic), equal volumes.
"""

from __future__ import annotations

import io
import json
import math
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import WorkloadError
from ..utils.resources import check_memory

__all__ = ["nas_cg_traffic", "milc_traffic", "read_traffic", "read_pfprof", "read_traffic_matrix",
           "read_rank_triples", "write_pfprof"]


def nas_cg_traffic(ranks: int = 128, rows: int = 8, volume: float = 2**20) -> np.ndarray:
    """Rank-to-rank bytes of a NAS CG-like run (see the module docstring).

    Examples
    --------
    >>> t = nas_cg_traffic(volume=1)
    >>> t.shape, int(t.sum(axis=1).min()), int(t.sum(axis=1).max())
    ((128, 128), 4, 5)
    """
    cols = ranks // rows
    t = np.zeros((ranks, ranks))
    for r in range(ranks):
        row, col = divmod(r, cols)
        for k in range(int(np.log2(cols))):
            t[r, row * cols + (col ^ (1 << k))] += volume
        if cols == rows:  # NPB's transpose exchange partner
            partner = (r % rows) * rows + r // rows
        else:
            partner = 2 * ((r // 2 % rows) * rows + r // 2 // rows) + r % 2
        if partner != r and partner < ranks:
            t[r, partner] += volume
    return t


def milc_traffic(shape: tuple[int, ...] = (4, 4, 4, 2), volume: float = 2**20) -> np.ndarray:
    """Rank-to-rank bytes of a MILC-like 4-D halo exchange (see the module docstring).

    Examples
    --------
    >>> milc_traffic(volume=1).sum(axis=1)[:3].tolist()
    [8.0, 8.0, 8.0]
    """
    n = int(np.prod(shape))
    t = np.zeros((n, n))
    coords = np.array(np.unravel_index(np.arange(n), shape)).T
    for d, size in enumerate(shape):
        for step in (-1, 1):
            nb = coords.copy()
            nb[:, d] = (nb[:, d] + step) % size
            other = np.ravel_multi_index(nb.T, shape)
            np.add.at(t, (np.arange(n), other), volume)
    np.fill_diagonal(t, 0.0)
    return t


def read_traffic(path: str | Path, *, unit: float = 1.0) -> np.ndarray:
    """Read rank-level traffic in bytes from a PFProf trace, a rank-triple CSV or a matrix.

    A directory or a ``.tar.gz``/``.tgz`` file is a PFProf trace; a ``.csv`` file whose first
    line is the header ``src_rank,dst_rank,bytes`` is read as rank triples; anything else as
    a matrix in ``unit`` bytes per entry.

    Raises
    ------
    WorkloadError
        Naming the file (and the rank or line) at fault.
    """
    p = Path(path)
    if p.is_dir() or p.name.endswith((".tar.gz", ".tgz")):
        return read_pfprof(p)
    if not p.is_file():
        raise WorkloadError(f"traffic {str(path)!r}: no such file or directory")
    if p.suffix.lower() == ".csv" and _has_triple_header(p):
        return read_rank_triples(p, unit=unit)
    return read_traffic_matrix(p, unit=unit)


def read_pfprof(path: str | Path) -> np.ndarray:
    """Read a PFProf trace: a directory of per-rank JSON files or a tarball of them.

    Raises
    ------
    WorkloadError
        If there are no JSON files, a file is not valid JSON or lacks ``rank``,
        ``n_procs`` or ``tx_bytes``, ranks are missing or repeated, ``n_procs`` differs
        between files, ``tx_bytes`` has the wrong length, or a count is negative,
        non-finite or not a number; the message names the file and the rank.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for r in range(2):
    ...     _ = (d / f"rank{r}.json").write_text(json.dumps({"rank": r, "n_procs": 2, "tx_bytes": [0, 5] if r == 0 else [7, 0]}))
    >>> read_pfprof(d).tolist()
    [[0.0, 5.0], [7.0, 0.0]]
    """
    p = Path(path)
    name = str(path)
    files = list(_pfprof_files(p))
    if not files:
        raise WorkloadError(f"PFProf trace {name!r} has no .json files")
    rows: dict[int, tuple[str, list[str]]] = {}
    n_procs: tuple[int, str] | None = None
    for fname, text in files:
        try:
            record = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise WorkloadError(f"PFProf trace {name!r}: {fname} is not valid JSON ({exc})") from None
        if not isinstance(record, dict) or not all(k in record for k in ("rank", "n_procs", "tx_bytes")):
            raise WorkloadError(f"PFProf trace {name!r}: {fname} needs the keys rank, n_procs and tx_bytes")
        rank, n = record["rank"], record["n_procs"]
        for key, value in (("rank", rank), ("n_procs", n)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise WorkloadError(f"PFProf trace {name!r}: {fname} has {key} {value!r}; it must be an integer >= 0")
        if n_procs is None:
            n_procs = (n, fname)
        elif n != n_procs[0]:
            raise WorkloadError(f"PFProf trace {name!r}: {fname} (rank {rank}) says n_procs {n}, but "
                                f"{n_procs[1]} says {n_procs[0]}")
        if rank >= n:
            raise WorkloadError(f"PFProf trace {name!r}: {fname} has rank {rank}, not below n_procs {n}")
        if rank in rows:
            raise WorkloadError(f"PFProf trace {name!r}: rank {rank} appears twice ({rows[rank][0]} and {fname})")
        tx = record["tx_bytes"]
        if not isinstance(tx, list) or len(tx) != n:
            got = f"{len(tx)} entries" if isinstance(tx, list) else type(tx).__name__
            raise WorkloadError(f"PFProf trace {name!r}: {fname} (rank {rank}) has tx_bytes of {got}; "
                                f"n_procs is {n}")
        for j, v in enumerate(tx):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise WorkloadError(f"PFProf trace {name!r}: {fname} (rank {rank}) has tx_bytes[{j}] = {v!r}; "
                                    f"it must be a finite number >= 0")
        rows[rank] = (fname, tx)
    assert n_procs is not None
    missing = sorted(set(range(n_procs[0])) - set(rows))
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        raise WorkloadError(f"PFProf trace {name!r} has {len(rows)} of {n_procs[0]} ranks; missing rank(s) {shown}")
    return _checked(np.array([rows[r][1] for r in range(n_procs[0])], dtype=np.float64), name)


def write_pfprof(traffic: np.ndarray, path: str | Path, *, message_bytes: float = 2**16) -> Path:
    """Write ``traffic`` as a PFProf trace: a directory of ``rank<r>.json``, or a tarball if
    ``path`` ends in ``.tar.gz`` or ``.tgz``. Message counts assume ``message_bytes`` each.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> t = nas_cg_traffic(ranks=16, rows=4)
    >>> bool((read_pfprof(write_pfprof(t, d / "cg.tgz")) == t).all())
    True
    """
    n = traffic.shape[0]
    whole = bool((traffic == np.floor(traffic)).all())
    sent = (traffic.astype(np.int64) if whole else traffic).tolist()
    got = (traffic.T.astype(np.int64) if whole else traffic.T).tolist()
    messages = np.ceil(traffic / message_bytes).astype(np.int64)
    sent_messages, got_messages = messages.tolist(), messages.T.tolist()
    records = {f"rank{r}.json": json.dumps({"rank": r, "n_procs": n, "tx_bytes": sent[r], "tx_messages": sent_messages[r],
                                            "rx_bytes": got[r], "rx_messages": got_messages[r]}) for r in range(n)}
    out = Path(path)
    try:
        if out.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(out, "w:gz") as tar:
                for fname, text in records.items():
                    data = text.encode()
                    info = tarfile.TarInfo(f"{out.name.split('.')[0]}/{fname}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        else:
            out.mkdir(parents=True, exist_ok=True)
            for fname, text in records.items():
                (out / fname).write_text(text)
    except OSError as exc:
        raise WorkloadError(f"cannot write PFProf trace {str(out)!r}: {exc}") from None
    return out


def read_traffic_matrix(path: str | Path, *, unit: float = 1.0) -> np.ndarray:
    """Read ``N`` lines of ``N`` numbers (spaces or commas; ``#`` comments), times ``unit`` bytes.

    Raises
    ------
    WorkloadError
        For an unreadable file, a matrix that is not square, an entry that is not a
        finite number >= 0, or no traffic between different ranks, naming the file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "t.txt"
    >>> _ = f.write_text("0 2\\n3 0\\n")
    >>> read_traffic_matrix(f, unit=1024).tolist()
    [[0.0, 2048.0], [3072.0, 0.0]]
    """
    name = str(path)
    if not (unit > 0 and math.isfinite(unit)):
        raise WorkloadError(f"traffic unit must be a positive number of bytes, got {unit!r}")
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"cannot read traffic matrix {name!r}: {exc}") from None
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#")[0].replace(",", " ").split()
        if fields:
            try:
                rows.append([float(x) for x in fields])
            except ValueError:
                raise WorkloadError(f"traffic matrix {name!r}, line {number}: {line.strip()!r} is not a row of "
                                    f"numbers") from None
    lengths = sorted({len(r) for r in rows})
    if len(rows) < 2 or lengths != [len(rows)]:
        hint = " (rank triples need the header line src_rank,dst_rank,bytes)" if lengths == [3] else ""
        raise WorkloadError(f"traffic matrix {name!r} must be N lines of N numbers, N >= 2; got "
                            f"{len(rows)} lines of {'/'.join(map(str, lengths)) or 0} numbers{hint}")
    return _checked(np.array(rows) * unit, name)


def read_rank_triples(path: str | Path, *, unit: float = 1.0) -> np.ndarray:
    """Read ``src_rank,dst_rank,bytes`` lines (a header line allowed; repeated pairs add up).

    The number of ranks is one more than the largest rank named.

    Raises
    ------
    WorkloadError
        Naming the file and line of a bad rank or byte count.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
    >>> _ = f.write_text("src_rank,dst_rank,bytes\\n0,2,10\\n0,2,5\\n")
    >>> read_rank_triples(f)[0].tolist()
    [0.0, 0.0, 15.0]
    """
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"cannot read traffic {name!r}: {exc}") from None
    src, dst, vol = [], [], []
    for number, line in enumerate(text.splitlines(), 1):
        fields = [f.strip() for f in line.split("#")[0].split(",")]
        if fields == [""]:
            continue
        if len(fields) != 3:
            raise WorkloadError(f"traffic {name!r}, line {number}: expected src_rank,dst_rank,bytes, got {line!r}")
        if number == 1 and not fields[0].lstrip("-").isdigit():
            continue  # header
        try:
            s, d, v = int(fields[0]), int(fields[1]), float(fields[2])
        except ValueError:
            raise WorkloadError(f"traffic {name!r}, line {number}: {line.strip()!r} needs two integer ranks and a "
                                f"byte count") from None
        if s < 0 or d < 0:
            raise WorkloadError(f"traffic {name!r}, line {number}: rank {min(s, d)} is negative")
        if not math.isfinite(v) or v < 0:
            raise WorkloadError(f"traffic {name!r}, line {number}: bytes {fields[2]!r} must be a finite number >= 0")
        src.append(s)
        dst.append(d)
        vol.append(v * unit)
    if not src:
        raise WorkloadError(f"traffic {name!r} has no src_rank,dst_rank,bytes lines")
    n = max(max(src), max(dst)) + 1
    n = max(n, 2)
    check_memory(8.0 * n * n, f"the {n:,} x {n:,} traffic matrix of {name!r}")
    t = np.zeros((n, n))
    np.add.at(t, (np.array(src), np.array(dst)), np.array(vol))
    return _checked(t, name)


def _checked(t: np.ndarray, name: str) -> np.ndarray:
    bad = np.argwhere(~np.isfinite(t) | (t < 0))
    if bad.size:
        i, j = bad[0]
        raise WorkloadError(f"traffic {name!r}: rank {i} to rank {j} is {t[i, j]}, not a finite number >= 0")
    if np.count_nonzero(t) == np.count_nonzero(np.diagonal(t)):
        raise WorkloadError(f"traffic {name!r} has no traffic between different ranks")
    return t


def _pfprof_files(p: Path) -> Iterator[tuple[str, str]]:
    """``(name, text)`` of every JSON file of a PFProf directory or tarball, in name order."""
    if p.is_dir():
        for f in sorted(p.rglob("*.json")):
            try:
                yield f.name, f.read_bytes().decode("utf-8-sig")
            except (OSError, UnicodeDecodeError) as exc:
                raise WorkloadError(f"PFProf trace {str(p)!r}: cannot read {f.name}: {exc}") from None
        return
    try:
        with tarfile.open(p, "r:*") as tar:
            members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".json")),
                             key=lambda m: m.name)
            for m in members:
                handle = tar.extractfile(m)
                data = handle.read() if handle is not None else b""
                try:
                    yield Path(m.name).name, data.decode("utf-8-sig")
                except UnicodeDecodeError as exc:
                    raise WorkloadError(f"PFProf trace {str(p)!r}: {m.name} is not text: {exc}") from None
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise WorkloadError(f"cannot read PFProf trace {str(p)!r}: {exc}") from None


def _has_triple_header(p: Path) -> bool:
    """Whether the first line that is not blank or a comment is ``src_rank,dst_rank,bytes``."""
    try:
        with open(p, encoding="utf-8-sig") as lines:
            for line in lines:
                text = line.split("#")[0].strip()
                if text:
                    return [f.strip() for f in text.split(",")] == ["src_rank", "dst_rank", "bytes"]
    except (OSError, UnicodeDecodeError):
        pass
    return False
