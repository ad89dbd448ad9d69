"""End-to-end runs through the CLI: result files, determinism, output-folder safety."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from simfl.cli import main
from tests.conftest import tiny_scenario


def test_run_writes_every_result_file(write_scenario, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(tiny_scenario(seeds=[0, 1]))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    for seed in (0, 1):
        run = out / "fedasync" / f"seed{seed}"
        metrics = pd.read_csv(run / "metrics.csv")
        events = pd.read_csv(run / "events.csv")
        assert list(metrics.columns)[:4] == ["virtual_time", "updates", "accuracy", "loss"]
        assert list(events.columns) == ["time", "update", "client", "staleness", "latency", "dispatch_time",
                                        "weight", "event"]
        assert len(events) == 13 and metrics["virtual_time"].tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    summary = pd.read_csv(out / "summary.csv")
    assert summary[["algorithm", "seed"]].values.tolist() == [["fedasync", 0], ["fedasync", 1]]
    assert (summary["updates"] == 13).all() and (summary["virtual_time"] == 8.0).all()
    assert (out / "accuracy.png").stat().st_size > 1000
    assert "name: tiny" in (out / "scenario.yaml").read_text()
    assert not (tmp_path / "out.partial").exists()
    assert "fedasync" in capsys.readouterr().out


def test_same_seed_same_files(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    raw = tiny_scenario(latency={"model": "exponential", "mean": 1.5}, budget={"time": 20.0})
    path = write_scenario(raw)
    for name in ("a", "b"):
        assert main(["run", str(path), "--out", str(tmp_path / name), "--quiet"]) == 0
    for f in ("metrics.csv", "events.csv"):
        a = (tmp_path / "a" / "fedasync" / "seed0" / f).read_bytes()
        b = (tmp_path / "b" / "fedasync" / "seed0" / f).read_bytes()
        assert a == b and len(a.splitlines()) > 5


def test_seeds_option_and_set_override(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(tiny_scenario())
    out = tmp_path / "o"
    code = main(["run", str(path), "--out", str(out), "--quiet", "--seeds", "3,4", "--set", "budget.time=4"])
    assert code == 0
    summary = pd.read_csv(out / "summary.csv")
    assert summary["seed"].tolist() == [3, 4] and (summary["virtual_time"] == 4.0).all()


def test_existing_output_needs_force(write_scenario, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(tiny_scenario())
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 2
    assert "--force" in capsys.readouterr().err
    assert (out / "keep.txt").exists()
    assert main(["run", str(path), "--out", str(out), "--quiet", "--force"]) == 2  # not simfl's folder
    assert "was not written by simfl" in capsys.readouterr().err and (out / "keep.txt").exists()
    (out / "keep.txt").unlink()
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0  # an empty folder is fine
    (out / "notes.txt").write_text("mine")
    assert main(["run", str(path), "--out", str(out), "--quiet", "--force"]) == 0  # simfl's own: replaced
    assert (out / "notes.txt").read_text() == "mine" and (out / "summary.csv").exists()


def test_help_works_both_ways() -> None:
    for cmd in (["simfl", "--help"], [sys.executable, "-m", "simfl", "--help"]):
        exe = cmd if cmd[0] != "simfl" else [str(Path(sys.executable).with_name("simfl")), "--help"]
        done = subprocess.run(exe, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "run" in done.stdout and "validate" in done.stdout
