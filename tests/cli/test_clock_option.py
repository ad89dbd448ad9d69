"""The clock can be chosen: ``simfl run --clock simpy|heap`` and ``simfl.run(..., clock=...)`` simulate every run on
that clock (a unit carries it wherever it runs), also with ``--verify`` and on resume, and give the same files on
both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import simfl
from simfl.cli import main
from simfl.sim import clock as clock_mod
from tests.conftest import tiny_scenario
from tests.reliability.helpers import interrupted_run

FILES = ("metrics.csv", "events.csv")


def scenario() -> dict[str, Any]:
    """Pure latency (where ``auto`` takes the heap clock), failures, a departure, sync rounds with a deadline."""
    return tiny_scenario(executor={"kind": "none"}, latency={"model": "exponential", "mean": 1.5}, budget={"time": 20.0},
                         availability={"p": 0.2, "rejoin_delay": 0.3, "departures": [{"client": 1, "leave": 5.0,
                                                                                       "rejoin": 9.0}]},
                         algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}],
                         rounds={"deadline": 2.0, "over_select": 0.5})


@pytest.fixture
def clocks_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of the clocks the runs of this process were simulated on (the real clocks, only listed)."""
    made: list[str] = []
    real = clock_mod.make_clock

    def listed(kind: clock_mod.ClockKind, *args: Any) -> clock_mod.Clock:
        made.append(kind)
        return real(kind, *args)

    monkeypatch.setattr("simfl.sim.world.make_clock", listed)
    return made


def files(out: Path) -> dict[str, bytes]:
    return {f"{a}/{n}": (out / a / "seed0" / n).read_bytes() for a in ("fedasync", "fedavg") for n in FILES}


def test_run_on_either_clock_gives_the_same_files(tmp_path: Path, clocks_made: list[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    outs = {}
    for clock in ("simpy", "heap", "auto"):
        outs[clock] = tmp_path / clock
        assert main(["run", str(path), "--out", str(outs[clock]), "--quiet", "--verify", "--clock", clock]) == 0
    assert clocks_made == ["simpy", "simpy", "heap", "heap", "heap", "heap"]  # auto: heap in pure-latency mode
    assert files(outs["simpy"]) == files(outs["heap"]) == files(outs["auto"])


def test_a_run_resumed_on_the_other_clock_gives_the_same_files(tmp_path: Path, clocks_made: list[str]) -> None:
    raw = scenario()
    scn, stage = interrupted_run(tmp_path, raw)  # checkpointed on the heap clock (auto, pure latency), then stopped
    assert main(["run", "--resume", str(tmp_path / "out"), "--quiet", "--clock", "simpy"]) == 0
    assert clocks_made[-1] == "simpy"
    assert main(["run", str(scn), "--out", str(tmp_path / "ref"), "--quiet"]) == 0
    assert files(tmp_path / "out") == files(tmp_path / "ref")


def test_the_api_takes_the_clock(tmp_path: Path, clocks_made: list[str]) -> None:
    heap = simfl.run(scenario(), tmp_path / "heap", clock="heap")
    simpy = simfl.run(scenario(), tmp_path / "simpy", clock="simpy")
    assert clocks_made == ["heap", "heap", "simpy", "simpy"]
    assert heap.events.equals(simpy.events) and heap.metrics.equals(simpy.metrics)
    swept = simfl.sweep(scenario(), {"train.lr": [0.1]}, tmp_path / "sweep", clock="simpy")
    assert clocks_made[4:] == ["simpy", "simpy"] and len(swept.summary) == 2


@pytest.mark.parametrize(("clock", "error", "text"), [
    ("simpyy", ValueError, "clock must be one of 'auto', 'simpy', 'heap', got 'simpyy'"),
    (None, TypeError, "clock must be one of 'auto', 'simpy', 'heap', got NoneType None"),
])
def test_the_api_refuses_another_clock_before_anything_runs(tmp_path: Path, clock: Any, error: type[Exception],
                                                            text: str) -> None:
    with pytest.raises(error) as caught:
        simfl.run(scenario(), tmp_path / "out", clock=clock)
    assert str(caught.value) == text and not (tmp_path / "out").exists()


def test_another_clock_on_the_command_line_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--clock", "sim"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "simfl: run: argument --clock: invalid choice: 'sim' (choose from 'simpy', 'heap', 'auto')"
    assert not (tmp_path / "out").exists()
