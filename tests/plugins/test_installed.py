"""The example plugin package installed (into a private folder) and run by its entry-point name.

The package in ``examples/plugin`` is installed with ``pip install --no-deps --no-build-isolation
--no-index --target`` (offline, with the venv's own setuptools); ``simfl`` then runs in a
subprocess whose PYTHONPATH holds that folder, so the entry point ``fadas_example`` of the group
``simfl.algorithms`` is found as for any installed package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from simfl.cli import main
from simfl.launch.checkpoint import CHECKPOINT_FILE, INCOMPLETE_FILE, RUNNING_DIR, Session, load_run
from simfl.schema import plugins
from tests.conftest import tiny_scenario

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugin"
ALGORITHMS = ("fedasync", "fadas_example")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the installed example plugin (a copy is built, so the source tree stays clean)."""
    pytest.importorskip("setuptools", reason="building the plugin offline needs setuptools in the venv")
    tmp = tmp_path_factory.mktemp("plugin")
    src = tmp / "src"
    shutil.copytree(PLUGIN, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--no-index", "--target", str(target), str(src)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return target


@pytest.fixture
def installed(site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plugin visible to this process too (sys.path and a fresh entry-point cache)."""
    monkeypatch.syspath_prepend(str(site))
    plugins.entry_points.cache_clear()
    yield site
    plugins.entry_points.cache_clear()


def simfl_cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "simfl", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def _scenario(folder: Path) -> Path:
    raw = tiny_scenario(algorithms=[{"name": "fedasync", "alpha": 0.6},
                                    {"name": "fadas_example", "buffer": 2, "server_lr": 0.05, "delay_threshold": 1}],
                        latency={"model": "exponential", "mean": 1.5}, budget={"time": 12.0})
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _files(out: Path) -> dict[str, bytes]:
    return {f"{a}/{n}": (out / a / "seed0" / n).read_bytes() for a in ALGORITHMS for n in ("metrics.csv", "events.csv")}


def test_entry_point_plugin_resumes_byte_identical_with_verify(
    installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scn = _scenario(tmp_path)
    ref = tmp_path / "ref"
    done = simfl_cli(installed, "run", str(scn), "--out", str(ref), "--quiet")
    assert done.returncode == 0, done.stderr
    # Interrupted (as by Ctrl-C) after a checkpoint taken in the middle of the plugin's run ...
    out = tmp_path / "out"
    stage = tmp_path / "out.partial"
    original = Session.save_run

    def save_then_stop(self: Session, algorithm: str, seed: int, blob: bytes, now: float, updates: int) -> None:
        original(self, algorithm, seed, blob, now, updates)
        if algorithm == "fadas_example" and updates:
            raise KeyboardInterrupt

    monkeypatch.setattr(Session, "save_run", save_then_stop)
    assert main(["run", str(scn), "--out", str(out), "--quiet", "--checkpoint-every", "3"]) == 130
    monkeypatch.setattr(Session, "save_run", original)
    saved: dict[str, Any] = load_run(stage / RUNNING_DIR / "fadas_example" / "seed0.pt")
    assert saved["algorithm"] == "fadas_example" and (stage / INCOMPLETE_FILE).exists() and (stage / CHECKPOINT_FILE).exists()
    assert {"m", "vhat", "max_delay"} <= set(saved["sim"]["algorithm"])  # the plugin's state, as data
    # ... then resumed by a fresh process with --verify: the same bytes as the uninterrupted run.
    done = simfl_cli(installed, "run", "--resume", str(out), "--verify", "--quiet")
    assert done.returncode == 0, done.stderr
    assert not stage.exists() and _files(out) == _files(ref)
    assert (out / "scenario.yaml").read_text().count("name: fadas_example") == 1


def test_reference_lists_the_installed_plugin(site: Path) -> None:
    done = simfl_cli(site, "reference")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    section = text[text.index("## Installed plugins"):]
    assert "### `algorithms[i].name: fadas_example` (algorithm, `simfl_fadas:FADAS`)" in section
    assert "FADAS (Wang et al., ICML 2024)" in section and "`algorithms[i].delay_threshold`" in section


def test_an_unknown_name_lists_the_installed_plugin(installed: Path, tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario(algorithms=[{"name": "fadas_examplee"}])))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown name 'fadas_examplee'; allowed: " in err
    assert err.endswith(", fedadam, scaffold, flower, serverapp, fadas_example (installed plugins) or an import path "
                        "package.module:Class")
