"""Malformed inputs, by the hundred: every one a clear error, never a traceback, a hang or a lie.

The corpus: the bad command lines users have tried, and plan and demand files made from
valid ones by seeded mutation (values swapped for hostile ones, keys dropped, text cut or
corrupted). Each case runs ``main([...])`` in process under a deadline and must end with
exit code 0 (a harmless mutation), 1 (bad input) or 2 (bad usage); on failure exactly one
``optiq: error:`` line and no traceback; on success, standard JSON where JSON is asked for.
The MPI cases run the executor under ``mpiexec`` and check that every rank ends, promptly,
with one message.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import mpiexec

from optiq.cli import main

DEADLINE_S = 60
HOSTILE = [None, True, -1, 0, 0.5, 1e30, 10**30, 2**63, -(2**63), "x", "", "NaN", [], {}, [[]], float("nan"),
           float("inf"), "8MiB", 1.5, -0.0, "\ufeff", 3]


class Hang(Exception):
    pass


@contextmanager
def deadline(seconds: float):
    def expire(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def outcome(capsys, argv: list[str]) -> tuple[int, str, str]:
    """Run the command line in process; check the promises every outcome must keep."""
    with deadline(DEADLINE_S):
        code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    assert code in (0, 1, 2), (argv, code, err)
    if code:
        assert err.count("optiq: error:") == 1, (argv, err)
    return code, out, err


def _standard_json(text: str):
    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


# -- the corpus ----------------------------------------------------------------------------

def _plan_lines(tmp: Path) -> list[list[str]]:
    """Mistakes on the command line, one per case."""
    ok = ["plan", "-t", "torus:4x4", "--pattern", "disjoint", "--sources", "2", "--ratio", "4", "-q"]
    out = ["-o", str(tmp / "p.json")]
    directory = tmp / "adir"
    directory.mkdir(exist_ok=True)
    return [
        [*ok, "-m", "opt", "--time-limit", "0", *out], [*ok, "-m", "opt", "--time-limit", "-5", *out],
        [*ok, "-m", "opt", "--time-limit", "nan", *out], [*ok, "-m", "opt", "--time-limit", "inf", *out],
        [*ok, "--gap", "1", *out], [*ok, "--gap", "-0.1", *out], [*ok, "--gap", "nan", *out],
        [*ok, "--seed", "-1", "--pairing", "random", *out], [*ok, "--seed", "1.5", *out],
        [*ok, "--size", "0", *out], [*ok, "--size", "-1", *out], [*ok, "--size", "1e30", *out],
        [*ok, "--size", "9223372036854775808", *out], [*ok, "--size", "1.5", *out], [*ok, "--size", "abc", *out],
        [*ok, "--size", "8XB", *out], [*ok, "--ratio", "0", *out], [*ok, "--k", "0", *out],
        [*ok, "--hop-slack", "-1", *out], [*ok, "--unit", "0", *out], [*ok, "--chunk-size", "-64KiB", *out],
        [*ok, "-m", "nosuch", *out], [*ok, "--solver", "nosuch", *out], [*ok, "--candidates", "best", *out],
        [*ok, "-o", str(tmp / "no" / "dir" / "p.json")], [*ok, "-o", str(directory)], [*ok],
        [*ok, "--random-sizes", "8MiB", *out], [*ok, "--random-sizes", "8MiB:1KiB", *out],
        [*ok, "--qos", str(tmp / "missing.json"), *out], [*ok, "--qos", str(directory), *out],
        ["plan", "-t", "torus:4x4", "--pattern", "subset", "-q", *out],
        ["plan", "-t", "torus:4x4", "--pattern", "distance", "-q", *out],
        ["plan", "-t", "torus:4x4", "--pattern", "destsize", "-q", *out],
        ["plan", "-t", "torus:4x4", "--pattern", "disjoint", "--demands", "x.csv", "-q", *out],
        ["plan", "-t", "torus:4x4", "--demands", str(tmp / "missing.csv"), "-q", *out],
        ["plan", "-t", "torus:4x4", "--demands", str(directory), "-q", *out],
        *[["plan", "-t", spec, "--pattern", "disjoint", "-q", *out] for spec in
          ("bgq:999", "torus:0x4", "torus:4x", "torus:x", "torus:1", "mesh:", "fattree:k=1", "fattree:k=4,n=0",
           "cluster:hosts=0", "graphml:" + str(directory), "graphml:" + str(tmp / "missing.graphml"), "nosuch:1",
           "torus:4x4,bw=-5MB/s", "torus:4x4,bw=0", "torus:4x4,bw=fast", "torus", "")],
        ["eval", str(tmp / "missing.json")], ["eval", str(directory)], ["eval"],
        ["simulate", str(tmp / "missing.json")], ["simulate", str(directory), "--model", "chunk"],
        ["compare", "-t", "torus:4x4", "--pattern", "disjoint", "--methods", "opt,nosuch", "-q"],
        ["compare", "-t", "torus:4x4", "--pattern", "disjoint", "--methods", ",", "-q"],
        ["fit-chunk", str(tmp / "missing.json"), "r.json", "-o", str(tmp / "m.json")],
        ["experiment", "nosuch", "--out", str(tmp / "exp")],
        ["run", str(tmp / "missing.json"), "--link-bw", "-5MB/s"], ["run", "x.json", "--timeout", "0"],
        ["collectives", "predict", "--params", str(tmp / "missing.json"), "--ranks", "4", "--size", "1MiB"],
        ["collectives", "predict", "--params", str(directory), "--ranks", "1", "--size", "1MiB"],
        ["nosuch"], [], ["plan", "--nosuch"],
    ]


def _valid_plan(tmp: Path, spec: str = "torus:4x4", sources: int = 2, ratio: int = 4) -> dict:
    path = tmp / f"valid-{spec}.json"
    if not path.exists():  # what the command says of it is not part of any mutant's output
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["plan", "-t", spec, "--pattern", "disjoint", "--sources", str(sources), "--ratio",
                         str(ratio), "-m", "opt", "-q", "-o", str(path)]) == 0
    return json.loads(path.read_text())


def _places(obj, where=()):
    """Every (container path) of a JSON value, for mutation."""
    yield where
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _places(v, (*where, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):  # the first few entries stand for the rest
            yield from _places(v, (*where, i))


def _mutated(data: dict, rng: random.Random) -> str:
    data = json.loads(json.dumps(data))
    places = [p for p in _places(data) if p]
    for _ in range(rng.choice((1, 1, 2, 3))):
        where = rng.choice(places)
        parent = data
        try:
            for key in where[:-1]:
                parent = parent[key]
            action = rng.random()
            if action < 0.15 and isinstance(parent, dict):
                parent.pop(where[-1], None)
            elif action < 0.25 and isinstance(parent, list):
                parent.append(parent[where[-1]])
            else:
                parent[where[-1]] = rng.choice(HOSTILE)
        except (KeyError, IndexError, TypeError):
            continue
    text = json.dumps(data)
    if rng.random() < 0.1:
        text = text[: rng.randrange(len(text))]
    elif rng.random() < 0.1:
        at = rng.randrange(len(text))
        text = text[:at] + chr(rng.randrange(32, 127)) + text[at + 1:]
    return text


def _mutated_csv(rng: random.Random) -> bytes:
    rows = [["src", "dst", "bytes"], ["0", "9", "1MiB"], ["3", "12", "2097152"], ["5", "10", "64KB"]]
    for _ in range(rng.choice((1, 2))):
        r = rng.randrange(len(rows))
        c = rng.randrange(3)
        rows[r][c] = rng.choice(["", "-1", "0", "0.7", "1e30", "99999999999999999999", "x", "16", "NaN", "5 5",
                                 "9", "\"", "1,2", "inf", "0x10", "１"])
    if rng.random() < 0.2:
        rows[rng.randrange(len(rows))].pop()
    text = "\n".join(",".join(r) for r in rows)
    data = text.encode()
    choice = rng.random()
    if choice < 0.15:
        data = b"\xef\xbb\xbf" + data
    elif choice < 0.3:
        data = data.replace(b"\n", b"\r\n")
    elif choice < 0.4:
        data = data[: rng.randrange(len(data))]
    elif choice < 0.45:
        data = bytes(rng.randrange(256) for _ in range(40))
    return data


PLAN_MUTANTS = 120
CSV_MUTANTS = 60


# -- the tests -----------------------------------------------------------------------------

def test_every_bad_command_line_is_one_clear_error(tmp_path, capsys):
    lines = _plan_lines(tmp_path)
    accepted = []
    for argv in lines:
        code, _, err = outcome(capsys, argv)
        if code == 0:
            accepted.append(argv)
    assert not accepted
    assert len(lines) >= 70


def test_mutated_plan_files_are_refused_clearly_or_evaluated_honestly(tmp_path, capsys):
    valid = _valid_plan(tmp_path)
    rng = random.Random(2026)
    refused = 0
    for i in range(PLAN_MUTANTS):
        path = tmp_path / f"mutant{i}.json"
        path.write_text(_mutated(valid, rng))
        code, out, err = outcome(capsys, ["eval", path, "--json"])
        if code == 0:
            metrics = _standard_json(out)
            assert metrics["predicted_time_s"] >= metrics["lower_bound_time_s"] * (1 - 1e-9), path.read_text()
            assert metrics["total_bytes"] > 0
        else:
            refused += 1
        code, _, _ = outcome(capsys, ["simulate", path, "--json", "-q"])
    assert refused > PLAN_MUTANTS // 2  # most mutations break the plan; each was said in one line


def test_mutated_demand_files_are_read_or_refused_clearly(tmp_path, capsys):
    rng = random.Random(7)
    for i in range(CSV_MUTANTS):
        path = tmp_path / f"d{i}.csv"
        path.write_bytes(_mutated_csv(rng))
        outcome(capsys, ["plan", "-t", "torus:4x4", "--demands", path, "-m", "default", "-q",
                         "-o", tmp_path / "p.json"])


# -- under mpiexec -------------------------------------------------------------------------

def _mpi_case(tmp: Path, argv: list[str], ranks: int = 4) -> subprocess.CompletedProcess:
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "optiq.runtime", *map(str, argv)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)  # a hang fails the test


@pytest.mark.mpi
def test_every_rank_of_a_failing_replay_ends_promptly_with_one_message(tmp_path, capsys):
    valid = _valid_plan(tmp_path, "torus:2x2", sources=1, ratio=2)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(valid))
    huge = json.loads(json.dumps(valid))
    huge["jobs"][0]["bytes"] = 10**30
    nan_chunk = json.dumps({**valid, "chunk_size": 1}).replace('"chunk_size": 1', '"chunk_size": NaN')
    files = {"huge.json": json.dumps(huge), "nan_chunk.json": nan_chunk, "cut.json": json.dumps(valid)[:200]}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "adir").mkdir()
    cases = [
        [good, "--json", tmp_path / "no" / "dir" / "r.json"], [good, "--json", tmp_path / "adir"],
        [tmp_path / "huge.json"], [tmp_path / "nan_chunk.json"], [tmp_path / "cut.json"], [tmp_path / "adir"],
        [good, "--link-bw", "-5MB/s"], [good, "--nosuch"], [good, "--timeout", "0"], [good, "--window", "0"],
    ]
    for argv in cases:
        proc = _mpi_case(tmp_path, argv, ranks=4)
        assert proc.returncode != 0, argv
        assert proc.stderr.count("optiq: error:") == 1, (argv, proc.stderr)
        assert "Traceback" not in proc.stderr, (argv, proc.stderr)
