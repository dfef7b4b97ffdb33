"""Running a child command that builds a testbed, so that Ctrl-C leaves nothing behind.

``subprocess.run`` kills its child (SIGKILL) a quarter of a second after Ctrl-C, in the middle
of the child's own clean-up: a testbed's namespaces would stay. Here the child gets SIGINT
(a terminal's Ctrl-C has sent it one already; a ``kill`` of this process alone has not) and
is waited for, then the interrupt goes on.
"""

from __future__ import annotations

import signal
import subprocess


def run_cleanly(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True)``, interruptible without leaks."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            out, err = process.communicate()
        except KeyboardInterrupt:
            process.send_signal(signal.SIGINT)
            process.wait()
            raise
    return subprocess.CompletedProcess(argv, process.returncode, out, err)
