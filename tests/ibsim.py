"""The real InfiniBand tools on a simulated fabric, for the tests: ``Simulator`` of
``scripts/ibsim_fabrics.py`` (``ibsim``, ``opensm``, ``ibnetdiscover``, ``dump_lfts``,
``ibtracert``), and a skip, saying why, where the Debian packages are absent (``apt-get
install opensm ibsim-utils infiniband-diags``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "scripts" / "ibsim_fabrics.py"


def _script():
    if "ibsim_fabrics" not in sys.modules:
        spec = importlib.util.spec_from_file_location("ibsim_fabrics", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules["ibsim_fabrics"] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules["ibsim_fabrics"]


Simulator = _script().Simulator


def need_tools() -> None:
    missing = _script().missing_tools()
    if missing:
        pytest.skip(f"needs the real InfiniBand tools ({', '.join(missing)} absent): "
                    f"apt-get install opensm ibsim-utils infiniband-diags")
