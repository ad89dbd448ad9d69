"""The documentation site builds with ``mkdocs build --strict`` (skipped when mkdocs is not installed)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
                    reason="mkdocs or mkdocstrings not installed (dev extra)")
def test_docs_build_strict(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    index = (tmp_path / "site" / "index.html").read_text()
    assert "discrete-event simulator" in index and 'href="reference/"' in index
    assert "latency.model" in (tmp_path / "site" / "reference" / "index.html").read_text()
    assert (tmp_path / "site" / "benchmarks" / "index.html").is_file()
    api = (tmp_path / "site" / "api" / "index.html").read_text()  # rendered from simfl.launch.api's docstrings
    assert "Run every algorithm and seed of" in api and "Accuracy vs virtual time" in api
    components = (tmp_path / "site" / "api" / "components" / "index.html").read_text()
    for name in ("AsyncAlgorithm", "SyncAlgorithm", "on_arrival", "LatencyModel", "DataConfigBase", "SIMFL_DATA"):
        assert name in components, name
    assert ":meth:" not in components and ":class:" not in components  # roles become inline code
