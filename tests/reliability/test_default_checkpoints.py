"""Default checkpoints on the wall clock: runs checkpoint every few minutes of wall time without being asked, an
interrupted run resumes from its last one, and the files never depend on when (or whether) the wall clock fired.

The wall clock here is a fake that advances 10 s at each read, so the checkpoints fall at the same reads in every
run of a test: the default interval (5 minutes) is reached after 30 reads.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from simfl.cli import main
from simfl.launch import units
from simfl.launch.checkpoint import (
    CHECKPOINT_FILE,
    INCOMPLETE_FILE,
    RUNNING_DIR,
    WALL_DEFAULT,
    Session,
    load_checkpoint,
    load_run,
    parse_wall,
)
from simfl.launch.experiment import RunOptions, federation, load_dataset, run_one
from simfl.output.results import run_files
from simfl.schema import scenario as scenario_mod
from simfl.sim import checkpoints
from simfl.sim.engine import Checkpointing
from tests.conftest import tiny_scenario
from tests.parallel.test_units import result_files
from tests.reliability.helpers import Saves, faulty_scenario


class FakeWall:
    """A wall clock that advances ``step`` seconds at each read; ``interrupt_after`` reads later it raises
    KeyboardInterrupt, as a Ctrl-C would at that point of the run."""

    def __init__(self, step: float = 10.0) -> None:
        self.now = 0.0
        self.step = step
        self.reads = 0
        self.interrupt_after: int | None = None

    def monotonic(self) -> float:
        self.reads += 1
        if self.interrupt_after is not None:
            self.interrupt_after -= 1
            if self.interrupt_after < 0:
                self.interrupt_after = None
                raise KeyboardInterrupt
        self.now += self.step
        return self.now


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> FakeWall:
    """The fake wall clock, read by the checkpoints of every run in this process."""
    fake = FakeWall()
    monkeypatch.setattr(checkpoints, "time", SimpleNamespace(monotonic=fake.monotonic))
    return fake


def test_every_wall_clock_checkpoint_resumes_to_the_same_run(wall: FakeWall) -> None:
    """Failures, a departure, async and sync entries (with a deadline and over-selection), in pure-latency mode (a
    training run's resume is the same path: tests/reliability/test_checkpoint.py): the run with wall-clock
    checkpoints has the events and metrics of the run without, and each of its checkpoints resumes to them."""
    scn = scenario_mod.validate(faulty_scenario(executor={"kind": "none"}))
    fed = federation(scn, load_dataset(scn), 0)
    for i in range(len(scn.algorithms)):
        saved = Saves()
        full = run_files(run_one(scn, fed, i, checkpointing=Checkpointing(saved, every_wall=50.0)).state)
        assert run_files(run_one(scn, fed, i).state) == full, "wall-clock checkpoints changed the run"
        times = [data["state"]["now"] for data in saved.loaded()]
        assert len(saved) >= 2 and 0 < times[0] < times[-1] < 30.0, times
        for data in saved.loaded():
            assert run_files(run_one(scn, fed, i, resume=data).state) == full


def test_a_costly_checkpoint_spaces_the_next_ones(wall: FakeWall) -> None:
    """A checkpoint that cost c seconds is followed by one no sooner than c / WALL_SHARE seconds later (the fake
    clock makes a save cost one 10 s step: the next comes 200 s after it, not the 30 s asked for)."""
    scn = scenario_mod.validate(faulty_scenario(executor={"kind": "none"}))
    fed = federation(scn, load_dataset(scn), 0)
    stamps: list[float] = []
    run_one(scn, fed, 0, checkpointing=Checkpointing(lambda data: stamps.append(wall.now), every_wall=30.0))
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    assert len(stamps) >= 3 and min(gaps) >= 10.0 / checkpoints.WALL_SHARE, gaps


def _scenario(folder: Path) -> Path:
    raw = tiny_scenario(budget={"time": 60.0},
                        algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}])
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_an_interrupted_run_resumes_from_its_last_default_checkpoint(
        wall: FakeWall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`simfl run` without any checkpoint option, interrupted midway through its second run after that run's
    default checkpoint: `--resume` goes on from that checkpoint, and every file is as an uninterrupted run's,
    with default checkpoints (at other instants) or none."""
    scn = _scenario(tmp_path)
    saves: list[tuple[str, float]] = []
    save_run = Session.save_run

    def spy(self: Session, algorithm: str, seed: int, blob: bytes, now: float, updates: int) -> None:
        save_run(self, algorithm, seed, blob, now, updates)
        saves.append((algorithm, now))
        if algorithm == "fedavg" and wall.interrupt_after is None and interrupting:
            wall.interrupt_after = 8  # a few reads on: the run has gone past its checkpoint

    monkeypatch.setattr(Session, "save_run", spy)
    interrupting = False
    ref = tmp_path / "ref"
    assert main(["run", str(scn), "--out", str(ref), "--quiet", "--workers", "1"]) == 0
    assert {a for a, _ in saves} == {"fedasync", "fedavg"}, "no default checkpoints"
    off = tmp_path / "off"
    saves.clear()
    assert main(["run", str(scn), "--out", str(off), "--quiet", "--workers", "1", "--checkpoint-wall", "off"]) == 0
    assert saves == []

    interrupting = True
    wall.step = 7.0  # the wall clock fires at other instants than in the reference run
    out = tmp_path / "out"
    stage = tmp_path / "out.partial"
    assert main(["run", str(scn), "--out", str(out), "--quiet", "--workers", "1"]) == 130
    marker = (stage / INCOMPLETE_FILE).read_text()
    assert "interrupted by SIGINT" in marker and "finished: fedasync seed0" in marker
    held = load_run(stage / RUNNING_DIR / "fedavg" / "seed0.pt")["sim"]["state"]
    assert held["updates"] > 0 and held["now"] == [t for a, t in saves if a == "fedavg"][-1]
    assert load_checkpoint(stage / CHECKPOINT_FILE)["wall"] == WALL_DEFAULT

    interrupting = False
    starts: list[float] = []
    run = units.run_one

    def resumed(scn: Any, fed: Any, index: int, options: RunOptions) -> Any:
        starts.append(0.0 if options.resume is None else options.resume["state"]["now"])
        return run(scn, fed, index, options)

    monkeypatch.setattr(units, "run_one", resumed)
    assert main(["run", "--resume", str(out), "--quiet", "--workers", "1"]) == 0
    assert starts == [held["now"]]
    assert result_files(out) == result_files(ref) == result_files(off)


@pytest.mark.parametrize(("text", "seconds"), [("5m", 300.0), ("90s", 90.0), (" 90 ", 90.0), ("1.5h", 5400.0),
                                               ("off", None), ("OFF", None)])
def test_checkpoint_wall_syntax(text: str, seconds: float | None) -> None:
    assert parse_wall(text) == seconds


@pytest.mark.parametrize("text", ["0", "0s", "-5m", "5d", "", "infs", "1e400s", "never"])
def test_checkpoint_wall_rejects(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(_scenario(tmp_path)), "--out", str(tmp_path / "o"), f"--checkpoint-wall={text}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("simfl: --checkpoint-wall: expected a wall-clock interval") and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.partial").exists()
