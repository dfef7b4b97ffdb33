"""Run a benchmark and record what it printed in ``benchmarks/RESULTS.md``, dated.

Measured figures live in RESULTS.md, not in docstrings: each benchmark has one section
there, between ``<!-- NAME -->`` and ``<!-- /NAME -->``, holding the date, the machine
(CPU, cores, memory, load before the run, Python, MPI), the exact command and its output.
This script runs the command and replaces that section (or appends it), so a section is
always what one run printed, and a figure is refreshed by running its benchmark again.

    python benchmarks/record.py NAME [ARGS...]    # runs benchmarks/NAME.py ARGS...
    python benchmarks/record.py NAME@TAG [ARGS...]  # the same, in a section of its own, NAME@TAG
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
RESULTS = HERE / "RESULTS.md"


def machine() -> str:
    """One line on what ran the benchmark and what else was running."""
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or platform.machine()
    mem = ""
    try:
        kib = int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal")))
        mem = f", {kib / 2**20:.0f} GiB"
    except (OSError, StopIteration):
        pass
    load = ", load {:.2f} {:.2f} {:.2f} before the run".format(*os.getloadavg()) if hasattr(os, "getloadavg") else ""
    mpi = ""
    try:
        from mpi4py import MPI

        mpi = ", " + MPI.Get_library_version().splitlines()[0].strip()
    except Exception:  # no MPI: the benchmark may not need it
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}{load}; Python {platform.python_version()}{mpi}"


def record(name: str, args: list[str]) -> str:
    """Run ``benchmarks/NAME.py ARGS`` (its output passes through) and return its section
    (``NAME@TAG``: the same script, recorded as a section of its own)."""
    script = HERE / f"{name.partition('@')[0]}.py"
    if not script.exists():
        raise SystemExit(f"record: no benchmark {script}")
    about = machine()
    started = datetime.datetime.now().astimezone()
    proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, text=True)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    if proc.wait() != 0:
        raise SystemExit(f"record: {script.name} failed (exit {proc.returncode}); RESULTS.md left as it was")
    minutes = (datetime.datetime.now().astimezone() - started).total_seconds() / 60
    command = shlex.join(["python", f"benchmarks/{script.name}", *args])
    return (f"<!-- {name} -->\n### {name}\n\n{started:%Y-%m-%d %H:%M %Z}, {minutes:.1f} min. {about}.\n\n"
            f"```\n$ {command}\n{''.join(lines).rstrip()}\n```\n<!-- /{name} -->")


def replace_section(text: str, name: str, section: str) -> str:
    """``text`` with the section of ``name`` replaced by ``section`` (appended if absent)."""
    pattern = re.compile(rf"<!-- {re.escape(name)} -->.*?<!-- /{re.escape(name)} -->", re.S)
    if pattern.search(text):
        return pattern.sub(lambda _: section, text)
    return text.rstrip() + "\n\n" + section + "\n"


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    name, args = sys.argv[1].removesuffix(".py"), sys.argv[2:]
    section = record(name, args)
    RESULTS.write_text(replace_section(RESULTS.read_text(), name, section))
    print(f"record: section {name!r} of {RESULTS} updated")


if __name__ == "__main__":
    main()
