"""Adapters that put optiq's calls inside other libraries without changing their code.

:mod:`optiq.integrations.mpi4py_fft`: :func:`~optiq.integrations.mpi4py_fft.accelerate` makes an
mpi4py-fft ``PFFT``'s transposes go through :func:`optiq.alltoallw`, every row (or column)
of its process grid planned together.
"""

__all__: list[str] = []
