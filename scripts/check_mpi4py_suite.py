"""Run mpi4py's own tests of vector collectives with optiq's alltoallv and alltoallw in place of MPI's.

Fetches the source distribution of the installed mpi4py from the package index (its tests
are not copied into this repository), rewrites every ``X.Alltoallv(...)``,
``X.Ialltoallv(...)`` and ``X.Alltoallv_init(...)`` call of the chosen test modules, and their
``Alltoallw`` forms, into a call of ``scripts/mpi4py_swap.py`` (which runs MPI's call and then optiq's on the same
arguments and compares the bytes), and runs the tests that make such calls under
``mpiexec -n N`` for every N asked for. Prints, per rank count, the tests run, passed,
skipped and failed, and every call's outcome: planned, local, handed to MPI, refused (both
raised) or a mismatch (calls are counted on every rank, so summed over the ranks). Exits 1
on any failure or mismatch, 3 when the package index cannot be reached.

    python scripts/check_mpi4py_suite.py [--ranks 1,2,3,4,5,8] [--method heu2] [--index URL] [--keep DIR]

The tests: ``test_cco_vec`` (blocking and in place, ``MPI.BOTTOM`` with struct types),
``test_cco_nb_vec`` (``Ialltoallv``, ``Ialltoallw``), ``test_cco_pr_vec`` (``Alltoallv_init``,
``Alltoallw_init``), ``test_cco_vec_inter`` (intercommunicators), the vector message
specifications of ``test_msgspec`` (``Alltoallw``'s too) and ``test_msgzero``'s zero-size vector
collectives, every array backend their ``arrayimpl`` finds installed but Numba's GPU arrays
(left out as mpi4py's own runner leaves them out: see ``RUNNER``).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Module -> the ``unittest -k`` pattern of its tests that call the swapped methods.
SUITES = {"test_cco_vec": "Alltoall", "test_cco_nb_vec": "Alltoall", "test_cco_pr_vec": "Alltoall",
          "test_cco_vec_inter": "Alltoall", "test_msgspec": "MessageVector", "test_msgzero": "CollectivesVector"}
SWAPPED = ("Alltoallv", "Ialltoallv", "Alltoallv_init", "Alltoallw", "Ialltoallw", "Alltoallw_init")
#: How every module runs. mpi4py's own runner (its ``test/main.py``) leaves Numba's GPU
#: arrays out unless asked (``--numba``): they need a CUDA device. This leaves them out too,
#: by hiding ``numba.cuda`` only (optiq's planner compiles its searches with numba).
RUNNER = "import sys, unittest; sys.modules['numba.cuda'] = None; unittest.main(module=None)"


def fetch_sdist(version: str, index: str, into: Path) -> Path:
    """Download mpi4py's source distribution of ``version`` (sha256 checked) and unpack its tests."""
    page = urllib.request.urlopen(f"{index.rstrip('/')}/mpi4py/", timeout=60).read().decode()
    links = re.findall(r'href="([^"]+)"', page)
    name = f"mpi4py-{version}.tar.gz"
    link = next((u for u in links if u.split("#")[0].endswith("/" + name) or u.split("#")[0] == name), None)
    if link is None:
        raise SystemExit(f"the index {index} lists no {name}")
    url, _, fragment = link.partition("#")
    if not url.startswith("http"):
        url = urllib.request.urljoin(f"{index.rstrip('/')}/mpi4py/", url)
    data = urllib.request.urlopen(url, timeout=120).read()
    want = dict(part.split("=", 1) for part in fragment.split("&") if "=" in part).get("sha256")
    if want and hashlib.sha256(data).hexdigest() != want:
        raise SystemExit(f"{name}: sha256 mismatch")
    archive = into / name
    archive.write_bytes(data)
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(f"mpi4py-{version}/test/") and m.isfile()]
        tar.extractall(into, members=members)  # noqa: S202 (names checked above: the test folder only)
    return into / f"mpi4py-{version}" / "test"


class _Swap(ast.NodeTransformer):
    """``X.Alltoallv(a, b)`` -> ``mpi4py_swap.Alltoallv(X, a, b)`` (and the other two)."""

    calls = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr in SWAPPED:
            self.calls += 1
            swap = ast.Attribute(value=ast.Name(id="mpi4py_swap", ctx=ast.Load()), attr=node.func.attr,
                                 ctx=ast.Load())
            return ast.copy_location(ast.Call(func=swap, args=[node.func.value, *node.args], keywords=node.keywords),
                                     node)
        return node


def rewrite(path: Path) -> int:
    """Swap the calls of one test module in place; how many were swapped."""
    tree = ast.parse(path.read_text())
    swap = _Swap()
    tree = swap.visit(tree)
    tree.body.insert(0, ast.Import(names=[ast.alias(name="mpi4py_swap")]))
    path.write_text(ast.unparse(ast.fix_missing_locations(tree)))
    return swap.calls


def run(tests: Path, ranks: int, method: str, timeout: float) -> dict:
    out = tests / f"swap-{ranks}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    env = dict(os.environ, OPTIQ_SWAP_OUT=str(out), OPTIQ_SWAP_METHOD=method, PYTHONDONTWRITEBYTECODE="1")
    mpiexec = Path(sys.executable).parent / "mpiexec"
    row = {"ranks": ranks, "run": 0, "failures": 0, "errors": 0, "skipped": 0, "seconds": 0.0, "failed": []}
    for module, pattern in SUITES.items():
        if not (tests / f"{module}.py").exists():
            continue
        start = time.perf_counter()
        try:
            proc = subprocess.run([str(mpiexec if mpiexec.exists() else "mpiexec"), "-n", str(ranks), sys.executable,
                                   "-c", RUNNER, "-k", pattern, module], cwd=tests, env=env, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:  # a hang, or a machine too slow for --timeout: either is a failure
            row["seconds"] += time.perf_counter() - start
            row["failed"].append(f"{module} (no end within {timeout:g} s)")
            row["failures"] += 1
            sys.stderr.write(f"--- {module} at {ranks} ranks: no end within --timeout {timeout:g} s\n")
            continue
        row["seconds"] += time.perf_counter() - start
        text = proc.stderr
        for count, kind in ((r"Ran (\d+) test", "run"), (r"failures=(\d+)", "failures"), (r"errors=(\d+)", "errors"),
                            (r"skipped=(\d+)", "skipped")):
            found = [int(n) for n in re.findall(count, text)]
            row[kind] += max(found) if found and kind != "run" else sum(found) // max(ranks, 1) if found else 0
        if proc.returncode != 0:
            row["failed"].append(module)
            row["failures"] += 0 if re.search(r"failures=|errors=", text) else 1
            sys.stderr.write(f"--- {module} at {ranks} ranks:\n{text[-3000:]}\n")
    tally: dict[str, int] = {}
    mismatches: list[str] = []
    for report in out.glob("rank*.json"):
        data = json.loads(report.read_text())
        for kind, n in data["tally"].items():
            tally[kind] = tally.get(kind, 0) + n
        mismatches += data["mismatches"]
    row["calls"] = tally
    row["mismatches"] = mismatches
    return row


def main() -> int:
    import mpi4py

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", default="1,2,3,4,5,8", help="mpiexec -n for each (default 1,2,3,4,5,8)")
    parser.add_argument("--method", default="heu2", help="the planner optiq's calls use (default heu2)")
    parser.add_argument("--index", default=os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple"),
                        help="the package index to fetch mpi4py's source distribution from")
    parser.add_argument("--keep", help="unpack and run in this folder (kept) instead of a temporary one")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per module and rank count")
    args = parser.parse_args()
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="mpi4py-suite-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        try:
            tests = fetch_sdist(mpi4py.__version__, args.index, workdir)
        except OSError as exc:  # offline, or the index refused
            print(f"cannot fetch mpi4py {mpi4py.__version__}'s sources from {args.index}: {exc}", file=sys.stderr)
            return 3
        shutil.copy(HERE / "mpi4py_swap.py", tests / "mpi4py_swap.py")
        swapped = {module: rewrite(tests / f"{module}.py") for module in SUITES if (tests / f"{module}.py").exists()}
        print(f"mpi4py {mpi4py.__version__} tests from {args.index}; calls swapped per module: {swapped}")
        print(f"{'ranks':>5} {'tests':>6} {'passed':>6} {'skipped':>7} {'failed':>6} {'planned':>8} {'local':>6} "
              f"{'mpi':>6} {'refused':>7} {'unchecked':>9} {'mismatch':>8} {'seconds':>8}")
        bad = 0
        for ranks in (int(r) for r in args.ranks.split(",")):
            row = run(tests, ranks, args.method, args.timeout)
            c = row["calls"]
            failed = row["failures"] + row["errors"]
            passed = row["run"] - failed - row["skipped"]
            print(f"{ranks:5d} {row['run']:6d} {passed:6d} {row['skipped']:7d} {failed:6d} {c.get('planned', 0):8d} "
                  f"{c.get('local', 0):6d} {c.get('mpi', 0):6d} {c.get('refused', 0):7d} {c.get('unchecked', 0):9d} "
                  f"{c.get('mismatch', 0):8d} {row['seconds']:8.1f}", flush=True)
            for line in row["mismatches"][:10]:
                print(f"      mismatch: {line}")
            bad += failed + c.get("mismatch", 0) + len(row["failed"])
        print("every call agreed with MPI's byte for byte" if not bad else f"{bad} failure(s) or mismatch(es)")
        return 1 if bad else 0
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
