"""The light commands import only what they use (their CPU cost is measured by benchmarks.imports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import contextlib, io, json, sys
from simfl.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[2:])
print(json.dumps({"code": code, "loaded": [m for m in json.loads(sys.argv[1]) if m in sys.modules]}))
"""


def loaded_after(argv: list[str], modules: list[str]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after ``simfl ARGV`` (which must succeed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(modules), *argv], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True, timeout=300)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    return list(result["loaded"])


@pytest.mark.parametrize("path", ["scenarios/quickstart.yaml", "scenarios/paper/mnist_tune_async.yaml"])
def test_validate_loads_neither_pandas_nor_matplotlib(path: str) -> None:
    """Nor the runner, with a tune: section too (the tune's plan and cost need neither)."""
    # torch stays: the estimate builds the model on the meta device (see benchmarks/imports.py)
    assert loaded_after(["validate", path], ["pandas", "matplotlib", "simfl.launch.runner"]) == []


def test_report_loads_no_torch(tmp_path: Path) -> None:
    argv = ["report", "results/quickstart-300s", "--out", str(tmp_path / "report")]
    if not (ROOT / "results" / "quickstart-300s" / "summary.csv").exists():
        pytest.skip("results/quickstart-300s is not in this checkout")
    # the algorithms' configs (no torch) say which entries are synchronous, for the default baseline; no implementation
    assert loaded_after(argv, ["torch", "numba", "simfl.algorithms.base", "simfl.algorithms.fedavg"]) == []
