"""Every bad input of ``simfl tune`` is one line, exit code 2, and nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simfl.cli import main
from tests.tune.test_tune import digits_scenario

pytest.importorskip("optuna")

CASES: list[tuple[dict[str, Any], str]] = [
    ({"params": {"data.partition.alpha": [0.1, 1.0]}}, "'data.partition.alpha': not a tunable key"),
    ({"params": {"train.epochs": [1, 2]}}, "epochs cannot be tuned per entry"),
    ({"params": {"algorithms[*].alfa": [0.2]}}, "'algorithms[*].alfa': no entry has an option 'alfa'"),
    ({"params": {"algorithms[fedavg].alpha": [0.2]}}, "entry fedavg (fedavg) has no option 'alpha'"),
    ({"params": {"algorithms[7].alpha": [0.2]}}, "index 7 out of range: the scenario has 2 entries"),
    ({"params": {"algorithms[fedbuff].alpha": [0.2]}}, "no entry named fedbuff; the entries are fedasync, fedavg"),
    ({"params": {"train.lr": {"log": [0.3, 0.001]}}}, "log: [0.3, 0.001] is inverted; low must be under high"),
    ({"params": {"train.lr": {"float": [0.1, 0.1]}}}, "float: [0.1, 0.1] is empty; low must be under high"),
    ({"params": {"train.lr": []}}, "'train.lr': is an empty list"),
    ({"params": {"train.lr": {"log": [0.0, 0.1]}}}, "log: low must be > 0"),
    ({"params": {"train.lr": {"int": [1.5, 3]}}}, "int: low and high must be integers"),
    ({"params": {"train.lr": {"between": [1, 3]}}}, "a range is one of"),
    ({"params": {"algorithms[fedasync].alpha": [0.5, 1.5]}}, "1.5 does not fit entry fedasync: alpha: must be in (0, 1)"),
    ({"params": {"train.lr": [0.1], "algorithms[0].train.lr": [0.2]}}, "both search train.lr of entry fedasync"),
    ({"params": {"algorithms[fedasync].alpha": [0.5]}}, "searches nothing of entry fedavg"),
    ({"params": {"train.lr": {"log": [0.01, 0.1]}}, "sampler": "grid"}, "sampler grid needs every key's values as a list"),
    ({"params": {}}, "needs at least one key"),
    ({"params": {"train.lr": [0.1, 0.2]}, "given_first": True},
     "entry fedasync: given_first: the entry's own train.lr (0.05) is not among the searched values"),
    ({"params": {"train.lr": [0.1]}, "trials": 0}, "tune.trials"),
]


@pytest.mark.parametrize(("tune", "expected"), CASES, ids=[c[1][:30] for c in CASES])
def test_a_bad_tune_section_is_one_line(tune: dict[str, Any], expected: str, tmp_path: Path, write_scenario,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    raw = digits_scenario(tune={"trials": 2, **tune})
    out = tmp_path / "out"
    assert main(["tune", str(write_scenario(raw)), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simfl: ") and err.count("\n") == 1, err
    assert expected in err, err
    assert not out.exists()


@pytest.mark.parametrize(("changes", "expected"), [
    ({"tune": None}, "has no tune: section"),
    ({"executor": {"kind": "none"}}, "executor.kind: none trains nothing"),
    ({"data": {"dataset": "digits", "partition": {"kind": "iid", "clients": 4}, "validation": 0.2}},
     "simfl tune holds out its own validation rows"),
    ({"algorithms": [{"name": "fedavg", "clients_per_round": 4}], "data": {"dataset": "digits",
      "partition": {"kind": "iid", "clients": 4}}, "tune": {"trials": 2, "params": {
          "algorithms[0].clients_per_round": [2, 9]}}}, "clients_per_round: must be at most the 4 clients, got 9"),
])
def test_a_scenario_that_cannot_be_tuned_is_one_line(changes: dict[str, Any], expected: str, tmp_path: Path,
                                                     write_scenario, capsys: pytest.CaptureFixture[str]) -> None:
    raw = digits_scenario(tune={"trials": 2, "params": {"train.lr": [0.1, 0.2]}})
    raw.update(changes)
    if raw["tune"] is None:
        del raw["tune"]
    out = tmp_path / "out"
    assert main(["tune", str(write_scenario(raw)), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simfl: ") and err.count("\n") == 1 and expected in err, err
    assert not out.exists()


def test_resume_needs_a_tune_folder_and_a_fresh_tune_refuses_one(tmp_path: Path, write_scenario,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--resume", str(tmp_path)]) == 2
    assert "holds no tune to resume (no tune.yaml)" in capsys.readouterr().err
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "tune.yaml").write_text("name: x\n")
    path = write_scenario(digits_scenario(tune={"trials": 2, "params": {"train.lr": [0.1, 0.2]}}))
    assert main(["tune", str(path), "--out", str(tmp_path / "held")]) == 2
    assert "holds a tune already: continue it with `simfl tune --resume" in capsys.readouterr().err
    assert main(["tune", "--resume", str(tmp_path / "held"), "--out", str(tmp_path)]) == 2
    assert "--resume: takes no scenario file" in capsys.readouterr().err
