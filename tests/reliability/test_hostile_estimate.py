"""The estimate counts every store: ``record:`` copies, client state, events and metrics, checkpoints, disk.

The issue: ``record.layer`` keeps a copy of a layer per aggregation, yet ``simfl validate`` said 16 MiB for a
run that peaked at 2.6 GB and wrote 485 MB, and a 4096x4096 layer over 10^5 virtual seconds (about 20 TB)
was "valid, 1.0 GiB". Here:

- two small record scenarios are run for real in a child process, and the estimate of peak memory
  (``ru_maxrss`` of that child) and of the bytes written (the output folder's files) must be within 2x;
- generated cases (layer sizes x budgets x evaluation grids, and seeds x free space) are checked in-process
  without training: a huge one is refused by ``simfl validate`` and ``simfl run`` in one line with exit 2
  before anything is written, a sane one is accepted (``run`` up to the launch, which is replaced).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

import simfl.cli
from simfl.cli import main
from simfl.schema import costs, estimate
from simfl.schema import scenario as scenario_mod

ROOT = Path(__file__).resolve().parents[2]
LIMIT = "8G"
"""--max-memory of the generated cases, so that they do not depend on this machine's RAM."""
LIMIT_BYTES = 8 << 30


def record_scenario(features: int, hidden: int, budget: dict[str, Any], every: float, seeds: int = 1,
                    algorithms: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """10 clients, each round 10 s (so one arrival per virtual second), an MLP whose layer '1.weight' of
    ``hidden x features`` values is recorded after each aggregation; pure-latency mode (no training)."""
    return {
        "name": "rec",
        "seeds": list(range(seeds)),
        "data": {"dataset": "synthetic", "features": features, "classes": 4, "train_size": 400, "test_size": 100,
                 "partition": {"kind": "iid", "clients": 10}},
        "model": {"name": "mlp", "hidden": [hidden]},
        "latency": {"model": "constant", "seconds": [10.0] * 10},
        "budget": budget,
        "eval": {"every": every},
        "algorithms": algorithms or [{"name": "fedasync", "alpha": 0.6}],
        "executor": {"kind": "none"},
        "record": {"layer": "1.weight"},
    }


# -- measured: estimate vs a real run ------------------------------------------------------------------------------

class Measured(NamedTuple):
    """What a real run took: its peak resident memory and the bytes of its output folder."""

    peak: int
    written: int


def measure(path: Path, out: Path) -> Measured:
    """Peak RSS of ``simfl run`` in a child process (its own rusage, from wait4) and the bytes of its folder."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-m", "simfl", "run", str(path), "--out", str(out), "--quiet",
                              "--workers", "1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0, child.stderr.read() if child.stderr else ""
    written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return Measured(usage.ru_maxrss * 1024, written)


@pytest.mark.parametrize("raw", [
    # one asynchronous run: 300 aggregations of a 512x256 layer (150 MiB recorded)
    record_scenario(256, 512, {"updates": 300}, 20.0),
    # FedAvg (rounds of 5) and FedAsync, two seeds each: four recordings of a 256x256 layer, one process
    record_scenario(256, 256, {"updates": 400}, 20.0, seeds=2,
                    algorithms=[{"name": "fedavg", "clients_per_round": 5}, {"name": "fedasync", "alpha": 0.6}]),
], ids=["async-150MiB", "sync-and-async-two-seeds"])
def test_estimate_is_within_2x_of_a_measured_record_run(tmp_path: Path, raw: dict[str, Any]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    est = estimate.estimate(scenario_mod.load(path))
    got = measure(path, tmp_path / "out")
    assert 0.5 <= est.memory / got.peak <= 2.0, (est.memory, got.peak)
    assert 0.5 <= est.results_bytes / got.written <= 2.0, (est.results_bytes, got.written)
    assert est.record_disk_bytes > got.written / 2  # the recordings are what this folder holds


# -- generated: huge record scenarios refused, sane ones accepted ----------------------------------------------------

LAYERS = [(8, 8), (64, 64), (256, 1024), (1024, 1024), (4096, 4096)]
"""(features, hidden): the recorded layer has features x hidden values (64 ... 16.8 million)."""
BUDGETS = [{"time": 60.0}, {"time": 1e5}, {"updates": 50}, {"updates": 2000}]
"""One arrival (one aggregation) per virtual second: 60, 10^5, 50 and 2000 aggregations."""
EVERY = [1.0, 30.0, 1000.0]


def aggregations(budget: dict[str, Any]) -> float:
    return float(budget["updates"]) if "updates" in budget else float(budget["time"])


def hand_memory(features: int, hidden: int, budget: dict[str, Any]) -> float:
    """The recording alone, counted by hand: 4 bytes per value per aggregation, held about four times."""
    return 4.0 * features * hidden * aggregations(budget) * 4


CASES = [(f, h, b, e) for f, h in LAYERS for b in BUDGETS for e in EVERY]


def kind(features: int, hidden: int, budget: dict[str, Any]) -> str:
    mem = hand_memory(features, hidden, budget)
    return "huge" if mem > 4 * LIMIT_BYTES else "sane" if mem < LIMIT_BYTES / 4 else "between"


def case_id(case: tuple[int, int, dict[str, Any], float]) -> str:
    f, h, b, e = case
    return f"{f}x{h}-{'-'.join(f'{k}{v:g}' for k, v in b.items())}-every{e:g}"


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """``simfl run`` checks everything, takes its folder, then stops short of running (the folders it got)."""
    launched: list[Path] = []

    def launch(args: Any, target: Any, workers: int, pool: int) -> int:
        launched.append(target.folder.out)
        return 0

    monkeypatch.setattr(simfl.cli, "_launch", launch)
    return launched


def one_line_refusal(capsys: pytest.CaptureFixture[str], argv: list[Any]) -> str:
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("simfl: ") and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_record_scenarios_are_refused_or_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  no_launch: list[Path], command: str,
                                                  case: tuple[int, int, dict[str, Any], float]) -> None:
    features, hidden, budget, every = case
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(record_scenario(features, hidden, budget, every)))
    out = tmp_path / "out"
    argv: list[Any] = [command, path, "--out", out, "--max-memory", LIMIT] + (["--quiet"] if command == "run" else [])
    expected = kind(features, hidden, budget)
    if expected == "huge":
        err = one_line_refusal(capsys, argv)
        assert "--max-memory" in err and "record" in err, err  # the record is named as the store to lower
        assert not no_launch and not list(tmp_path.glob("out*"))  # nothing written, no lock taken
    elif expected == "sane":
        assert main([str(a) for a in argv]) == 0, capsys.readouterr().err
        assert no_launch == ([out] if command == "run" else [])
    else:  # near the limit: either answer, but a refusal is one line
        code = main([str(a) for a in argv])
        assert code in (0, 2)
        if code == 2:
            assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_the_estimate_counts_the_recording(case: tuple[int, int, dict[str, Any], float]) -> None:
    """In-process: the recording is one copy per aggregation, in memory and on disk, as counted by hand."""
    features, hidden, budget, every = case
    est = estimate.estimate(scenario_mod.validate(record_scenario(features, hidden, budget, every)))
    values = features * hidden
    assert est.record_values == values
    assert est.recording_bytes == pytest.approx(4 * values * aggregations(budget), rel=0.01, abs=1024)
    assert est.memory >= costs.runtime_bytes(False) + costs.RECORD_COPIES * est.recording_bytes
    assert est.record_disk_bytes == est.recording_bytes  # one run
    assert est.results_bytes >= est.record_disk_bytes + est.events * costs.EVENT_CSV_BYTES


def test_the_issue_example_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], no_launch: list[Path]) -> None:
    """A 4096x4096 layer over 10^5 virtual seconds: about 6.7 TB recorded here, refused on memory (default limit)."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(record_scenario(4096, 4096, {"time": 1e5}, 1000.0)))
    for command in ("validate", "run"):
        err = one_line_refusal(capsys, [command, path, "--out", tmp_path / "out"])
        assert "TiB of memory per run" in err and "record" in err, err
    assert not list(tmp_path.glob("out*")) and not no_launch


# -- generated: the disk check ---------------------------------------------------------------------------------------

DISK_CASES = [(seeds, free) for seeds in (1, 4, 16, 64) for free in (1 << 20, 256 << 20, 4 << 30, 1 << 40)]


@pytest.mark.parametrize(("seeds", "free"), DISK_CASES, ids=[f"seeds{s}-free{f >> 20}MiB" for s, f in DISK_CASES])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_disk_is_checked_against_the_free_space_of_out(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch, no_launch: list[Path],
                                                       command: str, seeds: int, free: int) -> None:
    """Each run records 500 aggregations of a 256x1024 layer (500 MiB): memory per run stays the same, the folder
    grows with the seeds; refused when it exceeds the free space of out's filesystem (faked here)."""
    usage = type("Usage", (), {"total": 1 << 50, "used": 0, "free": free})
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(record_scenario(256, 1024, {"updates": 500}, 30.0, seeds=seeds)))
    out = tmp_path / "deeper" / "out"  # its nearest existing parent is asked
    argv: list[Any] = [command, path, "--out", out, "--max-memory", "64G"] + (["--quiet"] if command == "run" else [])
    written = seeds * 500 * 256 * 1024 * 4
    if written > free:
        err = one_line_refusal(capsys, argv)
        assert f"to {tmp_path}: records" in err and "is free there" in err and "record.layer" in err, err
        assert not no_launch and not (tmp_path / "deeper").exists()
    else:
        assert main([str(a) for a in argv]) == 0, capsys.readouterr().err
        assert no_launch == ([out] if command == "run" else [])


def test_validate_shows_disk_apart_from_memory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(record_scenario(256, 1024, {"updates": 500}, 30.0, seeds=2)))
    assert main(["validate", str(path), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "#   record:        2.4 GiB in RAM at the end of a run (layer '1.weight', 262,144 values x 500" in out
    assert "#   disk:          1000.4 MiB of results (2 runs; records 1000.0 MiB)" in out
    assert "#   free disk:     " in out and f"in {tmp_path}, 1000.4 MiB needed (events and metrics, records)" in out
    assert yaml.safe_load(out)["name"] == "rec"  # still valid YAML


def test_checkpoints_count_against_the_disk(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch, no_launch: list[Path]) -> None:
    """--checkpoint-every keeps one checkpoint per run under way (and one being replaced)."""
    raw = record_scenario(256, 1024, {"updates": 50}, 30.0)
    del raw["record"]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    est = estimate.estimate(scenario_mod.load(path), checkpoints=True)
    assert est.kept_checkpoints(1) == 2 and est.checkpoint_bytes > 13 * est.model_bytes  # global, evaluated, in flight
    usage = type("Usage", (), {"total": 1 << 50, "used": 0, "free": est.results_bytes + est.checkpoint_bytes})
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage)
    err = one_line_refusal(capsys, ["run", path, "--out", tmp_path / "out", "--quiet", "--workers", "1",
                                    "--checkpoint-every", "10"])
    assert "checkpoints" in err and "2 kept at once" in err, err
    assert not no_launch


# -- client state: only the clients a run can reach ------------------------------------------------------------------


def served(concurrency: int | None, updates: int, store: str = "ram", scratch: Path | None = None,
           shift_source: str = "global") -> dict[str, Any]:
    """OrthoFL over 1,000 clients (under ``shift_source: global`` an anchor per client, and under ``server:`` each
    client's kept model), no record."""
    raw = record_scenario(64, 256, {"updates": updates}, 30.0,
                          algorithms=[{"name": "orthofl", "beta": 0.6, "a": 0.5, "shift_source": shift_source}])
    del raw["record"]
    raw["data"].update(train_size=4000, partition={"kind": "iid", "clients": 1000})
    raw["latency"] = {"model": "exponential", "mean": 10.0, "floor": 5.0}
    raw["client_state"] = {"store": store, "dir": None if scratch is None else str(scratch)}
    if concurrency is not None:
        raw["server"] = {"concurrency": concurrency}
    return raw


@pytest.mark.parametrize(("concurrency", "updates", "reached", "held"), [
    (5, 50, 55, 5), (5, 10_000, 1000, 5), (100, 50, 150, 51), (None, 50, 1000, 51),
])
def test_client_state_counts_the_clients_a_run_can_reach(concurrency: int | None, updates: int, reached: int,
                                                         held: int) -> None:
    """The clients in flight hold the global versions they started from: at most one per aggregation (one per
    update here) and the first, shared by the clients dispatched from it."""
    est = estimate.estimate(scenario_mod.validate(served(concurrency, updates)))
    rows = 1 if concurrency is None else 2  # the anchor, and under server: the kept model
    assert est.reached == reached
    assert est.client_state_bytes == held * est.model_bytes + reached * rows * est.model_bytes


@pytest.mark.parametrize("shift_source", ["global", "chain"])
def test_client_state_counts_the_rows_the_run_keeps(shift_source: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimate's rows per client are the rows the run's stores hold: under 'global' an anchor per client reached
    and a kept model per client that arrived; under 'chain' (the shift from the model a client was sent, held while
    it trains) the kept models alone. The run reaches fewer clients than the estimate's bound, never more."""
    from simfl.algorithms import store

    stores: list[store.RamVectors] = []
    made = store.RamVectors.__init__

    def init(self: store.RamVectors, clients: int, length: int) -> None:
        made(self, clients, length)
        stores.append(self)

    monkeypatch.setattr(store.RamVectors, "__init__", init)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(served(100, 2000, shift_source=shift_source)))
    est = estimate.estimate(scenario_mod.load(path))
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--workers", "1"]) == 0
    held = [len(s.rows()) for s in stores if s.rows()]
    assert len(held) == (2 if shift_source == "global" else 1)
    assert costs.store_rows(scenario_mod.load(path)) == len(held)
    assert all(0.8 * est.reached <= n <= est.reached for n in held), (held, est.reached)


def test_a_disk_store_is_checked_where_it_goes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch, no_launch: list[Path]) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(served(5, 10_000, "disk", scratch)))
    est = estimate.estimate(scenario_mod.load(path))
    assert est.disk_bytes == 1000 * 2 * est.model_bytes and est.store_dir == str(scratch)
    usage = type("Usage", (), {"total": 1 << 50, "used": 0, "free": est.disk_bytes // 2})
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage)
    for command in ("validate", "run"):
        err = one_line_refusal(capsys, [command, path, "--out", tmp_path / "out"])
        assert "client state" in err and "1,000 clients reached" in err and "client_state.dir" in err, err
    assert not no_launch and not list(tmp_path.glob("out*"))


def test_an_unknown_recorded_layer_is_refused_ahead(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = record_scenario(8, 8, {"updates": 5}, 30.0)
    raw["record"] = {"layer": "9.weight"}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    err = one_line_refusal(capsys, ["validate", path])
    assert "record.layer: unknown layer '9.weight'; the model has: 1.weight, 1.bias, 3.weight, 3.bias" in err, err
