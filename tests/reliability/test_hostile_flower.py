"""Hostile input, part four (Flower): validate refuses what run refuses, no round waits forever, user code is named.

Classes: Flower rounds that never open (``fraction_train: 0``, a sample of no node, a legacy
``min_fit_clients`` above the clients, a strategy that picks no node: one line before the run, or at
its first round, under any budget; never a hang nor 0 updates with exit 0), Flower options (unknown,
abstract or forbidden strategies, option values of the wrong type, NaN and infinities, configs
Flower's ConfigRecord refuses, a ClientApp module that is not there: ``simfl validate`` and
``simfl run`` give the same exit code, and the same line), and user strategies (the user's own
strategy raising, exiting or returning a wrong value in its constructor, ``configure_*`` or
``aggregate_*``: one line naming the code, the call and the exception, its traceback in a file).
Each is property-based and calls the CLI in-process; counts per class go to
:data:`tests.reliability.hostile.COUNTS`.
"""

from __future__ import annotations

import copy
import math
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("flwr")

from tests.flower.strategies import METHODS, NAMES, RETURNS  # noqa: E402
from tests.reliability.hostile import COUNTS, cli, fuzz  # noqa: E402

STRATEGIES = "tests.flower.strategies"
RAISED = {"value_error": "ValueError", "runtime_error": "RuntimeError", "key_error": "KeyError",
          "zero_division": "ZeroDivisionError", "oddity": "Oddity", "exit": "SystemExit: 3"}
"""What each raising behaviour of :mod:`tests.flower.strategies` raises, as the line names it."""


def _scenario(entry: dict[str, Any], clients: int = 3, budget: dict[str, Any] | None = None,
              **changes: Any) -> dict[str, Any]:
    """A tiny synthetic federation of ``clients`` clients under one Flower entry."""
    raw: dict[str, Any] = {
        "name": "flower", "seeds": [0],
        "data": {"dataset": "synthetic", "train_size": 120, "test_size": 60, "features": 8, "classes": 3,
                 "partition": {"kind": "iid", "clients": clients}},
        "model": {"name": "mlp", "hidden": [8]},
        "train": {"epochs": 1, "batch_size": 16, "lr": 0.1},
        "latency": {"model": "constant", "seconds": [1.0 + 1.5 * i for i in range(clients)]},
        "budget": budget or {"updates": 4},
        "eval": {"every": 2.0},
        "algorithms": [entry],
        "executor": {"kind": "inline"},
    }
    raw.update(changes)
    return raw


def _write(folder: Path, raw: dict[str, Any]) -> Path:
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    return path


def _updates(out: Path) -> int:
    return int(pd.read_csv(out / "summary.csv")["updates"].min())


def _crash_file(err: str, traceback: bool) -> None:
    """The file a user-code line names holds the traceback (when the code raised); one in the temp folder goes."""
    path = Path(err.rsplit(" ", 1)[-1])
    assert path.is_file(), err
    if traceback:
        assert "Traceback" in path.read_text(), path
    if path.parent == Path(tempfile.gettempdir()) and path.name.startswith("simfl-crash-"):
        path.unlink()


# -- Flower rounds that never open ----------------------------------------------------------------------------

NEVER_OPENS: dict[str, tuple[str, dict[str, Any]]] = {
    # case: (strategy, options) under which no round can open on the federation's clients
    "fraction_train 0": ("FedAvg", {"fraction_train": 0}),
    "fraction_train 0.0 FedProx": ("FedProx", {"fraction_train": 0.0, "proximal_mu": 0.1}),
    "fraction_train 0 Krum": ("Krum", {"fraction_train": 0.0}),
    "fraction_train 0 FedYogi": ("FedYogi", {"fraction_train": 0}),
    "no node sampled": ("FedAvg", {"fraction_train": 0.1, "min_train_nodes": 0}),
    "negative minimum": ("FedAvg", {"fraction_train": 0.1, "min_train_nodes": -2}),
    "min_train_nodes above": ("FedAvg", {"min_train_nodes": 9}),
    "min_available_nodes above": ("FedMedian", {"min_available_nodes": 12}),
    "fraction above 1": ("FedAvg", {"fraction_train": 4.0}),
    "legacy min_fit_clients above": ("flwr.server.strategy:FedAvg", {"min_fit_clients": 9}),
    "legacy min_fit_clients far above": ("flwr.server.strategy:FedAvg", {"min_fit_clients": 10**6}),
    "legacy fraction_fit above 1": ("flwr.server.strategy:FedAvg", {"fraction_fit": 5.0}),
    "legacy nothing sampled": ("flwr.server.strategy:FedAvg", {"fraction_fit": 0.0, "min_fit_clients": 0}),
    "legacy FedMedian above": ("flwr.server.strategy:FedMedian", {"min_fit_clients": 7}),
}
BUDGETS = [{"updates": 4}, {"updates": 10**6}, {"time": 30.0}, {"time": 30.0, "updates": 4}]


@fuzz(110)
@given(case=st.sampled_from(sorted(NEVER_OPENS)), clients=st.integers(1, 5), budget=st.sampled_from(BUDGETS),
       command=st.sampled_from(["validate", "run", "run"]), deadline=st.sampled_from([None, None, 2.0]))
def test_a_round_that_can_never_open_is_refused_before_the_run(
        tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], case: str, clients: int,
        budget: dict[str, Any], command: str, deadline: float | None) -> None:
    """The issue: fraction_train 0, or a legacy min_fit_clients above the clients, hung under an update budget
    (validate: valid), and ran to the end with 0 updates and exit 0 under a time budget."""
    base = tmp_path_factory.mktemp("never")
    strategy, options = NEVER_OPENS[case]
    rounds = {"rounds": {"deadline": deadline}} if deadline else {}
    path = _write(base, _scenario({"name": "flower", "strategy": strategy, "options": options}, clients, budget,
                                  **rounds))
    argv: list[Any] = [command, path, "--out", base / "out", "--quiet"] if command == "run" else [command, path]
    _code, err = cli(capsys, argv, "Flower rounds that never open", expect=2)
    assert "no round would ever open" in err or "waits for at least" in err, err
    assert not (base / "out").exists() and not (base / "out.partial").exists()


@fuzz(40)
@given(strategy=st.sampled_from(["PicksNone", "LegacyPicksNone"]), clients=st.integers(2, 5),
       budget=st.sampled_from(BUDGETS), availability=st.booleans())
def test_a_strategy_that_picks_no_node_ends_the_run_in_one_line(
        tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], strategy: str, clients: int,
        budget: dict[str, Any], availability: bool) -> None:
    """A strategy that sends no node a message while every client is free: nothing can change that, so the run
    ends at its first round in one line instead of waiting forever (or running to its time with 0 updates)."""
    base = tmp_path_factory.mktemp("picksnone")
    extra = {"availability": {"departures": [{"client": 0, "leave": 0.0, "rejoin": 3.0}]}} if availability else {}
    path = _write(base, _scenario({"name": "flower", "strategy": f"{STRATEGIES}:{strategy}"}, clients, budget,
                                  **extra))
    _code, err = cli(capsys, ["run", path, "--out", base / "out", "--quiet", "--allow-imports"],
                     "Flower rounds that never open", expect=2)
    assert "picked no node in round 1" in err and "no round can ever open" in err, err


WAITS_FOR_ALL = {
    "legacy FedAvg": ("flwr.server.strategy:FedAvg", "min_fit_clients", {}),
    "legacy FedMedian": ("flwr.server.strategy:FedMedian", "min_fit_clients", {}),
    "FedAvg": ("FedAvg", "min_train_nodes", {"fraction_train": 1.0}),
    "FedProx": ("FedProx", "min_train_nodes", {"fraction_train": 1.0, "proximal_mu": 0.1}),
}
"""Strategies told to wait for every client: once one leaves for good, no round can open again."""


@fuzz(40)
@given(case=st.sampled_from(sorted(WAITS_FOR_ALL)), clients=st.integers(2, 4), gone=st.integers(1, 4),
       leave=st.sampled_from([0.0, 0.7, 5.0, 9.3]), budget=st.sampled_from([{"updates": 40}, {"updates": 10**6},
                                                                           {"time": 25.0}]))
def test_a_round_that_can_no_longer_open_after_clients_leave_for_good_ends_the_run(
        tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], case: str, clients: int,
        gone: int, leave: float, budget: dict[str, Any]) -> None:
    """The issue: a strategy waiting for more nodes than remain after clients left for good waited forever under
    an update budget. With nothing that can change (each client free or gone), the run ends as when every client
    has left: an update budget stops there, a time budget runs to its end; exit 0, the updates made so far."""
    base = tmp_path_factory.mktemp("gone")
    strategy, key, options = WAITS_FOR_ALL[case]
    gone = min(gone, clients)
    departures = [{"client": i, "leave": leave + 0.1 * i} for i in range(gone)]
    path = _write(base, _scenario({"name": "flower", "strategy": strategy, "options": {**options, key: clients}},
                                  clients, budget, availability={"departures": departures}))
    cli(capsys, ["run", path, "--out", base / "out", "--quiet"], "Flower rounds that never open", expect=0)
    updates = _updates(base / "out")
    assert updates < budget.get("updates", 10**6)
    rounds = math.ceil(leave / (1.0 + 1.5 * (clients - 1)))  # the slowest client's latency closes each round
    assert updates <= clients * (rounds + 1)


# -- Flower options: validate refuses what run refuses ---------------------------------------------------------

OPTION_KEYS: dict[str, list[str]] = {
    "FedAvg": ["fraction_train", "fraction_evaluate", "min_train_nodes", "min_evaluate_nodes", "min_available_nodes",
               "weighted_by_key", "arrayrecord_key", "train_metrics_aggr_fn"],
    "FedAvgM": ["server_momentum", "server_learning_rate", "fraction_train"],
    "FedYogi": ["eta", "eta_l", "beta_1", "beta_2", "tau"],
    "FedAdam": ["eta", "beta_1", "tau"],
    "FedAdagrad": ["eta", "eta_l"],
    "FedProx": ["proximal_mu", "fraction_evaluate"],
    "FedTrimmedAvg": ["beta"],
    "Krum": ["num_malicious_nodes", "fraction_train"],
    "QFedAvg": ["q", "client_learning_rate", "train_loss_key"],
    "flwr.server.strategy:FedAvg": ["fraction_fit", "min_fit_clients", "min_available_clients", "accept_failures",
                                    "inplace", "evaluate_fn"],
    "flwr.server.strategy:FedAvgM": ["server_momentum", "server_learning_rate"],
}
VALUES = st.sampled_from(["abc", "0.5", "", "1e999", True, False, None, [1, 2], {"a": 1}, math.nan, math.inf, -math.inf,
                          0, -1, 0.5, 1.0, 2**70, -(2**70), 1e308, 1e-320, "num-examples", "train_loss", "weird key"])
STRATEGY_NAMES = st.sampled_from(["FedNothing", "Strategy", "flwr.serverapp.strategy:Strategy",
                                  "flwr.server.strategy:Strategy", "flwr.serverapp.strategy:Nothing",
                                  "collections:OrderedDict", "os:system", "no_such_module_xyz:Strategy",
                                  f"{STRATEGIES}:NAMES", f"{STRATEGIES}:Oddity", "fedavg", "", "flwr:serverapp",
                                  "DifferentialPrivacyClientSideFixedClipping", "FedXgbCyclic"])
CONFIGS = st.sampled_from([{"a": [1, "x"]}, {"a": {"b": 1}}, {"a": None}, {"a": math.nan}, {"a": [math.inf]},
                           {"a": [[1]]}, {"a": 2**70}, {"a": b"bytes"}, {"a": [True, 1]}, {"a": []}, {"": 1},
                           {"lr": 0.05}, {"a": "text"}])


def _same_answer(capsys: pytest.CaptureFixture[str], base: Path, raw: dict[str, Any], allow: bool) -> None:
    """``simfl validate`` and ``simfl run`` of ``raw``: the same exit code and, for a refusal, the same line."""
    path = _write(base, raw)
    flags = ["--allow-imports"] if allow else []
    kind = "Flower options"
    validated, v_err = cli(capsys, ["validate", path, *flags], kind)
    ran, r_err = cli(capsys, ["run", path, "--out", base / "out", "--quiet", *flags], kind)
    if validated == 0 and ran == 2:  # a value Flower's own code fails on only once it runs (QFedAvg's lr 0)
        assert r_err.startswith("simfl: algorithms.strategy: ") and " in round " in r_err, r_err
        COUNTS[(kind, "valid, then one line at a round")] += 1
        return
    assert validated == ran, (v_err, r_err)
    if ran == 2:
        assert v_err.replace(f"{path}: ", "") == r_err.replace(f"{path}: ", ""), (v_err, r_err)
        assert not (base / "out").exists() and not (base / "out.partial").exists()
    else:
        assert _updates(base / "out") > 0, "exit 0 without a single update"


@fuzz(110)
@given(strategy=st.sampled_from(sorted(OPTION_KEYS)), data=st.data(), value=VALUES)
def test_an_option_value_is_refused_by_validate_as_by_run(
        tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], strategy: str,
        data: st.DataObject, value: Any) -> None:
    """The issue: text for fraction_train, fraction_evaluate, server_momentum or eta, an unknown weighted_by_key,
    .nan and .inf were internal errors at run time, and `simfl validate` said valid."""
    base = tmp_path_factory.mktemp("options")
    key = data.draw(st.sampled_from(OPTION_KEYS[strategy] + ["no_such_option"]), label="key")
    raw = _scenario({"name": "flower", "strategy": strategy, "options": {key: copy.deepcopy(value)}})
    _same_answer(capsys, base, raw, allow=False)


@fuzz(50)
@given(name=STRATEGY_NAMES, allow=st.booleans(), options=st.sampled_from([{}, {"fraction_train": 0.5}]))
def test_a_strategy_name_is_refused_by_validate_as_by_run(
        tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], name: str, allow: bool,
        options: dict[str, Any]) -> None:
    """The issue: unknown or abstract strategies and an import path without permission were valid for validate."""
    base = tmp_path_factory.mktemp("names")
    _same_answer(capsys, base, _scenario({"name": "flower", "strategy": name, "options": options}), allow)


@fuzz(50)
@given(which=st.sampled_from(["train_config", "evaluate_config"]), config=CONFIGS,
       strategy=st.sampled_from(["FedAvg", "FedProx", "FedAdam"]))
def test_a_config_flower_refuses_is_refused_by_validate_as_by_run(
        tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], which: str,
        config: dict[str, Any], strategy: str) -> None:
    """The issue: train_config/evaluate_config values that Flower's ConfigRecord refuses were internal errors."""
    base = tmp_path_factory.mktemp("configs")
    entry = {"name": "flower", "strategy": strategy, which: copy.deepcopy(config)}
    _same_answer(capsys, base, _scenario(entry), allow=False)


@fuzz(20)
@given(app=st.sampled_from(["no_such_module_xyz:app", "tests.flower.apps:no_such_app", "tests.flower.apps:mlp",
                            "tests.flower:apps", "os.path:join", "tests.flower.apps:sgd_app"]),
       allow=st.booleans(), algorithm=st.sampled_from(["fedavg", "flower"]))
def test_a_client_app_that_is_not_there_is_refused_by_validate_as_by_run(
        tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], app: str, allow: bool,
        algorithm: str) -> None:
    """The issue: a flower_app module that does not exist was valid for validate."""
    base = tmp_path_factory.mktemp("apps")
    entry = {"name": "fedavg", "clients_per_round": 2} if algorithm == "fedavg" else {"name": "flower",
                                                                                       "strategy": "FedAvg"}
    raw = _scenario(entry, client={"flower_app": app, "run_config": {"lr": 0.1, "local-epochs": 1,
                                                                      "batch-size": 16}},
                    model={"name": "mlp"}, data={"dataset": "digits",
                                                                  "partition": {"kind": "iid", "clients": 3}})
    _same_answer(capsys, base, raw, allow)


# -- user strategies ------------------------------------------------------------------------------------------


@fuzz(110)
@given(name=st.sampled_from(NAMES), command=st.sampled_from(["run", "run", "validate"]),
       budget=st.sampled_from([{"updates": 4}, {"time": 30.0}]))
def test_a_user_strategy_that_fails_is_named_in_one_line(
        tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], name: str, command: str,
        budget: dict[str, Any]) -> None:
    """The issue: the user's own strategy raising, or returning None, in __init__, configure_* or aggregate_* was
    "an internal error ... a bug in simfl"."""
    base = tmp_path_factory.mktemp("userstrategy")
    api, _, rest = name.partition("_")
    method = next(m for m in METHODS[api] if rest.startswith(m + "_"))
    behaviour = rest[len(method) + 1:]
    path = _write(base, _scenario({"name": "flower", "strategy": f"{STRATEGIES}:{name}"}, 3, budget))
    command = command if method == "__init__" else "run"  # validate builds the strategy; its methods run in a run
    argv: list[Any] = [command, path, "--allow-imports"] + (["--out", base / "out", "--quiet"] if command == "run"
                                                             else [])
    _code, err = cli(capsys, argv, "user strategies", expect=2)
    if method == "__init__":  # refused when the scenario is validated: no folder is made
        assert not (base / "out").exists() and not (base / "out.partial").exists()
    assert err.startswith("simfl: algorithms.strategy: ") and name in err, err
    assert (method if method != "__init__" else f"{name}()") in err, err
    if behaviour in RETURNS:
        assert " returned " in err and ", not " in err, err
    else:
        assert f" raised {RAISED[behaviour]}" in err, err
    _crash_file(err, traceback=behaviour not in RETURNS)


# -- Flower Datasets partitioners: validate refuses what their constructors refuse ------------------------------

PARTITIONER_REFUSALS = (
    [("DirichletPartitioner", {"alpha": a, "partition_by": "label"}) for a in (-1, 0, -0.5, [1, 2], [0, 1, 1])]
    + [("ShardPartitioner", {"partition_by": "label", "num_shards_per_partition": v}) for v in (-1, 0)]
    + [("ShardPartitioner", {"partition_by": "label", "shard_size": v}) for v in (0, -5)]
    + [("SizePartitioner", {"partition_sizes": v}) for v in ([-1, 50, 50], [1.5, 50, 50], [0, -2, 4])]
    + [("ContinuousPartitioner", {"partition_by": "label", "strictness": v}) for v in (2, -1, 1.5)]
)
"""Options a partitioner's constructor refuses (the issue: validate called them valid; run refused them)."""


@pytest.mark.parametrize(("partitioner", "options"), PARTITIONER_REFUSALS)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_partitioner_that_refuses_its_options_is_refused_by_validate_as_by_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], partitioner: str, options: dict[str, Any],
        command: str) -> None:
    pytest.importorskip("flwr_datasets")
    raw = _scenario({"name": "fedasync", "alpha": 0.5})
    raw["data"]["partition"] = {"kind": "flwr", "partitioner": partitioner, "clients": 3, "options": options}
    path = _write(tmp_path, raw)
    argv: list[Any] = [command, path] + (["--out", tmp_path / "out", "--quiet"] if command == "run" else [])
    _code, err = cli(capsys, argv, "4 validate agrees with run", expect=2)
    assert f"data.partition: {partitioner} refuses" in err, err
    assert not (tmp_path / "out").exists()
