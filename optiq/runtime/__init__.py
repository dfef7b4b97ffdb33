"""The executor: replay a plan over MPI with chunked store-and-forward (needs mpi4py).

Run a plan file with ``mpiexec -n N python -m optiq.runtime PLAN.json`` (or ``optiq run``),
or from an application: :func:`alltoallv` in place of ``comm.Alltoallv`` and :func:`alltoallw`
in place of ``comm.Alltoallw`` (they plan at run time and cache), or :func:`run_plan` /
:class:`Executor` with a plan made ahead.
"""

import numpy.ma  # noqa: F401  (numpy's unique loads it at its first call: not in an application's first plan, on every rank)

from ..sim.runs import RunReport, Timing
from .alltoall import AlltoallvResult, alltoallv, alltoallw
from .context import clear_cache
from .executor import Executor, bcast_plan, check_comm, check_routes, run_plan
from .requests import AlltoallvRequest, alltoallv_init, alltoallw_init, ialltoallv, ialltoallw
from .runner import BASELINES, measure, predicted_time
from .schedule import RankSchedule, Stream, compile_schedule
from .transport import TransferResult
from .verify import fill_send_buffers, find_mismatches, job_pattern

__all__ = ["alltoallv", "ialltoallv", "alltoallv_init", "alltoallw", "ialltoallw", "alltoallw_init", "AlltoallvRequest", "AlltoallvResult", "clear_cache", "run_plan", "Executor", "TransferResult", "measure", "RunReport", "Timing",
           "predicted_time", "compile_schedule", "RankSchedule", "Stream", "check_comm", "check_routes", "bcast_plan", "job_pattern",
           "fill_send_buffers", "find_mismatches", "BASELINES"]
