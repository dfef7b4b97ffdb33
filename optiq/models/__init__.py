"""Deprecated: the routing LP is :mod:`optiq.lp`; this alias goes in 0.2.0 (CHANGELOG.md).

The allreduce cost model moved to :mod:`optiq.collectives.cost` (its fit to
:mod:`optiq.collectives.fit`) and QoS classes to :mod:`optiq.workloads.qos`; the old module
names still import, with a :class:`DeprecationWarning`.
"""

import importlib
import sys
import warnings

from ..lp import *  # noqa: F403
from ..lp import __all__  # noqa: F401

warnings.warn("optiq.models is deprecated: use optiq.lp (the routing LP), optiq.collectives.cost and "
              "optiq.collectives.fit (the allreduce model) and optiq.workloads.qos", DeprecationWarning, stacklevel=2)

_MOVED = {"allreduce": "optiq.collectives.cost", "allreduce_fit": "optiq.collectives.fit",
          "qos": "optiq.workloads.qos",
          **{name: f"optiq.lp.{name}" for name in ("bounds", "colgen", "highs_lp", "pyomo_lp", "restricted",
                                                   "rounding", "scaling", "solution")}}
for _old, _new in _MOVED.items():
    sys.modules[f"{__name__}.{_old}"] = importlib.import_module(_new)
