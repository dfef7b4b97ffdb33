import csv

import numpy as np
import pytest

from optiq.cli import main
from optiq.experiments import STUDIES


def test_list_names_every_study(capsys):
    assert main(["experiment", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in STUDIES)


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_quick_study_writes_table_and_a_figure_that_says_what_it_shows(tmp_path, name, monkeypatch):
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to inspect it
    assert main(["experiment", name, "--quick", "--out", str(tmp_path), "-q"]) == 0
    rows = list(csv.DictReader(open(tmp_path / f"{name}.csv")))
    assert rows
    png = (tmp_path / f"{name}.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    (fig,) = figures
    (ax,) = fig.axes
    fig.canvas.draw()
    title, xlabel, ylabel = ax.get_title(), ax.get_xlabel(), ax.get_ylabel()
    assert title and xlabel and ylabel
    for text in (title, xlabel, ylabel):  # words, not the CSV's column names
        assert not any("_" in word for word in text.split()), text
    if "throughput" in ylabel or "time" in ylabel:
        assert "(GB/s)" in ylabel or "/" in ylabel, ylabel  # a unit or a ratio
    ticks = [t for t in ax.get_xticklabels() if t.get_text()]
    boxes = [t.get_window_extent() for t in ticks]
    assert all(not a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:]), [t.get_text() for t in ticks]
    if "seed" in xlabel:
        assert all(t.get_text().isdigit() for t in ticks), [t.get_text() for t in ticks]  # whole seeds only
    if "seed" in xlabel or "seed" in title:  # as many seeds as were run, not as the full study runs
        seeds = {r["seed"] for r in rows}
        assert f"({len(seeds)} seed" in title, title
        if ax.lines:
            assert all(line.get_linestyle() == "None" for line in ax.lines), "seeds are not joined by lines"


def test_quick_constant_ratio_orders_the_methods(tmp_path):
    main(["experiment", "constant-ratio", "--quick", "--out", str(tmp_path), "-q"])
    rows = {r["method"]: r for r in csv.DictReader(open(tmp_path / "constant-ratio.csv"))}
    predicted = {m: float(r["predicted_s"]) for m, r in rows.items()}
    assert predicted["opt"] <= predicted["heu2"] <= predicted["default"]
    assert all(float(r["bound_s"]) <= float(r["predicted_s"]) * (1 + 1e-9) for r in rows.values())


def test_unknown_study_is_an_error(tmp_path, capsys):
    assert main(["experiment", "nope", "--out", str(tmp_path)]) == 1
    assert "unknown experiment 'nope'" in capsys.readouterr().err


def test_fattree_study_traffic_and_routing(tmp_path):
    from optiq.workloads import host_demands, milc_traffic, nas_cg_traffic

    for traffic in (nas_cg_traffic(), milc_traffic()):
        assert traffic.shape == (128, 128) and np.all(np.diag(traffic) == 0)
        h = host_demands(traffic, 20, ranks_per_node=8)
        within = sum(traffic[i * 8:(i + 1) * 8, i * 8:(i + 1) * 8].sum() for i in range(16))
        assert h.demands.total_bytes == traffic.sum() - within  # every byte between hosts, none within
        assert h.intra_host_bytes == within
    main(["experiment", "fattree", "--quick", "--out", str(tmp_path), "-q"])
    rows = list(csv.DictReader(open(tmp_path / "fattree.csv")))
    by = {(r["app"], r["selection"], r["placement"], r["routing"]): float(r["max_link_bytes"]) for r in rows}
    for (app, sel, place, routing), load in by.items():
        if routing == "dynamic":
            assert load <= by[(app, sel, place, "dmodk")]


@pytest.mark.parametrize("source", ["model", "pfprof"])
def test_dynamic_routing_halves_cg_linear_block_and_is_never_worse_than_dmodk(tmp_path, source):
    """Seed 001: dynamic routing cut the busiest link of CG (linear selection, block placement)
    by 50% against D-mod-K, with the built-in model and with a PFProf trace of it."""
    from optiq.workloads import nas_cg_traffic
    from optiq.workloads.traffic import write_pfprof

    argv = ["experiment", "fattree", "--out", str(tmp_path), "-q"]
    if source == "pfprof":
        argv += ["--traffic", str(write_pfprof(nas_cg_traffic(), tmp_path / "cg.tgz"))]
    assert main(argv) == 0
    rows = list(csv.DictReader(open(tmp_path / "fattree.csv")))
    by = {(r["app"], r["selection"], r["placement"], r["routing"]): float(r["max_link_bytes"]) for r in rows}
    for (app, sel, place, routing), load in by.items():
        if routing == "dynamic":
            assert load <= by[(app, sel, place, "dmodk")]
    app = "CG" if source == "model" else "cg"
    assert by[(app, "linear", "block", "dynamic")] / by[(app, "linear", "block", "dmodk")] == pytest.approx(0.5)


def test_cg_transposes_with_npb_exch_proc():
    from optiq.workloads import nas_cg_traffic

    t = nas_cg_traffic(volume=1)
    for me in range(128):  # npcols = 16 = 2 nprows: NPB's exch_proc for npcols != nprows
        partner = 2 * ((me // 2 % 8) * 8 + me // 2 // 8) + me % 2
        row = set(me // 16 * 16 + ((me % 16) ^ (1 << k)) for k in range(4))
        assert set(np.flatnonzero(t[me]).tolist()) == row | ({partner} - {me})
    square = nas_cg_traffic(64, rows=8, volume=1)  # 8 x 8: the plain transpose
    assert square[3, 3 * 8 % 64 + 3 // 8] == 1 and square[10, (10 % 8) * 8 + 10 // 8] == 1


def test_fattree_study_reads_a_traffic_matrix_file(tmp_path, capsys):
    from optiq.workloads import milc_traffic

    path = tmp_path / "milc.txt"
    np.savetxt(path, milc_traffic() / 2**20, fmt="%g", delimiter=",", header="MILC-like halo exchange, MiB")
    assert main(["experiment", "fattree", "--traffic", str(path), "--traffic-unit", "1MiB", "--out",
                 str(tmp_path / "file"), "-q"]) == 0
    assert main(["experiment", "fattree", "--out", str(tmp_path / "builtin"), "-q"]) == 0
    from_file = list(csv.DictReader(open(tmp_path / "file" / "fattree.csv")))
    builtin = [r for r in csv.DictReader(open(tmp_path / "builtin" / "fattree.csv")) if r["app"] == "MILC"]
    assert {r["app"] for r in from_file} == {"milc"}
    assert [r["max_link_bytes"] for r in from_file] == [r["max_link_bytes"] for r in builtin]
    capsys.readouterr()


@pytest.mark.parametrize("text, fragment", [
    ("1 2\n3\n", "2 lines of 1/2 numbers"), ("0 1\n-1 0\n", "rank 1 to rank 0 is -1.0"),
    ("0 0\n0 5\n", "no traffic"), ("0 x\n1 0\n", "line 1: '0 x' is not a row of numbers"),
    ("\n".join(" ".join(["1"] * 200) for _ in range(200)), "the ranks need 25 hosts, but the topology has 20")])
def test_bad_traffic_matrix_files_name_the_fault(tmp_path, capsys, text, fragment):
    path = tmp_path / "t.txt"
    path.write_text(text)
    assert main(["experiment", "fattree", "--traffic", str(path), "--out", str(tmp_path), "-q"]) == 1
    err = capsys.readouterr().err
    assert fragment in err and "t.txt" in err and err.count("optiq: error:") == 1


def test_options_are_checked_against_the_study(tmp_path, capsys):
    assert main(["experiment", "hacc", "--quick", "--traffic", "x.txt", "--out", str(tmp_path), "-q"]) == 1
    assert "takes no --traffic" in capsys.readouterr().err


def test_quick_application_studies_favour_multipath(tmp_path):
    for name in ("hacc", "cesm"):
        main(["experiment", name, "--quick", "--out", str(tmp_path), "-q"])
        rows = list(csv.DictReader(open(tmp_path / f"{name}.csv")))
        key = "nodes" if name == "hacc" else "coupling"
        for case in {r[key] for r in rows}:
            t = {r["method"]: float(r["predicted_s"]) for r in rows if r[key] == case}
            bound = next(float(r["bound_s"]) for r in rows if r[key] == case)
            assert bound * (1 - 1e-9) <= t["opt"] <= min(t["heu2"], t["default"]) * (1 + 1e-9)
