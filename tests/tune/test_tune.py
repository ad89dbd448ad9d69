"""``simfl tune``: the known best value of a hand-built case, one worker against two, a stopped tune resumed, and
the best configuration as a scenario ``simfl run`` takes."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

import simfl
from simfl.cli import main
from simfl.launch.tune import BEST_FILE, STORAGE_FILE, TRIALS_FILE, TUNE_FILE, broken_since, tune
from simfl.schema.scenario import load
from simfl.schema.tuning import Space

pytest.importorskip("optuna")


def digits_scenario(**changes: Any) -> dict[str, Any]:
    """Digits over 4 IID clients, an MLP, 30 virtual seconds: a trial trains for about a second."""
    raw: dict[str, Any] = {
        "name": "tiny-tune",
        "seeds": [0],
        "data": {"dataset": "digits", "partition": {"kind": "iid", "clients": 4}},
        "model": {"name": "mlp", "hidden": [16]},
        "train": {"epochs": 1, "batch_size": 32, "lr": 0.05},
        "latency": {"model": "constant", "seconds": [2.0, 3.0, 5.0, 7.0]},
        "budget": {"time": 30.0},
        "eval": {"every": 15.0},
        "algorithms": [{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 4}],
    }
    raw.update(changes)
    return raw


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_learning_rate_grid_finds_the_value_that_clearly_wins(tmp_path: Path, write_scenario, capsys) -> None:
    # 1e-5 barely moves the weights in 30 s (about chance, 10%), 0.3 learns digits well above it: every entry's
    # best is 0.3, found by the grid, which runs each of the 2 points once although 3 trials were allowed
    raw = digits_scenario(tune={"trials": 3, "params": {"train.lr": [0.00001, 0.3]}})
    out = tmp_path / "tuned"
    assert main(["tune", str(write_scenario(raw)), "--out", str(out), "--quiet"]) == 0
    table = rows(out / TRIALS_FILE)
    assert [(r["entry"], r["trial"]) for r in table] == [("fedasync", "0"), ("fedasync", "1"), ("fedavg", "0"),
                                                        ("fedavg", "1")]
    for entry in ("fedasync", "fedavg"):
        scores = {float(r["train.lr"]): float(r["score"]) for r in table if r["entry"] == entry}
        assert set(scores) == {0.00001, 0.3}
        assert scores[0.3] > 0.6 > 0.25 > scores[0.00001]
    best = load(out / BEST_FILE)
    assert [a.train.lr for a in best.algorithms] == [0.3, 0.3]
    # the best is the grid's highest value: the summary and best.yaml's header say a wider grid may score higher
    edge = "fedavg: train.lr=0.3 is the highest of its grid; a wider search may score higher"
    printed = capsys.readouterr().out.splitlines()
    assert f"at an edge: {edge}" in printed
    assert f"# At an edge: {edge}." in (out / BEST_FILE).read_text().splitlines()
    # 0.3 wins however a trial is scored: the other rules choose the same trials, and both places say so
    for rule in ("best_accuracy", "mean_accuracy"):
        assert f"scored by {rule}: the same best trial of every entry" in printed
        assert f"# Scored by {rule}: the same best trial of every entry." in (out / BEST_FILE).read_text().splitlines()
    assert best.tune is None and best.seeds == [1] and best.name == "tiny-tune-tuned"
    assert best.data.validation is None  # the comparison trains on every row and scores on the test set
    assert (out / "trials.png").stat().st_size > 0
    assert (out / "trials" / "fedavg" / "trial1" / "summary.csv").is_file()
    # the trial's own scenario: the entry alone, scored on the validation split
    trial = load(out / "trials" / "fedavg" / "trial1" / "scenario.yaml")
    assert [a.name for a in trial.algorithms] == ["fedavg"] and trial.data.validation == 0.1
    assert trial.name == "tiny-tune-fedavg-trial1"  # one scenario name per trial: a report never pools trials


def _ranged(batch: int) -> dict[str, Any]:
    """One entry, two ranges searched by TPE, four trials asked ``batch`` at a time (with 2, the second batch is
    asked once the first is scored)."""
    return digits_scenario(algorithms=[{"name": "fedasync", "alpha": 0.6}], budget={"time": 15.0}, tune={
        "trials": 4, "batch": batch, "sampler": "tpe",
        "params": {"train.lr": {"log": [0.001, 0.5]}, "algorithms[*].alpha": {"float": [0.2, 0.9]}}})


def _whole(tmp_path_factory: pytest.TempPathFactory, batch: int) -> Path:
    base = tmp_path_factory.mktemp(f"whole{batch}")
    return tune(_ranged(batch), base / "out", workers=1, quiet=True, base=base).out


def test_two_workers_give_the_trials_table_of_one(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    one = _whole(tmp_path_factory, 4)
    two = simfl.tune(_ranged(4), tmp_path / "two", workers=2)  # the Python API, trials in two worker processes
    assert (two.out / TRIALS_FILE).read_bytes() == (one / TRIALS_FILE).read_bytes()
    assert list(two.trials["trial"]) == [0, 1, 2, 3] and two.trials["score"].notna().all()
    assert two.trials["train.lr"].nunique() == 4  # four distinct draws, each scored
    assert two.best.read_bytes() == (one / BEST_FILE).read_bytes()


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two-batch tune, run by one worker without a stop."""
    return _whole(tmp_path_factory, 2)


@pytest.mark.parametrize("stop_at", [1, 2])
def test_a_stopped_tune_resumes_to_the_same_trials(stop_at: int, whole: Path, tmp_path: Path) -> None:
    lines: list[str] = []

    def stop(line: str) -> None:
        lines.append(line)
        if len([x for x in lines if x.startswith("tune:")]) == stop_at:
            raise KeyboardInterrupt  # Ctrl-C once that batch was asked, before it ran

    with pytest.raises(KeyboardInterrupt):
        tune(_ranged(2), tmp_path / "cut", workers=1, quiet=True, base=tmp_path, log=stop)
    scored = tmp_path / "cut" / TRIALS_FILE
    assert (not scored.exists()) if stop_at == 1 else len(rows(scored)) == 2  # the batches before, scored
    assert main(["tune", "--resume", str(tmp_path / "cut"), "--quiet"]) == 0
    assert scored.read_bytes() == (whole / TRIALS_FILE).read_bytes()
    assert (tmp_path / "cut" / STORAGE_FILE).is_file() and (tmp_path / "cut" / TUNE_FILE).is_file()


def test_a_tune_stopped_within_a_batch_shows_the_trials_it_ran(whole: Path, tmp_path: Path) -> None:
    # the tables are written after each trial: a stop after the first trial of a batch keeps it in trials.csv
    # (waiting: Optuna is told when its whole batch has run) and in best.yaml, and the resume runs only the other
    lines: list[str] = []

    def stop(line: str) -> None:
        lines.append(line)
        if line.startswith("[2/"):  # the second trial's run ended: the first trial's folder is published
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tune(_ranged(2), tmp_path / "cut", workers=1, quiet=False, base=tmp_path, log=stop)
    table = rows(tmp_path / "cut" / TRIALS_FILE)
    complete = rows(whole / TRIALS_FILE)
    assert [(r["trial"], r["state"]) for r in table] == [("0", "waiting")]
    assert table[0]["score"] == complete[0]["score"] and complete[0]["state"] == "scored"
    assert "fedasync: trial 0 (best of 1 run so far of 4)" in (tmp_path / "cut" / BEST_FILE).read_text()
    assert "(best of 4)" in (whole / BEST_FILE).read_text()
    lines.clear()
    tune(resume=tmp_path / "cut", workers=1, quiet=True, log=lines.append)
    assert lines[0] == "tune: 1 trials (fedasync trial 1)"
    assert (tmp_path / "cut" / TRIALS_FILE).read_bytes() == (whole / TRIALS_FILE).read_bytes()


def test_a_resume_writes_the_tables_before_it_runs_a_trial(tmp_path: Path) -> None:
    # a folder whose tables are missing or stale (written by an older version) shows its trials as soon as it is
    # resumed, not only once the next trial ends
    lines: list[str] = []

    def stop(line: str) -> None:  # Ctrl-C at the second batch asked: the first scored, the second not run
        lines.append(line)
        if line.startswith("tune:") and "fedasync trial 2" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tune(_ranged(2), tmp_path / "cut", workers=1, quiet=True, base=tmp_path, log=stop)
    cut = tmp_path / "cut"
    first = (cut / TRIALS_FILE).read_bytes()
    (cut / TRIALS_FILE).write_text("entry,trial,score\n")  # an older form of the table
    (cut / BEST_FILE).unlink()
    lines.clear()
    with pytest.raises(KeyboardInterrupt):
        tune(resume=cut, workers=1, quiet=True, log=stop)  # stopped at its first line, before a trial runs
    assert lines == ["tune: 2 trials (fedasync trial 2, fedasync trial 3)"]
    assert (cut / TRIALS_FILE).read_bytes() == first and (cut / BEST_FILE).is_file()
    assert [r["state"] for r in rows(cut / TRIALS_FILE)] == ["scored", "scored"]


@pytest.mark.parametrize(("space", "value", "edge"), [
    (Space("categorical", (0.01, 0.03, 0.1)), 0.1, "highest"),
    (Space("categorical", (0.01, 0.03, 0.1)), 0.01, "lowest"),
    (Space("categorical", (0.01, 0.03, 0.1)), 0.03, None),
    (Space("categorical", (0.1,)), 0.1, None),  # one value: nothing was searched
    (Space("categorical", ("constant", "polynomial")), "polynomial", None),  # not an ordered scale
    (Space("categorical", (2, None, 8)), 8, None),
    (Space("float", low=0.2, high=0.9), 0.88, "high"),  # within 5% of the width
    (Space("float", low=0.2, high=0.9), 0.85, None),
    (Space("float", low=0.2, high=0.9), 0.2, "low"),
    (Space("float", low=0.001, high=0.3, log=True), 0.0013, "low"),  # 5% of the log width: up to 1.33e-3
    (Space("float", low=0.001, high=0.3, log=True), 0.0014, None),
    (Space("int", low=1, high=50), 48, "high"),
])
def test_a_value_at_an_end_of_what_was_searched(space: Space, value: Any, edge: str | None) -> None:
    assert space.edge(value) == edge


def test_a_trial_whose_model_broke_is_named(tmp_path: Path, write_scenario, capsys) -> None:
    # at lr 1e8 the MLP's weights overflow in the first rounds: its loss is NaN from the first evaluation on, and
    # its score, a constant guess's accuracy, does not say so; lr 0.3 learns and is not named
    raw = digits_scenario(algorithms=[{"name": "fedavg", "clients_per_round": 4}],
                          tune={"trials": 2, "params": {"train.lr": [0.3, 1.0e8]}})
    out = tmp_path / "tuned"
    assert main(["tune", str(write_scenario(raw)), "--out", str(out), "--quiet"]) == 0
    number = next(r["trial"] for r in rows(out / TRIALS_FILE) if float(r["train.lr"]) == 1.0e8)
    note = f"fedavg trial {number}: its loss is not finite from 15 s in seed 0"
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("diverged:")] == [f"diverged: {note}"]
    header = [line for line in (out / BEST_FILE).read_text().splitlines() if line.startswith("# Diverged")]
    assert header == [f"# Diverged: {note}; its score is a broken model's."]


@pytest.mark.parametrize(("losses", "since"), [
    (["2.3", "1.9", "nan", "inf"], 30.0),  # finite, then NaN: broken from its first non-finite evaluation
    (["2.3", "inf", "1.0", "1.0"], None),  # not finite once and finite again: its weights were finite, not broken
    (["2.3", "nan", "1.0", "nan"], 45.0),  # broken from the start of its last stretch of non-finite losses
    (["2.3", "1.9", "1.0", "0.8"], None),  # finite throughout
    (["", "", "", ""], None),  # no loss reported at all: nothing to say, not a broken model
])
def test_a_broken_model_is_found_from_its_last_stretch_of_non_finite_losses(tmp_path: Path, losses: list[str],
                                                                since: float | None) -> None:
    seed = tmp_path / "fedavg" / "seed0"
    seed.mkdir(parents=True)
    lines = [f"{15 * i:.1f},{4 * i},0.5,{loss}" for i, loss in enumerate(losses)]
    (seed / "metrics.csv").write_text("virtual_time,updates,accuracy,loss\n" + "\n".join(lines) + "\n")
    assert broken_since(tmp_path, "fedavg", [0]) == ({} if since is None else {0: since})


def test_best_yaml_runs_as_it_is(tmp_path: Path, write_scenario) -> None:
    # a best.yaml written by hand in the tune's form: each entry's own train: options over the scenario's
    raw = digits_scenario(algorithms=[{"name": "fedasync", "alpha": 0.4, "train": {"lr": 0.3}},
                                      {"name": "fedasync", "label": "plain"}], seeds=[1])
    out = tmp_path / "run"
    assert main(["run", str(write_scenario(raw)), "--out", str(out), "--quiet"]) == 0
    text = yaml.safe_load((out / "scenario.yaml").read_text())
    assert text["algorithms"][0]["train"] == {"lr": 0.3} and "train" not in text["algorithms"][1]


def test_given_first_makes_the_written_values_the_first_trial_of_a_grid_without_repeats(tmp_path: Path) -> None:
    import optuna

    from simfl.launch.tune import _next_batch, grid_order, plan_of
    from simfl.schema.scenario import validate

    raw = digits_scenario(tune={"trials": 6, "batch": 6, "given_first": True, "params": {
        "train.lr": [0.3, 0.05, 0.01], "algorithms[fedasync].alpha": [0.2, 0.6],
        "algorithms[fedasync].staleness": [{"kind": "constant"}, {"kind": "polynomial", "a": 0.5}]}})
    plan = plan_of(validate(raw))
    assert plan.sampler == "grid" and [e.trials for e in plan.entries] == [6, 3]  # fedavg's whole grid is 3 points
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'ask.db'}")
    for entry in plan.entries:
        order = grid_order(plan, entry)
        assert len(order) == len({repr(p) for p in order}) == (12 if entry.name == "fedasync" else 3)
        study = optuna.create_study(storage=storage, study_name=entry.name, direction="maximize")
        trials = _next_batch(plan, entry, study)
        assert [t.number for t in trials] == list(range(entry.trials))
        assert trials[0].values() == ({"train.lr": 0.05, "alpha": 0.6, "staleness": {"kind": "polynomial", "a": 0.5}}
                                      if entry.name == "fedasync" else {"train.lr": 0.05})
        assert [t.params for t in trials] == order[: entry.trials]


def _trial_folder(folder: Path, accuracies: list[float]) -> None:
    """A finished trial's files as ``simfl tune`` reads its scores: fedavg's seed 0, one evaluation every 15 s."""
    run = folder / "fedavg" / "seed0"
    run.mkdir(parents=True)
    lines = ["virtual_time,updates,accuracy,loss"] + [f"{15 * i},{i},{a},1.0" for i, a in enumerate(accuracies)]
    (run / "metrics.csv").write_text("\n".join(lines) + "\n")
    (folder / "summary.csv").write_text(f"algorithm,seed,final_accuracy,best_accuracy\n"
                                        f"fedavg,0,{accuracies[-1]},{max(accuracies)}\n")


def test_what_the_other_score_rules_would_choose(tmp_path: Path) -> None:
    # three trials of one entry, scored by hand: final 0.90 / 0.85 / 0.60, best 0.90 / 0.85 / 0.95, mean
    # (0.1 + 0.2 + 0.9) / 3 = 0.40, (0.1 + 0.8 + 0.85) / 3 = 0.5833, (0.1 + 0.95 + 0.6) / 3 = 0.55: the final
    # accuracy chooses trial 0, the best evaluation trial 2 and the mean trial 1
    from simfl.launch.tune import Trial, plan_of, rule_notes, trial_scores
    from simfl.schema.scenario import validate

    raw = digits_scenario(algorithms=[{"name": "fedavg", "clients_per_round": 4}],
                          tune={"trials": 3, "params": {"train.lr": [0.01, 0.03, 0.1]}})
    plan = plan_of(validate(raw))
    trials = [Trial(plan.entries[0], n, {"train.lr": lr}) for n, lr in enumerate((0.01, 0.03, 0.1))]
    for trial, accuracies in zip(trials, ([0.1, 0.2, 0.9], [0.1, 0.8, 0.85], [0.1, 0.95, 0.6]), strict=True):
        _trial_folder(tmp_path / trial.folder, accuracies)
        trial.scores = trial_scores(tmp_path / trial.folder, "fedavg", [0], "final_accuracy")
    assert [t.score for t in trials] == [0.9, 0.85, 0.6]
    assert rule_notes(plan, tmp_path, trials, {"fedavg": trials[0]}) == [
        "best_accuracy: fedavg trial 2 (train.lr=0.1: 0.9500)", "mean_accuracy: fedavg trial 1 (train.lr=0.03: 0.5833)"]
    # the rule's own choice is named by none; a rule that agrees says so; equal scores go to the lowest number
    assert rule_notes(plan, tmp_path, trials[:2], {"fedavg": trials[0]}) == [
        "best_accuracy: the same best trial of every entry", "mean_accuracy: fedavg trial 1 (train.lr=0.03: 0.5833)"]
    _trial_folder(tmp_path / "trials" / "fedavg" / "trial3", [0.1, 0.8, 0.85])
    twin = Trial(plan.entries[0], 3, {"train.lr": 0.03}, scores=[0.85])
    assert rule_notes(plan, tmp_path, [twin, *trials[:2]], {"fedavg": trials[0]})[1] == \
        "mean_accuracy: fedavg trial 1 (train.lr=0.03: 0.5833)"


def test_a_validation_split_too_small_to_separate_the_best_trials_is_named(tmp_path: Path) -> None:
    # 148 validation rows (every accuracy is k / 148): the best two trials at 140 and 139 rows, p = 140/148 = 0.9459,
    # differ by one row (0.0068) against two standard errors of 2 * sqrt(2 * 0.9459 * 0.0541 / 148) = 0.0526:
    # not separated; a difference of one row needs 8 * p * (1 - p) / (1/148)^2 = 8 * 0.05113 * 21904 = 8,960 rows
    from simfl.launch.tune import Trial, plan_of, resolution_notes, trial_scores, validation_rows
    from simfl.output.results import read_metrics
    from simfl.schema.scenario import validate

    raw = digits_scenario(algorithms=[{"name": "fedavg", "clients_per_round": 4}],
                          tune={"trials": 3, "params": {"train.lr": [0.01, 0.03, 0.1]}})
    plan = plan_of(validate(raw))
    trials = [Trial(plan.entries[0], n, {"train.lr": lr}) for n, lr in enumerate((0.01, 0.03, 0.1))]
    for trial, last in zip(trials, (140, 139, 100), strict=True):
        _trial_folder(tmp_path / trial.folder, [14 / 148, 90 / 148, last / 148])
        trial.scores = trial_scores(tmp_path / trial.folder, "fedavg", [0], "final_accuracy")
    assert validation_rows([read_metrics(tmp_path / t.folder, "fedavg", 0) for t in trials]) == 148
    (note,) = resolution_notes(plan, tmp_path, {"fedavg": trials[0]}, trials)
    assert note == ("fedavg: its best two trials, 0 and 1, score 0.9459 and 0.9392, 1 row apart of the validation "
                    "split's 148, within two standard errors (0.0526); about 8,960 rows would tell such a difference "
                    "apart (tune.validation, or more seeds)")
    # 40 rows apart is separated; accuracies that are no count of rows say nothing
    assert resolution_notes(plan, tmp_path, {"fedavg": trials[0]}, [trials[0], trials[2]]) == []
    assert validation_rows([pd.DataFrame({"accuracy": [0.1234567891234]})]) is None
