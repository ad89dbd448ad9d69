"""A Flower ServerApp as written, in virtual time: the ``serverapp`` entry and ``simfl flwr run APP_DIR``."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
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
    train.csv, its server-side evaluation once per round from 0 (a list-valued metric kept as a list), and its model
    saved as its code says."""
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
    assert [json.loads(pair) for pair in server["pair"]] == [[n, float(r)] for n, r in zip(server["norm"], range(4), strict=True)]
    first = next(iter(torch.load(saved).values()))  # the final model the app saved, its first layer's weights
    assert float((first.double() ** 2).sum()) == pytest.approx(server["norm"].iloc[-1], rel=1e-12)


def test_a_server_app_raising_is_one_line(tmp_path: Path) -> None:
    raw = scenario([{"name": "serverapp", "app": "tests.flower.server_apps:raising_app"}],
                   client={"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG})
    with pytest.raises(Exception, match="the ServerApp tests.flower.server_apps:raising_app raised RuntimeError: "
                       "the user's server app failed"):
        simfl.run(raw, out=tmp_path / "o", allow_imports=True, workers=1, quiet=True)


def test_every_message_type_is_relayed_as_sent_and_its_values_kept(tmp_path: Path) -> None:
    """A ServerApp with a loop of its own sends one message of every type per round (train with float64, int32 and
    float32 arrays and a config holding a list and bytes, evaluate, query, query.histogram, train.custom, a train
    message with a config only); each ClientApp call gets the message as sent and its reply comes back as given:
    dtypes and values kept, list-valued and int metrics kept, each message one client round (its latency). main
    starts once per run, each run with its own run id; train.csv and federated.csv come from the replies (Flower's
    weighted aggregation), a list-valued metric as a list."""
    raw = scenario([{"name": "serverapp", "app": "tests.flower.server_apps:typed_app",
                     "run_config": {"save-to": str(tmp_path / "seen.json"), "starts": str(tmp_path / "starts")}}],
                   client={"flower_app": "tests.flower.apps:every_type_app"}, seeds=[0, 1],
                   model={"name": "flower_app", "app": "tests.flower.server_apps:typed_app"},
                   latency=CONSTANT)
    simfl.run(raw, out=tmp_path / "o", allow_imports=True, workers=1, quiet=True)
    seen = json.loads((tmp_path / "seen.json").read_text())  # the last run's (seed 1)
    starts = (tmp_path / "starts").read_text().split()
    assert len(starts) == 2 and len(set(starts)) == 2 and str(seen["run_id"]) == starts[1]  # once per run, own ids
    replies = {r["node"]: r for r in seen["replies"][:6]}
    sent = ["train", "evaluate", "query", "query.histogram", "train.custom", "train"]
    assert [replies[n]["type"] for n in range(1, 7)] == sent == [replies[n]["seen"] for n in range(1, 7)]
    assert replies[1]["arrays"] == {"w64": ["float64", [2.5, 3.5]], "i32": ["int32", [1, 2, 3]],
                                    "w32": ["float32", [1.25]]}
    assert replies[6]["arrays"] == {}  # a config-only message: nothing to send back
    for node, reply in replies.items():
        metrics = reply["metrics"]
        assert metrics["histogram"] == [1.0, 2.0, float(node - 1)] and metrics["list-sent"] == [1, 2, 3]
        assert metrics["num-examples"] == 9 + node and metrics["run-id-low"] == seen["run_id"] % 1000
        assert reply["dtypes"] == (["float64", "int32", "float32"] if node < 6 else [])  # what the ClientApp got
    folder = tmp_path / "o" / "serverapp" / "seed1"
    events = pd.read_csv(folder / "events.csv")
    assert len(events) == 12 and list(events["time"])[-1] == 40.0  # 6 messages a round, the slowest node 20 s
    train = pd.read_csv(folder / "train.csv")
    assert list(train["round"]) == [1, 2] and list(train["nodes"]) == [3, 3]
    weights = [10, 14, 15]  # num-examples of the train, train.custom and config-only train replies (nodes 1, 5, 6)
    expected = [1.0, 2.0, sum(w * p for w, p in zip(weights, [0, 4, 5], strict=True)) / sum(weights)]
    assert json.loads(train["histogram"].iloc[0]) == pytest.approx(expected)
    assert list(pd.read_csv(folder / "federated.csv")["nodes"]) == [1, 1]
    assert not (folder / "server.csv").exists()  # no Result, no server-side evaluation


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
    assert own["latency"] == {"model": "rpi_gaussian"}  # no latency given: the measured Raspberry Pi devices
    bare = flwr_app.app_scenario(dataclasses.replace(app, federation={}), {}, {}, {})  # Flower's own defaults
    assert bare["data"]["partition"]["clients"] == 2 and bare["executor"] == {"threads": 2}  # calls one at a time
    wide = flwr_app.app_scenario(app, {}, {}, flwr_app.parse_pairs(["backend.init-args.num-cpus=4"], "--federation"))
    assert wide["executor"] == {"threads": 1, "kind": "process", "workers": 4}  # as Flower's engine: 4 CPUs // 1


@pytest.mark.parametrize(("cores", "side_by_side", "given", "pool"), [
    (8, 1, {}, 8),  # one run: the machine's cores over 1 thread per call, once the calls prove heavy
    (2, 1, {}, 2),
    (1, 1, {}, 0),  # one core: the calls one at a time
    (8, 2, {}, 4),  # two runs side by side, 4 cores each
    (2, 2, {}, 0),  # two runs fill the two cores
    (8, 1, {"executor": {"kind": "inline"}}, 0),  # the scenario names its executor: kept
])
def test_the_clientapp_calls_go_side_by_side_on_the_cores_the_runs_leave(
        monkeypatch: pytest.MonkeyPatch, cores: int, side_by_side: int, given: dict, pool: int) -> None:
    """Without Flower's backend CPUs the machine's cores are Flower's default: each run's ClientApp calls get the
    cores the runs side by side leave it (the example app: 1 CPU per ClientApp), in a pool once they prove heavy."""
    monkeypatch.setattr(flwr_app, "cores", lambda: cores)
    raw = flwr_app.app_scenario(flwr_app.read_app(APP), given, {}, {})
    assert (flwr_app.spare_pool(1, side_by_side) if flwr_app.leaves_executor(raw) else 0) == pool
    assert raw["executor"].get("kind") == given.get("executor", {}).get("kind")  # the scenario itself unchanged


@pytest.mark.parametrize("given", [[], ["--set", "executor.kind=inline"]])
def test_a_resumed_run_gets_the_cores_left_over_as_the_first_launch_did(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: list[str]) -> None:
    """The resolved scenario.yaml states an executor either way, so the folder keeps whether the launch chose it: a run
    started again by ``--resume`` gets the adaptive executor over the cores left exactly where the first launch gave
    it (the scenario naming none), and keeps a named ``inline`` otherwise. The first launch's memory check counts
    the pool's processes, the most the run can hold."""
    from simfl.algorithms.serverapp import ServerAppRounds
    from simfl.launch import units
    from simfl.schema import limits

    monkeypatch.setattr(flwr_app, "cores", lambda: 4)
    checked: list[int] = []
    check = limits.check
    monkeypatch.setattr(limits, "check", lambda est, *rest: (checked.append(est.workers), check(est, *rest))[1])
    made: list[tuple[str, int]] = []
    scenario_of = units.unit_scenario

    def seen(unit: units.Unit) -> Any:
        scn = scenario_of(unit)
        made.append((scn.executor.kind, scn.executor.workers))
        return scn

    monkeypatch.setattr(units, "unit_scenario", seen)
    original = ServerAppRounds.replied

    def killed(self: ServerAppRounds, key: int, arrival: Any) -> None:
        if self.rounds == 2:
            raise KeyboardInterrupt
        original(self, key, arrival)

    monkeypatch.setattr(ServerAppRounds, "replied", killed)
    common = ("--scenario", str(APP / "scenario.yaml"), "--seeds", "0", "--quiet", "--workers", "1", "--run-config",
              "num-server-rounds=2")
    assert flwr(str(APP), *common, *given, "--out", str(tmp_path / "cut")).returncode == 130
    monkeypatch.setattr(ServerAppRounds, "replied", original)
    done = flwr(str(APP), "--resume", str(tmp_path / "cut"), "--quiet", "--workers", "1")
    assert done.returncode == 0, done.stderr
    expected = ("inline", None) if given else ("adaptive", 4)  # 4 cores over the example app's 1 CPU per ClientApp
    assert made == [expected, expected]
    assert checked == [0 if given else 4]  # the first launch's estimate; a resume checks none


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
    """The example app folder (a quickstart-style ServerApp and ClientApp loading their own data and model; the
    scenario gives only latencies), seeding its initial model and shuffles itself (``app-seed=0``), under ``simfl
    flwr run`` and under Flower's simulation engine: every ClientApp call gives bit for bit the same result (the
    first round's training loss, their mean, agrees to the last bits), and the aggregates differ by float32
    rounding only, since Flower's engine hands the replies over in another order (the server-side evaluation of
    rounds 0 and 1 agrees to 1e-6).
    Training on from aggregates one rounding apart may amplify it (a ReLU near zero: 1e-5 by round 2 here), so
    round 2 and the final model agree to 1e-4. Under simfl the rounds take virtual time (constant latencies: 20 s
    a round), Flower's log lines are said at their virtual times, and simfl's evaluation grid is the app's
    evaluate_fn (metrics.csv agrees with server.csv)."""
    ours = tmp_path / "simfl.pt"
    done = flwr(str(APP), "--scenario", str(APP / "scenario.yaml"), "--out", str(tmp_path / "o"),
                "--workers", "1", "--run-config", f"save-to='{ours}' app-seed=0 num-server-rounds=2")
    assert done.returncode == 0, done.stderr
    rounds = [line for line in done.stderr.splitlines() if "[ROUND" in line or "closed" in line]
    assert rounds == [line for r in (1, 2) for line in (
        f"serverapp seed0: [{20 * r - 20} s] INFO :      [ROUND {r}/2]",
        f"serverapp seed0: [{20 * r} s] round {r} (train) closed: 6 messages to 6 of the 6 free nodes, 6 replies, "
        "0 lost")], done.stderr
    summary = done.stderr.splitlines()
    assert "serverapp seed0: [40 s] INFO :      Final results:" in summary  # Flower's summary, at its virtual time
    assert "the app trains on data of its own" not in done.stderr  # the scenario has no data: they are the app's
    config = {**flwr_app.read_app(APP).config, "save-to": str(tmp_path / "flower.pt"), "app-seed": 0,
              "num-server-rounds": 2}
    theirs = flower_engine(config, 6, pinned=True)  # the same kernels on both sides
    mine = torch.load(ours)
    assert sorted(mine["server"]) == [0, 1, 2] and sorted(mine["train"]) == [1, 2]
    # the round's training loss is the mean of the six replies', summed by Flower's engine in the order they come,
    # which varies from run to run: equal to the last bits, not bit for bit (one ulp apart in one run of many)
    assert mine["train"][1] == pytest.approx(theirs["train"][1], rel=1e-14, abs=0)
    assert mine["server"][0] == theirs["server"][0]
    for r, rel in ((1, 1e-6), (2, 1e-4)):
        for kind in ("server", "train"):
            for key, value in theirs[kind][r].items():
                assert mine[kind][r][key] == pytest.approx(value, rel=rel), (kind, r, key)
    for key, value in theirs["arrays"].items():
        torch.testing.assert_close(mine["arrays"][key], value, rtol=0, atol=1e-4)
    folder = tmp_path / "o" / "serverapp" / "seed0"
    server = pd.read_csv(folder / "server.csv")
    assert list(server["round"]) == [0, 1, 2]
    assert server["accuracy"].tolist() == pytest.approx([mine["server"][r]["accuracy"] for r in range(3)])
    assert pd.read_csv(folder / "events.csv")["time"].max() == 40.0
    metrics = pd.read_csv(folder / "metrics.csv")
    assert list(metrics["virtual_time"]) == [0.0, 20.0, 40.0]
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


def test_the_example_app_gives_the_same_files_every_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example app as Flower's quickstart writes it (its ServerApp builds its Net() unseeded, its ClientApp
    shuffles through an unseeded DataLoader), seeds 0 and 1: run twice, run with each round's ClientApp calls on two
    worker processes (seed 0), and killed in seed 1's second round then resumed (seed 0 kept, seed 1 started again),
    it gives the same files byte for byte; the two seeds differ. Resuming with another app's folder is refused."""
    from simfl.algorithms.serverapp import ServerAppRounds

    common = ("--scenario", str(APP / "scenario.yaml"), "--seeds", "0,1", "--quiet", "--run-config",
              "num-server-rounds=2")
    original = ServerAppRounds.replied

    def killed(self: ServerAppRounds, key: int, arrival: Any) -> None:
        if self.setup.seed == 1 and self.rounds == 2:
            raise KeyboardInterrupt
        original(self, key, arrival)

    monkeypatch.setattr(ServerAppRounds, "replied", killed)
    stopped = flwr(str(APP), *common, "--workers", "1", "--out", str(tmp_path / "cut"))
    assert stopped.returncode == 130, stopped.stderr
    assert "simfl flwr run APP_DIR --resume" in (tmp_path / "cut.partial" / "INCOMPLETE").read_text()
    monkeypatch.undo()
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text((APP / "pyproject.toml").read_text().replace("client_app:app", "client_app:x"))
    refused = flwr(str(other), "--resume", str(tmp_path / "cut"))
    assert refused.returncode == 2 and "ran the ClientApp 'digits_app.client_app:app', not 'digits_app.client_app:x'" in \
        refused.stderr
    assert flwr(str(APP), "--resume", str(tmp_path / "cut"), "--quiet", "--workers", "1").returncode == 0
    for out, extra in (("once", []), ("twice", []),
                       ("calls-apart", ["--seeds", "0", "--set", "executor={kind: process, workers: 2}"])):
        done = flwr(str(APP), *common, "--workers", "1", *extra, "--out", str(tmp_path / out))
        assert done.returncode == 0, done.stderr
    files = sorted(p.relative_to(tmp_path / "once") for p in (tmp_path / "once" / "serverapp").rglob("*.*"))
    assert {p.name for p in files} >= {"metrics.csv", "events.csv", "train.csv", "server.csv"}
    for out in ("twice", "calls-apart", "cut"):
        for name in files:
            if (tmp_path / out / name.parent).exists():  # calls-apart ran seed 0 only
                assert (tmp_path / out / name).read_bytes() == (tmp_path / "once" / name).read_bytes(), (out, name)
    assert (tmp_path / "cut" / "scenario.yaml").read_bytes() == (tmp_path / "once" / "scenario.yaml").read_bytes()
    trained = [(tmp_path / "once" / "serverapp" / f"seed{k}" / "train.csv").read_text() for k in (0, 1)]
    assert trained[0] != trained[1]  # the app's draws follow the seed


def test_the_calls_moved_to_a_pool_mid_run_give_the_same_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """By default (one run, 1 CPU per ClientApp, this machine's cores) a run's ClientApp calls go to worker
    processes once they have taken ``executor.switch_after`` seconds: here after the first call, the pool awaited so
    that every train call not yet made trains in it. The files are those of the calls one at a time, byte for byte."""
    from simfl.train import adaptive

    if flwr_app.cores() < 2:
        pytest.skip("one core: no pool is started")
    started = adaptive.AdaptiveExecutor._start_pool
    pooled: list[int] = []

    def awaited(self: adaptive.AdaptiveExecutor) -> Any:
        pool = started(self)
        while not pool.ready(block=True):
            pass
        real = pool.submit
        pool.submit = lambda job, due=None: pooled.append(job.client) or real(job, due)  # type: ignore[method-assign]
        return pool

    monkeypatch.setattr(adaptive.AdaptiveExecutor, "_start_pool", awaited)
    common = ("--scenario", str(APP / "scenario.yaml"), "--seeds", "0", "--quiet", "--workers", "1", "--run-config",
              "num-server-rounds=2")
    for out, extra in (("inline", ["--set", "executor.kind=inline"]), ("moved", ["--set", "executor.switch_after=1e-6"])):
        done = flwr(str(APP), *common, *extra, "--out", str(tmp_path / out))
        assert done.returncode == 0, done.stderr
    assert len(pooled) == 11  # round 1's train calls after the first (moved to the pool), and round 2's six
    files = sorted(p.relative_to(tmp_path / "inline") for p in (tmp_path / "inline" / "serverapp").rglob("*.csv"))
    assert {p.name for p in files} >= {"metrics.csv", "events.csv", "train.csv", "server.csv"}
    for name in files:
        assert (tmp_path / "moved" / name).read_bytes() == (tmp_path / "inline" / name).read_bytes(), name


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
    train messages carry the config the ServerApp's first train message carries ({lr}, without server-round), which
    its ClientApp reads."""
    import yaml

    done = flwr(str(APP), "--scenario", str(APP / "scenario.yaml"), "--out", str(tmp_path / "o"), "--quiet",
                "--workers", "1", "--set", "algorithms=[{name: fedbuff, buffer: 3}, {name: orthofl}]",
                "--set", "latency={model: rpi_gaussian}", "--set", "budget.time=300")
    assert done.returncode == 0, done.stderr
    saved = yaml.safe_load((tmp_path / "o" / "scenario.yaml").read_text())
    assert saved["latency"]["model"] == "rpi_gaussian"
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


# -- however the app is written; bounded and loud -------------------------------------------------------------------


def _run_cli(tmp_path: Path, raw: dict[str, Any], quiet: bool = True) -> subprocess.CompletedProcess[str]:
    """``simfl run`` of ``raw`` (written as a file) through the command's entry in this process."""
    import yaml

    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"), "--allow-imports",
                     "--workers", "1", *(["--quiet"] if quiet else [])])
    return subprocess.CompletedProcess([], code, out.getvalue(), err.getvalue())


def test_an_app_overriding_strategy_start_is_recorded(tmp_path: Path) -> None:
    """An override of ``Strategy.start`` (a loop of its own, as Flower's advanced-pytorch example writes one) is
    seen as Flower's own: its Result fills train.csv and server.csv, its evaluate_fn scores the app's own model on
    simfl's grid (metrics.csv: the evaluate_fn's accuracy and loss, not NaN), its log lines are said."""
    raw = scenario([{"name": "serverapp", "app": "tests.flower.server_apps:override_app"}],
                   client={"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG}, latency=CONSTANT,
                   model={"name": "flower_app", "app": "tests.flower.server_apps:override_app"})
    done = _run_cli(tmp_path, raw, quiet=False)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    folder = tmp_path / "o" / "serverapp" / "seed0"
    train, server = pd.read_csv(folder / "train.csv"), pd.read_csv(folder / "server.csv")
    assert list(train["round"]) == [1, 2] and train["train_loss"].notna().all()
    assert list(server["round"]) == [0, 1, 2]
    metrics = pd.read_csv(folder / "metrics.csv")
    assert list(metrics["virtual_time"]) == [0.0, 20.0, 40.0] and metrics["accuracy"].notna().all()
    assert list(metrics["loss"]) == list(server["loss"])  # the same models, scored by the same evaluate_fn
    said = [line for line in lines if "own loop, round" in line]
    assert said == ["serverapp seed0: [0 s] INFO :      own loop, round 1",
                    "serverapp seed0: [20 s] INFO :      own loop, round 2"], lines


@pytest.mark.parametrize(("app", "config", "words"), [
    ("sleeping_app", {"sleep": 3.0}, "the ServerApp tests.flower.server_apps:sleeping_app was still running after "
     "0.3 s, the limit algorithms.timeout"),
    ("threaded_app", {}, "the ServerApp tests.flower.server_apps:threaded_app called grid.send_and_receive from a "
     "thread of its own ('my-sender')"),
    ("worded_app", {}, "the ServerApp's evaluate_fn returned str 'fine', not a MetricRecord or None (a legacy"),
])
def test_a_server_app_out_of_bounds_is_one_line(tmp_path: Path, app: str, config: dict[str, Any], words: str) -> None:
    """A turn past its limit (a main that sleeps before its first message), a message sent from a thread of the
    app's own, an evaluate_fn that returns a str: one line, exit 2, no traceback."""
    raw = scenario([{"name": "serverapp", "app": f"tests.flower.server_apps:{app}", "run_config": config,
                     "timeout": 0.3}], client={"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG},
                   model={"name": "flower_app", "app": f"tests.flower.server_apps:{app}"})
    done = _run_cli(tmp_path, raw)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and words in lines[0], done.stderr


def test_integer_arrays_are_no_model_for_simfls_own_rules(tmp_path: Path) -> None:
    """simfl's own rules take the app's model from its first train message: integer arrays only are refused in one
    line; the app's own ServerApp relays them as they are."""
    raw = scenario([{"name": "fedasync"}], client={"flower_app": "tests.flower.apps:every_type_app"},
                   model={"name": "flower_app", "app": "tests.flower.server_apps:integer_app"})
    done = _run_cli(tmp_path, raw)
    assert done.returncode == 2 and "whose arrays hold no floating-point values (counts: int64)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    raw["algorithms"] = [{"name": "serverapp", "app": "tests.flower.server_apps:integer_app"}]
    assert _run_cli(tmp_path / "own", raw).returncode == 0


# -- Flower's other kinds of app: analytics, secure aggregation ------------------------------------------------------

EXAMPLES = Path(__file__).parents[2] / "examples" / "flower"


def test_an_analytics_app_of_query_messages_runs_alone(tmp_path: Path) -> None:
    """``simfl flwr run APP_DIR`` and nothing else, on an app without a model whose ServerApp sends query messages
    (``query``, then ``query.pixels``) in a loop of its own: the default latencies (said in one line), the app's
    federation's 5 nodes, each message one round trip of its node; the app's sums are those of the whole data."""
    import numpy as np
    from sklearn.datasets import load_digits

    saved = tmp_path / "answer.json"
    done = flwr(str(EXAMPLES / "analytics"), "--out", str(tmp_path / "o"), "--workers", "1", "--run-config",
                f"save-to='{saved}'")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == f"simfl: {flwr_app.LATENCY_NOTE}"
    assert any("round 2 (query.pixels) closed: 5 messages to 5 of the 5 free nodes, 5 replies" in line for line in lines)
    x, y = load_digits(return_X_y=True)
    answer = json.loads(saved.read_text())
    assert answer["counts"] == np.bincount(y).tolist()
    assert answer["histogram"] == np.histogram(x, bins=8, range=(0.0, 16.0))[0].tolist()
    assert answer["mean"] == pytest.approx(x.mean(), rel=1e-12)
    events = pd.read_csv(tmp_path / "o" / "serverapp" / "seed0" / "events.csv")
    assert len(events) == 10 and events["latency"].nunique() == 10  # 2 rounds of 5 nodes, measured devices' draws


def test_a_secure_aggregation_app_with_client_side_dp_runs(tmp_path: Path) -> None:
    """Flower's fl-dp-sa as an app folder: DefaultWorkflow with SecAggPlusWorkflow, client-side fixed clipping (a
    client mod) and server-side noise, a legacy NumPyClient under the secaggplus and fixedclipping mods. Each round
    is four stages of messages (three of them a config only), each a round trip of every node; the workflow's
    History fills server.csv and its final parameters the last row of metrics.csv."""
    (tmp_path / "s.yaml").write_text("latency: {model: constant, seconds: [5, 6, 7, 8, 9, 10]}\neval: {every: 10}\n")
    done = flwr(str(EXAMPLES / "secagg"), "--scenario", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"),
                "--workers", "1", "--run-config", "num-server-rounds=1")
    assert done.returncode == 0, done.stderr
    for said in ("Secure aggregation completed.", "aggregate_fit: central DP noise with", "[SUMMARY]"):
        assert any(said in line for line in done.stderr.splitlines()), done.stderr
    folder = tmp_path / "o" / "serverapp" / "seed0"
    events = pd.read_csv(folder / "events.csv")
    assert len(events) == 24 and list(events["time"])[-1] == 40.0  # 4 stages of 6 nodes, the slowest 10 s each
    server, metrics = pd.read_csv(folder / "server.csv"), pd.read_csv(folder / "metrics.csv")
    assert list(server["round"]) == [0, 1] and server["accuracy"].notna().all()
    assert metrics["accuracy"].iloc[-1] == server["accuracy"].iloc[-1]
    assert metrics["loss"].iloc[-1] == server["loss"].iloc[-1]
