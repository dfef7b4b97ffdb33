"""The emulated network: any optiq topology as Linux network namespaces, on which plans run over MPI and are timed.

Every host and switch is a network namespace, every cable a veth pair whose two directions
are rate limited (``tc tbf``) with a tail-drop queue, and every node holds one kernel route
per destination host: the network's own routes (forwarding tables, D-mod-K, dimension order,
dragonfly minimal routes), read back from the kernel hop by hop. Per-pair rules (policy
routing) carry free plans of one path per pair, the OpenFlow rules of the fat-tree study.
MPI (MPICH over TCP) runs one rank per host namespace; the links' counters show where every
byte went. Needs root (or CAP_NET_ADMIN); :func:`run_testbed` is ``optiq testbed run``.
"""

from ..errors import TestbedError
from .forwarding import Forwarding
from .layout import Layout
from .methods import Method, methods_of_plan, parse_methods, plan_methods
from .network import DEFAULT_QUEUE, Counters, SweepResult, Testbed, sweep
from .report import TestbedReport, TestbedRow
from .run import DEFAULT_METHODS as TESTBED_METHODS
from .run import DEFAULT_REPEAT, run_program, run_testbed

#: The fastest link's rate by default (bytes/s): 20 Mbit/s, low enough that a small machine's
#: cores keep up with the kernel's forwarding (``benchmarks/testbed_budget.py``).
TESTBED_RATE = 20e6 / 8

__all__ = ["Testbed", "Layout", "Forwarding", "Counters", "Method", "TestbedReport", "TestbedRow", "SweepResult",
           "TestbedError", "run_testbed", "run_program", "sweep", "plan_methods", "methods_of_plan", "parse_methods",
           "DEFAULT_QUEUE", "DEFAULT_REPEAT", "TESTBED_METHODS", "TESTBED_RATE"]
