"""The code is lint-clean (ruff) and type-clean (mypy) under the settings in pyproject.toml."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def tool(name: str) -> str:
    found = Path(sys.executable).parent / name
    if found.exists():
        return str(found)
    which = shutil.which(name)
    if not which:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return which


def test_ruff_is_clean():
    proc = subprocess.run([tool("ruff"), "check"], cwd=ROOT, capture_output=True, text=True)  # notebooks too
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_mypy_is_clean():
    proc = subprocess.run([tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
