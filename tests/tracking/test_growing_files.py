"""metrics.csv and events.csv grow in the staging folder during a run; the published files are unchanged."""

from __future__ import annotations

from pathlib import Path

import yaml

from simfl.cli import main
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.output.results import GrowingRun, OutputFolder, append_to, run_files, write_run
from simfl.schema import scenario as scenario_mod
from simfl.sim.engine import Progress
from simfl.sim.state import SimState
from tests.conftest import tiny_scenario
from tests.reliability.helpers import faulty_scenario, interrupted_run


def _watch(folder: Path, seen: list[tuple[bytes, bytes]]) -> tuple[GrowingRun, Progress]:
    """A GrowingRun, and a callback reading its files back after every call, as ``tail -f`` would."""
    growing = GrowingRun(append_to(folder))

    def call(state: SimState) -> None:
        growing(state)
        seen.append(((folder / "metrics.csv").read_bytes(), (folder / "events.csv").read_bytes()))

    return growing, call


def test_growing_files_end_byte_identical_to_the_written_ones(tmp_path: Path) -> None:
    raw = faulty_scenario(budget={"time": 20.0}, eval={"every": 2.0})
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), 0)
    for index in range(len(scn.algorithms)):
        live = tmp_path / f"live{index}"
        seen: list[tuple[bytes, bytes]] = []
        growing, watch = _watch(live, seen)
        state = run_one(scn, fed, index, progress=watch).state
        folder = OutputFolder(tmp_path / f"ref{index}")
        write_run(folder, "x", 0, run_files(state))
        metrics = (folder.stage / "x" / "seed0" / "metrics.csv").read_bytes()
        events = (folder.stage / "x" / "seed0" / "events.csv").read_bytes()
        assert (live / "metrics.csv").read_bytes() == metrics and (live / "events.csv").read_bytes() == events
        # the text handed on is the written file: run_files takes it instead of writing every row again
        handed = growing.handed_on(state)
        assert handed == {"metrics.csv": metrics, "events.csv": events}
        assert run_files(state, written=handed) == run_files(state)
        assert growing.handed_on(state) == {}  # given once
        # each evaluation added rows: every snapshot is a prefix of the final file, and they grow
        assert len(seen) >= len(state.metrics) > 5
        assert all(metrics.startswith(m) and events.startswith(e) for m, e in seen)
        assert len({m for m, _ in seen}) == len(state.metrics)
        assert seen[0][0].count(b"\n") == 2 and len(seen[-1][1]) > len(seen[len(seen) // 2][1]) > len(seen[0][1])


def test_staging_files_grow_during_a_cli_run(write_scenario, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """During ``simfl run``, metrics.csv in ``<out>.partial`` holds every evaluation so far."""
    path = write_scenario(tiny_scenario(budget={"time": 12.0}, eval={"every": 1.0}))
    ref = tmp_path / "ref"
    assert main(["run", str(path), "--out", str(ref), "--quiet"]) == 0
    out = tmp_path / "out"
    stage_file = tmp_path / "out.partial" / "fedasync" / "seed0" / "metrics.csv"
    lines: list[int] = []
    original = GrowingRun.__call__

    def spy(self: GrowingRun, state: SimState) -> None:
        original(self, state)
        lines.append(len(stage_file.read_text().splitlines()) - 1)

    monkeypatch.setattr(GrowingRun, "__call__", spy)
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    assert lines[:13] == list(range(1, 14))
    for name in ("metrics.csv", "events.csv"):
        assert (out / "fedasync" / "seed0" / name).read_bytes() == (ref / "fedasync" / "seed0" / name).read_bytes()


def test_resume_rewrites_the_growing_files_and_publishes_identical_ones(tmp_path: Path) -> None:
    scn, stage = interrupted_run(tmp_path)
    ref = tmp_path / "ref"
    assert main(["run", str(scn), "--out", str(ref), "--quiet"]) == 0
    growing = stage / "fedbuff" / "seed0" / "events.csv"
    assert growing.exists()  # the interrupted run's rows so far
    assert (ref / "fedbuff" / "seed0" / "events.csv").read_bytes().startswith(growing.read_bytes())
    assert main(["run", "--resume", str(tmp_path / "out"), "--quiet"]) == 0
    for algorithm in ("fedasync", "fedbuff"):
        for name in ("metrics.csv", "events.csv"):
            assert (tmp_path / "out" / algorithm / "seed0" / name).read_bytes() == \
                (ref / algorithm / "seed0" / name).read_bytes()
    assert yaml.safe_load((tmp_path / "out" / "scenario.yaml").read_text()).get("tracking") is None


def test_events_text_is_given_only_when_every_event_was_handed_on(tmp_path: Path) -> None:
    """A run stopped between two evaluations has events no call handed on: run_files writes them all itself."""
    scn = scenario_mod.validate(tiny_scenario(budget={"time": 12.0}, eval={"every": 1.0}))
    fed = federation(scn, load_dataset(scn), 0)
    growing = GrowingRun(append_to(tmp_path / "run" / "seed0"))
    state = run_one(scn, fed, 0, progress=growing).state
    assert growing.written["events"] == len(state.events)
    extra = SimState(state.clients, events=[*state.events, state.events[-1]], metrics=state.metrics)
    assert "events.csv" not in growing.handed_on(extra)


def test_events_written_from_values_are_the_dict_rows_bytes() -> None:
    """events.csv is written from the events themselves, each its values in column order (no dict per row): the same
    bytes as its rows as dicts."""
    from simfl.output.results import csv_text, csv_values_text
    from simfl.sim.state import Event

    events = [
        Event(0.1 + 0.2, 1, 3, 1, 2.5e-7, 0.0, 0.6),
        Event(1e300, None, 0, None, None, None, None, "failure"),
        Event(526.2, 7, 12, 4, 100.0, 426.2, float("nan"), "leave"),
        Event(3218.1, 8, 1, 2, 1 / 3, 3000.0, -0.0, "late"),
    ]
    columns = Event.columns()
    want = csv_text(columns, (e.row() for e in events))
    assert csv_values_text(columns, events) == want
    assert csv_values_text(columns, events[2:], header=False) == csv_text(
        columns, (e.row() for e in events[2:]), header=False)
    assert ",,,,," in want and "\r\n" in want
