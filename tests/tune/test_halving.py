"""Fair early stopping in ``simfl tune``: the rungs and the survivors by hand, a rung's run as the prefix of the
full trial, and a tiny digits tune pruned at the same rungs for every entry, alike with one worker, two, and
after a stop and a resume, still finding the value that clearly wins."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simfl.cli import main
from simfl.errors import InputError
from simfl.launch.tune import BEST_FILE, TRIALS_FILE, TUNE_FILE, halving_share, plan_of, score_at, tune
from simfl.schema.scenario import load, validate
from simfl.schema.tuning import HalvingConfig, rung_times, survivors
from tests.tune.test_tune import digits_scenario

pytest.importorskip("optuna")

LRS = [0.0003, 0.001, 0.003, 0.01, 0.03, 0.3]
"""Five steps too small to move an MLP on digits in 90 s (about chance) and one that learns: 0.3 wins every rung."""


def halving_scenario(**tune_changes: Any) -> dict[str, Any]:
    """The tune tests' digits scenario over 90 virtual seconds evaluated every 10: rungs at 10, 30 and 90 s."""
    tune_section: dict[str, Any] = {"trials": 6, "batch": 6, "params": {"train.lr": LRS}}
    tune_section.update(tune_changes)
    return digits_scenario(name="tiny-halving", budget={"time": 90.0}, eval={"every": 10.0}, tune=tune_section)


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize(("eta", "rungs", "budget", "every", "times"), [
    (3, 3, 6000.0, 200.0, [600.0, 2000.0, 6000.0]),  # 6000 / 9 = 666.7 and 6000 / 3 rounded down to the grid
    (3, 3, 90.0, 10.0, [10.0, 30.0, 90.0]),
    (2, 4, 80.0, 10.0, [10.0, 20.0, 40.0, 80.0]),
    (3, 3, 30.0, 15.0, [30.0]),  # 30 / 9 and 30 / 3 are under one period: no rung before the budget
    (3, 3, 45.0, 15.0, [15.0, 45.0]),  # 45 / 9 = 5 is under one period, 45 / 3 = 15 is on the grid
    (4, 2, 100.0, 30.0, [100.0]),  # 100 / 4 = 25 rounds down to 0 s, under one period: only the budget is left
])
def test_the_rungs_lie_on_the_evaluation_grid(eta: int, rungs: int, budget: float, every: float,
                                              times: list[float]) -> None:
    assert rung_times(HalvingConfig(eta=eta, rungs=rungs), budget, every) == times


def test_the_best_share_of_a_rung_goes_on() -> None:
    # 6 scored, eta 3: the best ceil(6 / 3) = 2, a broken (NaN) score last
    assert survivors({0: 0.5, 1: 0.9, 2: 0.1, 3: 0.8, 4: 0.2, 5: 0.3}, 3) == [1, 3]
    assert survivors({7: math.nan, 8: 0.0}, 3) == [8]
    assert survivors({7: math.nan}, 3) == [7]  # one trial always goes on
    assert survivors({0: 0.2, 1: 0.4, 2: 0.3}, 2) == [1, 2]
    # a tie at the cut is no evidence: every trial level with the last one kept goes on (all four at the untrained
    # model's accuracy, as before a synchronous rule's first round; two level second best)
    assert survivors({0: 0.1, 1: 0.1, 2: 0.1, 3: 0.1}, 3) == [0, 1, 2, 3]
    assert survivors({0: 0.5, 1: 0.9, 2: 0.5, 3: 0.2, 4: 0.1, 5: 0.0}, 3) == [0, 1, 2]
    assert survivors({0: math.nan, 1: math.nan, 2: math.nan}, 3) == [0, 1, 2]
    assert survivors({}, 3) == []


def test_halving_share_by_hand() -> None:
    # per entry one batch of 6 at rungs 10, 30, 90 s, a promoted trial continuing from its rung: 4 stop at 10 s,
    # 1 at 30 s, 1 at 90 s = 40 + 30 + 90 = 160 of 6 x 90 = 540 virtual seconds: 0.2963
    plan = plan_of(validate(halving_scenario()))
    assert plan.rungs == [10.0, 30.0, 90.0] and plan.eta == 3
    assert halving_share(plan) == pytest.approx(160 / 540)
    # a grid's trials do not depend on the scores: all 6 of an entry compete at its rungs, whatever tune.batch
    assert halving_share(plan_of(validate(halving_scenario(batch=4)))) == pytest.approx(160 / 540)
    # TPE learns from the scores, batch by batch: batches of 4 and 2 (6 trials, batch 4) are halved apart,
    # 2 x 10 + 1 x 30 + 1 x 90 = 140 and 1 x 10 + 1 x 90 = 100, of 6 x 90 = 540
    tpe = halving_scenario(batch=4, sampler="tpe", params={"train.lr": {"log": [0.001, 0.5]}})
    assert halving_share(plan_of(validate(tpe))) == pytest.approx(240 / 540)


def test_halving_is_on_where_it_is_safe_and_says_why_it_is_off(tmp_path: Path) -> None:
    assert plan_of(validate(halving_scenario())).config.halving == HalvingConfig()  # the resolved choice
    small = plan_of(validate(halving_scenario(trials=2)))
    assert small.rungs == [] and small.config.halving is False
    assert small.halving_note == ("halving off: an entry's first batch has 2 trials, fewer than eta 3: none would be "
                                  "pruned (raise tune.trials)")
    short = halving_scenario()
    short["budget"] = {"time": 15.0}
    assert "leaves no rung on the evaluation grid" in plan_of(validate(short)).halving_note
    # asked for where it cannot run: one line naming the field
    with pytest.raises(InputError, match=r"tune\.halving.*cannot run: an entry's first batch has 2 trials"):
        plan_of(validate(halving_scenario(batch=2, sampler="tpe", params={"train.lr": {"log": [0.001, 0.5]}},
                                          halving=True)))
    # off when asked, and in a folder's tune.yaml written before halving existed (unset there)
    assert plan_of(validate(halving_scenario(halving=False))).rungs == []
    assert plan_of(validate(halving_scenario()), resume=True).rungs == []
    assert plan_of(validate(halving_scenario(halving={"eta": 2, "rungs": 2}))).rungs == [40.0, 90.0]


def test_a_rung_is_the_full_trial_up_to_it(tmp_path: Path) -> None:
    # the run to a rung has the full run's evaluations up to the rung, so its score there is the same
    from simfl import run as run_scenario
    from simfl.launch.tune import trial_scenario
    from simfl.output.results import read_metrics

    plan = plan_of(validate(halving_scenario()))
    entry = plan.entries[1]
    metrics = {}
    for budget in (30.0, 90.0):
        scn = trial_scenario(plan.raw, entry, {"train.lr": 0.3}, 0.1, "test", 5, budget)
        run_scenario(scn, tmp_path / f"to{budget:g}", quiet=True)
        metrics[budget] = read_metrics(tmp_path / f"to{budget:g}", entry.name, 0)
    part, whole = metrics[30.0], metrics[90.0]
    assert list(part["virtual_time"]) == [0.0, 10.0, 20.0, 30.0]
    pd.testing.assert_frame_equal(part, whole[whole["virtual_time"] <= 30.0].reset_index(drop=True))
    for rule in ("final_accuracy", "best_accuracy", "mean_accuracy"):
        assert score_at(part, rule) == score_at(whole, rule, 30.0)


def _tune(tmp_path: Path, out: str, workers: int = 1, **kw: Any) -> Path:
    return tune(halving_scenario(), tmp_path / out, workers=workers, quiet=True, base=tmp_path, **kw).out


@pytest.fixture(scope="module")
def halved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny halving tune, one worker, without a stop."""
    return _tune(tmp_path_factory.mktemp("halved"), "one")


def test_halving_prunes_at_the_same_rungs_for_every_entry_and_finds_the_best(halved: Path) -> None:
    table = rows(halved / TRIALS_FILE)
    for entry in ("fedasync", "fedavg"):
        mine = [r for r in table if r["entry"] == entry]
        # 6 trials at 10 s, the best 2 at 30 s, the best 1 at 90 s: the same rungs and shares for both entries
        assert sorted(float(r["rung"]) for r in mine) == [10.0] * 4 + [30.0, 90.0]
        assert [r["state"] for r in mine].count("pruned") == 5 and [r["state"] for r in mine].count("scored") == 1
        assert sum(float(r["virtual_seconds"]) for r in mine) == 4 * 10 + 30 + 90  # promoted trials continue
        full = next(r for r in mine if r["state"] == "scored")
        assert float(full["train.lr"]) == 0.3  # the value that clearly wins, found with 0.30 of the training
        assert full["folder"] == f"trials/{entry}/trial{full['trial']}/rung2"
        # every trial's score at the rungs it reached; a trial's score is its last rung's
        for r in mine:
            at = [r[f"score_at_{t}s"] for t in ("10", "30", "90")]
            reached = [float(x) for x in at if x != ""]
            assert reached[-1] == pytest.approx(float(r["score"]))
            assert len(reached) == {10.0: 1, 30.0: 2, 90.0: 3}[float(r["rung"])]
        # the trial at 0.3 scores best at 10 s already, well above the too-small steps (about chance)
        first = {float(r["train.lr"]): float(r["score_at_10s"]) for r in mine}
        assert max(first, key=lambda lr: first[lr]) == 0.3
    best = load(halved / BEST_FILE)
    assert [a.train.lr for a in best.algorithms] == [0.3, 0.3]
    assert load(halved / TUNE_FILE).tune.halving == HalvingConfig()  # what a resume continues
    assert (halved / "trials" / "fedavg" / "trial5" / "rung0" / "summary.csv").is_file()
    assert (halved / "trials.png").stat().st_size > 0  # with its panel of the scores at the rungs


def test_two_workers_give_the_halving_table_of_one(halved: Path, tmp_path: Path) -> None:
    two = _tune(tmp_path, "two", workers=2)
    assert (two / TRIALS_FILE).read_bytes() == (halved / TRIALS_FILE).read_bytes()
    assert (two / BEST_FILE).read_bytes() == (halved / BEST_FILE).read_bytes()


@pytest.mark.parametrize("stop_at", [2])
def test_a_halving_tune_stopped_between_rungs_resumes_to_the_same_trials(stop_at: int, halved: Path,
                                                                         tmp_path: Path) -> None:
    lines: list[str] = []

    def stop(line: str) -> None:  # Ctrl-C as the second (third) rung is about to run
        lines.append(line)
        if len([x for x in lines if x.startswith("tune:")]) == stop_at:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _tune(tmp_path, "cut", log=stop)
    assert main(["tune", "--resume", str(tmp_path / "cut"), "--quiet"]) == 0
    assert (tmp_path / "cut" / TRIALS_FILE).read_bytes() == (halved / TRIALS_FILE).read_bytes()
    assert (tmp_path / "cut" / BEST_FILE).read_bytes() == (halved / BEST_FILE).read_bytes()


def test_the_replay_of_a_full_search_makes_the_choices_of_a_live_halving(halved: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # the same grid searched without halving, then replayed from its trials' own curves: the same rungs, the same
    # survivors and the same best trial as the tune that halved as it ran, at the share that tune ran
    from simfl.launch.tune import replay_halving

    full = tune(halving_scenario(halving=False), tmp_path / "full", workers=1, quiet=True, base=tmp_path).out
    replay = replay_halving(full)
    lines = replay.lines()
    assert replay.kept == 2 and (replay.pruned, replay.trials) == (10, 12)
    live = {r["entry"]: r for r in rows(halved / TRIALS_FILE) if r["state"] == "scored"}
    for entry in ("fedasync", "fedavg"):
        line = next(x for x in lines if x.startswith(f"{entry}:"))
        assert f"the full search's best is trial {live[entry]['trial']} (train.lr=0.3: " in line
        assert line.endswith("halving keeps the same")
    assert lines[-1].startswith("halving at 10, 30, 90 s keeping 1/3 of each entry: 10 of 12 trials pruned, 0.30 of "
                                "the full search's virtual training")
    # what halving kept at each rung is what the live tune ran to it
    pruned_at = {(r["entry"], r["trial"]): r["rung"] for r in rows(halved / TRIALS_FILE)}
    assert sorted(pruned_at.values()).count("10.0") == 8
    times = {0: "10.0", 1: "30.0", 2: "90.0"}
    assert {(entry, str(number)): times[j] for (entry, number), j in replay.reached.items()} == pruned_at
    # the command line: the same lines; a bad eta is one line and exit 2; a halving tune is not replayed
    assert main(["tune", "--halving-replay", str(full)]) == 0
    assert capsys.readouterr().out.splitlines() == lines
    assert main(["tune", "--halving-replay", str(full), "--eta", "1"]) == 2
    assert "--eta: Input should be greater than or equal to 2" in capsys.readouterr().err
    assert main(["tune", "--halving-replay", str(halved)]) == 2
    assert "was tuned with halving already" in capsys.readouterr().err


def test_validate_states_the_tunes_cost_and_the_training_it_runs(tmp_path: Path, write_scenario,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # simfl validate states the tune's rungs, the share of training halving runs and its cost (CPU, wall here and on
    # Ray nodes); the share is what the tune then runs, counted from its trials table (how long that takes against
    # the estimate is a timing: python -m benchmarks.tune_estimate)
    from simfl.launch.tune import tune_seconds

    raw = halving_scenario(trials=3, batch=3, params={"train.lr": [0.01, 0.03, 0.3]})
    raw.update(budget={"time": 900.0}, eval={"every": 100.0}, algorithms=[{"name": "fedasync", "alpha": 0.6}])
    assert main(["validate", str(write_scenario(raw))]) == 0
    printed = capsys.readouterr().out
    # 3 trials to 100 s, 1 of them on to 300 s and 900 s, continuing: 2 x 100 + 900 = 1100 of 3 x 900 = 2700 virtual
    # seconds
    assert "halving keeps the best 1/3 of each entry at 100, 300, 900 s (the rest pruned): 0.41 of the training" in printed
    assert "#   cost:          the tune: CPU about " in printed and "on 4 Ray nodes like this one" in printed
    plan = plan_of(validate(raw))
    cost = tune_seconds(plan)
    assert cost is not None and cost[0] == pytest.approx(cost[1] * 1100 / 2700)
    out = tune(raw, tmp_path / "tuned", workers=1, quiet=True, base=tmp_path).out
    assert sum(float(r["virtual_seconds"]) for r in rows(out / TRIALS_FILE)) == 1100.0


@pytest.mark.parametrize(("seconds", "asked", "rungs", "note"), [
    ([2.0, 3.0, 5.0, 7.0], None, [10.0, 30.0, 90.0], ""),  # mean round 4.25 s: every rung after it
    ([12.0, 14.0, 16.0, 18.0], None, [30.0, 90.0], "2 rungs: a rung before 15 s, the mean round time"),
    ([40.0, 50.0, 60.0, 70.0], None, [], "halving off: a rung before 55 s, the mean round time"),
    ([12.0, 14.0, 16.0, 18.0], {"eta": 3, "rungs": 3}, [10.0, 30.0, 90.0], "its first rung at 10 s comes first"),
])
def test_no_default_rung_before_the_mean_round(seconds: list[float], asked: dict[str, int] | None,
                                               rungs: list[float], note: str) -> None:
    # rungs at 10, 30, 90 s by default; a rung before the mean round time cuts trials before most clients' first
    # update: the default takes fewer rungs (none: off), a halving asked for keeps its rungs and says so
    raw = halving_scenario(halving=asked)
    raw["latency"] = {"model": "constant", "seconds": seconds}
    plan = plan_of(validate(raw))
    assert plan.rungs == rungs
    assert plan.halving_note.startswith(note) if note else plan.halving_note == ""
