"""Every notebook under notebooks/ executes top to bottom with its quick parameters (SIMFL_NOTEBOOK_QUICK=1),
with the kernel's default matplotlib backend."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SIMFL_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the quick run writes to a temporary folder
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's default (inline) backend
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # tiny models: threads only contend on a shared CI machine
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    assert any("cells run" in "".join(o.get("text", "")) for cell in nb.cells for o in cell.get("outputs", []))
    if path.name == "delay_sweep.ipynb":  # it ends with the answer: the sweep figure, then the comparison table
        last = [cell for cell in nb.cells if cell.cell_type == "code"][-1]
        kinds = [kind for o in last.outputs for kind in o.get("data", {})]
        assert kinds.index("image/png") < kinds.index("text/html")
        table = last.outputs[-1]["data"]["text/html"]
        assert "ratio_low" in table and "fastest" in table
