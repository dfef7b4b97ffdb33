"""The real InfiniBand tools on a simulated fabric, for the tests: ``Simulator`` of
``scripts/ibsim_fabrics.py`` (``ibsim``, ``opensm``, ``ibnetdiscover``, ``dump_lfts``,
``ibtracert``), and a skip, saying why, where the Debian packages are absent (``apt-get
install opensm ibsim-utils infiniband-diags``)."""

from __future__ import annotations

import pytest
from conftest import SYNTHETIC_FABRIC, script

SCRIPT = SYNTHETIC_FABRIC.parent / "ibsim_fabrics.py"
Simulator = script("ibsim_fabrics").Simulator


def need_tools() -> None:
    missing = script("ibsim_fabrics").missing_tools()
    if missing:
        pytest.skip(f"needs the real InfiniBand tools ({', '.join(missing)} absent): "
                    f"apt-get install opensm ibsim-utils infiniband-diags")
