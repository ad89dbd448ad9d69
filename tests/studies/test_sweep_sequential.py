"""Sequential seeds in ``simfl sweep``: each grid point is its own plan, seeds added in batches per point until that
point's comparison is settled or the most, by the one rule ``simfl run`` follows; the same cells and comparison with
one worker, two, and after a kill and a resume; comparison.csv per point with its ``stopped`` column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import simfl
from simfl.cli import main
from simfl.launch import runner
from simfl.output import sequential
from tests.conftest import tiny_scenario

ENTRIES = [{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}]
CLEAR = {"model": "constant", "seconds": [1.0, 2.5, 4.0]}
"""FedAsync takes about half FedAvg's time here: settled at the second look (0.51x [0.28, 0.92] at 6 seeds, as
tests/studies/test_sequential_runs.py finds for the same scenario run by simfl run)."""
UNCLEAR = {"model": "lognormal", "mean": 2.0, "std": 0.8}
"""Random latencies under which the ratio stays unclear (1.12x [0.84, 1.50] at 9 seeds): every look runs."""


def _sweep(**changes: Any) -> dict[str, Any]:
    """Two grid points, looks at 3, 6 and 9 seeds."""
    raw = tiny_scenario(seeds={"first": 3, "most": 9}, algorithms=ENTRIES, sweep={"latency": [CLEAR, UNCLEAR]})
    raw.update(changes)
    return raw


def _same(a: Path, b: Path) -> None:
    for name in ("comparison.csv", "comparison.md", "cells.csv", "sweep.yaml"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    cells = pd.read_csv(a / "cells.csv")["cell"]
    for cell in cells:
        left, right = (pd.read_csv(x / cell / "summary.csv").drop(columns="wall_seconds") for x in (a, b))
        pd.testing.assert_frame_equal(left, right)
    assert sorted(p.name for p in a.iterdir() if p.is_dir()) == sorted(p.name for p in b.iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sweep, one worker, from the command line (its scenario file and output folder)."""
    import yaml

    folder = tmp_path_factory.mktemp("swept")
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(_sweep(), sort_keys=False))
    assert main(["sweep", str(path), "--out", str(folder / "one"), "--quiet", "--workers", "1"]) == 0
    return path, folder / "one"


def test_each_point_adds_seeds_until_its_own_comparison_is_settled(swept: tuple[Path, Path]) -> None:
    _, out = swept
    table = pd.read_csv(out / "comparison.csv")
    assert table.columns[-1] == "stopped"
    rows = {(r["scenario"], r["entry"]): r for r in table.to_dict("records")}
    clear, unclear = "tiny[latency=constant]", "tiny[latency=lognormal]"
    # the clear point stops at its second look (6 seeds), its ratio's interval below 1x; the unclear one runs to 9
    assert rows[(clear, "fedasync")]["seeds"] == 6 and rows[(clear, "fedasync")]["stopped"] == sequential.EXCLUDES
    assert rows[(clear, "fedasync")]["ratio_high"] < 1.0
    assert rows[(unclear, "fedasync")]["seeds"] == 9 and rows[(unclear, "fedasync")]["stopped"] == sequential.MOST
    assert rows[(clear, "fedavg")]["stopped"] == rows[(unclear, "fedavg")]["stopped"] == "baseline"
    # a cell per point and seed that ran, none past a point's last look
    cells = pd.read_csv(out / "cells.csv")
    assert cells.groupby("scenario")["seed"].apply(list).to_dict() == {clear: list(range(6)), unclear: list(range(9))}
    assert not (out / "latency=constant__seed=6").exists() and (out / "latency=lognormal__seed=8").is_dir()
    assert "sequential seeds: 6 of at most 9, time-ratio intervals adjusted for the looks at 3, 6, 9 seeds" in (
        out / "comparison.md").read_text()


def test_a_point_compares_as_simfl_run_of_it_does(swept: tuple[Path, Path], write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # the same rule, not a second copy: simfl run of the clear point's scenario stops at the same look with the same
    # intervals and reasons
    _, out = swept
    path = write_scenario(tiny_scenario(seeds={"first": 3, "most": 9}, algorithms=ENTRIES, latency=CLEAR))
    assert main(["run", str(path), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    alone = pd.read_csv(tmp_path / "run" / "comparison.csv").set_index("entry")
    point = pd.read_csv(out / "comparison.csv").query("scenario == 'tiny[latency=constant]'").set_index("entry")
    same = ["seeds", "ratio", "ratio_low", "ratio_high", "ratio_bound", "paired_seeds", "target", "final_accuracy",
            "fastest_clear", "stopped"]
    pd.testing.assert_frame_equal(point[same], alone[same])


def test_two_workers_give_the_same_cells_and_comparison(swept: tuple[Path, Path], tmp_path: Path) -> None:
    path, out = swept
    assert main(["sweep", str(path), "--out", str(tmp_path / "two"), "--quiet", "--workers", "2"]) == 0
    _same(out, tmp_path / "two")


def test_a_sweep_killed_in_a_later_look_resumes_to_the_same(swept: tuple[Path, Path], tmp_path: Path) -> None:
    path, out = swept
    original = runner.write_run
    calls = {"n": 0}

    def stop_in_the_second_look(*args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 15:  # the first look's 2 points x 3 seeds x 2 entries = 12 runs and two of the second's
            raise KeyboardInterrupt
        original(*args, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(runner, "write_run", stop_in_the_second_look)
    try:
        assert main(["sweep", str(path), "--out", str(tmp_path / "cut"), "--quiet", "--workers", "1"]) == 130
    finally:
        mp.undo()
    assert not (tmp_path / "cut" / "comparison.csv").exists()
    assert (tmp_path / "cut" / "latency=constant__seed=2").is_dir()  # the first look is kept
    assert main(["sweep", str(path), "--out", str(tmp_path / "cut"), "--quiet", "--workers", "1"]) == 0
    _same(out, tmp_path / "cut")


def test_the_api_reads_the_cells_that_ran(swept: tuple[Path, Path], tmp_path: Path) -> None:
    _, out = swept
    res = simfl.sweep(_sweep(), out=tmp_path / "api", workers=1, quiet=True)
    assert sorted(res.summary.groupby("cell")["seed"].nunique().to_dict().items()) == [
        ("tiny[latency=constant]", 6), ("tiny[latency=lognormal]", 9)]
    assert (res.comparison["stopped"] == pd.read_csv(out / "comparison.csv")["stopped"]).all()


def test_a_list_of_seeds_sweeps_as_before(tmp_path: Path) -> None:
    res = simfl.sweep(_sweep(seeds=[0, 1]), out=tmp_path / "list", workers=1, quiet=True)
    assert "stopped" not in res.comparison.columns
    assert list(pd.read_csv(tmp_path / "list" / "cells.csv")["seed"]) == [0, 1, 0, 1]


def test_a_report_of_the_sweep_gives_its_sequential_intervals(swept: tuple[Path, Path], tmp_path: Path) -> None:
    # simfl report over the sweep's folder pools each point's cells as its seeds and, the cells being the sweep's,
    # adjusts the time ratios' intervals for the sweep's looks as the sweep's own comparison.csv does (the fixed
    # intervals, narrower, would disagree with it on what is settled)
    _, out = swept
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    own = pd.read_csv(out / "comparison.csv").set_index(["scenario", "entry"])
    reported = pd.read_csv(tmp_path / "report" / "comparison.csv").set_index(["dataset", "entry"])
    for key, row in own.iterrows():
        other = reported.loc[key]
        assert other["seeds"] == row["seeds"] and other["stopped"] == row["stopped"], key
        for column in ("ratio", "ratio_low", "ratio_high", "time_to_target_low", "time_to_target_high"):
            assert other[column] == pytest.approx(row[column], nan_ok=True), (key, column)
