"""The tables OpenSM's own routing engines give a fabric: the real subnet manager, run on the
fabric simulated by ``ibsim``, its tables read back (``--routes opensm:ENGINE``).

An operator picks the engine that suits the fabric (``ftree`` on a fat-tree, ``dfsssp``, ...),
not the ``minhop`` optiq emulates, so a gain is stated over the best of them. Given the
``ibnetdiscover`` output of a fabric, :func:`opensm_tables`:

1. starts ``ibsim -s -n`` on that very file (ibsim reads ``ibnetdiscover``'s format and keeps its
   GUIDs), with a socket of its own;
2. pins every port's LID as the file gives it, in a ``guid2lid`` file in OpenSM's cache
   directory, so the tables OpenSM writes address the LIDs the file names;
3. runs ``opensm -o -R ENGINE`` once (``ibsim-run`` preloads the simulator's library) and checks
   its log says that engine configured every switch (OpenSM falls back to minhop, and exits 0,
   when an engine refuses a fabric);
4. runs ``dump_lfts``, stops ibsim by its process id, checks every host's LID is in it, and keeps
   the dump in a cache directory, named by a hash of the fabric file and the engine, for the next call.

Where the tools are absent it says how to get them, or how to give the tables another way: a
``dump_lfts`` of the real fabric as ``--routes FILE``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TopologyError

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["OPENSM_ENGINES", "opensm_tables", "missing_opensm_tools", "opensm_cache_dir"]

#: The unicast routing engines of OpenSM 3.3 that route a fabric on their own (``file`` loads
#: tables; ``lash``, ``dor`` and ``torus-2QoS`` need a fabric shaped for them and refuse others).
OPENSM_ENGINES = ("minhop", "updn", "dnup", "ftree", "dfsssp", "sssp", "nue", "lash", "dor", "torus-2QoS")
#: The programs it runs (Debian: ibsim-utils, opensm, infiniband-diags).
TOOLS = ("ibsim", "ibsim-run", "opensm", "dump_lfts")
#: Seconds ibsim has to say it is ready, and OpenSM or ``dump_lfts`` to finish.
READY_S, TOOL_S = 30.0, 600.0


def _which(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.path.exists(p)),
                                      None)


def missing_opensm_tools() -> list[str]:
    """The programs :func:`opensm_tables` needs that are not installed."""
    return [t for t in TOOLS if _which(t) is None]


def opensm_cache_dir() -> Path:
    """Where the tables are kept: ``$XDG_CACHE_HOME/optiq/opensm`` (``~/.cache`` by default)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "optiq" / "opensm"


def _check_engine(engine: str) -> None:
    if engine not in OPENSM_ENGINES:
        hint = (" (NVIDIA's subnet manager's adaptive routing, not in the open OpenSM: compare with the adaptive "
                "method, the bound of ideal adaptive routing)" if engine.startswith("ar") else "")
        raise TopologyError(f"unknown OpenSM routing engine {engine!r}{hint}; choose from {', '.join(OPENSM_ENGINES)}")


def _guid2lid(topology: Topology) -> str:
    """OpenSM's ``guid2lid`` lines: every port GUID of the fabric with the LIDs the file gave it."""
    fabric = topology.fabric
    assert fabric is not None
    lines = []
    for guid, lid, lmc in zip(fabric.lid_guid.tolist(), fabric.lids.tolist(), fabric.lid_lmc.tolist()):
        if guid and lid:
            lines.append(f"0x{int(guid):016x} 0x{lid:04x} 0x{lid + (1 << lmc) - 1:04x}")
    return "\n".join(lines) + "\n"


def opensm_tables(topology: Topology, engine: str, *, progress: Callable[[str], None] | None = None,
                  refresh: bool = False) -> Path:
    """The ``dump_lfts`` file of the tables OpenSM's ``engine`` gives ``topology``'s fabric
    (module docstring); read back with ``ibnet:FILE,routes=THAT``.

    Parameters
    ----------
    topology : Topology
        Read from ``ibnetdiscover`` output (``ibnet:FILE``), with every port's LID.
    engine : str
        One of :data:`OPENSM_ENGINES`.
    progress : callable, optional
        Hears what runs (OpenSM may take a while on a large fabric).
    refresh : bool
        Route again even where the cache has the tables.

    Returns
    -------
    Path
        The dump, in :func:`opensm_cache_dir`.

    Raises
    ------
    TopologyError
        For a topology that is not a fabric, an unknown engine, a port without a LID, tools
        that are not installed (saying how to get them), or an engine that did not route the
        fabric (OpenSM's errors quoted).
    """
    _check_engine(engine)
    fabric = topology.fabric
    if fabric is None:
        raise TopologyError(f"OpenSM's engines route InfiniBand fabrics (-t ibnet:FILE), not {topology.name}")
    if not (fabric.lids > 0).all():
        raise TopologyError(f"{fabric.source}: port {int((fabric.lids <= 0).argmax())} of the fabric has no LID; "
                            f"OpenSM's tables would name LIDs the file does not: discover the fabric once its "
                            f"subnet manager has run")
    cache = opensm_cache_dir() / f"{_file_digest(Path(fabric.source))}-{engine}.lfts"
    if cache.exists() and not refresh:
        return cache
    missing = missing_opensm_tools()
    if missing:
        raise TopologyError(f"--routes opensm:{engine} runs the real subnet manager on the fabric simulated, and "
                            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed: apt-get "
                            f"install ibsim-utils opensm infiniband-diags, or give the tables as --routes FILE "
                            f"(dump_lfts of a fabric {engine} routes)")
    with tempfile.TemporaryDirectory(prefix="optiq-opensm-") as work:
        dump = _route(Path(fabric.source), Path(work), engine, _guid2lid(topology), progress)
        _check_every_host(topology, dump, engine)
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_suffix(f".{os.getpid()}.part")
        partial.write_text(dump)
        partial.replace(cache)  # whole or not at all, for a concurrent reader
    return cache


def _file_digest(path: Path) -> str:
    """A short hash of the fabric file's bytes: its GUIDs and LIDs name the tables, and the
    topology's fingerprint does not hold them."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _route(net: Path, work: Path, engine: str, guid2lid: str, progress: Callable[[str], None] | None) -> str:
    """Simulate ``net``, route it with ``engine`` and return ``dump_lfts``' output."""
    (work / "guid2lid").write_text(guid2lid)
    env = dict(os.environ, IBSIM_SOCKNAME=f"optiq-opensm-{os.getpid()}-{time.monotonic_ns()}",
               OSM_TMP_DIR=str(work), OSM_CACHE_DIR=str(work))
    log_path = work / "ibsim.log"
    with open(log_path, "w") as log:
        sim = subprocess.Popen([_which("ibsim") or "ibsim", "-s", "-n", str(net)], stdin=subprocess.DEVNULL,
                               stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=work)
    try:
        deadline = time.monotonic() + READY_S
        while "simulator ready" not in log_path.read_text(errors="replace"):
            if sim.poll() is not None or time.monotonic() > deadline:
                raise TopologyError(f"ibsim did not simulate {net}: {_tail(log_path)}")
            time.sleep(0.05)
        if progress:
            progress(f"OpenSM routes {net.name} with {engine} (ibsim)")
        osm_log = work / "opensm.log"
        _run(["opensm", "-o", "-f", str(osm_log), "-R", engine], env, work)
        text = osm_log.read_text(errors="replace") if osm_log.exists() else ""
        if f"{engine} tables configured on all switches" not in text:
            errors = [line.strip() for line in text.splitlines() if "ERR" in line][-3:]
            raise TopologyError(f"OpenSM's {engine} engine did not route {net.name}"
                                + (f": {' | '.join(errors)}" if errors else " (it fell back to another engine)"))
        dump = _run(["dump_lfts"], env, work)
    finally:
        if sim.poll() is None:
            os.kill(sim.pid, signal.SIGTERM)
            try:
                sim.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(sim.pid, signal.SIGKILL)
                sim.wait()
    if "Unicast lids" not in dump:
        raise TopologyError(f"dump_lfts printed no tables of {net.name}")
    return dump


def _check_every_host(topology: Topology, dump: str, engine: str) -> None:
    """Refuse tables that leave out a host's LID (the simulated fabric lost it, as ibsim does
    with two ports of one GUID), naming the first such host."""
    fabric = topology.fabric
    assert fabric is not None
    listed = {int(line[2:6], 16) for line in dump.splitlines() if line.startswith("0x") and len(line) > 6}
    missing = [h for h, lid in enumerate(fabric.endpoint_lid.tolist()) if lid not in listed]
    if missing:
        h = missing[0]
        others = f" and {len(missing) - 1} other hosts" if len(missing) > 1 else ""
        raise TopologyError(f"OpenSM's {engine} tables have no entry for {topology.endpoint_names[h]} (LID "
                            f"0x{int(fabric.endpoint_lid[h]):04x}){others}: the simulated fabric lost "
                            f"{'them' if others else 'it'} (ibsim drops a node whose GUID another port has, and "
                            f"hosts past its 511th)")


def _run(argv: list[str], env: dict[str, str], work: Path) -> str:
    tool = _which(argv[0]) or argv[0]
    try:
        done = subprocess.run([_which("ibsim-run") or "ibsim-run", tool, *argv[1:]], env=env, cwd=work,
                              capture_output=True, text=True, timeout=TOOL_S)
    except subprocess.TimeoutExpired:
        raise TopologyError(f"{argv[0]} did not end within {TOOL_S:g} s on the simulated fabric") from None
    if done.returncode != 0 and argv[0] != "opensm":  # opensm's log says more than its code
        raise TopologyError(f"{argv[0]} failed on the simulated fabric: {done.stderr.strip()[-300:]}")
    return done.stdout


def _tail(path: Path) -> str:
    return " | ".join(path.read_text(errors="replace").strip().splitlines()[-3:])
