"""Every user mistake ends in exactly one line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from simfl.cli import main
from tests.conftest import tiny_scenario


def one_line_error(capsys, argv: list[str]) -> str:  # type: ignore[no-untyped-def]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"colour": "blue"}, "colour: unknown key"),
        ({"budget": {"time": "soon"}}, "budget.time: "),
        ({"algorithms": [{"name": "fedasync", "alpha": 1.5}]}, "algorithms[0].alpha: must be in (0, 1), got 1.5"),
        ({"algorithms": [{"name": "fedasync", "alfa": 0.5}]}, "algorithms[0].alfa: unknown key"),
        ({"algorithms": [{"name": "nope"}]}, "algorithms[0].name: unknown name 'nope'; allowed: "),
        ({"algorithms": []}, "algorithms: "),
        ({"train": {"lr": -1}}, "train.lr: must be in (0, inf), got -1"),
        ({"budget": {}}, "budget: set at least one of time, updates"),
        ({"seeds": [1, 1]}, "seeds: seeds must be distinct"),
        ({"latency": {"model": "constant", "seconds": [1.0, -2.0, 3.0]}}, "latency.seconds[1]: must be in (0, inf)"),
        ({"latency": {"model": "constant", "seconds": [1.0, 2.0]}},
         "latency.seconds: needs one latency per client (3), got 2"),
        ({"eval": {"every": float("nan")}}, "eval.every: must be a finite number"),
    ],
)
def test_bad_values_name_their_yaml_path(write_scenario, capsys, change, expected) -> None:  # type: ignore[no-untyped-def]
    raw = tiny_scenario()
    raw.update(change)
    if "colour" in change:
        raw["colour"] = "blue"
    err = one_line_error(capsys, ["run", str(write_scenario(raw)), "--quiet", "--out", str(Path("/nonexistent/x"))])
    assert expected in err


def test_missing_required_section(write_scenario, capsys) -> None:  # type: ignore[no-untyped-def]
    raw = tiny_scenario()
    del raw["model"]
    assert "model: missing required key" in one_line_error(capsys, ["validate", str(write_scenario(raw))])


def test_missing_file(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    err = one_line_error(capsys, ["run", str(tmp_path / "nope.yaml")])
    assert "nope.yaml: no such file" in err


def test_malformed_yaml(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nalgorithms: [a, b\n")
    assert "malformed YAML at line" in one_line_error(capsys, ["validate", str(path)])


def test_yaml_that_is_not_a_mapping(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    assert "must hold a mapping" in one_line_error(capsys, ["validate", str(path)])


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("train.lr", "expected KEY=VALUE"),
        ("train.lr.x=1", "train.lr is a value"),
        ("algorithms.5.alpha=0.1", "index 5 out of range: algorithms has 1 entries"),
        ("algorithms.first.alpha=0.1", "algorithms is a list: use an index"),
        ("train.speed=3", "train.speed: unknown key"),
        ("algorithms[0].alpha=2", "algorithms[0].alpha: must be in (0, 1), got 2"),
    ],
)
def test_bad_set_paths(write_scenario, capsys, override, expected) -> None:  # type: ignore[no-untyped-def]
    err = one_line_error(capsys, ["validate", str(write_scenario(tiny_scenario())), "--set", override])
    assert expected in err


def test_bad_seeds_option(write_scenario, capsys) -> None:  # type: ignore[no-untyped-def]
    assert "--seeds" in one_line_error(capsys, ["run", str(write_scenario(tiny_scenario())), "--seeds", "a,b"])


def test_unknown_command(capsys) -> None:  # type: ignore[no-untyped-def]
    one_line_error(capsys, ["frobnicate"])


def test_no_output_left_behind_on_bad_input(write_scenario, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    raw = tiny_scenario(latency={"model": "constant", "seconds": [1.0]})
    out = tmp_path / "out"
    one_line_error(capsys, ["run", str(write_scenario(raw)), "--out", str(out)])
    assert not out.exists() and not (tmp_path / "out.partial").exists()


def test_subprocess_exit_code_and_single_line(write_scenario) -> None:  # type: ignore[no-untyped-def]
    raw = tiny_scenario(algorithms=[{"name": "fedasync", "alpha": 1.5}])
    done = subprocess.run([sys.executable, "-m", "simfl", "validate", str(write_scenario(raw))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "algorithms[0].alpha" in done.stderr


def test_usage_mistakes_name_the_subcommand_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "s.yaml", "--bogus"]) == 2
    assert capsys.readouterr().err.strip() == "simfl: command line: unrecognized arguments: --bogus"
    assert main(["run", "s.yaml", "--seeds", "x"]) == 2
    assert capsys.readouterr().err.strip() == "simfl: run: argument --seeds: expected comma-separated integers, got 'x'"
    assert main(["run"]) == 2
    assert capsys.readouterr().err.strip() == "simfl: run: needs a scenario file (or --resume OUT)"


def test_an_update_budget_no_round_can_reach_is_refused(write_scenario, capsys) -> None:  # type: ignore[no-untyped-def]
    """Every round failing with only an update budget would run for ever in virtual time: refused in one line."""
    raw = tiny_scenario(availability={"p": 1.0}, budget={"updates": 5})
    err = one_line_error(capsys, ["validate", str(write_scenario(raw))])
    assert "availability.p 1.0" in err and "budget.time" in err
    raw["budget"] = {"updates": 5, "time": 10.0}  # with a time budget the run ends (every round failed)
    assert main(["validate", str(write_scenario(raw))]) == 0
