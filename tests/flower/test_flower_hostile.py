"""``simfl flwr run`` on apps that misuse their threads, and the budget of simfl's own rules over an app."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("flwr")

import yaml  # noqa: E402

from simfl.cli import main  # noqa: E402
from simfl.errors import InputError  # noqa: E402
from simfl.launch import flwr_app  # noqa: E402
from tests.flower.tiny_apps import app_folder  # noqa: E402

LATENCY = "latency={model: constant, seconds: [10, 12, 20]}"
"""Three nodes; a round of all three closes 20 s after it opened."""


def flwr(capfd: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    """``simfl flwr run`` in this process: its exit code and every line written to the terminal's stderr meanwhile
    (the file descriptor's, so a thread's traceback printed late is seen too)."""
    capfd.readouterr()
    code = main(["flwr", "run", *argv, "--quiet", "--workers", "1", "--set", LATENCY, "--set", "eval.every=20"])
    return code, capfd.readouterr().err.strip().splitlines()


@pytest.mark.parametrize(("app", "words"), [
    ("late_app", "the ServerApp tests.flower.tiny_apps:late_app called grid.send_and_receive from a thread of its own "
     "('late-sender') after main returned"),
    ("pushing_app", "the ServerApp tests.flower.tiny_apps:pushing_app called grid.push_messages from a thread of its "
     "own ('pusher'); "),
    ("failing_thread_app", "the ServerApp tests.flower.tiny_apps:failing_thread_app's thread 'helper' raised "
     "TypeError: Not all values are of valid type."),
])
def test_a_thread_of_the_apps_own_ends_the_run_in_one_line(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch, app: str,
                                                           words: str) -> None:
    """A thread main started calling the grid (after main returned too: simfl waits for the app's non-daemon
    threads, as Python does) or raising (a Flower error): one line, exit 2, no traceback, no result folder."""
    monkeypatch.setattr(threading, "excepthook", threading.__excepthook__)  # Python's own, which prints (not pytest's)
    folder = app_folder(tmp_path / "app", serverapp=app)
    code, lines = flwr(capfd, str(folder), "--out", str(tmp_path / "o"))
    assert code == 2 and len(lines) == 1 and words in lines[0], lines
    assert not (tmp_path / "o").exists()


def test_simfls_own_rules_take_their_budget_from_the_apps_rounds(tmp_path: Path,
                                                                 capfd: pytest.CaptureFixture[str]) -> None:
    """``--set algorithms=...`` over an app of 2 rounds (its pyproject's num-server-rounds), 3 nodes: FedAvg of 2
    clients a round runs its 2 rounds (4 updates) and FedAsync beside it the same 4 updates; the app's ServerApp
    alone keeps its open-ended budget (its main ends the run: 2 rounds of 3 nodes)."""
    folder = app_folder(tmp_path / "app")
    code, lines = flwr(capfd, str(folder), "--out", str(tmp_path / "o"), "--set",
                       "algorithms=[{name: fedavg, clients_per_round: 2}, {name: fedasync}]")
    assert code == 0, lines
    saved = yaml.safe_load((tmp_path / "o" / "scenario.yaml").read_text())
    assert saved["budget"] == {"updates": 4, "time": 20.0 * flwr_app.OPEN_PERIODS}
    for name in ("fedavg", "fedasync"):
        events = pd.read_csv(tmp_path / "o" / name / "seed0" / "events.csv")
        assert len(events) == 4, (name, events)
        assert pd.read_csv(tmp_path / "o" / name / "seed0" / "metrics.csv")["updates"].iloc[-1] == 4
    assert pd.read_csv(tmp_path / "o" / "fedavg" / "seed0" / "events.csv")["dispatch_time"].nunique() == 2  # rounds
    code, lines = flwr(capfd, str(folder), "--out", str(tmp_path / "app_run"))
    assert code == 0, lines
    assert yaml.safe_load((tmp_path / "app_run" / "scenario.yaml").read_text())["budget"] == {
        "time": 20.0 * flwr_app.OPEN_PERIODS, "updates": None}
    assert len(pd.read_csv(tmp_path / "app_run" / "serverapp" / "seed0" / "events.csv")) == 6


def _budget(folder: Path, base: dict[str, Any], run_config: dict[str, Any] | None = None) -> Any:
    app = flwr_app.read_app(folder)
    return flwr_app.app_scenario(app, base, run_config or {}, {})["budget"]


def test_the_budget_read_from_the_apps_rounds(tmp_path: Path) -> None:
    """Asynchronous rules alone: the rounds of every node; --run-config's rounds count; a budget the user sets wins;
    the largest synchronous round sets it beside smaller ones."""
    folder = app_folder(tmp_path / "app")
    backstop = {"time": 60.0 * flwr_app.OPEN_PERIODS}
    assert _budget(folder, {"algorithms": [{"name": "orthofl"}]}) == {"updates": 6, **backstop}
    assert _budget(folder, {"algorithms": [{"name": "orthofl"}]}, {"num-server-rounds": 5}) == {"updates": 15, **backstop}
    fedavgs = [{"name": "fedavg", "clients_per_round": 1}, {"name": "fedavg", "clients_per_round": 2, "label": "b"}]
    assert _budget(folder, {"algorithms": fedavgs}) == {"updates": 4, **backstop}
    assert _budget(folder, {"algorithms": [{"name": "orthofl"}], "budget": {"time": 50}}) == {"time": 50}
    assert _budget(folder, {"budget": {"updates": 7}}) == {"updates": 7}
    assert _budget(folder, {}) == backstop


@pytest.mark.parametrize(("config", "algorithms", "words"), [
    ("lr = 0.1\n", "[{name: fedasync}]", "its run config's num-server-rounds (pyproject.toml's "
     "[tool.flwr.app.config] or --run-config), which has none; set one, e.g. --set budget.updates=N"),
    ('num-server-rounds = "3"\n', "[{name: fedasync}]", "which gives text '3', not a whole number of at least 1"),
    ("num-server-rounds = 2\n", "[{name: serverapp, app: 'tests.flower.tiny_apps:server_app'}, {name: fedasync}]",
     "is needed when simfl's own rules run beside the app's ServerApp"),
])
def test_no_budget_to_read_is_one_line(tmp_path: Path, capfd: pytest.CaptureFixture[str], config: str,
                                       algorithms: str, words: str) -> None:
    folder = app_folder(tmp_path / "app", config)
    code, lines = flwr(capfd, str(folder), "--out", str(tmp_path / "o"), "--set", f"algorithms={algorithms}")
    assert code == 2 and len(lines) == 1 and lines[0].startswith("simfl: budget: ") and words in lines[0], lines
    assert not (tmp_path / "o").exists()
    with pytest.raises(InputError, match="budget"):
        _budget(folder, {"algorithms": yaml.safe_load(algorithms)})
