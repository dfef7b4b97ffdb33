"""The executor: schedules in process; byte-exact replay and failure handling under mpiexec."""

import json
import os
import re

import numpy as np
import pytest
from conftest import MPI_SCRIPTS, launch

from optiq import Demands, from_spec, make_plan, plan_metrics
from optiq.cli import main
from optiq.errors import PlanError
from optiq.runtime import compile_schedule, find_mismatches, job_pattern, predicted_time
from optiq.runtime.schedule import rank_hops
from optiq.sim import simulate_chunks


def small_plan(tmp_path, spec="torus:2x2", method="heu2", name="plan.json", **kw):
    topo = from_spec(spec)
    n = topo.num_endpoints
    demands = Demands(np.arange(n), (np.arange(n) + n // 2) % n, 100_000 + 777 * np.arange(n))
    plan = make_plan(topo, demands, method, k=4, **kw)
    path = tmp_path / name
    plan.save(path)
    return plan, path


# -- in process -------------------------------------------------------------------------

@pytest.mark.parametrize("seconds_per_chunk", [0.005, 0.05, 0.3])
def test_a_paced_path_keeps_its_schedule_however_long_a_chunk_lasts_and_catches_up_after_a_pause(seconds_per_chunk):
    """A paced path's message goes when its schedule reaches it, never earlier: at 20 Mbit/s a
    64 KiB chunk of a path lasts longer than the 20 ms burst of an emulated link, and the path
    must still send one every ``seconds_per_chunk``. After a pause (its rank woke late) every
    message due goes at once."""
    from mpi4py import MPI

    from optiq.runtime import RankSchedule, Stream
    from optiq.runtime.transport import PACED_BURST_S, Transfer

    chunk, chunks = 65536, 12
    stream = Stream(path=0, job=0, offset=0, nbytes=chunk * chunks, prev=-1, next=1, link=0)
    schedule = RankSchedule(0, (stream,), {0: chunk * chunks}, {})
    send = {0: np.zeros(chunk * chunks, np.uint8)}
    transfer = Transfer(MPI.COMM_SELF, schedule, chunk, send, {}, window=64, path_rate={0: chunk / seconds_per_chunk})
    starts = []

    def record(message):  # the moment each message would go to MPI, instead of sending it
        starts.append((now, message.first, message.chunks))
        transfer.links[0].inflight += message.chunks

    transfer._start_send = record
    for st in transfer.states:
        st.busy_until = -chunk / st.rate  # as run() starts it: one message ahead
        transfer._enqueue(st)
    transfer.links[0].busy_until = 0.0
    step = min(seconds_per_chunk, PACED_BURST_S) / 20
    asleep = (4.5 * seconds_per_chunk, 8.5 * seconds_per_chunk)  # the rank does not look in between
    for now in np.arange(0.0, seconds_per_chunk * (chunks + 2), step):
        if not asleep[0] < now < asleep[1]:
            transfer._pump(float(now))
    assert sum(m for _, _, m in starts) == chunks
    for moment, first, m in starts:
        due = (first + m - 1) * seconds_per_chunk
        assert moment >= due - 1e-9, (first, moment, due)  # never ahead of the schedule
        woke = asleep[1] if asleep[0] < due < asleep[1] else due  # the first look at which it is due
        assert moment <= woke + 3 * step, (first, moment, due)  # then it goes: catching up after the pause


@pytest.mark.parametrize("routing", ["forwarded", "free"])
def test_schedule_roles_follow_the_stops(tmp_path, routing):
    plan, _ = small_plan(tmp_path, "mesh:4", "default", routing=routing)
    hops = set(zip(*[a.tolist() for a in rank_hops(plan)][:3]))
    for r in range(4):
        sched = compile_schedule(plan, r)
        assert set(sched.send_jobs) == set(np.flatnonzero(plan.demands.src == r).tolist())
        assert set(sched.recv_jobs) == set(np.flatnonzero(plan.demands.dst == r).tolist())
        for s in sched.streams:
            stops = plan.paths.stop_nodes(s.path, plan.topology)
            i = stops.index(r)
            assert s.prev == (stops[i - 1] if i > 0 else -1)
            assert s.next == (stops[i + 1] if i + 1 < len(stops) else -1)
            assert s.direct == (len(stops) == 2)
            if s.next >= 0:
                assert (s.path, r, s.next) in hops
                assert plan.topology.link_src[s.link] == r  # the first link of the leg to the next stop
    copies = plan.paths.copies.sum()
    assert copies == (0 if routing == "forwarded" else (plan.paths.hops - 1).sum())


def test_fat_tree_hops_skip_switches(tmp_path):
    plan, _ = small_plan(tmp_path, "fattree:k=2,n=2", "default")
    path, src, dst, link = rank_hops(plan)
    assert path.size == plan.paths.num_paths  # hosts hang off switches: one rank-level hop per path
    np.testing.assert_array_equal(src, plan.demands.src[plan.paths.job])
    np.testing.assert_array_equal(dst, plan.demands.dst[plan.paths.job])


def test_zero_byte_paths_and_offsets(tmp_path):
    plan, _ = small_plan(tmp_path, "torus:2x2", "opt")
    plan.path_bytes[:] = 0
    jo = plan.paths.job_offsets
    for j in range(plan.demands.num_jobs):  # all bytes on the job's last path, the others empty
        plan.path_bytes[jo[j + 1] - 1] = plan.demands.nbytes[j]
    carried = {s.path for r in range(4) for s in compile_schedule(plan, r).streams}
    assert carried == set((jo[1:] - 1).tolist())
    assert all(s.offset == 0 for r in range(4) for s in compile_schedule(plan, r).streams)


def test_default_window_shrinks_to_the_forwarding_budget(tmp_path, monkeypatch):
    from optiq.runtime import executor
    from optiq.runtime.slots import forwarding_slots

    topo = from_spec("mesh:8")
    src = np.arange(4)
    plan = make_plan(topo, Demands(src, src + 4, np.full(4, 2**22)), "default", routing="free")  # 3 forwards all four
    sched = compile_schedule(plan, 3)
    chunk = 2**16
    wide = executor.default_window(chunk, None)
    assert executor._within_budget(sched, chunk, wide) == wide  # 4 x 4 MiB of slots fit 256 MiB
    monkeypatch.setattr(executor, "FORWARDING_BYTES", 3 * 2**20)
    window = executor._within_budget(sched, chunk, wide)
    assert executor.WINDOW <= window < wide
    slot_bytes = sum(a.nbytes for a in forwarding_slots(sched, chunk, window))
    assert slot_bytes <= 3 * 2**20 < sum(a.nbytes for a in forwarding_slots(sched, chunk, 2 * window))


@pytest.mark.parametrize("chunk", [4096, 65536, 2**20])
@pytest.mark.parametrize("link_bw", [1e6, 25e6, 50e6, 100e6, 200e6, 1e9, 1e10])
def test_paced_default_window_cuts_segments_into_whole_messages(chunk, link_bw):
    from optiq.runtime.executor import MAX_DEFAULT_WINDOW, WINDOW, default_window
    from optiq.runtime.slots import paced_message_chunks, segment_chunks

    window = default_window(chunk, link_bw)
    per_message, seg = paced_message_chunks(chunk, link_bw), segment_chunks(window)
    assert WINDOW <= window <= MAX_DEFAULT_WINDOW
    assert seg % per_message == 0 or seg < per_message  # no short message closes a segment


@pytest.mark.parametrize("nbytes", [0, 1, 2**21 - 1, 2**21, 5 * 2**20 + 3])
def test_huge_page_buffers_are_aligned_and_whole(nbytes):
    from optiq.runtime.memory import HUGE_PAGE, huge_page_buffer

    buf = huge_page_buffer(nbytes)
    assert buf.dtype == np.uint8 and buf.nbytes == nbytes and buf.flags.writeable and buf.flags.c_contiguous
    if nbytes >= HUGE_PAGE:
        assert buf.ctypes.data % HUGE_PAGE == 0
    buf[:] = 7  # every byte is ours to write
    assert int(buf.sum()) == 7 * nbytes
    with pytest.raises(ValueError, match="-1 bytes"):
        huge_page_buffer(-1)


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")
def test_huge_page_buffers_are_private_memory():
    """Anonymous private memory, the kind that gets huge pages: not shared memory (shmem)."""
    from optiq.runtime.memory import huge_page_buffer

    buf = huge_page_buffer(4 * 2**20)
    buf.fill(1)
    lo, hi, anonymous_kib, inside = buf.ctypes.data, buf.ctypes.data + buf.nbytes, 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start < hi and end > lo
            elif inside and head == "Anonymous:":
                anonymous_kib += int(line.split()[1])
    assert anonymous_kib * 1024 >= buf.nbytes


def test_job_buffers_are_disjoint_aligned_views():
    from optiq.runtime.memory import BUFFER_ALIGN, job_buffers

    sizes = {9: 3 * 2**20 + 5, 2: 0, 4: 1, 7: 4096, 1: 2**21}
    bufs = job_buffers(sizes)
    assert list(bufs) == list(sizes) and {j: b.nbytes for j, b in bufs.items()} == sizes
    base = min(b.ctypes.data for b in bufs.values())
    spans = sorted((b.ctypes.data, b.ctypes.data + b.nbytes) for b in bufs.values())
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))
    assert all((b.ctypes.data - base) % BUFFER_ALIGN == 0 for b in bufs.values())
    for j, b in bufs.items():
        b[:] = j
    assert all((b == j).all() for j, b in bufs.items())  # no buffer wrote into another


def test_mismatch_names_job_and_offset():
    got = {2: job_pattern(2, 1000, seed=5)}
    assert find_mismatches(got, seed=5) == []
    got[2][700] ^= 0xFF
    assert find_mismatches(got, seed=5) == ["job 2: 1 of 1000 bytes differ, first at offset 700"]
    assert find_mismatches({3: job_pattern(2, 1000, seed=5)}, seed=5)  # another job's data is caught


@pytest.mark.parametrize("option, value, named", [("repeat", 0, "repeat must be"), ("warmup", -1, "warmup must be"),
                                                  ("repeat", 2.5, "repeat must be"), ("baseline", "mpi", "unknown baseline")])
def test_measure_refuses_its_options_by_name_before_any_run(tmp_path, option, value, named):
    from mpi4py import MPI

    from optiq.errors import ParameterError
    from optiq.runtime import measure

    plan, _ = small_plan(tmp_path)  # of 4 ranks: COMM_SELF would not fit it, so nothing may run before the check
    with pytest.raises(ParameterError, match=named):
        measure(MPI.COMM_SELF, plan, **{option: value})


def test_predicted_time_counts_only_paced_links(tmp_path):
    plan, _ = small_plan(tmp_path, "fattree:k=2,n=2", "default")
    host_links = plan.topology.link_src < plan.topology.num_endpoints
    assert predicted_time(plan, 1e6)[0] == pytest.approx(plan.link_bytes[host_links].max() / 1e6)


def test_a_transfer_starts_at_the_agreed_moment_and_is_timed_from_it():
    import time

    from mpi4py import MPI

    from optiq.runtime import RankSchedule
    from optiq.runtime.transport import Transfer

    idle = RankSchedule(0, (), {}, {})  # nothing to move: its time is its wait for the start
    past = time.perf_counter() - 1.0
    assert Transfer(MPI.COMM_SELF, idle, 1024, {}, {}).run(start_at=past).elapsed_s >= 1.0
    soon = time.perf_counter() + 0.05
    result = Transfer(MPI.COMM_SELF, idle, 1024, {}, {}).run(start_at=soon)
    assert time.perf_counter() >= soon and 0 <= result.elapsed_s <= time.perf_counter() - soon


def test_run_without_enough_ranks_is_a_clear_error(tmp_path, capsys):
    _, path = small_plan(tmp_path)
    assert main(["run", str(path)]) == 1
    assert "mpiexec -n 4" in capsys.readouterr().err


# -- under mpiexec ------------------------------------------------------------------------

@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [3, 4, 8])
def test_random_plans_arrive_byte_exact(ranks):
    proc, _ = launch(ranks, MPI_SCRIPTS / "random_plans.py", "--plans-per-topology", 3)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failure(s)" in proc.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [4, 8])
def test_application_messages_with_the_executors_tags_are_not_disturbed_and_any_dtype_travels(ranks):
    proc, _ = launch(ranks, MPI_SCRIPTS / "app_tags.py")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.mpi
def test_start_together_agrees_on_a_start_allreduce_asleep_never_yields_and_connections_go_in_turn():
    proc, _ = launch(4, MPI_SCRIPTS / "waits.py")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("spec", ["fattree:k=2,n=2", "torus:2x2", "cluster:hosts=4,edges=2,cores=1"])
def test_simulated_and_counted_copies_equal_the_executors_forwarded_chunks(tmp_path, spec):
    plan, path = small_plan(tmp_path, spec, "heu2", chunk_size=4096)
    out = tmp_path / "out.json"
    proc, _ = launch(plan.topology.num_endpoints, "-m", "optiq.runtime", path, "--json", out, "--repeat", 1,
                     "--warmup", 0)
    assert proc.returncode == 0, proc.stderr
    forwarded = json.loads(out.read_text())["chunks_forwarded"]
    assert simulate_chunks(plan).copies == forwarded
    assert plan_metrics(plan).copies_per_path_avg * plan.used().paths.num_paths == pytest.approx(forwarded)


@pytest.mark.mpi
def test_run_contract_json(tmp_path):
    plan, path = small_plan(tmp_path, "torus:2x4", "opt")
    out = tmp_path / "out.json"
    proc, _ = launch(8, "-m", "optiq.runtime", path, "--verify", "--json", out, "--baseline", "alltoallv",
                     "--repeat", 2, "--chunk-size", "10000")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["verified"] is True and report["baseline"]["verified"] is True
    assert report["bytes_total"] == plan.demands.nbytes.sum() == report["baseline"]["bytes_total"]
    assert report["repeats"] == 2 and len(report["times_s"]) == 2
    assert report["elapsed_min_s"] <= report["elapsed_median_s"] == report["elapsed_s"]
    assert report["throughput_Bps"] == pytest.approx(report["bytes_total"] / report["elapsed_s"])
    assert proc.stdout.count("verified") == 1  # only rank 0 prints


@pytest.mark.mpi
def test_paced_paths_replay_byte_exact_and_never_beat_their_rates(tmp_path):
    plan, path = small_plan(tmp_path, "torus:2x2", "opt")
    out = tmp_path / "out.json"
    proc, _ = launch(4, "-m", "optiq.runtime", path, "--verify", "--pace-paths", "--json", out, "--repeat", 1)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["verified"] is True
    assert report["elapsed_s"] >= plan.predicted_time_s * 0.999  # every path at most at its planned rate
    assert "caution: the prediction is for the modelled links" in proc.stdout  # no link runs at their rates


@pytest.mark.mpi
def test_paced_run_is_never_faster_than_its_links(tmp_path):
    plan, path = small_plan(tmp_path, "torus:2x2", "default")
    out = tmp_path / "out.json"
    proc, _ = launch(4, "-m", "optiq.runtime", path, "--link-bw", "50MB/s", "--json", out, "--repeat", 1)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["predicted_time_s"] == pytest.approx(predicted_time(plan, 50e6)[0])
    assert predicted_time(plan, 50e6)[0] == pytest.approx(plan.link_bytes.max() / 50e6)  # one-hop paths
    assert report["elapsed_min_s"] >= report["predicted_time_s"]
    assert "caution" not in proc.stdout  # emulated links: the prediction is for them


def _corrupt(tmp_path, path, what):
    data = json.loads(path.read_text())
    if what == "node":
        data["jobs"][0]["paths"][0]["stops"][-1] = 99
    bad = tmp_path / f"bad-{what}.json"
    bad.write_text(json.dumps(data) if what == "node" else path.read_text()[:-40])
    return bad


@pytest.mark.parametrize("case, fragment", [
    ("too few ranks", "mpiexec -n 8"),
    ("missing", "does not exist"),
    ("corrupt", "not valid JSON"),
    ("node", "stop 99 does not exist"),
])
def test_bad_plans_fail_on_every_rank(tmp_path, case, fragment):
    _, path = small_plan(tmp_path, "torus:2x4" if case == "too few ranks" else "torus:2x2")
    path = {"missing": tmp_path / "nope.json", "corrupt": _corrupt(tmp_path, path, "json"),
            "node": _corrupt(tmp_path, path, "node")}.get(case, path)
    proc, _ = launch(4, "-m", "optiq.runtime", path, "--verify")
    assert proc.returncode == 1
    assert proc.stderr.count(fragment) == 1, proc.stderr  # said once, by rank 0
    assert "Traceback" not in proc.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("mode", ["raise", "vanish", "exit"])
def test_a_failing_rank_stops_every_rank(tmp_path, mode):
    _, path = small_plan(tmp_path)
    # a hang raises subprocess.TimeoutExpired after 60 s (the transfers give up after 3)
    proc, _ = launch(4, MPI_SCRIPTS / "failing_rank.py", mode, path, "--verify", "--timeout", 3, timeout=60)
    assert proc.returncode != 0
    if mode == "raise":
        assert "rank 1: the send buffer of job 1" in proc.stderr
    if mode == "vanish":  # every other rank times out: one of them speaks for all
        assert "timed out after 3 s" in proc.stderr and "from rank 1" in proc.stderr
        assert re.search(r"path \d+ \(H\d+( -> [HS]\d+)+\) from rank 1", proc.stderr), proc.stderr  # its route
    said = proc.stderr.count("optiq: error:")
    if mode == "exit":  # mpiexec reaps the rest; one may time out first and speak for all
        assert said <= 1, proc.stderr
    else:
        assert said == 1, proc.stderr


@pytest.mark.mpi
def test_more_ranks_than_the_plan_uses_run_with_one_warning(tmp_path):
    _, path = small_plan(tmp_path)
    proc, _ = launch(6, "-m", "optiq.runtime", path, "--verify", "--repeat", 1, "--warmup", 0)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("ranks 4..5 have nothing to send") == 1 and "mpiexec -n 4 is enough" in proc.stderr


@pytest.mark.mpi
def test_ctrl_c_under_mpiexec_is_said_once(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from conftest import mpiexec, sigint_as_at_a_terminal

    # planning a large machine to the optimum takes long enough (minutes) to be interrupted while every rank works
    proc = subprocess.Popen([mpiexec(), "-n", "4", sys.executable, "-m", "optiq.cli.main", "plan", "-t", "bgq:8192",
                             "--pattern", "disjoint", "-m", "opt", "--gap", "0", "-o", str(tmp_path / "p.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_at_a_terminal)
    time.sleep(8)  # every rank is planning by then
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert err.count("optiq: interrupted") == 1, err
    assert proc.returncode != 0 and "Traceback" not in err


def test_the_run_report_follows_the_shared_schema(tmp_path):
    from optiq.runtime import RunReport, Timing
    from optiq.sim import read_run_report
    from optiq.sim.runs import REPORT_KEYS, TIMING_KEYS

    timing = Timing("optiq opt", [0.5, 0.25, 0.75], 1000, True)
    report = RunReport(method="opt", topology="torus 2x2", plan_fingerprint="f" * 16, ranks=4, jobs=2, paths=3,
                       chunk_size=4096, window=4, link_bw_Bps=None, predicted_time_s=0.1, predicted_at="x",
                       repeats=3, warmup=1, plan=timing, baseline=Timing("MPI_Alltoallv", [0.1], 1000, None),
                       chunks_forwarded=0, buffer_bytes_max=0, messages=0)
    data = report.to_dict()
    assert tuple(data) == REPORT_KEYS and tuple(data["baseline"])[1:] == TIMING_KEYS
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    back = read_run_report(path)
    assert back == report and back.to_dict() == data and str(back) == str(report)
    assert (back.elapsed_s, back.plan.min_s, back.baseline.name) == (0.5, 0.25, "MPI_Alltoallv")
    # every key is checked, and the mistake named
    for key, value, message in (("elapsed_s", "fast", "'elapsed_s' is 'fast', not a number"),
                                ("elapsed_s", 0.4, "'elapsed_s' is 0.4, but the median of 'times_s' is 0.5"),
                                ("chunk_size", 0, "'chunk_size' is 0, not a whole number of at least 1"),
                                ("link_bw_Bps", -1, "'link_bw_Bps' is -1, not a positive number or null"),
                                ("verified", "yes", "'verified' is 'yes', not true, false or null"),
                                ("times_s", [], "'times_s' is \\[\\], not a list of times"),
                                ("baseline", 3, "'baseline' is 3, not an object or null"),
                                ("method", None, "'method' is None, not a string"),
                                ("ranks", 10**400, "'ranks' is 1000.*, not a number"),
                                ("times_s", [10**400], "'times_s' is \\[1000.*\\], not a list of times")):
        path.write_text(json.dumps({**data, key: value}))
        with pytest.raises(PlanError, match=message):
            read_run_report(path)
    path.write_text(json.dumps({k: v for k, v in data.items() if k != "plan_fingerprint"}))
    with pytest.raises(PlanError, match="has no 'plan_fingerprint'"):
        read_run_report(path)


def test_an_idle_rank_yields_first_then_sleeps_a_growing_pause_never_past_its_moment(monkeypatch):
    """``give_way``, between a transfer's idle turns and in the polite waits: the first ``yields``
    idle turns yield the core (a rank with a core of its own sees the next message at once, where a
    sleep lasts its timer slack beyond), later ones sleep the back-off from its start, at most
    ``longest`` and never past ``until``."""
    import time

    from optiq.mpi import waiting

    did: list = []
    monkeypatch.setattr(waiting.os, "sched_yield", lambda: did.append("yield"))
    monkeypatch.setattr(waiting.time, "sleep", did.append)
    for idle in (1, 3, 4, 5, 40):
        waiting.give_way(idle, yields=3)
    assert did == ["yield", "yield", waiting.idle_pause(1), waiting.idle_pause(2), waiting.MAX_IDLE_SLEEP_S]
    did.clear()
    waiting.give_way(6, yields=0, longest=1e-4)                       # the back-off is past 1e-4 here
    waiting.give_way(1, yields=0, until=time.perf_counter() - 1.0)    # a moment gone: no sleep at all
    waiting.give_way(1, yields=0, until=time.perf_counter() + 60.0)   # a moment far off: the back-off
    assert did == [1e-4, 0.0, waiting.idle_pause(1)]
