"""The repository's ``scripts/`` for benchmarks: each loaded as a module, and an ibsim fabric as
the real ``ibnetdiscover`` prints it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` as a module (registered in ``sys.modules``: its dataclasses look themselves up there)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def discovered(kind: str, args: list[str], work: Path) -> Path:
    """``scripts/ibsim_fabrics.py KIND ARGS`` simulated by ibsim, routed once by OpenSM's minhop
    (so every port has a LID), and the file ``ibnetdiscover`` prints of it."""
    net = work / f"{kind}.net"
    subprocess.run([sys.executable, ROOT / "scripts" / "ibsim_fabrics.py", kind, net, *args], check=True,
                   capture_output=True)
    with load_script("ibsim_fabrics").Simulator(net, work / kind) as sim:
        sim.route("minhop")
        fabric, _ = sim.discover()
    return fabric
