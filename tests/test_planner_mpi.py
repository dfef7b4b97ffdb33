"""Planning spread over MPI ranks writes the same plan as a serial run."""

import subprocess
import sys

import numpy as np
import pytest
from conftest import MPI_SCRIPTS, launch, mpiexec

from optiq import from_spec, load_plan, make_plan
from optiq.cli import main

pytestmark = pytest.mark.mpi

SPEC = "torus:4x4x4"


def _same_plan(a, b):
    assert np.array_equal(a.demands.src, b.demands.src) and np.array_equal(a.demands.dst, b.demands.dst)
    assert np.array_equal(a.paths.job, b.paths.job) and np.array_equal(a.paths.offsets, b.paths.offsets)
    assert np.array_equal(a.paths.links, b.paths.links) and np.array_equal(a.path_bytes, b.path_bytes)


def _workload(topology, kind):
    """``plan_ranks.py``'s workload of that kind (the script's own, loaded without running it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("plan_ranks", MPI_SCRIPTS / "plan_ranks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.workload(topology, kind)


@pytest.mark.parametrize("method, kind", [("opt", "disjoint"), ("heu2", "disjoint"), ("opt", "sparse")])
def test_plans_from_1_2_and_4_ranks_equal_the_serial_plan(tmp_path, method, kind):
    """``sparse`` takes column generation through several iterations, each pricing beside its
    LP solve: over ranks the searches take turns, and the plan is the serial one."""
    t = from_spec(SPEC)
    d, options = _workload(t, kind)
    serial = make_plan(t, d, method, **options)
    assert serial.info["timings"]["ranks"] == 1
    if kind == "sparse":
        assert serial.info["iterations"] >= 3
    for ranks in (1, 2, 4):
        out = tmp_path / f"{method}{ranks}.json"
        proc, _ = launch(ranks, MPI_SCRIPTS / "plan_ranks.py", SPEC, method, out, kind)
        assert proc.returncode == 0, proc.stderr
        plan = load_plan(out)
        _same_plan(plan, serial)
        assert plan.info["timings"]["ranks"] == (ranks if ranks > 1 else 1)


def _cli(*argv, ranks: int) -> subprocess.CompletedProcess:
    optiq = [sys.executable, "-c", "import sys; from optiq.cli import main; sys.exit(main(sys.argv[1:]))"]
    return subprocess.run([mpiexec(), "-n", str(ranks), *optiq, *argv], capture_output=True, text=True, timeout=300)


def test_mpiexec_optiq_plan_writes_one_plan_like_the_serial_one(tmp_path, capsys):
    argv = ["plan", "-t", SPEC, "--pattern", "disjoint", "--size", "1MiB", "-m", "opt", "--gap", "0.02"]
    assert main([*argv, "-o", str(tmp_path / "serial.json"), "-q"]) == 0
    capsys.readouterr()
    proc = _cli(*argv, "-o", str(tmp_path / "two.json"), ranks=2)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("wrote") == 1  # rank 0 alone reports
    two, serial = load_plan(tmp_path / "two.json"), load_plan(tmp_path / "serial.json")
    _same_plan(two, serial)
    assert two.info["timings"]["ranks"] == 2 and serial.info["timings"]["ranks"] == 1


def test_mpiexec_optiq_plan_error_is_said_once_and_every_rank_fails(tmp_path):
    proc = _cli("plan", "-t", "bgq:999", "--pattern", "disjoint", "-o", str(tmp_path / "x.json"), ranks=3)
    assert proc.returncode != 0
    assert proc.stderr.count("optiq: error:") == 1 and "no Blue Gene/Q preset" in proc.stderr
