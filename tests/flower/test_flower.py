"""Flower in virtual time: Flower's strategies as simfl algorithms, a Flower ClientApp as simfl's client."""

from __future__ import annotations

import copy
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

pytest.importorskip("flwr")

import simfl  # noqa: E402
from simfl.cli import main  # noqa: E402
from simfl.errors import InputError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

BASE: dict[str, Any] = {
    "name": "flower",
    "seeds": [0],
    "data": {"dataset": "digits", "partition": {"kind": "dirichlet", "clients": 6, "alpha": 0.5}},
    "model": {"name": "mlp"},
    "train": {"epochs": 1, "batch_size": 16, "lr": 0.05},
    "latency": {"model": "exponential", "mean": 10.0, "floor": 5.0},
    "budget": {"time": 120},
    "eval": {"every": 20},
    "algorithms": [{"name": "fedavg", "clients_per_round": 6}],
    "executor": {"kind": "inline"},
}
RUN_CONFIG = {"lr": 0.05, "local-epochs": 1, "batch-size": 16}


def scenario(algorithms: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    raw["algorithms"] = algorithms
    raw.update(changes)
    return raw


def metrics(out: Path, name: str, seed: int = 0) -> pd.DataFrame:
    return pd.read_csv(out / name / f"seed{seed}" / "metrics.csv")


def events(out: Path, name: str, seed: int = 0) -> pd.DataFrame:
    return pd.read_csv(out / name / f"seed{seed}" / "events.csv")


def test_flower_fedavg_and_fedprox_equal_simfls_own(tmp_path: Path) -> None:
    """Flower's FedAvg and FedProx (Message API) and the legacy FedAvg against simfl's fedavg and fedprox.

    The same clients train the same rounds (events equal); the models agree to float32 rounding:
    simfl adds each weighted model with one fused multiply-add, Flower rounds the product, then the sum."""
    raw = scenario([
        {"name": "fedavg", "clients_per_round": 6},
        {"name": "flower", "strategy": "FedAvg"},
        {"name": "flower", "strategy": "flwr.server.strategy:FedAvg", "label": "legacy_fedavg"},
        {"name": "fedprox", "clients_per_round": 6, "mu": 0.1},
        {"name": "flower", "strategy": "FedProx", "options": {"proximal_mu": 0.1}},
    ])
    simfl.run(raw, out=tmp_path / "out")
    out = tmp_path / "out"
    for mine, theirs in (("fedavg", "FedAvg"), ("fedavg", "legacy_fedavg"), ("fedprox", "FedProx")):
        pd.testing.assert_frame_equal(events(out, mine), events(out, theirs))
        a, b = metrics(out, mine), metrics(out, theirs)
        assert (a["updates"] == b["updates"]).all()
        assert (a["accuracy"] - b["accuracy"]).abs().max() <= 1 / 150  # at most one test sample in rounding
        assert (a["loss"] - b["loss"]).abs().max() < 1e-5
    assert not metrics(out, "fedavg")["accuracy"].equals(metrics(out, "fedprox")["accuracy"])


def test_flower_samples_its_own_nodes_the_same_for_a_seed(tmp_path: Path) -> None:
    raw = scenario([{"name": "flower", "strategy": "FedAvg",
                     "options": {"fraction_train": 0.5, "min_train_nodes": 2, "min_available_nodes": 2}}])
    simfl.run(raw, out=tmp_path / "a")
    simfl.run(raw, out=tmp_path / "b")
    first = events(tmp_path / "a", "FedAvg")
    pd.testing.assert_frame_equal(first, events(tmp_path / "b", "FedAvg"))
    arrivals = first[first["event"] == "arrival"]
    per_round = arrivals.groupby("dispatch_time")["client"].count()
    assert (per_round == 3).all()  # int(6 * 0.5) nodes each round
    assert arrivals["client"].nunique() > 3  # and not the same three every round


def test_strategies_resume_byte_identical(tmp_path: Path) -> None:
    """FedYogi (stateful: moments), FedTrimmedAvg and Krum from YAML in one scenario, one unit at a time: killed
    while FedYogi runs (its running checkpoint written), --resume gives the same files, federated.csv and train.csv
    included."""
    names = ["FedYogi", "FedTrimmedAvg", "Krum"]
    options = {"Krum": {"num_malicious_nodes": 1}, "FedTrimmedAvg": {"beta": 0.2}, "FedYogi": {}}
    raw = scenario([{"name": "flower", "strategy": s, "options": options[s]} for s in names], budget={"time": 400})
    path = tmp_path / "s.yaml"
    import yaml

    path.write_text(yaml.safe_dump(raw))
    args = ["run", str(path), "--quiet", "--checkpoint-every", "1", "--workers", "1"]
    assert main([*args, "--out", str(tmp_path / "full")]) == 0  # in this process: only the killed run needs its own
    killed = subprocess.Popen([sys.executable, "-m", "simfl", *args, "--out", str(tmp_path / "cut")], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    running = tmp_path / "cut.partial" / "running" / "FedYogi" / "seed0.pt"
    for _ in range(600):
        if running.exists() or killed.poll() is not None:
            break
        subprocess.run(["sleep", "0.1"])
    assert killed.poll() is None, "the run ended before it could be killed"
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert main(["run", "--resume", str(tmp_path / "cut"), "--quiet", "--workers", "1"]) == 0
    for strategy in names:
        assert (tmp_path / "full" / strategy / "seed0" / "train.csv").exists()  # each aggregates train_loss
        for name in ("metrics.csv", "events.csv", "federated.csv", "train.csv"):
            assert (tmp_path / "full" / strategy / "seed0" / name).read_bytes() == \
                (tmp_path / "cut" / strategy / "seed0" / name).read_bytes(), (strategy, name)


def test_federated_evaluation_of_an_unchanged_model_is_its_accuracy_on_the_clients_data(tmp_path: Path) -> None:
    """Clients that train nothing keep the initial model: each round's federated evaluation (simfl's scores on
    every client's partition, weighted by num-examples) is that model's accuracy and loss on the union of the
    partitions, computed here directly; the legacy FedAvg aggregates the same losses."""
    from simfl.launch.experiment import federation, load_dataset
    from simfl.schema.scenario import validate
    from simfl.train.evaluate import Evaluator

    raw = scenario([{"name": "flower", "strategy": "FedAvg"},
                    {"name": "flower", "strategy": "flwr.server.strategy:FedAvg", "label": "legacy"}],
                   client={"flower_app": "tests.flower.apps:frozen_app"})
    simfl.run(raw, out=tmp_path / "o", allow_imports=True)
    with simfl.names.allowing_imports(True):
        scn = validate(raw)
        fed = federation(scn, load_dataset(scn), 0)
    x = torch.cat([s[0] for s in fed.shards])
    y = torch.cat([s[1] for s in fed.shards])
    expected = Evaluator(fed.model, fed.layout, x, y)(fed.init)
    rounds = len(pd.read_csv(tmp_path / "o" / "FedAvg" / "seed0" / "events.csv")) // 6
    table = pd.read_csv(tmp_path / "o" / "FedAvg" / "seed0" / "federated.csv")
    assert list(table.columns) == ["round", "update", "nodes", "eval_loss", "eval_acc"]
    assert table["round"].tolist() == list(range(1, rounds + 1)) and rounds >= 3
    assert table["update"].tolist() == [6 * r for r in range(1, rounds + 1)]
    assert (table["nodes"] == 6).all()
    assert table["eval_acc"].tolist() == pytest.approx([expected.accuracy] * rounds, rel=1e-12)
    assert table["eval_loss"].tolist() == pytest.approx([expected.loss] * rounds, rel=1e-6)
    legacy = pd.read_csv(tmp_path / "o" / "legacy" / "seed0" / "federated.csv")
    assert list(legacy.columns) == ["round", "update", "nodes", "loss"]
    assert legacy["loss"].tolist() == pytest.approx([expected.loss] * rounds, rel=1e-6)
    # train.csv: what FedAvg's aggregate_train returns, the replies' partition ids weighted by num-examples; the
    # legacy FedAvg returns no training metrics (no fit_metrics_aggregation_fn), so it has no train.csv
    trained = pd.read_csv(tmp_path / "o" / "FedAvg" / "seed0" / "train.csv")
    assert list(trained.columns) == ["round", "update", "nodes", "partition"]
    assert trained[["round", "update", "nodes"]].values.tolist() == [[r, 6 * r, 6] for r in range(1, rounds + 1)]
    sizes = fed.client_sizes
    assert trained["partition"].tolist() == pytest.approx([sum(i * n for i, n in enumerate(sizes)) / sum(sizes)]
                                                          * rounds, rel=1e-12)
    assert not (tmp_path / "o" / "legacy" / "seed0" / "train.csv").exists()


def test_a_client_apps_evaluate_handler_answers_the_federated_evaluation(tmp_path: Path) -> None:
    """The app's evaluate handler gets the strategy's evaluate config and the client's state as its training
    left it (what the handler writes there is dropped); Flower's FedAvg weights its metrics by num-examples;
    fraction_evaluate 0 turns the evaluation off."""
    from simfl.launch.experiment import federation, load_dataset
    from simfl.schema.scenario import validate

    raw = scenario([{"name": "flower", "strategy": "FedAvg", "evaluate_config": {"tag": 7}},
                    {"name": "flower", "strategy": "FedAvg", "options": {"fraction_evaluate": 0.0}, "label": "off"}],
                   client={"flower_app": "tests.flower.apps:evaluating_app", "run_config": RUN_CONFIG})
    simfl.run(raw, out=tmp_path / "o", allow_imports=True)
    with simfl.names.allowing_imports(True):
        sizes = federation(validate(raw), load_dataset(validate(raw)), 0).client_sizes
    table = pd.read_csv(tmp_path / "o" / "FedAvg" / "seed0" / "federated.csv")
    assert len(table) >= 3 and (table["nodes"] == 6).all()
    # metrics are weighted means over the nodes: equal values come back to float64 rounding
    assert table["server-round"].tolist() == pytest.approx(table["round"].tolist())
    assert table["rounds-seen"].tolist() == pytest.approx(table["round"].tolist())  # every client trains each round
    assert table["tag"].tolist() == pytest.approx([7] * len(table))
    assert table["partition"].tolist() == pytest.approx([sum(i * n for i, n in enumerate(sizes)) / sum(sizes)]
                                                        * len(table))
    assert not (tmp_path / "o" / "off" / "seed0" / "federated.csv").exists()
    assert (tmp_path / "o" / "off" / "seed0" / "metrics.csv").read_bytes() == \
        (tmp_path / "o" / "FedAvg" / "seed0" / "metrics.csv").read_bytes()  # evaluation changes no training


def test_flower_strategies_in_a_report_beside_simfls(tmp_path: Path) -> None:
    raw = scenario([{"name": "fedavg", "clients_per_round": 6}, {"name": "flower", "strategy": "FedYogi"},
                    {"name": "flower", "strategy": "Krum", "options": {"num_malicious_nodes": 1}}])
    simfl.run(raw, out=tmp_path / "out")
    done = subprocess.run([sys.executable, "-m", "simfl", "report", str(tmp_path / "out"), "--out",
                           str(tmp_path / "report")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    table = "\n".join(p.read_text() for p in (tmp_path / "report").glob("*.md"))
    for name in ("| FedAvg |", "| FedYogi |", "| Krum |"):  # simfl's fedavg shows as FedAvg
        assert name in table


def test_a_client_app_reproducing_simfls_sgd_gives_its_numbers(tmp_path: Path) -> None:
    """The same local SGD as a Flower ClientApp: byte-identical files under FedAvg, FedProx (the app applies
    Flower's proximal-mu) and the async FedBuff and OrthoFL; the app's context.state persists per client."""
    algorithms = [{"name": "fedavg", "clients_per_round": 6}, {"name": "fedprox", "clients_per_round": 6, "mu": 0.1},
                  {"name": "fedbuff", "buffer": 3}, {"name": "orthofl"}]
    simfl.run(scenario(algorithms), out=tmp_path / "own")
    app = scenario(algorithms, client={"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG})
    simfl.run(app, out=tmp_path / "app", allow_imports=True)
    for name in ("fedavg", "fedprox", "fedbuff", "orthofl"):
        for file in ("metrics.csv", "events.csv"):
            assert (tmp_path / "own" / name / "seed0" / file).read_bytes() == \
                (tmp_path / "app" / name / "seed0" / file).read_bytes(), (name, file)


def test_a_legacy_numpy_client_app_gives_simfls_numbers(tmp_path: Path) -> None:
    """simfl's SGD as a legacy NumPyClient behind ClientApp(client_fn=...): the same files as simfl's own trainer
    under FedAvg, FedBuff and Flower's FedAvg; its client has no evaluate, so the federated evaluation falls back
    to simfl's scores on each partition and equals the own trainer's too."""
    algorithms = [{"name": "fedavg", "clients_per_round": 6}, {"name": "fedbuff", "buffer": 3},
                  {"name": "flower", "strategy": "FedAvg"}]
    simfl.run(scenario(algorithms), out=tmp_path / "own")
    app = scenario(algorithms, client={"flower_app": "tests.flower.apps:legacy_sgd_app", "run_config": RUN_CONFIG})
    simfl.run(app, out=tmp_path / "app", allow_imports=True)
    for name, files in (("fedavg", ["metrics.csv", "events.csv"]), ("fedbuff", ["metrics.csv", "events.csv"]),
                        ("FedAvg", ["metrics.csv", "events.csv", "federated.csv"])):
        for file in files:
            assert (tmp_path / "own" / name / "seed0" / file).read_bytes() == \
                (tmp_path / "app" / name / "seed0" / file).read_bytes(), (name, file)


def test_client_state_travels_with_the_client_and_resumes(tmp_path: Path) -> None:
    """context.state survives across a client's rounds, whichever process trains them."""
    from simfl.launch.experiment import federation, load_dataset, run_one
    from simfl.schema.scenario import validate

    raw = scenario([{"name": "fedbuff", "buffer": 3}],
                   client={"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG})
    with simfl.names.allowing_imports(True):
        scn = validate(raw)
        data = load_dataset(scn)
        result = run_one(scn, federation(scn, data, 0), 0)
    rounds = [c.rounds for c in result.state.clients]
    seen = []
    from simfl.train.flower import unpack

    for c in result.state.clients:
        assert c.memory is not None
        seen.append(int(unpack(c.memory)["seen"]["rounds"]))
    # a client's count is the rounds it delivered: every started round but one still in flight at the end
    assert all(r - 1 <= s <= r for r, s in zip(rounds, seen, strict=True))
    assert max(seen) > 2


def test_process_workers_train_a_client_app_as_inline_does(tmp_path: Path) -> None:
    algorithms = [{"name": "fedbuff", "buffer": 3}]
    client = {"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG}
    simfl.run(scenario(algorithms, client=client), out=tmp_path / "inline", allow_imports=True)
    simfl.run(scenario(algorithms, client=client, executor={"kind": "process", "workers": 2, "threads": 1}),
              out=tmp_path / "process", allow_imports=True)
    for file in ("metrics.csv", "events.csv"):
        assert (tmp_path / "inline" / "fedbuff" / "seed0" / file).read_bytes() == \
            (tmp_path / "process" / "fedbuff" / "seed0" / file).read_bytes()


# -- bad input ---------------------------------------------------------------------------------------------------


def cli(tmp_path: Path, raw: dict[str, Any], *flags: str) -> subprocess.CompletedProcess[str]:
    """``simfl run`` of ``raw`` through the command's own entry (in this process: the refusals come before any
    worker starts); its exit code and what it wrote."""
    import contextlib
    import io

    import yaml

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    argv = ["run", str(path), "--quiet", "--out", str(tmp_path / "o"), *flags]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


@pytest.mark.parametrize(("entry", "client", "words"), [
    ({"name": "flower", "strategy": "FedNothing"}, None, "not a strategy of flwr.serverapp.strategy"),
    ({"name": "flower", "strategy": "collections:OrderedDict"}, None, "not a Flower strategy class"),
    ({"name": "flower", "strategy": "FedAvg", "options": {"fraction": 2}}, None, "unexpected keyword"),
    ({"name": "flower", "strategy": "FedAvg", "options": {"min_available_nodes": 50}}, None, "waits for at least 50"),
    ({"name": "fedavg", "clients_per_round": 6}, {"flower_app": "tests.flower.apps:not_an_app"},
     "not a Flower ClientApp"),
    ({"name": "fedavg", "clients_per_round": 6}, {"flower_app": "tests.flower.apps:wrong_shapes_app"},
     "has shape (3, 3)"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, entry: dict[str, Any], client: dict[str, Any] | None,
                                          words: str) -> None:
    raw = scenario([entry], **({} if client is None else {"client": client}))
    done = cli(tmp_path, raw, "--allow-imports")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("executor", [{"kind": "inline"}, {"kind": "ray", "workers": 1}])
def test_a_client_app_that_raises_names_the_client_and_round(tmp_path: Path, executor: dict[str, Any]) -> None:
    if executor["kind"] == "ray":
        pytest.importorskip("ray")
    raw = scenario([{"name": "fedavg", "clients_per_round": 6}], executor=executor,
                   client={"flower_app": "tests.flower.apps:raising_app", "run_config": RUN_CONFIG})
    done = cli(tmp_path, raw, "--allow-imports")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "client 3, node 4, its round 1" in lines[0] and "ValueError: the user's training code failed" in lines[0]
    crash = lines[0].rsplit(" ", 1)[-1]
    text = Path(crash).read_text()
    assert "raising_train" in text and "Traceback" in text


def test_an_app_path_needs_permission(tmp_path: Path) -> None:
    raw = scenario([{"name": "fedavg", "clients_per_round": 6}], client={"flower_app": "tests.flower.apps:sgd_app"})
    done = cli(tmp_path, raw)
    assert done.returncode == 2 and "--allow-imports" in done.stderr


def test_flower_cannot_run_under_cross_device_serving() -> None:
    from simfl.schema.scenario import validate

    with pytest.raises(InputError, match="picks its own clients"):
        validate(scenario([{"name": "flower", "strategy": "FedAvg"}], server={"concurrency": 3}))
