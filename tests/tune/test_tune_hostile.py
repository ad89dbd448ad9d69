"""A tune folder changed behind the tune's back, and a search space of the wrong kind: each is one line, exit code 2,
and nothing in the folder touched.

``simfl tune --resume`` holds tune.yaml to what the tune started as (``started.json``) and ``optuna.db`` to the
plan before Optuna opens it; ``simfl validate`` and ``simfl tune`` refuse a range of the wrong kind for an option's
type before any folder is made.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from simfl.cli import main
from simfl.launch.tune import STARTED_FILE, STORAGE_FILE, TUNE_FILE, check_started, text_digest, tune
from simfl.schema.scenario import load, validate
from tests.tune.test_tune import digits_scenario

pytest.importorskip("optuna")


def _small() -> dict[str, Any]:
    """One entry, a grid of two learning rates, 15 virtual seconds: the stopped tune every test starts from."""
    return digits_scenario(algorithms=[{"name": "fedasync", "alpha": 0.6}], budget={"time": 15.0},
                           tune={"trials": 2, "params": {"train.lr": [0.1, 0.2]}})


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tune stopped once its first batch was asked (trials in optuna.db, none run): what a Ctrl-C leaves."""
    base = tmp_path_factory.mktemp("stopped")

    def stop(line: str) -> None:
        if line.startswith("tune:"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tune(_small(), base / "out", workers=1, quiet=True, base=base, log=stop)
    return base / "out"


@pytest.fixture
def folder(stopped: Path, tmp_path: Path) -> Path:
    """A copy of the stopped tune, times kept, to change."""
    return Path(shutil.copytree(stopped, tmp_path / "out"))


def snapshot(folder: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every file and folder below ``folder``: its bytes (None for a folder) and modification time."""
    return {str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def refused(argv: list[str], folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``simfl argv``'s one line of refusal, having checked its exit code 2 and that ``folder`` is as it was."""
    before = snapshot(folder)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("simfl: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert snapshot(folder) == before
    return err


def edit_tune(folder: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Change the folder's tune.yaml as a user editing it would."""
    raw = yaml.safe_load((folder / TUNE_FILE).read_text())
    change(raw)
    (folder / TUNE_FILE).write_text(yaml.safe_dump(raw, sort_keys=False))


# -- tune.yaml against what the tune started as ---------------------------------------------------------------------


def test_a_tune_records_what_it_started_as(stopped: Path) -> None:
    record = json.loads((stopped / STARTED_FILE).read_text())
    text = (stopped / TUNE_FILE).read_text()
    assert record["tune_yaml"] == text
    assert record["sha256"] == text_digest(text) == hashlib.sha256((stopped / TUNE_FILE).read_bytes()).hexdigest()


def _budget(raw: dict[str, Any]) -> None:
    raw["budget"]["time"] = 30.0


def _searched(raw: dict[str, Any]) -> None:
    raw["tune"]["params"]["train.lr"] = [0.1, 0.3]


def _two(raw: dict[str, Any]) -> None:
    raw["seeds"] = [0, 1]
    raw["budget"]["time"] = 30.0


@pytest.mark.parametrize(("change", "expected"), [
    (_budget, "its budget changed since the tune started (budget.time 15 → 30); a tune resumes only as it was started"),
    (_searched, "its tune changed since the tune started (tune.params.train.lr[1] 0.2 → 0.3)"),
    (_two, "its seeds, budget changed since the tune started (seeds [0] → [0, 1]; budget.time 15 → 30)"),
], ids=["budget", "searched value", "two keys"])
def test_a_changed_tune_yaml_is_refused_on_resume(change: Callable[[dict[str, Any]], None], expected: str,
                                                  folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit_tune(folder, change)
    err = refused(["tune", "--resume", str(folder), "--quiet"], folder, capsys)
    assert f"simfl: {folder / TUNE_FILE}: " in err and expected in err, err


def test_how_tune_yaml_is_written_is_no_change(folder: Path) -> None:
    # a comment, another order of keys, 15 for 15.0: the same scenario
    raw = yaml.safe_load((folder / TUNE_FILE).read_text())
    raw["budget"] = {"updates": None, "time": 15}
    (folder / TUNE_FILE).write_text("# mine\n" + yaml.safe_dump(dict(reversed(raw.items())), sort_keys=False))
    check_started(folder, load(folder / TUNE_FILE))
    # a simfl that writes the scenario otherwise (here, without a default) still resumes the tune it started
    record = json.loads((folder / STARTED_FILE).read_text())
    text = record["tune_yaml"].replace("  updates: null\n", "")
    assert text != record["tune_yaml"]
    record.update(tune_yaml=text, sha256=text_digest(text))
    (folder / STARTED_FILE).write_text(json.dumps(record))
    check_started(folder, load(folder / TUNE_FILE))


def test_a_tampered_record_is_refused(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = json.loads((folder / STARTED_FILE).read_text())
    (folder / STARTED_FILE).write_text(json.dumps({**record, "tune_yaml": record["tune_yaml"] + "# more\n"}))
    err = refused(["tune", "--resume", str(folder), "--quiet"], folder, capsys)
    assert f"{folder / STARTED_FILE}: is not this tune's record of how it started: its text does not have" in err


def test_a_folder_without_the_record_is_not_checked_but_its_storage_still_holds_it(
        folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a folder written before started.json existed: no record to compare with, so no check of tune.yaml ...
    (folder / STARTED_FILE).unlink()
    edit_tune(folder, _budget)
    check_started(folder, load(folder / TUNE_FILE))
    # ... but a changed searched value no longer matches what optuna.db asked: one line, not Optuna's ValueError
    edit_tune(folder, _searched)
    err = refused(["tune", "--resume", str(folder), "--quiet"], folder, capsys)
    assert (f"{folder / STORAGE_FILE}: is not this tune's Optuna storage: fedasync trial 0's train.lr was drawn from "
            "[0.1, 0.2], and tune.yaml searches [0.1, 0.3]") in err, err


# -- optuna.db that is not the tune's -------------------------------------------------------------------------------


def _sql(path: Path, *statements: str) -> None:
    with sqlite3.connect(path) as db:
        for statement in statements:
            db.execute(statement)
    db.close()


def _random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(0).randbytes(8192))


def _foreign(path: Path) -> None:
    path.unlink()
    _sql(path, "CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT)", "INSERT INTO things VALUES (1, 'a')")


def _older(path: Path) -> None:
    _sql(path, "UPDATE alembic_version SET version_num = 'v3.0.0.d'", "UPDATE version_info SET library_version = '3.6.1'")


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "note.txt").write_text("mine\n")


def _index(path: Path) -> None:
    _sql(path, "UPDATE trial_params SET param_value = 99")


def _distribution(path: Path) -> None:
    changed = json.dumps({"name": "CategoricalDistribution", "attributes": {"choices": [0.1, 0.3]}})
    _sql(path, f"UPDATE trial_params SET distribution_json = '{changed}'")


@pytest.mark.parametrize(("tamper", "expected"), [
    (_random_bytes, "it is not an SQLite database; restore the tune's own optuna.db, or start the tune afresh"),
    (_foreign, "it holds no Optuna studies (its tables: things)"),
    (_older, "its schema is an older Optuna's (v3.0.0.d; Optuna "),
    (_folder, "it is a folder"),
    (_index, "fedasync trial 0's train.lr is stored as 99.0, which is not among [0.1, 0.2]"),
    (_distribution, "fedasync trial 0's train.lr was drawn from [0.1, 0.3], and tune.yaml searches [0.1, 0.2]"),
], ids=["random bytes", "foreign sqlite", "older schema", "a folder", "index 99", "changed distribution"])
def test_an_optuna_db_not_the_tunes_is_refused_untouched(tamper: Callable[[Path], None], expected: str, folder: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    tamper(folder / STORAGE_FILE)
    err = refused(["tune", "--resume", str(folder), "--quiet"], folder, capsys)
    assert f"simfl: {folder / STORAGE_FILE}: is not this tune's Optuna storage: {expected}" in err, err


def test_the_halving_replay_refuses_a_foreign_optuna_db_untouched(folder: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _foreign(folder / STORAGE_FILE)
    err = refused(["tune", "--halving-replay", str(folder)], folder, capsys)
    assert f"{folder / STORAGE_FILE}: is not this tune's Optuna storage: it holds no Optuna studies" in err, err


# -- a value space of the wrong kind for the option's type ------------------------------------------------------------


@pytest.mark.parametrize(("params", "expected"), [
    ({"train.batch_size": {"float": [8, 40]}},
     "'train.batch_size': {float: [8, 40]} does not fit entry fedasync: batch_size takes integers; give {int: [low, "
     "high]} (an integer step optional) or a list of integers"),
    ({"train.batch_size": [8.0, 16]}, "'train.batch_size': [8.0, 16] does not fit entry fedasync: batch_size takes "
     "integers, not 8.0"),
    ({"train.lr": [0.1], "algorithms[fedavg].clients_per_round": {"log": [1, 4]}},
     "'algorithms[fedavg].clients_per_round': {log: [1, 4]} does not fit entry fedavg: clients_per_round takes "
     "integers"),
    ({"train.lr": [0.1], "algorithms[fedasync].staleness": {"float": [0.1, 1.0]}},
     "'algorithms[fedasync].staleness': {float: [0.1, 1.0]} does not fit entry fedasync: staleness takes a section, "
     "not a range of numbers; give a list of its values"),
], ids=["float range", "float in a list", "log range", "a section"])
@pytest.mark.parametrize("command", ["validate", "tune"])
def test_a_range_of_the_wrong_kind_is_refused_before_any_folder(params: dict[str, Any], expected: str, command: str,
                                                               tmp_path: Path, write_scenario,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = write_scenario(digits_scenario(tune={"trials": 2, "params": params}))
    out = tmp_path / "out"
    argv = ["validate", str(path)] if command == "validate" else ["tune", str(path), "--out", str(out), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("simfl: ") and err.count("\n") == 1 and expected in err, err
    assert not out.exists()


def test_ranges_of_the_right_kind_pass() -> None:
    for params in ({"train.batch_size": {"int": [8, 40], "step": 8}}, {"train.batch_size": [8, 16]},
                   {"train.momentum": {"int": [0, 1]}, "algorithms[*].staleness.a": {"float": [0.1, 1.0]}},
                   {"train.lr": {"log": [0.001, 0.3]}, "algorithms[*].staleness": [{"kind": "constant"}]}):
        assert validate(digits_scenario(tune={"trials": 2, "params": params})).tune is not None


def test_a_resumed_tune_yaml_with_a_range_of_the_wrong_kind_is_refused(folder: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    edit_tune(folder, lambda raw: raw["tune"]["params"].update({"train.batch_size": {"float": [8, 40]}}))
    err = refused(["tune", "--resume", str(folder), "--quiet"], folder, capsys)
    assert "'train.batch_size': {float: [8, 40]} does not fit entry fedasync: batch_size takes integers" in err, err
