"""Adapters for other libraries: mpi4py-fft's transforms through optiq (the ``fft`` extra)."""

import importlib.util

import pytest
from conftest import MPI_SCRIPTS, launch

needs_fft = pytest.mark.skipif(importlib.util.find_spec("mpi4py_fft") is None,
                               reason="mpi4py-fft is not installed (pip install 'optiq[fft]'; building it needs "
                                      "FFTW's headers, Debian's libfftw3-dev)")


def test_accelerate_refuses_what_is_not_a_pfft_in_one_line():
    from optiq.errors import ArgumentError
    from optiq.integrations.mpi4py_fft import accelerate

    with pytest.raises(ArgumentError, match="accelerate takes an mpi4py_fft PFFT"):
        accelerate(object(), network="torus:2x2")


@needs_fft
def test_accelerate_needs_a_network():
    from mpi4py import MPI
    from mpi4py_fft import PFFT

    from optiq.errors import ArgumentError
    from optiq.integrations.mpi4py_fft import accelerate

    fft = PFFT(MPI.COMM_SELF, (4, 4, 4), dtype=complex)
    with pytest.raises(ArgumentError, match="needs network="):
        accelerate(fft)
    fft.destroy()


@pytest.mark.mpi
@needs_fft
def test_mpi4py_fft_through_optiq_is_bitwise_its_own():
    proc, _ = launch(4, MPI_SCRIPTS / "fft_check.py", timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
