"""Progress that tells the truth: runs report from within, the time left follows what was measured (hand-computed
cases), the elapsed time ticks with no report, and the API shows progress where a person watches."""

from __future__ import annotations

import io
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import simfl
from simfl.launch import progress as progress_mod
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.launch.progress import Progress, watched
from simfl.launch.units import Done, Grown, Message, Moved, Unit, run_unit, units_of
from simfl.output.results import run_files
from simfl.schema import scenario as scenario_mod
from simfl.sim import pulse
from tests.conftest import tiny_scenario


class Clock:
    """A wall clock set by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _units(estimates: dict[str, float]) -> list[Unit]:
    return [Unit(0, i, name, 0, "", "", 1, None, estimate=seconds) for i, (name, seconds) in enumerate(estimates.items())]


def test_time_left_deals_the_units_to_the_workers_at_their_scaled_estimates() -> None:
    """A, B (estimated 100 s each) and C (50 s) on two workers."""
    clock = Clock()
    shown = Progress(_units({"a": 100.0, "b": 100.0, "c": 50.0}), workers=2, quiet=True, clock=clock)
    # nothing measured: the estimates, dealt in plan order (A and B side by side, C after the first of them)
    assert shown.eta() == 150.0
    assert shown.describe() == "0/3 runs, 0s elapsed, starting: about 2m30s of runs (estimated)"
    clock.now = 40.0
    shown.finished((0, "a", 0), 40.0, "done")
    # A took 40 s for its 100: the estimates scale by (prior + 40) / (prior + 100), the prior a twentieth of the
    # mean estimate; B and C then go side by side
    prior = 0.05 * 250 / 3
    assert shown.eta() == pytest.approx(100 * (prior + 40) / (prior + 100))
    assert shown.describe() == "1/3 runs, 40s elapsed, about 42s left"


def test_time_left_follows_a_units_own_pace() -> None:
    """The issue's case: a run estimated at 2 minutes, 14% done after 7 min 33 s. Its own pace (453 s per 14%) gives
    46 min left; blended with its estimate (a twentieth of a run at the estimated pace, scaled as measured), 43 min.
    The bar said 1m59s before."""
    clock = Clock()
    shown = Progress(_units({"a": 120.0}), workers=1, quiet=True, clock=clock)
    shown.moved((0, "a", 0), 0.0)
    clock.now = 453.0
    shown.moved((0, "a", 0), 0.14)
    factor = (6 + 453) / (6 + 120 * 0.14)
    assert shown.eta() == pytest.approx(0.86 * (453 + 6 * factor) / (0.14 + 0.05))
    assert shown.describe() == "0/1 runs, 7m33s elapsed, about 43m17s left"
    assert shown.eta() == pytest.approx(453 / 0.14 * 0.86, rel=0.1)


def test_a_resumed_unit_is_timed_from_where_its_checkpoint_stands() -> None:
    clock = Clock()
    shown = Progress(_units({"a": 100.0}), workers=1, quiet=True, clock=clock)
    shown.moved((0, "a", 0), 0.5)
    clock.now = 10.0
    shown.moved((0, "a", 0), 0.6)
    assert shown.eta() == pytest.approx(40.0)  # 10 s per tenth (as estimated), four tenths left
    assert shown.describe() == "0/1 runs, 10s elapsed, about 40s left"


def test_the_elapsed_time_ticks_when_no_unit_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_mod, "TICK_SECONDS", 0.01)
    clock, out = Clock(), io.StringIO()
    shown = Progress(_units({"a": 100.0}), workers=1, bar=True, file=out, clock=clock)
    try:
        clock.now = 75.0
        deadline = time.monotonic() + 10
        while "1m15s elapsed" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "0/1 runs, 1m15s elapsed, starting: about 1m40s of runs (estimated)" in out.getvalue()
    finally:
        shown.close()


def test_a_unit_reports_from_within_its_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """One metric row at each end of the run, and Moved messages in between (the wall clock advances 1 s a read:
    the pulse beats every third read), with the share of the budget done, from 0."""
    fake = Clock()

    def read() -> float:
        fake.now += 1.0
        return fake.now

    monkeypatch.setattr(pulse, "time", SimpleNamespace(monotonic=read))
    raw = tiny_scenario(executor={"kind": "none"}, budget={"time": 60.0}, eval={"every": 60.0})
    scn = scenario_mod.validate(raw)
    unit = units_of(0, scn, Path("."), None, False, 1.0)[0]
    messages: list[Message] = []
    outcome = run_unit(unit, messages.append)
    assert isinstance(outcome, Done)
    shares = [m.done for m in messages if isinstance(m, Moved)]
    assert shares[0] == 0.0 and len(shares) > 10 and shares == sorted(shares) and 0.5 < shares[-1] <= 1.0
    assert len([m for m in messages if isinstance(m, Grown) and m.file == "metrics.csv"]) <= 2
    alone = run_one(scn, federation(scn, load_dataset(scn), 0), 0).state  # without the pulse: the same run
    assert {k: outcome.files[k] for k in ("metrics.csv", "events.csv")} == run_files(alone)


def test_watched_means_a_terminal_or_a_notebook_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = SimpleNamespace(isatty=lambda: True, write=lambda text: len(text), flush=lambda: None)
    monkeypatch.delenv("CI", raising=False)
    assert not watched()  # pytest's captured stderr is no terminal
    monkeypatch.setattr("sys.stderr", terminal)
    assert watched()
    monkeypatch.setenv("CI", "true")
    assert not watched()
    monkeypatch.setenv("CI", "false")
    assert watched()


def test_the_api_shows_progress_by_default_only_where_a_person_watches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    raw = tiny_scenario(executor={"kind": "none"})
    simfl.run(raw, tmp_path / "a")  # a pipe (pytest's capture): quiet
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(progress_mod, "watched", lambda: True)
    simfl.run(raw, tmp_path / "b")
    assert "[1/1] fedasync seed0: accuracy nan in " in capsys.readouterr().err
    simfl.run(raw, tmp_path / "c", quiet=True)
    assert capsys.readouterr().err == ""


def test_units_of_a_scenario_carry_the_wall_clock_checkpoints_where_they_can_be_taken() -> None:
    raw = tiny_scenario(algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}])
    scn = scenario_mod.validate(raw)
    assert [u.wall for u in units_of(0, scn, Path("."), None, False, 1.0, 300.0)] == [300.0, 300.0]
    recorded = scenario_mod.validate({**raw, "record": {"layer": "0.weight"}})
    assert [u.wall for u in units_of(0, recorded, Path("."), None, False, 1.0, 300.0)] == [None, None]
    assert units_of(0, scn, Path("."), None, False, 1.0)[0].wall is None


def test_a_finished_run_whose_model_broke_says_so_in_its_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # at lr 1e8 the MLP's weights are NaN after the first updates: its loss is finite at 0 s and not from the
    # evaluation at 2 s on, and its accuracy, a constant guess's, does not say so; at lr 0.1 nothing is added
    monkeypatch.setattr(progress_mod, "watched", lambda: True)
    simfl.run(tiny_scenario(train={"epochs": 1, "batch_size": 16, "lr": 1.0e8}), tmp_path / "a")
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("[1/1]"))
    assert line.startswith("[1/1] fedasync seed0: accuracy 0.3000 (the model broke, its loss is not finite from 2 s to "
                           "the end) in ")
    simfl.run(tiny_scenario(), tmp_path / "b")
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("[1/1]"))
    assert "(" not in line and "finite" not in line
