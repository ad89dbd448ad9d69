"""``seeds: {first: ..., most: ...}``: simfl run adds batches of seeds until the comparison is settled, the same with
one worker, two, and after a kill and ``--resume``; bad plans are one line (exit 2); a list of seeds is unchanged (a
sweep's plan, per grid point: test_sweep_sequential.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simfl.cli import main
from simfl.launch import runner
from simfl.output import comparison as comparing
from simfl.output import sequential
from simfl.schema import scenario as scenario_mod
from tests.conftest import tiny_scenario

ENTRIES = [{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}]
PLAN = {"first": 3, "most": 5, "step": 1, "until": "settled"}


def _unsettled(**changes: Any) -> dict[str, Any]:
    """Two entries whose ratio stays unclear over 5 seeds of random latencies: every look runs."""
    return tiny_scenario(seeds=dict(PLAN), algorithms=ENTRIES, latency={"model": "lognormal", "mean": 2.0, "std": 0.8},
                         **changes)


def _same(a: Path, b: Path) -> None:
    assert (a / "comparison.csv").read_bytes() == (b / "comparison.csv").read_bytes()
    assert (a / "comparison.md").read_bytes() == (b / "comparison.md").read_bytes()
    assert (a / "scenario.yaml").read_bytes() == (b / "scenario.yaml").read_bytes()
    left, right = (pd.read_csv(x / "summary.csv").drop(columns="wall_seconds") for x in (a, b))
    pd.testing.assert_frame_equal(left, right)


def test_unsettled_entries_run_every_look_up_to_the_most(write_scenario, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = write_scenario(_unsettled())
    assert main(["run", str(path), "--out", str(tmp_path / "one"), "--quiet"]) == 0
    printed = capsys.readouterr().out
    table = pd.read_csv(tmp_path / "one" / "comparison.csv").set_index("entry")
    assert table.columns[-1] == "stopped" and list(table["seeds"]) == [5, 5]
    assert table.loc["fedasync", "stopped"] == sequential.MOST and table.loc["fedavg", "stopped"] == "baseline"
    assert sorted(set(pd.read_csv(tmp_path / "one" / "summary.csv")["seed"])) == [0, 1, 2, 3, 4]
    assert "sequential seeds: 5 of at most 5, time-ratio intervals adjusted for the looks at 3, 4, 5 seeds" in printed
    assert "seeds:\n  first: 3\n  most: 5\n  step: 1\n  until: settled\n  start: 0\n" in (
        tmp_path / "one" / "scenario.yaml").read_text()
    # the same comparison of the same runs, without the plan, has the fixed (narrower) interval and no stopped column
    one = tmp_path / "one"
    runs = {(e, s): pd.read_csv(one / e / f"seed{s}" / "metrics.csv") for e in ("fedasync", "fedavg") for s in range(5)}
    fixed = comparing.compare(runs, {"fedavg"}).table.set_index("entry").loc["fedasync"]
    row = table.loc["fedasync"]
    assert fixed["ratio"] == pytest.approx(row["ratio"]) and "stopped" not in fixed
    assert row["ratio_low"] < fixed["ratio_low"] < fixed["ratio_high"] < row["ratio_high"]

    assert main(["run", str(path), "--out", str(tmp_path / "two"), "--quiet", "--workers", "2"]) == 0
    _same(tmp_path / "one", tmp_path / "two")

    original = runner.write_run
    calls = {"n": 0}

    def stop_in_the_second_look(*args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 8:  # the first look's 6 runs and one of the second's are written
            raise KeyboardInterrupt
        original(*args, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(runner, "write_run", stop_in_the_second_look)
    try:
        assert main(["run", str(path), "--out", str(tmp_path / "three"), "--quiet"]) == 130
    finally:
        mp.undo()
    assert main(["run", "--resume", str(tmp_path / "three"), "--quiet"]) == 0
    _same(tmp_path / "one", tmp_path / "three")


def test_a_clear_comparison_stops_before_the_most(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # FedAsync takes about half FedAvg's time here (0.51x at 6 seeds): settled at the second look of three, and the
    # first look's comparison, rebuilt from its files, was not (how often the first look stops: test_sequential.py)
    path = write_scenario(tiny_scenario(seeds={"first": 3, "most": 9}, algorithms=ENTRIES))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    table = pd.read_csv(out / "comparison.csv").set_index("entry")
    assert list(table["seeds"]) == [6, 6]
    assert table.loc["fedasync", "stopped"] == sequential.EXCLUDES and table.loc["fedasync", "ratio_high"] < 1.0
    scn = scenario_mod.load(out / "scenario.yaml")
    first = {(e, s): pd.read_csv(out / e / f"seed{s}" / "metrics.csv") for e in ("fedasync", "fedavg") for s in range(3)}
    assert scn.seeds == [0, 1, 2] and not runner.comparison_of(scn, first).settled
    # simfl report of the folder rebuilds the same sequential comparison from its scenario.yaml's plan
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    rebuilt = pd.read_csv(tmp_path / "report" / "comparison.csv").set_index("entry").loc[table.index]
    same = ["seeds", "ratio", "ratio_low", "ratio_high", "ratio_bound", "paired_seeds", "target", "stopped"]
    pd.testing.assert_frame_equal(rebuilt[same], table[same])


def test_a_list_of_seeds_has_no_stopped_column(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(tiny_scenario(seeds=[0, 1], algorithms=ENTRIES))
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert "stopped" not in pd.read_csv(tmp_path / "out" / "comparison.csv").columns
    assert "seeds:\n- 0\n- 1\n" in (tmp_path / "out" / "scenario.yaml").read_text()


@pytest.mark.parametrize(("seeds", "expected"), [
    ({"first": 2, "most": 10}, "seeds: first: input should be greater than or equal to 3, got 2"),
    ({"first": 3}, "seeds: most: missing required key"),
    ({"first": 5, "most": 4}, "seeds: most (4) must be at least first (5)"),
    ({"first": 3, "most": 10, "until": "done"}, "seeds: until: unknown until 'done'; allowed: settled"),
    ({"first": 3, "most": 10, "width": 1.5}, "seeds: width: input should be less than 1, got 1.5"),
    ({"first": 3, "most": 10, "every": 2}, "seeds: every: unknown key"),
])
def test_a_bad_plan_is_one_line_and_exit_2(write_scenario, capsys: pytest.CaptureFixture[str],  # type: ignore[no-untyped-def]
                                           seeds: dict[str, Any], expected: str) -> None:
    path = write_scenario(tiny_scenario(seeds=seeds))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err, err
    assert "seeds takes a list, or a plan {first: 3, most: 10, until: settled}" in err


def test_a_tune_refuses_a_plan(write_scenario, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(tiny_scenario(seeds={"first": 3, "most": 5}, tune={"trials": 2, "params": {"train.lr": [0.1, 0.2]}}))
    assert main(["validate", str(path)]) == 2
    assert "tune: simfl tune needs a list of seeds" in capsys.readouterr().err


def test_validate_names_the_plan(write_scenario, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(tiny_scenario(seeds={"first": 3, "most": 10, "width": 0.1}))
    assert main(["validate", str(path)]) == 0
    captured = capsys.readouterr()
    assert "seeds:\n  first: 3\n  most: 10\n  until: settled\n  width: 0.1\n  start: 0\n" in captured.out
    assert captured.err.strip().endswith("valid (1 algorithms x 3 to 10 seeds, sequential)")
