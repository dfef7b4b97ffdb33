"""MPI across the namespaces: one rank per host namespace, its data on the data network.

``mpiexec`` (hydra, from the MPICH wheel) runs in the control namespace and starts one proxy
per host through its ``ssh`` launcher, whose program is a script of the testbed's
(:func:`write_launcher`): it receives a host's management address and the proxy's command,
and runs the command in that host's namespace with a host name of its own (``unshare
--uts``), so MPICH sees no shared memory between ranks. hydra's own traffic goes over the
management network (``-iface``); MPI's data is pinned to the data address (MPICH's OFI
``tcp`` provider on the ``oq`` device), and the links' counters show that it is.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TestbedError
from .layout import DATA_DEVICE, MANAGEMENT_BRIDGE
from .system import run

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .layout import Layout

__all__ = ["MPI_ENVIRONMENT", "find_mpiexec", "write_launcher", "mpiexec_argv", "start"]

#: MPICH's data on the data network: the OFI ``tcp`` provider bound to each host's data address;
#: ``OPTIQ_TESTBED`` tells optiq's own commands that their links are the emulated ones.
MPI_ENVIRONMENT = {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": DATA_DEVICE,
                   "OPTIQ_TESTBED": "1"}


def find_mpiexec() -> str:
    """hydra's ``mpiexec`` beside this Python (the MPICH wheel's), else on ``PATH``.

    Raises
    ------
    TestbedError
        If there is none, or it is not MPICH's hydra (its ``ssh`` launcher and ``-iface`` are needed).
    """
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        raise TestbedError("the testbed runs MPI with MPICH's mpiexec: pip install 'optiq[mpi]'")
    version = run([found, "--version"], check=False, what="mpiexec --version").stdout
    if "HYDRA" not in version:
        raise TestbedError(f"{found} is not MPICH's hydra mpiexec (the testbed needs its ssh launcher and -iface): "
                           f"pip install 'optiq[mpi]'")
    return found


def write_launcher(layout: Layout, directory: Path) -> Path:
    """The program hydra's ``ssh`` launcher runs: ``LAUNCHER [OPTIONS] HOST COMMAND...`` runs
    ``COMMAND`` in the namespace of the host whose management address is ``HOST``."""
    hosts = layout.topology.num_endpoints
    cases = "\n".join(f"  {layout.management_address(h)}) ns={layout.namespaces[h]} ;;" for h in range(hosts))
    script = f"""#!/bin/sh
# hydra's ssh launcher for testbed {layout.name}: LAUNCHER [-x ...] HOST COMMAND...
while [ "${{1#-}}" != "$1" ]; do shift; done
host=$1; shift
case $host in
{cases}
  *) echo "optiq testbed launcher: no host $host in {layout.name}" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns && exec $*"
"""
    path = directory / "launcher"
    path.write_text(script)
    path.chmod(0o755)
    return path


def mpiexec_argv(layout: Layout, launcher: Path, ranks: Sequence[int], command: Sequence[str]) -> list[str]:
    """The command that runs ``command`` as rank ``r`` in the namespace of host ``ranks[r]``."""
    hosts = ",".join(f"{layout.management_address(h)}:1" for h in ranks)
    return ["ip", "netns", "exec", layout.control, find_mpiexec(), "-launcher", "ssh", "-launcher-exec",
            str(launcher), "-iface", MANAGEMENT_BRIDGE, "-hosts", hosts, "-n", str(len(ranks)), *command]


def start(argv: Sequence[str], *, stdout: Path, stderr: Path, environment: dict[str, str] | None = None
          ) -> subprocess.Popen[bytes]:
    """Start ``argv`` (from :func:`mpiexec_argv`) with MPI's data pinned (:data:`MPI_ENVIRONMENT`),
    its output to files."""
    env = dict(os.environ, **MPI_ENVIRONMENT, **(environment or {}))
    for name in ("UCX_TLS", "UCX_NET_DEVICES"):  # the OFI netmod is chosen: UCX settings would only confuse
        env.pop(name, None)
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        return subprocess.Popen(list(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)


def describe(argv: Sequence[str]) -> str:
    """``argv`` as a shell line (for messages and ``--keep``)."""
    return " ".join(shlex.quote(a) for a in argv)
