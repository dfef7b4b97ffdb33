"""Every ``bash`` and ``python`` block of the README and of docs/ runs as written.

Each page's blocks run in order in one fresh directory (a block may use the files an earlier
one wrote), with this environment's ``.venv`` linked in and its ``bin`` first on ``PATH``, and
``scripts/``, ``examples/`` and ``benchmarks/`` linked from the repository, as docs/cli.md
tells a reader to set one up. The README's blocks run from the repository root: every file
they write must be one git ignores there. A bash block runs
under ``set -euo pipefail``; a python block runs with this interpreter, or under
``mpiexec -n 4`` when it uses ``MPI.COMM_WORLD``. Two things are not run as written:

- the install at the start of the README's two commands (``python3 -m venv .venv &&
  .venv/bin/pip install ... &&``): this environment is that install, and ``.ci/run`` does it
  from a clean clone; the rest of the line runs. The test command itself is this run.
- a block after ``<!-- docs-test: needs NAME ... -->`` runs only where every NAME is a
  command on ``PATH`` or an existing file (a real fabric's ``ibnetdiscover``, a cluster's
  Slurm configuration), ``python:MODULE`` where that module can be imported (an optional extra's
  package), or ``netns`` where network namespaces can be made and ``ethtool`` is installed (the
  testbed's pages: the ``netns`` lane), and is skipped with the reason otherwise;
- a block after ``<!-- docs-test: installs -->`` changes the environment it runs in (an
  install against a cluster's own MPI): it is skipped, with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import mpiexec

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = ("bash", "python")
FENCE = re.compile(r"^```(\w*)\s*$")
NEEDS = re.compile(r"<!--\s*docs-test:\s*needs\s+(.+?)\s*-->")
INSTALLS = re.compile(r"<!--\s*docs-test:\s*installs\s*-->")
INSTALL = re.compile(r"^python3 -m venv \.venv && \.venv/bin/pip install -e '[^']*'( && |$)")
THE_TESTS = ".venv/bin/python -m pytest"
PAGE_TIMEOUT_S = 900


@dataclass
class Block:
    page: Path
    line: int
    language: str
    code: str
    needs: tuple[str, ...]
    installs: bool = False

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    """The page's fenced blocks in the languages that run, with what each needs."""
    found, lines = [], page.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        needs = NEEDS.search(before)
        if opening.group(1) in LANGUAGES:
            found.append(Block(page, i + 1, opening.group(1), "\n".join(lines[i + 1:end]) + "\n",
                               tuple(needs.group(1).split()) if needs else (), bool(INSTALLS.search(before))))
        i = end + 1
    return found


def _as_run_here(code: str) -> str:
    """The README's install prefix taken off (this environment is that install), and the
    test command, which is this run, left out."""
    out = []
    for line in code.splitlines():
        line = INSTALL.sub("", line)
        if line.strip() == THE_TESTS or line.strip().startswith(THE_TESTS + " "):
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def _missing(needs: tuple[str, ...]) -> list[str]:
    return [n for n in needs if not (_netns_here() if n == NETNS else _importable(n[len(PYTHON):])
                                     if n.startswith(PYTHON) else shutil.which(n) or Path(n).exists())]


#: The need of a block that imports an optional module: ``python:MODULE`` (an extra's package).
PYTHON = "python:"


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


#: The need of a block that builds an emulated network (root, network namespaces).
NETNS = "netns"


def _netns_here() -> bool:
    from optiq.errors import TestbedError
    from optiq.testbed.system import check_privileges

    try:
        check_privileges()
    except TestbedError:
        return False
    return shutil.which("ethtool") is not None


def _workdir(tmp_path: Path) -> dict[str, str]:
    for name in ("scripts", "examples", "benchmarks"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONPATH", None)
    return env


def _left_in_the_checkout(here: Path) -> list[str]:
    """Files written under ``here`` (not the links, not the blocks' scripts) that git would not
    ignore in the repository root, where the README's blocks run."""
    made = [os.path.relpath(os.path.join(top, name), here) for top, _, files in os.walk(here)  # links not followed
            for name in files if not os.path.islink(os.path.join(top, name))
            and not (top == str(here) and re.fullmatch(r"block\d+\.(sh|py)", name))]
    if not made or shutil.which("git") is None or not (ROOT / ".git").exists():
        return []
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", "--stdin"], input="\n".join(made),
                             capture_output=True, text=True).stdout.split()
    return sorted(set(made) - set(ignored))


def _command(block: Block, number: int, here: Path) -> list[str]:
    if block.language == "bash":
        script = here / f"block{number}.sh"
        script.write_text("set -euo pipefail\n" + _as_run_here(block.code))
        return ["bash", str(script)]
    script = here / f"block{number}.py"
    script.write_text(block.code)
    if "MPI.COMM_WORLD" in block.code:
        return [mpiexec(), "-n", "4", sys.executable, str(script)]
    return [sys.executable, str(script)]


def _marks(page: Path) -> list[pytest.MarkDecorator]:
    text = "".join(b.code for b in blocks_of(page))
    marks = [pytest.mark.slow]
    if any(NETNS in b.needs for b in blocks_of(page)):
        marks.append(pytest.mark.netns)  # its own lane: the network needs the machine to itself
    elif "mpiexec" in text or "MPI.COMM_WORLD" in text:
        marks.append(pytest.mark.mpi)
    return marks


def test_the_pages_have_blocks_to_run_and_every_needs_names_something():
    counts = {page.name: len(blocks_of(page)) for page in PAGES}
    assert counts["README.md"] >= 3 and counts["cli.md"] >= 3 and counts["fabrics.md"] >= 2, counts
    for page in PAGES:
        for block in blocks_of(page):
            assert all(block.needs), block
            assert block.code.strip(), f"{block}: an empty block"


@pytest.mark.parametrize("page", [pytest.param(p, id=p.name, marks=_marks(p)) for p in PAGES if blocks_of(p)])
def test_every_block_on_the_page_runs_as_written(page, tmp_path, capsys):
    env = _workdir(tmp_path)
    ran, skipped, seconds = 0, [], []
    for number, block in enumerate(blocks_of(page)):
        if block.installs:
            skipped.append(f"{block}: installs into the environment it runs in")
            continue
        missing = _missing(block.needs)
        if missing:
            skipped.append(f"{block}: needs {', '.join(missing)}")
            continue
        start = time.perf_counter()
        proc = subprocess.run(_command(block, number, tmp_path), cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=PAGE_TIMEOUT_S)
        seconds.append(f"{block.line}: {time.perf_counter() - start:.0f} s")
        assert proc.returncode == 0, (f"{block} failed (exit {proc.returncode}):\n{block.code}\n--- stdout\n"
                                      f"{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
        assert "Traceback" not in proc.stderr, f"{block}: a traceback\n{proc.stderr[-3000:]}"
        ran += 1
    if page.name == "README.md":
        left = _left_in_the_checkout(tmp_path)
        assert not left, f"the README's blocks leave files git does not ignore: {left}"
    with capsys.disabled():
        print(f"\n{page.name}: {ran} blocks ran (line: seconds {', '.join(seconds)})"
              + "".join(f"\n  skipped {s}" for s in skipped))
    assert ran or skipped
