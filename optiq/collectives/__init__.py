"""Allreduce: the algorithms run for real (mpi4py on numpy buffers), their cost model
(:mod:`.cost`), its fit (:mod:`.fit`) and the micro-benchmarks that feed it."""

from .algorithms import (
                         allreduce,
                         block_bounds,
                         cps_allreduce,
                         hierarchical_cps_allreduce,
                         rhd_allreduce,
                         ring_allreduce,
)

__all__ = ["allreduce", "ring_allreduce", "rhd_allreduce", "cps_allreduce", "hierarchical_cps_allreduce",
           "block_bounds"]
