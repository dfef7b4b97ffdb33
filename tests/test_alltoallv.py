"""optiq.runtime.alltoallv: rank-level plans from host plans in process; the call under mpiexec."""

import re

import numpy as np
import pytest
from conftest import MPI_SCRIPTS, launch

from optiq import from_spec, make_plan
from optiq.errors import PlanError
from optiq.runtime.options import DEFAULT_CACHE_SIZE, DEFAULT_MAX_UNCHECKED, DEFAULT_PLAN_BUDGET, DEFAULT_TIMEOUT
from optiq.runtime.ranklevel import WITHIN_HOST, host_demands_of, rank_network, rank_plan


@pytest.mark.parametrize("spec, host_of", [
    ("torus:4x4", list(range(16))),                  # one rank per node
    ("torus:4x4", [0, 0, 5, 5, 5, 10, 15, 15]),      # several ranks per node, most nodes without a rank
    ("fattree:k=2,n=3", [0, 1, 1, 2, 7, 7, 7, 3]),   # hosts of a fat-tree, switches forward
    ("mesh:6", [5, 4, 3, 2, 1, 0]),                  # ranks in reverse
])
def test_rank_plans_carry_every_rank_pair_on_its_host_pairs_paths(spec, host_of):
    t = from_spec(spec)
    host_of = np.array(host_of)
    N = host_of.size
    rng = np.random.default_rng(N)
    matrix = rng.integers(0, 5000, (N, N))
    matrix[rng.random((N, N)) < 0.25] = 0
    net = rank_network(t, host_of)
    hosts = host_demands_of(matrix, host_of)
    host_plan = make_plan(t, hosts, "opt", forwarders=np.unique(host_of))  # only hosts with a rank forward
    plan = rank_plan(net, matrix, host_plan)  # a valid Plan: paths connect, bytes add up per job
    x = net.topology
    rank = net.rank_of_endpoint
    pairs = {(int(rank[s]), int(rank[d])): int(n) for s, d, n in zip(plan.demands.src, plan.demands.dst,
                                                                     plan.demands.nbytes)}
    want = {(a, b): int(matrix[a, b]) for a in range(N) for b in range(N) if a != b and matrix[a, b]}
    assert pairs == want
    # the network's links carry what the host plan puts on them, give or take a byte per rank pair and path
    network = plan.link_bytes[:t.num_links]
    assert np.abs(network - host_plan.link_bytes).max() <= N * N
    assert (x.capacity[t.num_links:] == WITHIN_HOST).all()
    assert plan.predicted_time_s == pytest.approx(host_plan.predicted_time_s, rel=1e-3)
    # pairs on one host: one hop; other ranks reach the network through their host's leader
    for j in range(plan.demands.num_jobs):
        a, b = int(rank[plan.demands.src[j]]), int(rank[plan.demands.dst[j]])
        hops = plan.paths.hops[plan.paths.job_offsets[j]:plan.paths.job_offsets[j + 1]]
        if host_of[a] == host_of[b]:
            assert hops.tolist() == [1]
        else:
            leader = {h: int(np.flatnonzero(host_of == h)[0]) for h in host_of}
            extra = (leader[host_of[a]] != a) + (leader[host_of[b]] != b)
            assert (hops >= t.pair_hops([host_of[a]], [host_of[b]])[0] + extra).all()


def test_a_host_plan_that_stops_where_no_rank_runs_is_refused():
    t = from_spec("torus:4x4")
    host_of = np.array([0, 0, 5, 10])
    matrix = np.full((4, 4), 10**6) * (1 - np.eye(4, dtype=np.int64))
    anywhere = make_plan(t, host_demands_of(matrix, host_of), "opt")  # may stop at any node of the torus
    assert set(anywhere.topology.link_dst[anywhere.paths.links[anywhere.paths.stops]].tolist()) - {0, 5, 10}
    with pytest.raises(PlanError, match="where no rank runs"):
        rank_plan(rank_network(t, host_of), matrix, anywhere)


def test_host_demands_leave_out_traffic_within_hosts():
    m = np.array([[9, 4, 0], [3, 9, 2], [0, 0, 9]])
    assert host_demands_of(m, np.array([1, 1, 1])) is None
    assert host_demands_of(m, np.array([0, 1, 1])).to_rows() == [(0, 1, 4), (1, 0, 3)]


GOOD_CALL = dict(method="auto", link_bw=None, chunk_model=None, planner_options={}, cache_size=DEFAULT_CACHE_SIZE,
                 max_unchecked=DEFAULT_MAX_UNCHECKED, plan_budget=DEFAULT_PLAN_BUDGET, timeout=DEFAULT_TIMEOUT)


@pytest.mark.parametrize("option, value, named", [
    ("method", "optt", "unknown method 'optt'"), ("method", None, "unknown method None"),
    ("link_bw", 0, "link_bw"), ("link_bw", -5.0, "link_bw"), ("link_bw", float("nan"), "link_bw"),
    ("link_bw", float("inf"), "link_bw"), ("link_bw", True, "link_bw"), ("link_bw", "fast", "link_bw 'fast' is not a rate"),
    ("link_bw", "10", "link_bw '10' needs a unit"), ("link_bw", "0Mb/s", "link_bw '0Mb/s' must be positive"),
    ("chunk_model", "x", "chunk_model"), ("cache_size", 0, "cache_size"), ("max_unchecked", -1, "max_unchecked"),
    ("plan_budget", -0.5, "plan_budget"), ("plan_budget", "5%", "plan_budget"), ("timeout", 0, "timeout"),
    ("timeout", float("nan"), "timeout"), ("planner_options", {"kk": 4}, "'kk'"),
    ("planner_options", {"k": 0}, "k must be"), ("planner_options", {"comm": None}, "comm="),
])
def test_a_calls_options_are_refused_by_name_whether_or_not_it_would_plan(option, value, named):
    """What makes a planning call fail is refused by every call, even one MPI moves (method="mpi")."""
    from optiq.errors import OptiqError
    from optiq.runtime.options import check_call_options

    for method in ("auto", "mpi", "opt"):
        options = dict(GOOD_CALL, method=method) | {option: value}
        with pytest.raises(OptiqError, match=re.escape(named)):
            check_call_options(**options)


def test_every_valid_call_option_is_taken():
    from optiq.runtime.options import CALL_METHODS, check_call_options, check_keywords
    from optiq.sim import ChunkModel

    for method in CALL_METHODS:
        check_call_options(**dict(GOOD_CALL, method=method))
    for option, value in [("link_bw", 1.25e9), ("link_bw", np.float64(5e8)), ("link_bw", 10**9), ("link_bw", "10Gb/s"),
                          ("link_bw", "25MB/s"),
                          ("chunk_model", ChunkModel()), ("timeout", float("inf")), ("plan_budget", float("inf")),
                          ("plan_budget", 0), ("max_unchecked", 0), ("cache_size", np.int64(3)),
                          ("planner_options", {"k": 4, "seed": 2, "fewest_stops": False, "chunk_size": 8192})]:
        check_call_options(**dict(GOOD_CALL, **{option: value}))
    check_keywords("heu2", {"network": "torus:4x4", "hosts": [0, 1], "k": 8, "timeout": 5})


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [4, 8])
def test_alltoallv_moves_what_mpi_alltoallv_moves_caches_and_fails_together(ranks):
    proc, _ = launch(ranks, MPI_SCRIPTS / "alltoallv_check.py")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.mpi
@pytest.mark.slow
def test_the_example_runs_on_16_ranks_and_delivers_what_alltoallv_delivers():
    from pathlib import Path

    example = Path(__file__).parent.parent / "examples" / "alltoallv.py"
    proc, _ = launch(16, example, "--size", "1MiB", "--link-bw", "400MB/s", timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["default", "opt"]
    assert all(line.endswith("the same bytes as MPI_Alltoallv: True") for line in lines)


# -- mpi4py's message forms, in process on COMM_SELF: optiq against MPI on the same arguments --

def _self_pair(make, name="Alltoallv"):
    """Run comm.Alltoallv and optiq.alltoallv (``name="Alltoallw"``: their w forms) on COMM_SELF
    on fresh copies of ``make()``'s arguments: (MPI's exception or received bytes, optiq's
    exception or received bytes)."""
    from mpi4py import MPI

    import optiq

    ours = getattr(optiq, name.lower())
    outcomes = []
    for call in (lambda s, r: getattr(MPI.COMM_SELF, name)(s, r), lambda s, r: ours(MPI.COMM_SELF, s, r)):
        send, recv, buffer = make()
        try:
            call(send, recv)
        except Exception as exc:
            outcomes.append(exc)
            continue
        outcomes.append(None if buffer is None else bytes(MPI.buffer.frombuffer(buffer)))
    return outcomes


def _forms():
    import array

    from mpi4py import MPI

    vector = MPI.INT.Create_vector(2, 1, 2).Commit()
    i = lambda n, v=0: np.arange(n, dtype="i") + v  # noqa: E731
    return {
        "buffer": lambda: (i(4), (r := np.zeros(4, "i")), r),
        "[buf, count]": lambda: ([i(6), 3], [(r := np.zeros(6, "i")), 3], r),
        "[buf, (count, displ)]": lambda: ([i(6), (2, [1])], [(r := np.full(6, -1, "i")), (2, [3])], r),
        "[buf, typecode]": lambda: ([i(4), "i"], [(r := np.zeros(4, "i")), MPI.INT], r),
        "[buf, counts, displs, T]": lambda: ([i(6), [2], [1], MPI.INT], [(r := np.zeros(6, "i")), [2], [4], "i"], r),
        "bytes to bytearray": lambda: ([b"abc", "c"], [(r := bytearray(3)), MPI.CHAR], r),
        "array.array": lambda: (array.array("d", [1.5, 2.5]), (r := array.array("d", [0, 0])), r),
        "Fortran order": lambda: (np.asfortranarray(i(6).reshape(2, 3)), (r := np.asfortranarray(np.zeros((2, 3), "i"))), r),
        "MPI memory": lambda: (bytearray(b"wxyz"), (r := MPI.Alloc_mem(4)), r),
        "vector type": lambda: ([i(8), ([2], [0]), vector], [(r := np.zeros(8, "i")), ([4], [0]), MPI.INT], r),
        "IN_PLACE": lambda: (MPI.IN_PLACE, (r := i(5, 7)), r),
        "None, zero": lambda: ([None, 0, MPI.INT], [None, 0, MPI.INT], None),
        "BOTTOM, zero": lambda: ([MPI.BOTTOM, (0, None), "B"], [MPI.BOTTOM, "B"], None),
        # mistakes: the same exception type as mpi4py's
        "five items": lambda: ([i(2), 0, [0], "i", None], [np.zeros(2, "i"), "i"], None),
        "unknown typecode": lambda: ([i(2), "\0"], [np.zeros(2, "i"), "i"], None),
        "null datatype, count inferred": lambda: ([MPI.Alloc_mem(5), None, [0], MPI.DATATYPE_NULL],
                                                 [None, 0, [0], "B"], None),
        "length not a multiple": lambda: ([MPI.Alloc_mem(5), None, [0], "i"], [None, 0, [0], "B"], None),
        "a list as buffer": lambda: ([[1, 2, 3, 4], 0, 0, "i"], [None, 0, [0], "B"], None),
        "not a message": lambda: (object, [None, 0, [0], "B"], None),
        "float counts": lambda: ([bytearray(b"abc"), np.array([3.1])], [bytearray(4), (3, np.array([1]))], None),
        "read-only receive": lambda: ([b"abc", "c"], [b"xyz", "c"], None),
        "object array": lambda: (np.zeros(2, dtype=object), np.zeros(2, "i"), None),
    }


@pytest.mark.parametrize("form", sorted(_forms()))
def test_every_message_form_moves_what_mpi_moves_or_fails_as_mpi4py_fails(form):
    from optiq.errors import OptiqError

    mpi, ours = _self_pair(_forms()[form])
    if isinstance(mpi, Exception):
        assert isinstance(ours, type(mpi)) and isinstance(ours, OptiqError), (mpi, ours)
    else:
        assert not isinstance(ours, Exception), ours
        assert ours == mpi


def _w_forms():
    from mpi4py import MPI

    column = MPI.DOUBLE.Create_subarray([3, 2], [3, 1], [0, 1]).Commit()   # the second column of a 3 x 2 array
    vector = MPI.INT.Create_vector(2, 1, 2).Commit()
    struct = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT, MPI.DOUBLE]).Commit()
    resized = MPI.INT.Create_resized(-4, 12).Commit()  # a negative lower bound
    i = lambda n, v=0: np.arange(n, dtype="i") + v  # noqa: E731
    d = lambda *shape: np.arange(int(np.prod(shape)), dtype="d").reshape(shape) + 0.5  # noqa: E731
    return {
        "[buf, types]": lambda: ([d(3, 2), [column]], [(r := np.zeros(3)), [MPI.DOUBLE.Create_contiguous(3).Commit()]],
                                 r),
        "[buf, (counts, displs), types]": lambda: ([i(8), ([2], [4]), [vector]], [(r := np.zeros(6, "i")), ([4], [8]),
                                                                                  [MPI.INT]], r),
        "[buf, counts, displs, types]": lambda: ([i(6), [3], [0], [MPI.INT]], [(r := np.zeros(6, "i")), [3], [12],
                                                                               [MPI.INT]], r),
        "numpy counts and displs": lambda: ([i(6), np.array([3]), np.array([4]), [MPI.INT]],
                                            [(r := np.zeros(6, "i")), (np.array([3]), np.array([0])), (MPI.INT,)], r),
        "struct type": lambda: ([np.arange(40, dtype="u1"), ([2], [4]), [struct]], [(r := np.zeros(40, "u1")),
                                                                                   ([2], [0]), [struct]], r),
        "negative lower bound": lambda: ([i(6), ([2], [4]), [resized]], [(r := np.zeros(6, "i")), ([2], [0]),
                                                                          [MPI.INT]], r),
        "counts and displs left out": lambda: ([bytearray(b"abc"), None, None, [MPI.CHAR]],
                                               [(r := bytearray(3)), [MPI.CHAR]], r),
        "IN_PLACE": lambda: (MPI.IN_PLACE, [(r := i(4, 7)), ([3], [4]), [MPI.INT]], r),
        "zero counts, no buffer": lambda: ([None, ([0], [0]), [MPI.INT]], [None, ([0], [0]), [MPI.INT]], None),
        # mistakes: the same exception type as mpi4py's
        "one item": lambda: ([i(2)], [np.zeros(2, "i"), [MPI.INT]], None),
        "five items": lambda: ([i(2), [1], [0], [MPI.INT], None], [np.zeros(2, "i"), [MPI.INT]], None),
        "BOTTOM without counts": lambda: ([MPI.BOTTOM, None, [0], [MPI.BYTE]], [bytearray(1), [MPI.BYTE]], None),
        "BOTTOM without displs": lambda: ([MPI.BOTTOM, [0], None, [MPI.BYTE]], [bytearray(1), [MPI.BYTE]], None),
        "a typecode for a type": lambda: ([i(2), ["i"]], [np.zeros(2, "i"), [MPI.INT]], None),
        "too many types": lambda: ([i(2), [MPI.INT, MPI.INT]], [np.zeros(2, "i"), [MPI.INT]], None),
        "float counts": lambda: ([i(2), ([1.5], [0]), [MPI.INT]], [np.zeros(2, "i"), [MPI.INT]], None),
        "an integer for counts": lambda: ([i(2), (1, [0]), [MPI.INT]], [np.zeros(2, "i"), [MPI.INT]], None),
        "read-only receive": lambda: ([b"abc", [3], [0], [MPI.CHAR]], [b"xyz", [3], [0], [MPI.CHAR]], None),
        "not a sequence": lambda: (object(), [np.zeros(2, "i"), [MPI.INT]], None),
    }


@pytest.mark.parametrize("form", sorted(_w_forms()))
def test_every_alltoallw_form_moves_what_mpi_moves_or_fails_as_mpi4py_fails(form):
    from optiq.errors import OptiqError

    mpi, ours = _self_pair(_w_forms()[form], "Alltoallw")
    if isinstance(mpi, Exception):
        assert isinstance(ours, type(mpi)) and isinstance(ours, OptiqError), (mpi, ours)
    else:
        assert not isinstance(ours, Exception), ours
        assert ours == mpi


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2, 3, 4, 5])
def test_alltoallw_moves_what_mpi_alltoallw_moves_in_every_form(ranks):
    proc, _ = launch(ranks, MPI_SCRIPTS / "alltoallw_check.py")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [6, 8])
def test_sub_communicators_exchanging_at_once_are_planned_over_their_parent(ranks):
    proc, _ = launch(ranks, MPI_SCRIPTS / "subcomm_check.py")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [3, 5])
def test_a_call_predicted_to_be_a_plan_runs_it_ahead_and_a_broken_prediction_moves_mpis_bytes(ranks):
    proc, _ = launch(ranks, MPI_SCRIPTS / "predicted_check.py")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [4, 6])
def test_autos_policy_stays_alike_on_every_rank_whatever_each_rank_measures(ranks):
    proc, _ = launch(ranks, MPI_SCRIPTS / "auto_alike_check.py")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.mpi
def test_a_rank_of_the_parent_that_never_joins_fails_the_others_in_one_line():
    proc, _ = launch(4, MPI_SCRIPTS / "parent_not_joined.py")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.mpi
@pytest.mark.slow
def test_mpi4py_own_vector_collective_tests_pass_through_optiq(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parent.parent / "scripts" / "check_mpi4py_suite.py"
    proc = subprocess.run([sys.executable, str(script), "--ranks", "2", "--keep", str(tmp_path)], capture_output=True,
                          text=True, timeout=900)
    if proc.returncode == 3:
        pytest.skip(f"mpi4py's sources cannot be fetched here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "every call agreed with MPI's byte for byte" in proc.stdout


def _general_parts(spec, blocks, readonly):
    """What the full reading and its checks make of a message: its bytes and byte displacements, or None."""
    from optiq.errors import OptiqError
    from optiq.runtime.messages import read_message

    try:
        m = read_message(spec, readonly=readonly, blocks=blocks)
        m.check_bounds("x")
    except OptiqError:
        return None
    return m.byte_counts, m.byte_displs, m.data.size


def test_quick_reading_agrees_with_the_full_reading_or_leaves_the_message_to_it():
    from optiq.runtime.messages import quick_parts, spec_key

    rng = np.random.default_rng(7)
    dtypes = ["f8", "i4", "u1", "c16", ">f8" if np.little_endian else "<f8", "O", "V3"]
    quick_seen = refused = 0
    for _ in range(600):
        blocks = int(rng.integers(1, 6))
        dtype = np.dtype(dtypes[int(rng.integers(len(dtypes)))])
        size = int(rng.integers(0, 12))
        buf = np.zeros((size, 2) if rng.random() < 0.2 else size, dtype)
        if rng.random() < 0.15:
            buf = np.asfortranarray(buf) if buf.ndim == 2 else buf[::2]  # Fortran order, or not contiguous
        readonly = bool(rng.random() < 0.5)
        if rng.random() < 0.15:
            buf.flags.writeable = False
        counts = rng.integers(-1 if rng.random() < 0.1 else 0, 3, blocks).astype(rng.choice(["i8", "i4", "u2"]))
        displs = rng.integers(-1 if rng.random() < 0.1 else 0, max(size - 1, 1) + (rng.random() < 0.2) * size, blocks)
        spec = [buf, (counts, displs)]
        general = _general_parts(spec, blocks, readonly)
        quick = quick_parts(spec, blocks, readonly=readonly)
        if quick is None:
            simple = dtype.kind in "fiuc" and dtype.isnative and buf.flags.c_contiguous and (readonly or
                                                                                          buf.flags.writeable)
            # a simple buffer is left to the full reading only when the full reading refuses it
            assert not simple or general is None, (spec, general)
            refused += general is None
            continue
        quick_seen += 1
        assert general is not None, spec
        for ours, theirs in zip(quick, general):
            assert np.array_equal(ours, theirs), (spec, quick, general)
        # the memo's key tells apart what reads differently
        other = [buf, (counts, displs + 1)]
        assert spec_key(spec) == spec_key([buf, (counts.copy(), displs.copy())]) != spec_key(other)
    assert quick_seen > 100 and refused > 20, (quick_seen, refused)


def test_the_planning_estimate_is_the_guess_until_a_plan_is_measured_then_scaled_to_it():
    from optiq.runtime.policy import PLAN_S_FIXED, PLAN_S_PER_PAIR, Shapes

    def guess(pairs: int) -> float:
        return PLAN_S_FIXED + PLAN_S_PER_PAIR * pairs

    shapes, key = Shapes(), (1, 2)
    assert shapes.estimate(48) == pytest.approx(guess(48)) and shapes.plan_scale is None
    shapes.decide(key, (0, 0), 48, float("inf"), (3, 3))  # a pattern of 48 pairs is planned...
    shapes.book(key, 0.0, 0.3)                    # ...and its planning measured 0.3 s
    # the next pattern of the same pairs is expected to cost the same; others in proportion
    assert shapes.estimate(48) == pytest.approx(0.3)
    assert shapes.estimate(1000) == pytest.approx(0.3 * guess(1000) / guess(48))
    # a slower plan raises the scale at once, a faster one halves it at most
    shapes.book(key, 0.0, 0.6)
    assert shapes.estimate(48) == pytest.approx(0.6)
    shapes.book(key, 0.0, 0.001)
    assert shapes.estimate(48) == pytest.approx(0.3)
    shapes.book(key, 0.0, 0.0)  # no planning in the booked calls: nothing learned
    assert shapes.estimate(48) == pytest.approx(0.3)


def test_auto_plans_counts_that_repeat_and_never_counts_that_drift():
    from optiq.runtime.policy import COUNTS_KEPT, Shapes

    key, call_s, budget = (5, 6), 1.0, 0.05  # planning 12 pairs pays after the first call
    drifting = Shapes()
    for call in range(100):  # new counts every call: planning always pays, no plan is made
        pattern = drifting.decide(key, (0, 0), 12, budget, (call, call))
        assert pattern is not None and (call == 0 or "new on these pairs" in pattern.reason), (call, pattern)
        assert not drifting.is_hot((0, 0))
        # their calls may go unchecked, bounded by the cap alone, once planning pays
        assert drifting.calls_left(key, budget) == (None if call else 0), (call, drifting.calls_left(key, budget))
        drifting.book(key, call_s, 0.0)
    assert drifting.decide(key, (0, 0), 12, budget, (99, 99)) is None  # counts that repeat: planned
    assert drifting.calls_left(key, budget) == 0
    # counts that come back within the last COUNTS_KEPT are planned; older ones are new again
    cycling = Shapes()
    for call in range(3 * COUNTS_KEPT):
        counts = (call % COUNTS_KEPT, 0)
        planned = cycling.decide(key, (0, 0), 12, budget, counts) is None
        assert planned == (call >= COUNTS_KEPT), call
        cycling.book(key, call_s, 0.0)
    gone = Shapes()
    for call in range(COUNTS_KEPT + 1):
        gone.decide(key, (0, 0), 12, budget, (call, 0))
        gone.book(key, call_s, 0.0)
    assert gone.decide(key, (0, 0), 12, budget, (0, 0)) is not None  # pushed out: new again
    # plan_budget=inf plans every pattern, new or not
    assert Shapes().decide(key, (0, 0), 12, float("inf"), (1, 1)) is None


def test_unchecked_windows_grow_to_the_cap_and_never_pass_the_call_that_plans():
    from optiq.runtime.policy import Quiet as _Quiet
    from optiq.runtime.policy import Shapes

    # one shape left to MPI, agreed calls only where a window ends: the windows grow fourfold up to the cap
    for cap in (0, 1, 5, 127):
        quiet, agreed_at, call = _Quiet(), [], 0
        while call < 600:
            agreed_at.append(call)
            quiet.agreed("options", (1, 2), cap)
            call += 1 + quiet.remaining
        gaps = np.diff(agreed_at) - 1
        expect = [min(4 ** s, cap + 1) - 1 for s in range(len(gaps))]
        assert gaps.tolist() == expect, (cap, gaps.tolist()[:10])
    # another shape or other options restart the streak; a shape to be planned stops it
    quiet = _Quiet()
    for _ in range(3):
        quiet.agreed("options", (1, 2), 127)
    assert quiet.remaining == 15
    quiet.agreed("options", (3, 4), 127)
    assert quiet.remaining == 0 and quiet.streak == 0
    quiet.agreed("other options", (3, 4), 127)
    assert quiet.remaining == 0
    quiet.agreed("other options", None, 127)
    assert quiet.remaining == 0 and quiet.shape is None

    # a shape not yet worth planning: a window never runs past the call after which planning pays
    for call_s, budget in ((0.01, 0.05), (0.002, 0.05), (0.04, 0.2)):
        shapes, quiet, key, calls, planned_at = Shapes(), _Quiet(), (5, 6), 0, None
        while planned_at is None and calls < 100_000:
            if shapes.decide(key, (0, 0), 12, budget, (9, 9)) is None:  # an agreed call: hot, planned at the next
                planned_at = calls
                break
            quiet.agreed("options", key, 1 << 20, shapes.calls_left(key, budget))
            shapes.book(key, call_s * (1 + quiet.remaining), 0.0, 1 + quiet.remaining)  # at the next agreed call
            calls += 1 + quiet.remaining
        # the first call whose agreement finds planning paid, checking every call: closed form
        need = shapes.estimate(12) / budget
        every_call = int(np.ceil(need / call_s - 1e-9))
        assert planned_at is not None and every_call <= planned_at <= every_call + 1, (planned_at, every_call)
        assert shapes.calls_left(key, budget) == 0
    # a shape planned before: its new counts go to MPI until planning them pays again (what the
    # plan cost counts), in windows that open one agreed call later while a plan of it is cached
    shapes, key = Shapes(), (5, 6)
    assert shapes.decide(key, (0, 0), 12, float("inf"), (9, 9)) is None  # hot, planned at once
    shapes.book(key, 0.01, 1.0)
    left = shapes.calls_left(key, 0.05)
    need = (1.0 + shapes.estimate(12)) / 0.05
    assert left == int((need - 0.01) / 0.01) > 0 and shapes.decide(key, (0, 0), 12, 0.05, (9, 9)) is not None
    shapes.book(key, 0.01 * (left - 1), 0.0, left - 1)
    assert shapes.calls_left(key, 0.05) == 1
    shapes.book(key, 0.02, 0.0, 2)
    assert shapes.calls_left(key, 0.05) == 0 and shapes.decide(key, (0, 0), 12, 0.05, (9, 9)) is None
    for planned, expect in ((False, [0, 3, 15, 63]), (True, [0, 0, 3, 15])):
        quiet = _Quiet()
        gaps = []
        for _ in range(4):
            quiet.agreed("options", key, 127, None, planned)
            gaps.append(quiet.remaining)
        assert gaps == expect, (planned, gaps)
    # a shape never to be planned has no limit but the cap
    shapes = Shapes()
    shapes.decide((7, 8), (0, 0), 12, 0.05, (9, 9))
    shapes.mpi_faster((7, 8), "measured")
    assert shapes.calls_left((7, 8), 0.05) is None and shapes.calls_left((9, 9), 0.05) == 0


def test_a_shape_on_a_network_where_no_plan_is_faster_is_mpis_from_its_first_call():
    from optiq.runtime.patterns import no_faster_plan
    from optiq.runtime.policy import Shapes

    never = no_faster_plan("cluster:hosts=8,edges=2,cores=1")
    assert never and not no_faster_plan("cluster:hosts=8,edges=2,cores=2") and not no_faster_plan("torus:4x4")
    for budget in (0.05, float("inf")):  # even a budget that plans every pattern at once plans none
        shapes, key = Shapes(), (1, 2)
        for call in range(5):
            pattern = shapes.decide(key, (0, 0), 12, budget, (3, 3), never)
            assert pattern is not None and pattern.method == "mpi" and never in pattern.reason, (budget, call)
            assert not shapes.is_hot((0, 0)) and shapes.calls_left(key, budget) is None  # windows: the cap alone
            shapes.book(key, 1.0, 0.0)
        assert shapes.plans_made == 0


def test_a_cycle_of_shapes_settled_on_mpi_opens_windows_as_one_shape_does():
    """The rows, the columns, the columns and the rows of a grid in turn (a transform's transposes
    forward, then backward): once both shapes are settled, the windows grow fourfold to the cap."""
    from optiq.runtime.policy import CYCLE_SHAPES
    from optiq.runtime.policy import Quiet as _Quiet

    cycle = [(1, 1), (2, 2), (2, 2), (1, 1)]
    quiet, agreed_at, call = _Quiet(), [], 0
    while call < 1000:
        agreed_at.append(call)
        quiet.agreed("options", cycle[call % 4], 127)
        call += 1 + quiet.remaining
    gaps = (np.diff(agreed_at) - 1).tolist()
    assert gaps[:6] == [0, 0, 3, 15, 63, 127] and set(gaps[5:]) == {127}, gaps[:8]
    assert set(quiet.window()) == {(1, 1), (2, 2)}
    # a settled shape to be planned bounds every window by its calls left, less its share of those gone
    quiet = _Quiet()
    for shape, left in (((1, 1), 40), ((2, 2), None), ((2, 2), None), ((1, 1), 40)):
        quiet.agreed("options", shape, 127, left)
    assert quiet.remaining == 15  # the cap of this streak, below 40
    quiet.remaining = 0           # the window's 15 calls went unchecked, half of them counted as (1, 1)'s
    quiet.agreed("options", (2, 2), 127, None)
    assert quiet.settled[(1, 1)] == int(40 - 15 / 2) == 32 and quiet.remaining == 31
    # more shapes than a cycle holds, or other options, start a new cycle
    for k in range(CYCLE_SHAPES + 1):
        quiet.agreed("options", (10 + k, 0), 127)
    assert len(quiet.settled) == 2 + CYCLE_SHAPES + 1 - CYCLE_SHAPES and quiet.remaining == 0  # a new cycle at the ninth
    quiet.agreed("other", (10, 0), 127)
    assert quiet.settled == {(10, 0): None} and quiet.streak == 0


def test_a_message_read_again_on_other_buffers_reads_those_buffers():
    """Specifications of one key (counts, displacements, datatypes, buffer sizes) are laid out
    from the first one read: every part is then that of the new buffer, packed or in place."""
    from mpi4py import MPI

    from optiq.runtime.forms import GENERAL, VECTOR

    column = MPI.DOUBLE.Create_subarray([3, 2], [3, 1], [0, 1]).Commit()
    nothing = MPI.DOUBLE.Create_contiguous(0).Commit()
    try:
        for kind, spec in ((GENERAL, lambda a: [a, ([1, 1], [0, 0]), [column, nothing]]),
                           (VECTOR, lambda a: [a, ([3, 3], [0, 3])])):
            first, second = np.arange(6.0).reshape(3, 2), np.arange(6.0).reshape(3, 2) + 100
            a = kind.read(spec(first), readonly=True, blocks=2)
            got = a.read(0).view("d").tolist()  # (what reading found out of its buffer stays its own)
            b = kind.read(spec(second), readonly=True, blocks=2)
            if kind is GENERAL:
                assert got == [1.0, 3.0, 5.0] and b.read(0).view("d").tolist() == [101.0, 103.0, 105.0]
            else:
                assert got == [0.0, 1.0, 2.0] and b.read(1).view("d").tolist() == [103.0, 104.0, 105.0]
            target = np.zeros((3, 2))
            kind.read(spec(target), readonly=False, blocks=2).write(0, np.array([7.0, 8.0, 9.0]).view(np.uint8))
            assert (target[:, 1] if kind is GENERAL else target.reshape(-1)[:3]).tolist() == [7.0, 8.0, 9.0]
    finally:
        column.Free()
        nothing.Free()


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [3, 5])
def test_a_plan_whose_transfer_fails_ends_within_its_bound_and_mpi_moves_the_calls_after(ranks):
    proc, _ = launch(ranks, MPI_SCRIPTS / "plan_failed_check.py")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


class _Ranks:
    def __init__(self, size):
        self.size = size

    def Get_size(self):  # noqa: N802  (MPI's name)
        return self.size


def _reviewed(calls, *, watched=True, failed_at=None, ranks=4):
    """A cached plan reviewed after calls of these times, every rank's alike (``failed_at``: that call failed)."""
    from collections import OrderedDict
    from types import SimpleNamespace

    from optiq.runtime.patterns import Pattern
    from optiq.runtime.watch import judge, review

    plan = Pattern("heu2", "planned", predicted_s=0.1, default_s=0.2, own=(1, 2))
    plan.watched = watched
    ctx = SimpleNamespace(entries=OrderedDict([((5, 6), plan)]), comm=_Ranks(ranks))
    for k, seconds in enumerate(calls):
        failed = k == failed_at
        pattern = ctx.entries[(5, 6)]
        slow = not failed and judge(pattern, seconds)
        review(ctx, pattern, seconds, int(failed), int(slow), "comm.Alltoallv")
    return plan, ctx.entries[(5, 6)]


def test_a_plan_is_measured_again_only_after_a_call_much_slower_than_its_usual():
    from optiq.runtime.watch import DRIFT_FACTOR, DRIFT_SLACK_S, RECENT_CALLS, RECENT_MIN

    first = [0.3, 0.2, 0.25]  # the usual call: their median, 0.25
    assert len(first) == RECENT_MIN
    plan, entry = _reviewed(first + [DRIFT_FACTOR * 0.25 + DRIFT_SLACK_S * 0.9])
    assert entry is plan and not plan.trial and plan.fastest_s == 0.2 and not plan.drifted
    slow = DRIFT_FACTOR * 0.25 + DRIFT_SLACK_S * 1.1
    plan, entry = _reviewed(first + [slow])
    assert entry is plan and plan.trial and plan.fastest_s is None and not plan.recent_s
    assert "1 of the 4 ranks" in plan.drifted and f"{slow:.4g} s" in plan.drifted and plan.drifted in plan.reason
    plan, entry = _reviewed(first + [slow], watched=False)  # a method the caller named: kept as it is
    assert entry is plan and not plan.trial and plan.fastest_s == 0.2
    # before its usual is known, no call is judged: the second of a plan varies most
    plan, entry = _reviewed([0.2, 1.0, 0.2])
    assert not plan.trial and not plan.drifted
    # calls that vary: past 1.5x the fastest, but not past 1.5x the median of the last ones
    fastest, usual = 0.2, 0.4
    noisy = [fastest] + [usual] * (RECENT_CALLS - 1) + [DRIFT_FACTOR * usual + DRIFT_SLACK_S * 0.9]
    plan, entry = _reviewed(noisy)
    assert entry is plan and not plan.trial and plan.fastest_s == fastest and not plan.drifted
    assert plan.recent_s == noisy[-RECENT_CALLS:]  # the last calls only
    plan, entry = _reviewed(noisy[:-1] + [DRIFT_FACTOR * usual + DRIFT_SLACK_S * 1.1])
    assert entry is plan and plan.trial


def test_a_plan_that_failed_on_a_rank_is_replaced_by_mpi_with_its_prediction_kept():
    plan, entry = _reviewed([0.3, 0.2, 0.2], failed_at=2)
    assert entry.method == "mpi" and entry.executor is None and entry.own == plan.own
    assert (entry.predicted_s, entry.default_s) == (plan.predicted_s, plan.default_s)
    assert "heu2 plan's last call failed on 1 of the 4 ranks" in entry.reason and "comm.Alltoallv" in entry.reason


def test_a_plans_transfer_is_bounded_by_a_multiple_of_its_fastest_call_once_it_has_one():
    from optiq.runtime.patterns import Pattern
    from optiq.runtime.watch import FAULT_GRACE_S, FAULT_MULTIPLE, bound

    plan = Pattern("heu2", "")
    assert bound(plan, 60.0) == 60.0  # the first call: the caller's timeout
    plan.fastest_s = 0.4
    assert bound(plan, 60.0) == pytest.approx(FAULT_MULTIPLE * 0.4 + FAULT_GRACE_S)
    assert bound(plan, 1.0) == 1.0  # never beyond the caller's timeout
