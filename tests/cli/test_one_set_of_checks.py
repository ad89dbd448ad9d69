"""One set of checks: whatever `simfl run` refuses of a scenario, `simfl validate` refuses with the same line.

Each case is a scenario that a run refuses once its data is split or its delay model built (the refusals raised
under simfl/latency, simfl/sim, simfl/train and simfl/launch/experiment.py that a scenario can provoke); both
commands are run on it, and their one-line messages must be equal. A clash names all of its sources (the issue's
case: a fleet trace's availability windows and a departure of the same client).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from simfl.cli import main
from tests.conftest import tiny_scenario

Case = Callable[[Path], dict[str, Any]]


def _fleet(folder: Path, windows: str = "30-100", period: str = "") -> str:
    """A fleet trace of two devices; the first present only within ``windows``."""
    path = folder / "fleet.csv"
    path.write_text(f"client,seconds_per_sample,bandwidth,windows,period\na,0.01,1e6,{windows},{period}\nb,0.02,1e6,,\n")
    return str(path)


CASES: dict[str, Case] = {
    "a departure during a fleet trace's absence": lambda d: tiny_scenario(
        latency={"model": "fleet_csv", "path": _fleet(d)},
        availability={"departures": [{"client": 2, "leave": 10.0, "rejoin": 40.0}]}),
    "a departure of a client that does not exist": lambda d: tiny_scenario(
        availability={"departures": [{"client": 7, "leave": 10.0}]}),
    "two departures of one client overlap": lambda d: tiny_scenario(
        availability={"departures": [{"client": 1, "leave": 10.0}, {"client": 1, "leave": 20.0, "rejoin": 30.0}]}),
    "a latency per client for too few clients": lambda d: tiny_scenario(
        latency={"model": "constant", "seconds": [1.0, 2.0]}),
    "more concurrency than clients": lambda d: tiny_scenario(server={"concurrency": 5}),
    "more clients per round than clients": lambda d: tiny_scenario(
        algorithms=[{"name": "fedavg", "clients_per_round": 4}]),
    "uniform bounds crossed once fitted": lambda d: tiny_scenario(latency={"model": "uniform", "low": 1000.0}),
    "a device per client for too few clients": lambda d: tiny_scenario(latency={"model": "replay", "devices": [0, 1]}),
    "a Pareto tail without a mean": lambda d: tiny_scenario(latency={"model": "pareto", "shape": 0.5}),
    "a periodic fleet trace without a horizon": lambda d: tiny_scenario(
        latency={"model": "fleet_csv", "path": _fleet(d, "0-5", "50")}),
    "a fleet trace that is not there": lambda d: tiny_scenario(
        latency={"model": "fleet_csv", "path": str(d / "missing.csv")}),
    "a disk store in a folder that is not there": lambda d: tiny_scenario(
        algorithms=[{"name": "orthofl"}], client_state={"store": "disk", "dir": str(d / "nowhere")}),
    "a Flower app's model under latencies scaled by its FLOPs": lambda d: tiny_scenario(
        data={"dataset": "flower_app", "partition": {"kind": "iid", "clients": 3}},
        model={"name": "flower_app", "app": "tests.flower.server_apps:fedavg_app",
               "run_config": {"num-server-rounds": 1, "lr": 0.1}},
        latency={"model": "lognormal", "scaling": {"compute": "workload"}}),
    "pairwise OrthoFL on too many clients": lambda d: tiny_scenario(
        data={**tiny_scenario()["data"], "train_size": 1000, "partition": {"kind": "iid", "clients": 101}},
        latency={"model": "exponential", "mean": 1.0}, algorithms=[{"name": "orthofl_pairwise"}]),
}


def _line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_and_validate_refuse_with_the_same_line(tmp_path: Path, case: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    raw = CASES[case](tmp_path)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**raw, "executor": {"kind": "none"}}, sort_keys=False))
    out = tmp_path / "out"
    ran = _line(capsys, ["run", str(path), "--out", str(out), "--quiet", "--workers", "1", "--allow-imports"])
    validated = _line(capsys, ["validate", str(path), "--allow-imports"])
    assert validated == ran
    assert not out.exists() and not out.with_name("out.partial").exists()


def test_a_clash_names_the_trace_and_the_departure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Client 2 plays the fleet's first device, away until 30 s: its departure from 10 s to 40 s overlaps that."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(CASES["a departure during a fleet trace's absence"](tmp_path)))
    assert _line(capsys, ["validate", str(path)]) == (
        "simfl: availability.departures[0]: client 2 is away from 10 to 40 here and from 0 to 30 by the availability "
        f"windows of the fleet trace latency.path {tmp_path / 'fleet.csv'}: one client's absences must not overlap")
