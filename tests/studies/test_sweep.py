"""simfl sweep: grid expansion, cell names, validation, parallel workers, resuming after a kill."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from simfl import outdir
from simfl.cli import main
from simfl.launch.grid import plan, run_sweep
from tests.conftest import tiny_scenario

ROOT = Path(__file__).resolve().parents[2]


def swept(**changes: Any) -> dict[str, Any]:
    """The tiny scenario with a 2 x 2 grid (latency section x alpha) and 1 seed: 4 cells."""
    raw = tiny_scenario(**changes)
    raw.setdefault("sweep", {
        "latency": [{"model": "constant", "seconds": [1.0, 2.5, 4.0]}, {"model": "uniform", "low": 1.0, "high": 3.0}],
        "algorithms[0].alpha": [0.3, 0.6],
    })
    return raw


def test_plan_names_cells_and_sets_values(write_scenario) -> None:  # type: ignore[no-untyped-def]
    _, cells = plan(write_scenario(swept(seeds=[0, 1])))
    assert [c.name for c in cells] == [
        "latency=constant__alpha=0.3__seed=0", "latency=constant__alpha=0.3__seed=1",
        "latency=constant__alpha=0.6__seed=0", "latency=constant__alpha=0.6__seed=1",
        "latency=uniform__alpha=0.3__seed=0", "latency=uniform__alpha=0.3__seed=1",
        "latency=uniform__alpha=0.6__seed=0", "latency=uniform__alpha=0.6__seed=1",
    ]
    last = cells[-1].scenario()
    assert last.latency.model == "uniform" and last.algorithms[0].alpha == 0.6 and last.seeds == [1]
    assert last.name == "tiny[latency=uniform,alpha=0.6]" and last.sweep is None


def test_list_values_and_colliding_labels(write_scenario) -> None:  # type: ignore[no-untyped-def]
    raw = swept(sweep={"latency.seconds": [[1, 2, 3], [1, 2, 6]],
                       "latency": [{"model": "constant", "seconds": [1, 1, 1]},
                                   {"model": "constant", "seconds": [2, 2, 2]}]})
    names = [c.name for c in plan(write_scenario(raw))[1]]
    assert names[0] == "seconds=1-2-3__latency=constant-v0__seed=0"
    assert len(set(names)) == 4


@pytest.mark.parametrize(("sweep", "expected"), [
    ({"latency..model": [1]}, "sweep: key 'latency..model' is not a dotted path"),
    ({"seeds": [[1]]}, "sweep: key 'seeds': name, seeds, sweep cannot be swept"),
    ({"train.lr": []}, "sweep: key 'train.lr' needs at least one value"),
    ({"nothing.here": [1]}, "sweep cell [nothing.here=1]: nothing.here: the scenario has no 'nothing'"),
    ({"train.lr": [0.1, -1]}, "sweep cell [train.lr=-1]: train.lr: "),
    ({"latency.model": ["constant", "lognormal"]}, "sweep cell [latency.model=lognormal]: latency.seconds: unknown key"),
])
def test_bad_sweep_is_one_line(write_scenario, tmp_path: Path, capsys, sweep, expected) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(swept(sweep=sweep))
    for command in (["validate", str(path)], ["sweep", str(path), "--out", str(tmp_path / "o")]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and expected in err, err
    assert not (tmp_path / "o").exists()


def test_run_ignores_the_sweep_block(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert main(["run", str(write_scenario(swept(), "a.yaml")), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert main(["run", str(write_scenario(tiny_scenario(), "b.yaml")), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    for name in ("metrics.csv", "events.csv"):
        assert (tmp_path / "a/fedasync/seed0" / name).read_bytes() == (tmp_path / "b/fedasync/seed0" / name).read_bytes()


def test_sweep_with_workers_writes_normal_result_folders(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "sw"
    assert main(["sweep", str(write_scenario(swept())), "--out", str(out), "--workers", "2"]) == 0
    cells = pd.read_csv(out / "cells.csv")
    assert len(cells) == 4 and (out / "sweep.yaml").is_file()
    for name in cells["cell"]:
        summary = pd.read_csv(out / name / "summary.csv")
        assert summary["algorithm"].tolist() == ["fedasync"]
        assert (out / name / "fedasync" / "seed0" / "events.csv").is_file()
        assert (out / name / "accuracy.png").is_file()
    assert not list(out.glob("*.partial"))
    # each cell equals a plain run of its own scenario
    cell = out / "latency=uniform__alpha=0.3__seed=0"
    assert main(["run", str(cell / "scenario.yaml"), "--out", str(tmp_path / "alone"), "--quiet"]) == 0
    assert (cell / "fedasync/seed0/events.csv").read_bytes() == (tmp_path / "alone/fedasync/seed0/events.csv").read_bytes()


def test_sweep_on_a_local_ray_instance_equals_the_in_process_sweep(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    path = write_scenario(swept())
    assert main(["sweep", str(path), "--out", str(tmp_path / "here")]) == 0
    try:
        code = main(["sweep", str(path), "--out", str(tmp_path / "ray"), "--workers", "2", "--ray"])
    except Exception as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"a local Ray instance cannot start here: {exc}")
    if code == 2 and not (tmp_path / "ray").is_dir():  # pragma: no cover - depends on the machine
        pytest.skip("a local Ray instance cannot start here")
    assert code == 0 and not ray.is_initialized()  # the sweep shut down the instance it started
    cells = pd.read_csv(tmp_path / "here" / "cells.csv")["cell"]
    assert len(cells) == 4 and not list((tmp_path / "ray").glob("*.partial"))
    for name in cells:
        for file in ("summary.csv", "fedasync/seed0/metrics.csv", "fedasync/seed0/events.csv"):
            here, there = tmp_path / "here" / name / file, tmp_path / "ray" / name / file
            if file == "summary.csv":  # wall_seconds differs; everything else is the same run
                assert pd.read_csv(here).drop(columns="wall_seconds").equals(pd.read_csv(there).drop(columns="wall_seconds"))
            else:
                assert here.read_bytes() == there.read_bytes(), (name, file)


KILL_AFTER_FIRST_CELL = """
import os, signal, sys
from pathlib import Path
from simfl.launch.grid import run_sweep
run_sweep(sys.argv[1], Path(sys.argv[2]), on_published=lambda name: os.kill(os.getpid(), signal.SIGKILL))
"""


def test_killed_sweep_resumes_without_redoing_finished_cells(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, out = write_scenario(swept()), tmp_path / "sw"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", KILL_AFTER_FIRST_CELL, str(path), str(out)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr  # killed by SIGKILL right after publishing its first cell
    first = "latency=constant__alpha=0.3__seed=0"
    assert sorted(p.name for p in out.iterdir() if p.is_dir() and not p.name.endswith(".partial")) == [first]
    stamp = {p: p.stat().st_mtime_ns for p in (out / first).rglob("*")}
    # the other cells wait in their staging folders; one of them lost its bookkeeping and holds a file of the user's
    leftover = out / "latency=constant__alpha=0.6__seed=0.partial"
    assert (leftover / "INCOMPLETE").is_file()
    (leftover / "checkpoint.pt").unlink()
    (leftover / "junk").write_text("x")

    lines: list[str] = []
    outcome = run_sweep(path, out, log=lines.append)
    assert outcome.skipped == [first]
    assert outcome.ran == [c.name for c in outcome.cells[1:]]
    assert {p: p.stat().st_mtime_ns for p in (out / first).rglob("*")} == stamp
    redone = out / "latency=constant__alpha=0.6__seed=0"
    assert (redone / "junk").read_text() == "x" and "junk" not in outdir.listed(redone)  # not simfl's: kept, unlisted
    assert not list(out.glob("*.partial"))
    assert lines[0].startswith("1 of 4 cells already finished")
    again = run_sweep(path, out, log=lines.append)
    assert again.ran == [] and len(again.skipped) == 4


def test_resuming_a_different_sweep_is_refused(write_scenario, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    raw = swept(sweep={"algorithms[0].alpha": [0.3]})
    out = tmp_path / "sw"
    assert main(["sweep", str(write_scenario(raw)), "--out", str(out)]) == 0
    raw["sweep"] = {"algorithms[0].alpha": [0.3, 0.5]}
    assert main(["sweep", str(write_scenario(raw)), "--out", str(out)]) == 2
    assert "holds a different sweep" in capsys.readouterr().err
    assert yaml.safe_load((out / "sweep.yaml").read_text())["sweep"] == {"algorithms[0].alpha": [0.3]}


def test_sweep_without_grid_runs_one_cell_per_seed(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_sweep(write_scenario(tiny_scenario(seeds=[3, 4])), tmp_path / "sw", log=lambda _: None)
    assert outcome.ran == ["seed=3", "seed=4"]
    assert pd.read_csv(tmp_path / "sw" / "seed=4" / "summary.csv")["seed"].tolist() == [4]


def test_a_latency_sweep_answers_where_each_rule_wins(write_scenario, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A list-valued latency parameter swept over two seeds: sweep.png, and one comparison per grid point pooling its
    seeds, the swept key a column."""
    from simfl.output.comparison import compare

    raw = tiny_scenario(seeds=[0, 1], budget={"time": 6.0},
                        algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}])
    raw["sweep"] = {"latency.seconds": [[1.0, 2.5, 4.0], [1.0, 1.0, 8.0]]}
    out = tmp_path / "sw"
    assert main(["sweep", str(write_scenario(raw)), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    table = pd.read_csv(out / "comparison.csv")
    assert list(table.columns[:3]) == ["scenario", "latency.seconds", "entry"]
    assert table["latency.seconds"].tolist() == ["[1.0, 2.5, 4.0]"] * 2 + ["[1.0, 1.0, 8.0]"] * 2
    assert table["seeds"].tolist() == [2, 2, 2, 2] and set(table["baseline"]) == {"fedavg"}
    for (scenario, label), rows in table.groupby(["scenario", "latency.seconds"], sort=False):
        cells = [f"seconds={'1.0-2.5-4.0' if label.startswith('[1.0, 2.5') else '1.0-1.0-8.0'}__seed={s}" for s in (0, 1)]
        runs = {(a, s): pd.read_csv(out / cell / a / f"seed{s}" / "metrics.csv")
                for s, cell in enumerate(cells) for a in ("fedasync", "fedavg")}
        expected = compare(runs, {"fedavg"}, None, None, scenario, ["fedasync", "fedavg"])
        assert f"{scenario}: {expected.verdict}" in printed
        pd.testing.assert_frame_equal(rows.drop(columns=["scenario", "latency.seconds"]).reset_index(drop=True),
                                      expected.table.replace("", float("nan")), check_dtype=False)
    assert "## tiny[seconds=1.0-1.0-8.0]" in (out / "comparison.md").read_text()
