"""Halving's promoted trials continue from where their rung stopped: a run kept as its time budget stopped it and
resumed with a later budget is the run to that budget, so the continued tune's trials table, best.yaml and every
trial's files are those of the tune that runs every rung from time 0 (``CONTINUE_RUNGS`` off), with one worker,
two, and after a kill between rungs and a resume; and the tune's cost states the continued share."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import torch

from simfl.cli import main
from simfl.launch import runner
from simfl.launch import tune as tuning
from simfl.launch.tune import BEST_FILE, TRIALS_FILE, estimate_line, halving_share, plan_of, trial_scenario, tune
from simfl.schema.scenario import validate
from tests.tune.test_halving import halving_scenario, rows

pytest.importorskip("optuna")

SURVIVORS = {"fedasync": 2, "fedavg": 2}
"""Trials of each entry that go on from the first rung (6 trials, eta 3: ceil(6 / 3))."""


@pytest.mark.parametrize("algorithms", [
    None,  # the tiny tune's FedAsync and FedAvg
    [{"name": "flower", "strategy": "FedYogi"}],  # a Flower strategy's state (its moments) and tables go on too
])
def test_a_run_kept_at_its_budget_and_resumed_with_a_later_one_is_the_run_to_it(
        algorithms: list[dict[str, Any]] | None) -> None:
    # the run to 30 s kept as its budget stopped it (clients in flight, the 30 s evaluation row written, the stop
    # wake-up that fired still pending) and resumed with budget.time 90 ends in the state of the run to 90 s, field for
    # field; resumed without moving its stop wake-up it would end at once, at 30 s
    from simfl.launch.experiment import RunOptions, federation, load_dataset, run_one
    from simfl.sim.engine import Checkpointing
    from tests.sim.same import assert_same_state

    raw = halving_scenario()
    if algorithms is not None:
        pytest.importorskip("flwr")
        raw["algorithms"] = algorithms
    plan = plan_of(validate(raw))
    for entry in plan.entries:
        def scenario(budget: float, entry: Any = entry) -> Any:
            return trial_scenario(plan.raw, entry, {"train.lr": 0.3}, 0.1, "test", 5, budget)

        whole = scenario(90.0)
        ran = run_one(whole, federation(whole, load_dataset(whole), 0, 0), 0)
        direct = ran.state
        kept: list[bytes] = []

        def keep(sim: dict[str, Any], kept: list[bytes] = kept) -> None:
            buffer = io.BytesIO()
            torch.save(sim, buffer)
            kept.append(buffer.getvalue())

        part = scenario(30.0)
        short = run_one(part, federation(part, load_dataset(part), 0, 0), 0,
                        RunOptions(checkpointing=Checkpointing(lambda sim: None, at_end=keep))).state
        assert len(kept) == 1 and short.now == 30.0
        sim = torch.load(io.BytesIO(kept[0]), weights_only=True)
        assert sim["state"]["now"] == 30.0 and sim["state"]["metrics"][-1]["virtual_time"] == 30.0
        assert any(c["handle"] is not None for c in sim["state"]["clients"])  # rounds in flight at the rung
        assert [row for row in sim["state"]["pending"] if row[0] == "stop"][0][2] == 30.0
        again = run_one(whole, federation(whole, load_dataset(whole), 0, 0), 0, RunOptions(resume=sim))
        continued = again.state
        assert continued.now == 90.0 and len(continued.events) > len(short.events)
        assert_same_state(continued, direct)
        assert again.tables == ran.tables  # a Flower strategy's federated.csv and train.csv rows


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The (entry, seed) runs that continued from a kept state, as the runner finds them."""
    found: list[tuple[str, int]] = []
    kept_run = runner.kept_run

    def counting(folder: Path, algorithm: str, seed: int, at: float) -> tuple[dict[str, Any] | None, float]:
        sim, wall = kept_run(folder, algorithm, seed, at)
        if sim is not None:
            found.append((algorithm, seed))
        return sim, wall

    monkeypatch.setattr(runner, "kept_run", counting)
    return found


def _tune(tmp_path: Path, out: str, workers: int = 1, **kw: Any) -> Path:
    return tune(halving_scenario(), tmp_path / out, workers=workers, quiet=True, base=tmp_path, **kw).out


@pytest.fixture(scope="module")
def afresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny halving tune with every rung run from time 0, as before continuation."""
    with pytest.MonkeyPatch.context() as patch:  # for this tune only: the tests' own tunes continue
        patch.setattr(tuning, "CONTINUE_RUNGS", False)
        return _tune(tmp_path_factory.mktemp("afresh"), "afresh")


def _trial_files(out: Path) -> dict[str, bytes]:
    """Every file of every trial's folders, summary.csv without its wall_seconds (the machine's, not the run's)."""
    import pandas as pd

    found = {}
    for path in sorted((out / "trials").rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(out).as_posix()
        data = path.read_bytes()
        if path.name == "summary.csv":
            data = pd.read_csv(path).drop(columns="wall_seconds").to_csv(index=False).encode()
        found[rel] = data
    return found


def _same(out: Path, afresh: Path) -> None:
    assert (out / TRIALS_FILE).read_bytes() == (afresh / TRIALS_FILE).read_bytes()
    assert (out / BEST_FILE).read_bytes() == (afresh / BEST_FILE).read_bytes()
    assert _trial_files(out) == _trial_files(afresh)
    assert not list(out.rglob("*.end"))  # every kept state removed once continued or pruned


def test_a_continued_tune_is_the_tune_run_from_time_0(afresh: Path, tmp_path: Path,
                                                      counted: list[tuple[str, int]]) -> None:
    out = _tune(tmp_path, "continued")
    _same(out, afresh)
    # the runs that continued: per entry the 2 trials to 30 s and the 1 to 90 s (seed 0), none of the first rung's
    assert sorted(counted) == sorted([("fedasync", 0)] * 3 + [("fedavg", 0)] * 3)
    # what each trial cost, continuing: 4 stopped at 10 s, 1 at 30 s, 1 at 90 s per entry
    assert sorted(float(r["virtual_seconds"]) for r in rows(out / TRIALS_FILE)) == [10.0] * 8 + [30.0] * 2 + [90.0] * 2
    assert "0.30 of the training of every trial run to the budget" in (out / BEST_FILE).read_text()


def test_two_workers_continue_to_the_same_tune(afresh: Path, tmp_path: Path, counted: list[tuple[str, int]]) -> None:
    out = _tune(tmp_path, "two", workers=2)
    _same(out, afresh)
    assert len(counted) == 6


def test_a_tune_killed_between_rungs_resumes_from_the_kept_runs(afresh: Path, tmp_path: Path,
                                                                counted: list[tuple[str, int]]) -> None:
    lines: list[str] = []
    kept_then: list[str] = []

    def stop(line: str) -> None:  # a kill as the second rung is about to run
        lines.append(line)
        if len([x for x in lines if x.startswith("tune:")]) == 2:
            kept_then.extend(sorted(p.relative_to(tmp_path / "cut").as_posix()
                                    for p in (tmp_path / "cut").rglob("seed0.pt")))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _tune(tmp_path, "cut", log=stop)
    # the first rung's runs of the trials going on are kept, the pruned ones' already removed: 2 of 6 per entry
    assert [p.split("/")[1] for p in kept_then].count("fedasync") == SURVIVORS["fedasync"]
    assert [p.split("/")[1] for p in kept_then].count("fedavg") == SURVIVORS["fedavg"]
    assert all(p.endswith(f"/rung0.end/{p.split('/')[1]}/seed0.pt") for p in kept_then)
    assert "from 10 to 30 s" in lines[-1]
    assert counted == []
    assert main(["tune", "--resume", str(tmp_path / "cut"), "--quiet"]) == 0
    _same(tmp_path / "cut", afresh)
    assert len(counted) == 6  # the resume continued from the kept runs, not from time 0


def test_an_entry_whose_runs_cannot_be_checkpointed_runs_each_rung_from_time_0(
        afresh: Path, tmp_path: Path, counted: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch) -> None:
    # as a ServerApp entry's: FedAvg's runs taken as not checkpointable are run afresh at every rung, to the same
    # scores; only FedAsync's continue, and FedAvg's trials cost each rung from time 0
    from simfl.algorithms.configs import FedAvgConfig

    monkeypatch.setattr(FedAvgConfig, "checkpointable", False)
    plan = plan_of(validate(halving_scenario()))
    # per entry 6 trials over 10, 30, 90 s: FedAsync 4 x 10 + 30 + 90 = 160, FedAvg from 0 at each rung
    # 6 x 10 + 2 x 30 + 90 = 210, of 2 x 6 x 90 = 1080
    assert halving_share(plan) == pytest.approx(370 / 1080)
    assert ("0.34 of the training of every trial to the budget (fedavg: each rung a run from time 0, as runs that "
            "cannot be checkpointed)") in estimate_line(plan, None)
    out = _tune(tmp_path, "fallback")
    assert sorted(counted) == [("fedasync", 0)] * 3
    table = rows(out / TRIALS_FILE)
    cost = {(r["entry"], r["trial"]): r.pop("virtual_seconds") for r in table}
    assert table == [{k: v for k, v in r.items() if k != "virtual_seconds"} for r in rows(afresh / TRIALS_FILE)]
    assert sum(float(v) for (entry, _), v in cost.items() if entry == "fedavg") == 210.0
    assert sum(float(v) for (entry, _), v in cost.items() if entry == "fedasync") == 160.0
    assert _trial_files(out) == _trial_files(afresh)


def test_the_cost_states_the_continued_share(write_scenario, capsys: pytest.CaptureFixture[str]) -> None:
    # eta 3 over 2 rungs, 24 trials of one entry over 90 s evaluated every 10: rungs at 30 and 90 s. All 24 run to
    # 30 s (24 / 3 = 8 run-equivalents) and 8 go on from there to 90 s (8 x 2 / 3 = 5.33): 13.33 of 24, 0.56; run from
    # time 0 at each rung it was 24 / 3 + 8 = 16 of 24, 0.67
    lrs = [round(0.01 * (k + 1), 2) for k in range(24)]
    raw = halving_scenario(trials=24, batch=24, params={"train.lr": lrs}, halving={"eta": 3, "rungs": 2})
    raw["algorithms"] = [{"name": "fedasync", "alpha": 0.6}]
    plan = plan_of(validate(raw))
    assert plan.rungs == [30.0, 90.0]
    assert halving_share(plan) == pytest.approx((24 * 30 + 8 * 60) / (24 * 90))
    assert main(["validate", str(write_scenario(raw))]) == 0
    printed = capsys.readouterr().out
    assert "halving keeps the best 1/3 of each entry at 30, 90 s (the rest pruned): 0.56 of the training" in printed
    assert "each rung a run from time 0" not in printed


def test_a_kept_run_that_does_not_read_as_this_one_is_not_continued(tmp_path: Path) -> None:
    # a kept state saves time and decides nothing: one that is damaged, another run's or kept at another time is
    # passed over (the run then starts at time 0, to the same files)
    from simfl.launch.checkpoint import keep_run, kept_run, run_blob

    sim = {"state": {"now": 10.0, "updates": 3, "clients": [], "events": [], "metrics": [], "pending": []},
           "algorithm": {}, "latency": {}, "availability": None, "last_eval": None}
    keep_run(tmp_path / "end", "fedasync", 0, run_blob("fedasync", 0, 1.5, sim))
    found, wall = kept_run(tmp_path / "end", "fedasync", 0, 10.0)
    assert found is not None and found["state"]["updates"] == 3 and wall == 1.5
    assert kept_run(tmp_path / "end", "fedasync", 0, 30.0) == (None, 0.0)  # kept at another rung
    assert kept_run(tmp_path / "end", "fedasync", 1, 10.0) == (None, 0.0)  # no such seed
    (tmp_path / "end" / "fedasync" / "seed0.pt").write_bytes(b"not a checkpoint")
    assert kept_run(tmp_path / "end", "fedasync", 0, 10.0) == (None, 0.0)
