"""A Flower ServerApp as written, in virtual time: the ``serverapp`` entry and ``simfl flwr run APP_DIR``."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

pytest.importorskip("flwr")

import simfl  # noqa: E402
from benchmarks.flower_engine import flower_engine  # noqa: E402
from simfl.cli import main  # noqa: E402
from simfl.errors import InputError  # noqa: E402
from simfl.launch import flwr_app  # noqa: E402
from tests.flower.test_flower import RUN_CONFIG, scenario  # noqa: E402

APP = Path(__file__).parents[2] / "examples" / "flower" / "app"
CONSTANT = {"model": "constant", "seconds": [10.0, 10.0, 10.0, 12.0, 14.0, 20.0]}
"""Six clients; a round of all six closes at its slowest, 20 s after it opened."""


def serverapp(rounds: int, **config: Any) -> dict[str, Any]:
    return {"name": "serverapp", "app": "tests.flower.server_apps:fedavg_app",
            "run_config": {"num-server-rounds": rounds, "lr": 0.05, **config}}


def test_a_server_app_runs_as_the_flower_bridge_runs_its_strategy(tmp_path: Path) -> None:
    """Flower's FedAvg started by a ServerApp (Strategy.start, from simfl's initial model) against the same strategy
    as a simfl algorithm: the same events and evaluations round for round; the app's run ends when its main
    returns (3 rounds: at 60 s), with the final model evaluated, its Result's train metrics equal to the bridge's
    train.csv, its server-side evaluation once per round from 0, and its model saved as its code says."""
    saved = tmp_path / "final.pt"
    raw = scenario([serverapp(3, **{"save-to": str(saved)}),
                    {"name": "flower", "strategy": "FedAvg", "options": {"fraction_evaluate": 0.0},
                     "train_config": {"lr": 0.05}}],
                   client={"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG}, latency=CONSTANT)
    simfl.run(raw, out=tmp_path / "o", allow_imports=True, workers=1, quiet=True)
    app, bridge = tmp_path / "o" / "serverapp" / "seed0", tmp_path / "o" / "FedAvg" / "seed0"
    events = pd.read_csv(app / "events.csv")
    assert list(events["time"])[-1] == 60.0 and len(events) == 18
    assert events.equals(pd.read_csv(bridge / "events.csv").iloc[:18])
    metrics, expected = pd.read_csv(app / "metrics.csv"), pd.read_csv(bridge / "metrics.csv")
    assert list(metrics["virtual_time"]) == [0.0, 20.0, 40.0, 60.0]
    pd.testing.assert_frame_equal(metrics, expected.iloc[:4])
    train = pd.read_csv(app / "train.csv")
    pd.testing.assert_frame_equal(train, pd.read_csv(bridge / "train.csv").iloc[:3][train.columns])
    server = pd.read_csv(app / "server.csv")
    assert list(server["round"]) == [0, 1, 2, 3] and list(server["calls"]) == [1, 2, 3, 4]
    first = next(iter(torch.load(saved).values()))  # the final model the app saved, its first layer's weights
    assert float((first.double() ** 2).sum()) == pytest.approx(server["norm"].iloc[-1], rel=1e-12)


def test_a_server_app_raising_is_one_line(tmp_path: Path) -> None:
    raw = scenario([{"name": "serverapp", "app": "tests.flower.server_apps:raising_app"}],
                   client={"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG})
    with pytest.raises(Exception, match="the ServerApp tests.flower.server_apps:raising_app raised RuntimeError: "
                       "the user's server app failed"):
        simfl.run(raw, out=tmp_path / "o", allow_imports=True, workers=1, quiet=True)


def test_train_and_evaluate_messages_sent_together_are_refused(tmp_path: Path) -> None:
    raw = scenario([{"name": "serverapp", "app": "tests.flower.server_apps:mixed_app"}],
                   client={"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG})
    with pytest.raises(InputError, match="messages of type \\['evaluate', 'train'\\] together"):
        simfl.run(raw, out=tmp_path / "o", allow_imports=True, workers=1, quiet=True)


# -- simfl flwr run ----------------------------------------------------------------------------------------------


def flwr(*argv: str) -> subprocess.CompletedProcess[str]:
    """``simfl flwr run`` through the command's entry in this process; exit code and output."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["flwr", "run", *argv])
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def test_the_app_folder_is_read_as_flwr_run_reads_it() -> None:
    app = flwr_app.read_app(APP)
    assert (app.name, app.serverapp, app.clientapp) == ("digits_app", "digits_app.server_app:app", "digits_app.client_app:app")
    assert app.federation == {"num-supernodes": 6, "backend.client-resources.num-cpus": 1}
    run = flwr_app.fused(app, flwr_app.parse_pairs(["lr=0.1 num-server-rounds=2 unknown=3"], "--run-config"))
    assert run["lr"] == 0.1 and run["num-server-rounds"] == 2 and "unknown" not in run and run["batch-size"] == 16
    raw = flwr_app.app_scenario(app, {"data": {"dataset": "digits", "partition": {"kind": "iid"}}}, {},
                                flwr_app.parse_pairs(["num-supernodes=4"], "--federation-config"))
    assert raw["data"]["partition"]["clients"] == 4 and raw["executor"]["threads"] == 1
    assert raw["algorithms"] == [{"name": "serverapp", "app": "digits_app.server_app:app", "run_config": app.config}]
    assert raw["budget"] == {"time": 60.0 * 100_000} and raw["client"]["flower_app"] == "digits_app.client_app:app"
    assert raw["model"] == {"name": "flower_app", "app": "digits_app.server_app:app", "run_config": app.config}
    own = flwr_app.app_scenario(app, {}, {}, {})  # no data: the ClientApp's own, one client per supernode
    assert own["data"] == {"dataset": "flower_app", "partition": {"kind": "iid", "clients": 6}}
    assert own["algorithms"] == raw["algorithms"]  # the same entry: that the data are the app's is read from data:
    with pytest.raises(InputError, match="num-supernodes: is needed: the app loads its own data"):
        flwr_app.app_scenario(dataclasses.replace(app, federation={}), {}, {}, {})


@pytest.mark.parametrize(("argv", "words"), [
    (["tests"], "is not a Flower App folder: it has no pyproject.toml"),
    ([str(APP), "--run-config", "lr=abc"], "--run-config: The provided configuration string is in an invalid format"),
    ([str(APP), "--scenario", str(APP / "scenario.yaml"), "--federation-config", "num-supernodes=0"],
     "num-supernodes: must be a whole number of at least 1, got 0"),
    ([str(APP), "--scenario", str(APP / "scenario.yaml"), "--set", "data.partition.clients=5"],
     "num-supernodes: is 6, but the scenario's data.partition.clients is 5"),
])
def test_bad_input_to_flwr_run_is_one_line_and_exit_2(tmp_path: Path, argv: list[str], words: str) -> None:
    done = flwr(*argv, "--out", str(tmp_path / "o"), "--quiet")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr
    assert not (tmp_path / "o").exists()


def test_flwr_run_gives_flower_engines_numbers(tmp_path: Path) -> None:
    """The test app folder (a quickstart-style ServerApp and ClientApp loading their own data and model; the
    scenario gives only latencies) under ``simfl flwr run`` and under Flower's simulation engine: the same
    per-round server-side evaluation and training loss (to float rounding: the replies are summed in another
    order) and the same final model; under simfl the rounds take virtual time (constant latencies: 20 s a round),
    and simfl's evaluation grid is the app's evaluate_fn (metrics.csv agrees with server.csv)."""
    ours = tmp_path / "simfl.pt"
    done = flwr(str(APP), "--scenario", str(APP / "scenario.yaml"), "--out", str(tmp_path / "o"),
                "--workers", "1", "--run-config", f"save-to='{ours}'")
    assert done.returncode == 0, done.stderr
    rounds = [line for line in done.stderr.splitlines() if "[ROUND" in line]
    assert rounds == [f"serverapp seed0: [ROUND {r}] sampled 6 nodes (out of 6), received 6 results and 0 failures; "
                      f"virtual time {20 * r} s" for r in (1, 2, 3)], done.stderr
    assert "the app trains on data of its own" not in done.stderr  # the scenario has no data: they are the app's
    config = {**flwr_app.read_app(APP).config, "save-to": str(tmp_path / "flower.pt")}
    theirs = flower_engine(config, 6)
    mine = torch.load(ours)
    assert sorted(mine["server"]) == [0, 1, 2, 3] and sorted(mine["train"]) == [1, 2, 3]
    for kind in ("server", "train"):
        for r, values in theirs[kind].items():
            for key, value in values.items():
                assert mine[kind][r][key] == pytest.approx(value, rel=1e-6), (kind, r, key)
    for key, value in theirs["arrays"].items():
        torch.testing.assert_close(mine["arrays"][key], value, rtol=1e-5, atol=1e-6)
    folder = tmp_path / "o" / "serverapp" / "seed0"
    server = pd.read_csv(folder / "server.csv")
    assert list(server["round"]) == [0, 1, 2, 3]
    assert server["accuracy"].tolist() == pytest.approx([mine["server"][r]["accuracy"] for r in range(4)])
    assert pd.read_csv(folder / "events.csv")["time"].max() == 60.0
    metrics = pd.read_csv(folder / "metrics.csv")
    assert list(metrics["virtual_time"]) == [0.0, 20.0, 40.0, 60.0]
    assert metrics["accuracy"].tolist() == server["accuracy"].tolist() and metrics["loss"].equals(server["loss"])


def test_an_app_with_simfls_data_is_told_it_trains_on_its_own(tmp_path: Path) -> None:
    """A data: section makes simfl's partition (here dirichlet, sizes drawn) the clients' sample counts; an app
    that loads its own data anyway is said so once."""
    done = flwr(str(APP), "--scenario", str(APP / "scenario.yaml"), "--out", str(tmp_path / "o"),
                "--workers", "1", "--run-config", "num-server-rounds=1",
                "--set", "data={dataset: digits, partition: {kind: dirichlet, alpha: 1.0, sizes: draw}}")
    assert done.returncode == 0, done.stderr
    own = [line for line in done.stderr.splitlines() if "the app trains on data of its own" in line]
    assert len(own) == 1 and "reports 250 examples for node 1, whose partition in data.partition holds" in own[0]


def test_flwr_run_resumes_with_the_same_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped (as by Ctrl-C) once seed 0's ServerApp run finished, ``--resume`` keeps it and runs seed 1 from its
    start: the folder equals an unstopped run's, but for the wall times; another app's folder is refused."""
    from simfl.launch.checkpoint import Session

    original = Session.finish

    def finish_then_stop(self: Session, *args: Any) -> None:
        original(self, *args)
        raise KeyboardInterrupt

    common = ("--scenario", str(APP / "scenario.yaml"), "--seeds", "0,1", "--quiet", "--workers", "1",
              "--run-config", "num-server-rounds=2")
    monkeypatch.setattr(Session, "finish", finish_then_stop)
    stopped = flwr(str(APP), *common, "--out", str(tmp_path / "cut"))
    assert stopped.returncode == 130, stopped.stderr
    assert "simfl flwr run APP_DIR --resume" in (tmp_path / "cut.partial" / "INCOMPLETE").read_text()
    monkeypatch.setattr(Session, "finish", original)
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text((APP / "pyproject.toml").read_text().replace("client_app:app", "client_app:x"))
    refused = flwr(str(other), "--resume", str(tmp_path / "cut"))
    assert refused.returncode == 2 and "ran the ClientApp 'digits_app.client_app:app', not 'digits_app.client_app:x'" in \
        refused.stderr
    assert flwr(str(APP), "--resume", str(tmp_path / "cut"), "--quiet", "--workers", "1").returncode == 0
    assert flwr(str(APP), *common, "--out", str(tmp_path / "whole")).returncode == 0
    for name in ("serverapp/seed0/metrics.csv", "serverapp/seed1/events.csv", "serverapp/seed1/server.csv",
                 "scenario.yaml"):
        assert (tmp_path / "cut" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
    summary = [pd.read_csv(tmp_path / f / "summary.csv").drop(columns="wall_seconds") for f in ("cut", "whole")]
    pd.testing.assert_frame_equal(*summary)


@pytest.mark.parametrize(("app", "words"), [
    ("tests.flower.apps:sgd_app", "is a ClientApp, not a Flower ServerApp"),
    ("tests.flower.nowhere:app", "cannot import module 'tests.flower.nowhere'"),
    ("server_app", "must be an import path package.module:attribute"),
])
def test_a_server_app_is_checked_at_validation(app: str, words: str) -> None:
    from simfl import names
    from simfl.schema.scenario import validate

    raw = scenario([{"name": "serverapp", "app": app}],
                   client={"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG})
    with names.allowing_imports(True), pytest.raises(InputError, match=words):
        validate(raw)


def test_an_app_waiting_for_nodes_waits_in_virtual_time(tmp_path: Path) -> None:
    """Flower's FedAvg waits for ``min_available_nodes`` (asking the grid again): after a round closed at its
    deadline (20 s) without its straggler (40 s), the next round opens when the straggler is free, at 40 s. As
    under Flower, its sample size comes from its first look (5 nodes free): it sends 5 of the 6; the 4 of them
    with latencies under the deadline deliver, the main returns after round 2, at 60 s."""
    raw = scenario([serverapp(2, **{"min-available": 6})],
                   client={"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG},
                   latency={"model": "constant", "seconds": [10.0, 10.0, 10.0, 12.0, 14.0, 40.0]},
                   rounds={"deadline": 20.0})
    simfl.run(raw, out=tmp_path / "o", allow_imports=True, workers=1, quiet=True)
    events = pd.read_csv(tmp_path / "o" / "serverapp" / "seed0" / "events.csv")
    second = events[events["dispatch_time"] > 0]
    assert set(second["dispatch_time"]) == {40.0} and len(second) == 4, events
    assert list(events["event"]).count("late") == 1
    assert pd.read_csv(tmp_path / "o" / "serverapp" / "seed0" / "metrics.csv")["virtual_time"].iloc[-1] == 60.0


def test_an_app_waiting_for_more_nodes_than_the_federation_is_one_line(tmp_path: Path) -> None:
    raw = scenario([serverapp(2, **{"min-available": 7})],
                   client={"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG})
    with pytest.raises(InputError, match="while all 6 clients were free: it waits for more nodes than the federation"):
        simfl.run(raw, out=tmp_path / "o", allow_imports=True, workers=1, quiet=True)


def test_flwr_run_trains_the_apps_client_under_simfls_async_rules(tmp_path: Path) -> None:
    """``--set algorithms=...``: the app, unchanged, under FedBuff and OrthoFL with the Raspberry Pi latencies; its
    train messages carry the config the ServerApp's first train message carries ({lr}, without server-round),
    written in scenario.yaml."""
    import yaml

    done = flwr(str(APP), "--scenario", str(APP / "scenario.yaml"), "--out", str(tmp_path / "o"), "--quiet",
                "--workers", "1", "--set", "algorithms=[{name: fedbuff, buffer: 3}, {name: orthofl}]",
                "--set", "latency={model: rpi_gaussian}", "--set", "budget.time=300")
    assert done.returncode == 0, done.stderr
    saved = yaml.safe_load((tmp_path / "o" / "scenario.yaml").read_text())
    assert saved["client"]["train_config"] == {"lr": 0.05} and saved["latency"]["model"] == "rpi_gaussian"
    for name in ("fedbuff", "orthofl"):
        events = pd.read_csv(tmp_path / "o" / name / "seed0" / "events.csv")
        metrics = pd.read_csv(tmp_path / "o" / name / "seed0" / "metrics.csv")
        assert len(events) >= 6 and events["latency"].nunique() > 3  # the devices' drawn delays
        assert metrics["accuracy"].notna().all() and metrics["accuracy"].iloc[-1] > metrics["accuracy"].iloc[0]


@pytest.mark.parametrize("section", [{"data": {"dataset": "flower_app", "partition": {"kind": "iid", "clients": 6}}},
                                     {"model": {"name": "flower_app", "app": "digits_app.server_app:app"}}])
def test_the_apps_own_data_and_model_need_its_client_app(section: dict[str, Any]) -> None:
    from simfl.schema.scenario import validate

    raw = {**scenario([{"name": "fedasync"}]), **section}
    with pytest.raises(InputError, match="flower_app is a Flower app's own; it needs the app's ClientApp"):
        validate(raw)


def test_the_estimate_of_a_server_app_run_follows_its_rounds() -> None:
    """``simfl flwr run`` sets a budget no app reaches; the estimate counts the app's num-server-rounds instead,
    so that 20,000 supernodes are not refused for updates the app never asks for."""
    from simfl import names
    from simfl.schema.estimate import estimate
    from simfl.schema.limits import check
    from simfl.schema.scenario import validate

    app = flwr_app.read_app(APP)
    flwr_app.importable(APP)
    raw = flwr_app.app_scenario(app, {"latency": {"model": "rpi_gaussian"}}, {"num-server-rounds": 2},
                                {"num-supernodes": 20_000})
    with names.allowing_imports(True):
        scn = validate(raw)
    est = estimate(scn)
    assert est.arrivals == 2 * 20_000 and 2_000 < est.horizon < 10_000  # two rounds, each of the slowest of 20,000
    check(est, 8 * 2**30)
    scn.algorithms[0].run_config.pop("num-server-rounds")  # no rounds to go by: the budget bounds the estimate
    with pytest.raises(InputError, match="per run .*; the limit is"):  # its events alone: millions of updates
        check(estimate(scn), 8 * 2**30)
