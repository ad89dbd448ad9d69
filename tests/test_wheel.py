"""The built wheel works on its own: installed into a fresh venv, ``simfl quickstart`` runs from the shipped files.

Builds with ``python -m build --wheel --no-isolation`` (offline: the running
environment's setuptools) from a copy of the sources, installs the wheel with
``--no-deps`` into a venv that sees this environment's packages (torch and the
rest) only through a path file, so simfl itself can come only from the wheel.
Skipped when ``build`` is not installed (it is in the ``dev`` extra).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("build") is None, reason="build not installed (dev extra)")


def run(cmd: list[str], cwd: Path) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_wheel_installs_and_runs_quickstart(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "simfl", src / "simfl", ignore=shutil.ignore_patterns("__pycache__"))
    run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist")], src)
    (wheel,) = (tmp_path / "dist").glob("simfl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"simfl/latency/data/devices.csv", "simfl/latency/data/pooled.json", "simfl/latency/data/uploads.csv",
            "simfl/scenarios/quickstart.yaml", "simfl/models/model_costs.json", "simfl/schema/costs.json",
            "simfl/py.typed"} <= names

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    py = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)], tmp_path)
    site = Path(run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path).strip())
    (site / "outer_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # torch & co., not processed for .pth

    work = tmp_path / "work"
    work.mkdir()
    where = run([str(py), "-c", "import simfl; print(simfl.__file__)"], work)
    assert where.startswith(str(venv)), where
    assert "quickstart" in run([str(venv / "bin" / "simfl"), "quickstart", "--help"], work)
    out = run([str(venv / "bin" / "simfl"), "quickstart", "--quiet", "--seeds", "0", "--set", "budget.time=20",
               "--set", "latency={model: replay}"], work)
    assert "results: runs/quickstart" in out
    assert (work / "runs" / "quickstart" / "summary.csv").is_file()
    run([str(py), "-m", "simfl", "quickstart", "--help"], work)


def test_shipped_quickstart_is_the_projects() -> None:
    from simfl.scenarios import shipped

    assert shipped("quickstart").read_bytes() == (ROOT / "scenarios" / "quickstart.yaml").read_bytes()
