"""simfl.run with worker processes from any caller: a script without ``if __name__ == "__main__":``, code on
standard input and a notebook. The workers never import the caller's main module, so the script is not run
again, and the files equal those of a run in this process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import simfl
from tests.conftest import tiny_scenario
from tests.parallel.test_units import result_files

ROOT = Path(__file__).resolve().parents[2]

CALLER = """\
print("the caller ran")
import simfl
import simfl.launch.parallel as parallel
from tests.conftest import tiny_scenario

ran = []  # how many units went to local worker processes
original = parallel.LocalWorkers.run
parallel.LocalWorkers.run = lambda self, units, handle: (ran.append((self.workers, len(units))), original(self, units, handle))
simfl.run(tiny_scenario(seeds=[0, 1]), out=OUT, quiet=True, workers=2)
assert ran == [(2, 2)], ran
"""
"""The caller's code, with no main guard; it fails unless its two units ran in two local worker processes."""


def caller(out: Path) -> str:
    return CALLER.replace("OUT", repr(str(out)))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The files of the caller's runs, run in this process."""
    out = tmp_path_factory.mktemp("reference") / "out"
    simfl.run(tiny_scenario(seeds=[0, 1]), out=out, quiet=True, workers=1)
    return result_files(out)


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("SIMFL_WORKERS", None)
    return env


def test_a_script_without_a_main_guard_runs_workers(tmp_path: Path, reference: dict[str, bytes]) -> None:
    script = tmp_path / "script.py"
    script.write_text(caller(tmp_path / "out"))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("the caller ran") == 1  # no worker ran the script again
    assert result_files(tmp_path / "out") == reference


def test_code_on_standard_input_runs_workers(tmp_path: Path, reference: dict[str, bytes]) -> None:
    done = subprocess.run([sys.executable, "-"], input=caller(tmp_path / "out"), cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("the caller ran") == 1
    assert result_files(tmp_path / "out") == reference


def test_a_notebook_runs_workers(tmp_path: Path, reference: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for key, value in _env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SIMFL_WORKERS", raising=False)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(caller(tmp_path / "out"))])
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert result_files(tmp_path / "out") == reference


def test_a_class_of_the_callers_main_runs_in_its_process(tmp_path: Path) -> None:
    """Workers cannot import a plugin class defined in the caller's script, so its units run where it was given."""
    script = tmp_path / "script.py"
    script.write_text(
        "import simfl\n"
        "import simfl.launch.parallel as parallel\n"
        "from simfl.algorithms.fedasync import FedAsync\n"
        "from tests.conftest import tiny_scenario\n"
        "class Mine(FedAsync):\n"
        "    pass\n"
        "parallel.LocalWorkers.run = None  # would fail if called\n"
        "res = simfl.run(tiny_scenario(seeds=[0, 1], algorithms=[{'name': Mine, 'alpha': 0.6}]),\n"
        f"                out={str(tmp_path / 'out')!r}, quiet=True, workers=2)\n"
        "assert len(res.summary) == 2\n"
    )
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
