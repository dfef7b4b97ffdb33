"""The kernel's side: network namespaces, ``ip`` and ``tc`` in batches, and what may be done here.

Everything a testbed makes is named with its testbed's name (``optiq-<tag>``): namespaces
``<name>-h<i>`` (hosts), ``<name>-s<j>`` (switches) and ``<name>-ctl`` (the management
side, where ``mpiexec`` runs). Commands go to the kernel in batches, one ``ip -batch`` or
``tc -batch`` process per namespace, several namespaces at once (:func:`each`), never one
process per route.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..errors import TestbedError

__all__ = ["PREFIX", "NAME_PATTERN", "check_privileges", "run", "ip_batch", "tc_batch", "in_namespace", "each",
           "namespaces", "find_testbeds", "namespace_pids", "kill_namespace_processes", "delete_namespaces"]

#: Every testbed's name starts with this.
PREFIX = "optiq-"
#: A testbed's namespace: ``<testbed name>-<h|s><number>`` or ``<testbed name>-ctl``.
NAME_PATTERN = re.compile(rf"^({re.escape(PREFIX)}[A-Za-z0-9]+)-(h\d+|s\d+|ctl)$")
#: Namespaces set up at once (the commands mostly wait for the kernel).
PARALLEL = 8
#: The tools the testbed needs, and the Debian package of each.
TOOLS = {"ip": "iproute2", "tc": "iproute2", "unshare": "util-linux"}

T = TypeVar("T")
R = TypeVar("R")


def check_privileges() -> None:
    """Raise :class:`TestbedError` in one line unless network namespaces can be made here.

    Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN), ``ip`` and ``tc`` (iproute2) and
    ``unshare`` (util-linux); a probe namespace is made and removed to be sure.
    """
    missing = [f"{tool} ({package})" for tool, package in TOOLS.items() if shutil.which(tool) is None]
    if missing:
        raise TestbedError(f"the testbed needs {', '.join(missing)}: apt-get install "
                           f"{' '.join(sorted({TOOLS[t.split()[0]] for t in missing}))}")
    probe = f"{PREFIX}probe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode:
        why = made.stderr.strip().splitlines()[-1] if made.stderr.strip() else f"exit code {made.returncode}"
        who = "" if os.geteuid() == 0 else " (run it as root, or with CAP_NET_ADMIN and CAP_SYS_ADMIN)"
        raise TestbedError(f"cannot make network namespaces here{who}: ip netns add: {why}")
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)


def run(argv: Sequence[str], *, input: str | None = None, what: str | None = None,
        check: bool = True, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure raise :class:`TestbedError` with its last lines of stderr."""
    try:
        done = subprocess.run(list(argv), input=input, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise TestbedError(f"{argv[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise TestbedError(f"{what or ' '.join(argv[:4])} did not end within {timeout:g} s") from None
    if check and done.returncode:
        raise TestbedError(f"{what or ' '.join(argv[:4])} failed: {_last_lines(done.stderr)}")
    return done


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:]) or "(no message)"


def ip_batch(namespace: str | None, lines: Iterable[str], *, what: str = "", force: bool = False,
             json_out: bool = False) -> str:
    """``ip [-n NAMESPACE] -batch -`` with ``lines``; the text it printed.

    Without ``force`` the first failing line stops the batch and is named in the error; with it
    every line runs, and the caller checks what came out (``json_out``: one JSON array per
    line that printed anything).
    """
    text = "\n".join(lines)
    if not text:
        return ""
    argv = ["ip"] + (["-n", namespace] if namespace else []) + (["-force"] if force else []) \
        + (["-j"] if json_out else []) + ["-batch", "-"]
    done = run(argv, input=text + "\n", check=False)
    if done.returncode and not force:
        raise TestbedError(f"{what or 'ip'}{' in ' + namespace if namespace else ''}: "
                           f"{_failed_line(done.stderr, text)}")
    return done.stdout


def tc_batch(namespace: str, lines: Iterable[str], *, what: str = "") -> None:
    """``tc -n NAMESPACE -batch -`` with ``lines`` (stops at, and names, the first failing one)."""
    text = "\n".join(lines)
    if not text:
        return
    done = run(["tc", "-n", namespace, "-batch", "-"], input=text + "\n", check=False)
    if done.returncode:
        raise TestbedError(f"{what or 'tc'} in {namespace}: {_failed_line(done.stderr, text)}")


def _failed_line(stderr: str, text: str) -> str:
    """The batch line that failed (``Command failed -:N``) and the kernel's answer."""
    found = re.search(r"Command failed -:(\d+)", stderr)
    message = _last_lines(re.sub(r"Command failed -:\d+", "", stderr), 2)
    if found:
        lines = text.splitlines()
        n = int(found.group(1))
        if 0 < n <= len(lines):
            return f"{lines[n - 1]!r}: {message}"
    return message


def in_namespace(namespace: str, argv: Sequence[str], *, what: str = "", timeout: float = 120.0) -> str:
    """Run ``argv`` inside ``namespace`` (``ip netns exec``); its standard output."""
    return run(["ip", "netns", "exec", namespace, *argv], what=what or f"{argv[0]} in {namespace}",
               timeout=timeout).stdout


def each(function: Callable[[T], R], items: Iterable[T], *, parallel: int = PARALLEL) -> list[R]:
    """``function`` on every item, ``parallel`` at a time (the commands wait on the kernel, not
    Python); results in the items' order, the first error raised."""
    items = list(items)
    if len(items) <= 1 or parallel <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(parallel, len(items))) as pool:
        return list(pool.map(function, items))


def namespaces() -> list[str]:
    """The names of every network namespace here (``ip netns list``)."""
    out = run(["ip", "-j", "netns", "list"], what="ip netns list").stdout.strip()
    found: list[dict[str, Any]] = json.loads(out) if out else []
    return [entry["name"] for entry in found]


def find_testbeds(names: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Testbed name -> its namespaces, among ``names`` (default: every namespace here)."""
    out: dict[str, list[str]] = {}
    for name in namespaces() if names is None else names:
        found = NAME_PATTERN.match(name)
        if found:
            out.setdefault(found.group(1), []).append(name)
    return out


def namespace_pids(namespace: str) -> list[int]:
    """The processes inside ``namespace`` (``ip netns pids``)."""
    done = run(["ip", "netns", "pids", namespace], check=False)
    return [int(p) for p in done.stdout.split() if p.isdigit()]


def kill_namespace_processes(names: Iterable[str], *, grace_s: float = 1.0) -> int:
    """End every process inside the namespaces ``names`` (and only those): SIGTERM, then
    SIGKILL after ``grace_s``. Returns how many there were."""
    names = list(names)
    pids = {pid for pids in each(namespace_pids, names) for pid in pids}
    if not pids:
        return 0
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = set()
        for pid in pids:
            try:
                os.kill(pid, sig)
                alive.add(pid)
            except ProcessLookupError:
                pass
        if not alive or sig == signal.SIGKILL:
            break
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_alive(p) for p in alive):
            time.sleep(0.05)
        pids = {p for p in alive if _alive(p)}
        if not pids:
            break
    return len(pids)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def delete_namespaces(names: Iterable[str]) -> None:
    """End the processes inside ``names``, then delete the namespaces (their links go with them)."""
    names = list(names)
    if not names:
        return
    kill_namespace_processes(names)
    ip_batch(None, [f"netns delete {name}" for name in names], force=True)
