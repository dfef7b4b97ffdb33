"""Every notebook runs top to bottom at its quick size (they are committed without outputs)."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit notebooks without outputs"
    monkeypatch.setenv("OPTIQ_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    shown = [o for o in outputs if o.get("output_type") in ("stream", "execute_result", "display_data")]
    assert len(shown) >= 2, "a notebook shows its results"  # a table and a figure or a line of numbers
    assert os.path.exists(tmp_path / "tour.plan.json") or path.stem != "tour"
