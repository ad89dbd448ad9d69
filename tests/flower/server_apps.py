"""Flower ServerApps the tests run under simfl, written as Flower's quickstart writes them."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from simfl import rng
from tests.flower.apps import mlp

fedavg_app = ServerApp()
"""Flower's FedAvg over every node for ``num-server-rounds``, from simfl's initial model of seed 0; saves the
final model to ``save-to`` when the run config names it."""


def initial_model() -> torch.nn.Module:
    """simfl's initial model of seed 0 (the stream (0, "init")), so that runs compare with simfl's own."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(rng.torch_seed(0, "init"))
        return mlp()


def started(context: Context) -> None:
    """Count a start of main in the file the run config's ``starts`` names, if any."""
    if context.run_config.get("starts"):
        with open(str(context.run_config["starts"]), "a") as fh:
            fh.write(f"{context.run_id}\n")


@fedavg_app.main()
def fedavg_main(grid: Grid, context: Context) -> None:
    started(context)
    rounds = int(context.run_config["num-server-rounds"])
    strategy = FedAvg(fraction_train=float(context.run_config.get("fraction-train", 1.0)),
                      fraction_evaluate=float(context.run_config.get("fraction-evaluate", 0.0)),
                      min_available_nodes=int(context.run_config.get("min-available", 2)))
    evaluated: list[int] = []

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        evaluated.append(server_round)
        weight = next(iter(arrays.values())).numpy()  # the first layer's weights
        norm = float((weight.astype("float64") ** 2).sum())
        return MetricRecord({"norm": norm, "calls": len(evaluated), "pair": [norm, float(server_round)]})

    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(initial_model().state_dict()),
                            train_config=ConfigRecord({"lr": float(context.run_config["lr"])}), num_rounds=rounds,
                            evaluate_fn=evaluate)
    target = context.run_config.get("save-to")
    if target:
        torch.save(result.arrays.to_torch_state_dict(), Path(str(target)))


raising_app = ServerApp()


@raising_app.main()
def raising_main(grid: Grid, context: Context) -> None:
    list(grid.get_node_ids())
    raise RuntimeError("the user's server app failed")


mixed_app = ServerApp()


@mixed_app.main()
def mixed_main(grid: Grid, context: Context) -> None:
    from flwr.app import Message, MessageType, RecordDict

    arrays = ArrayRecord(initial_model().state_dict())
    nodes = list(grid.get_node_ids())
    messages = [Message(RecordDict({"arrays": arrays, "config": ConfigRecord({})}), dst_node_id=n,
                        message_type=MessageType.TRAIN if i else MessageType.EVALUATE) for i, n in enumerate(nodes)]
    grid.send_and_receive(messages)


typed_app = ServerApp()
"""A loop of its own (no strategy): two rounds, each one message of every type to six nodes (train with float64,
int32 and float32 arrays, evaluate, query, query.histogram, train.custom, and a train message with a config only);
saves what the replies held to ``save-to`` (JSON)."""


@typed_app.main()
def typed_main(grid: Grid, context: Context) -> None:
    import json

    import numpy as np
    from flwr.app import Array, Message, RecordDict

    started(context)
    seen = []
    for _ in range(2):
        nodes = sorted(grid.get_node_ids())
        arrays = ArrayRecord({"w64": Array(np.array([1.5, 2.5], dtype=np.float64)),
                              "i32": Array(np.array([1, 2, 3], dtype=np.int32)),
                              "w32": Array(np.array([0.25], dtype=np.float32))})
        config = ConfigRecord({"list": [1, 2, 3], "blob": b"xy", "name": "n"})
        kinds = ["train", "evaluate", "query", "query.histogram", "train.custom", "train"]
        messages = [Message(RecordDict({"arrays": arrays, "config": config} if i < 5 else {"config": config}),
                            dst_node_id=n, message_type=k) for i, (n, k) in enumerate(zip(nodes, kinds, strict=True))]
        for reply in grid.send_and_receive(messages):
            back = reply.content["arrays"]
            seen.append({"type": reply.metadata.message_type, "node": reply.metadata.src_node_id,
                         "seen": reply.content["seen"]["type"], "dtypes": reply.content["seen"]["dtypes"],
                         "arrays": {k: [str(v.numpy().dtype), v.numpy().tolist()] for k, v in back.items()},
                         "metrics": dict(reply.content["metrics"])})
    with open(str(context.run_config["save-to"]), "w") as fh:
        json.dump({"replies": seen, "run_id": context.run_id}, fh)


class OwnStart(FedAvg):
    """A FedAvg whose ``start`` is its own (as Flower's advanced-pytorch example writes one): its loop, its lines."""

    def start(self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int = 3, timeout: float = 3600,
              train_config: ConfigRecord | None = None, evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Any = None) -> Any:
        from flwr.common import log
        from flwr.serverapp.strategy import Result

        result = Result()
        arrays = initial_arrays
        result.evaluate_metrics_serverapp[0] = evaluate_fn(0, arrays)
        for current in range(1, num_rounds + 1):
            log(logging.INFO, "own loop, round %s", current)
            replies = grid.send_and_receive(self.configure_train(current, arrays, train_config or ConfigRecord(),
                                                                 grid), timeout=timeout)
            new_arrays, metrics = self.aggregate_train(current, replies)
            if new_arrays is not None:
                result.arrays = arrays = new_arrays
            if metrics is not None:
                result.train_metrics_clientapp[current] = metrics
            result.evaluate_metrics_serverapp[current] = evaluate_fn(current, arrays)
        return result


override_app = ServerApp()
"""FedAvg through an override of ``Strategy.start``; its evaluate_fn gives an accuracy (its call count over 100)
and a loss (the first layer's squared norm)."""


@override_app.main()
def override_main(grid: Grid, context: Context) -> None:
    calls: list[int] = []

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        calls.append(server_round)
        weight = next(iter(arrays.values())).numpy()
        return MetricRecord({"accuracy": len(calls) / 100, "loss": float((weight.astype("float64") ** 2).sum())})

    strategy = OwnStart(fraction_evaluate=0.0)
    strategy.start(grid=grid, initial_arrays=ArrayRecord(initial_model().state_dict()), num_rounds=2,
                   train_config=ConfigRecord({"lr": 0.05}), evaluate_fn=evaluate)


sleeping_app = ServerApp()
"""Sleeps ``sleep`` seconds before it sends anything."""


@sleeping_app.main()
def sleeping_main(grid: Grid, context: Context) -> None:
    import time

    time.sleep(float(context.run_config["sleep"]))
    list(grid.get_node_ids())


threaded_app = ServerApp()
"""Sends its messages from a thread of its own, which main waits for."""


@threaded_app.main()
def threaded_main(grid: Grid, context: Context) -> None:
    import threading

    from flwr.app import Message, MessageType, RecordDict

    nodes = list(grid.get_node_ids())

    def send() -> None:
        arrays = ArrayRecord(initial_model().state_dict())
        grid.send_and_receive([Message(RecordDict({"arrays": arrays, "config": ConfigRecord({})}), dst_node_id=n,
                                       message_type=MessageType.TRAIN) for n in nodes])

    worker = threading.Thread(target=send, name="my-sender")
    worker.start()
    worker.join()


worded_app = ServerApp()
"""FedAvg whose evaluate_fn returns a str."""


@worded_app.main()
def worded_main(grid: Grid, context: Context) -> None:
    FedAvg(fraction_evaluate=0.0).start(grid=grid, initial_arrays=ArrayRecord(initial_model().state_dict()),
                                        num_rounds=1, evaluate_fn=lambda r, a: "fine")


integer_app = ServerApp()
"""Sends integer arrays only (as a model), then stops."""


@integer_app.main()
def integer_main(grid: Grid, context: Context) -> None:
    import numpy as np
    from flwr.app import Array, Message, MessageType, RecordDict

    arrays = ArrayRecord({"counts": Array(np.arange(4, dtype=np.int64))})
    grid.send_and_receive([Message(RecordDict({"arrays": arrays, "config": ConfigRecord({"lr": 0.1})}),
                                   dst_node_id=n, message_type=MessageType.TRAIN) for n in grid.get_node_ids()])


# -- Flower's legacy server: ServerApp(server_fn=...), a Server and a Strategy, as Flower's tutorials write them --

import numpy as np  # noqa: E402
from flwr.client import NumPyClient  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402

from simfl.train.flower import client_data  # noqa: E402
from tests.flower.apps import sgd  # noqa: E402


class LegacyClient(NumPyClient):
    """simfl's local SGD as a legacy NumPyClient that trains with the ``lr`` of its fit config (the strategy's
    ``on_fit_config_fn``) and evaluates on its own partition (its accuracy and the server round it was told)."""

    def __init__(self, context: Context) -> None:
        self.context = context

    def _model(self, parameters: list[np.ndarray]) -> torch.nn.Module:
        model = mlp()
        keys = list(model.state_dict())
        model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in zip(keys, parameters, strict=True)})
        return model

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[list[np.ndarray], int, dict[str, Any]]:
        model = self._model(parameters)
        run = self.context.run_config
        x, y = client_data(self.context)
        loss = sgd(model, x, y, float(config["lr"]), int(run["local-epochs"]), int(run["batch-size"]), 0.0)
        return [v.detach().numpy() for v in model.state_dict().values()], len(y), \
            {"train_loss": loss, "server-round": int(config["server-round"])}

    def evaluate(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[float, int, dict[str, Any]]:
        model = self._model(parameters)
        x, y = client_data(self.context)
        with torch.no_grad():
            out = model(x)
        loss = float(torch.nn.functional.cross_entropy(out, y))
        return loss, len(y), {"accuracy": float((out.argmax(1) == y).float().mean())}


legacy_client_app = ClientApp(client_fn=lambda context: LegacyClient(context).to_client())
"""A legacy ClientApp (client_fn and a NumPyClient that fits and evaluates)."""


def weighted(pairs: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """The metrics of a round's clients averaged by their example counts (Flower's tutorial's weighted_average)."""
    total = sum(n for n, _ in pairs)
    keys = sorted({k for _, m in pairs for k in m})
    return {k: sum(n * float(m[k]) for n, m in pairs) / total for k in keys}


def digits_scores(model: torch.nn.Module) -> tuple[float, float]:
    """The model's loss and accuracy on scikit-learn's digits (the server side's held data, scaled as simfl's)."""
    from sklearn.datasets import load_digits

    images, labels = load_digits(return_X_y=True)
    x = torch.tensor(images / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    y = torch.tensor(labels)
    with torch.no_grad():
        out = model(x)
    return float(torch.nn.functional.cross_entropy(out, y)), float((out.argmax(1) == y).float().mean())


def legacy_server_fn(context: Context) -> Any:
    """Flower's tutorial shape: a legacy FedAvg sampling 30% of the nodes but at least 3 to fit (3 of 6: the minimum)
    and half but at least 2 to evaluate (3 of 6: the fraction), of at least ``min-available`` (4) nodes, its fit
    config from ``on_fit_config_fn``, its server-side ``evaluate_fn`` on the digits, run by Flower's default Server
    for ``num-server-rounds``; ``order-to`` (a file) gets the nodes of each round's fit results as aggregate_fit
    reads them."""
    from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays
    from flwr.server import ServerAppComponents, ServerConfig
    from flwr.server.strategy import FedAvg as LegacyFedAvg

    start = initial_model()
    keys = list(start.state_dict())

    def evaluate(server_round: int, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        model = mlp()
        model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in zip(keys, parameters, strict=True)})
        loss, accuracy = digits_scores(model)
        return loss, {"accuracy": accuracy}

    class Recording(LegacyFedAvg):
        """Flower's legacy FedAvg, writing the nodes of each round's fit results in the order it reads them."""

        def aggregate_fit(self, server_round: int, results: Any, failures: Any) -> Any:
            if context.run_config.get("order-to"):
                with open(str(context.run_config["order-to"]), "a") as fh:
                    fh.write(" ".join(str(proxy.cid) for proxy, _ in results) + "\n")
            return super().aggregate_fit(server_round, results, failures)

    strategy = Recording(
        fraction_fit=0.3, min_fit_clients=3, fraction_evaluate=0.5, min_evaluate_clients=2,
        min_available_clients=int(context.run_config.get("min-available", 4)),
        evaluate_fn=evaluate, on_fit_config_fn=lambda r: {"lr": 0.05, "server-round": r},
        fit_metrics_aggregation_fn=weighted, evaluate_metrics_aggregation_fn=weighted,
        initial_parameters=ndarrays_to_parameters([v.numpy() for v in start.state_dict().values()]))
    assert parameters_to_ndarrays(strategy.initial_parameters)[0].shape == start.state_dict()[keys[0]].shape
    return ServerAppComponents(strategy=strategy, config=ServerConfig(num_rounds=int(context.run_config["num-server-rounds"])))


legacy_app = ServerApp(server_fn=legacy_server_fn)
"""A legacy ``server_fn`` app: Flower's default Server, a legacy FedAvg with evaluate_fn and on_fit_config_fn."""


def narrow_server_fn(context: Context) -> Any:
    """The legacy app with a Server of its own whose pool is 2 workers wide (``set_max_workers(2)``)."""
    from flwr.server import Server, ServerAppComponents, SimpleClientManager

    parts = legacy_server_fn(context)
    server = Server(client_manager=SimpleClientManager(), strategy=parts.strategy)
    server.set_max_workers(2)
    return ServerAppComponents(server=server, config=parts.config)


narrow_app = ServerApp(server_fn=narrow_server_fn)
"""A legacy app whose Server sends at most 2 messages at once."""


# -- push and pull ------------------------------------------------------------------------------------------------


def _query(node: int, tag: str, message_type: str = "query") -> Any:
    """A config-only message to ``node``, tagged so that its reply can be told apart."""
    from flwr.app import Message, RecordDict

    return Message(RecordDict({"config": ConfigRecord({"tag": tag})}), dst_node_id=node, message_type=message_type)


def _tell(context: Context, seen: dict[str, Any]) -> None:
    import json

    with open(str(context.run_config["record"]), "w") as fh:
        json.dump(seen, fh)


pushing_app = ServerApp()
"""Pushes a query to every node, then a second one to each (two push_messages calls, no wait), then pulls in a loop
that sleeps between pulls, as Flower's apps poll; records each pull's replies (by message id) in ``record``."""


@pushing_app.main()
def pushing_main(grid: Grid, context: Context) -> None:
    import time

    nodes = sorted(grid.get_node_ids())
    first = list(grid.push_messages([_query(n, f"a{n}") for n in nodes]))
    second = list(grid.push_messages([_query(n, f"b{n}") for n in nodes]))
    waiting = set(first + second)
    pulls: list[list[str]] = []
    while waiting:
        got = list(grid.pull_messages(first + second))
        pulls.append([str(m.metadata.reply_to_message_id) for m in got])
        waiting -= set(pulls[-1])
        time.sleep(0.001)
    nothing = list(grid.pull_messages(first))  # every reply taken: nothing left, no wait
    _tell(context, {"first": first, "second": second, "pulls": pulls, "after": len(nothing)})


timeout_app = ServerApp()
"""send_and_receive to every node with ``timeout`` (virtual seconds), then to the nodes listed next without one;
records the nodes that replied to each and the nodes listed in between."""


@timeout_app.main()
def timeout_main(grid: Grid, context: Context) -> None:
    nodes = sorted(grid.get_node_ids())
    early = grid.send_and_receive([_query(n, "early") for n in nodes], timeout=float(context.run_config["timeout"]))
    listed = sorted(grid.get_node_ids())
    later = grid.send_and_receive([_query(n, "later") for n in listed])
    _tell(context, {"early": sorted(int(m.metadata.src_node_id) for m in early), "listed": listed,
                    "later": sorted(int(m.metadata.src_node_id) for m in later)})


vertical_app = ServerApp()
"""As Flower's vertical example does: each round asks every node for its part (send_and_receive of queries), then
pushes each node its gradient (a ``train.custom`` message) without waiting for a reply; the next round's queries
queue behind the gradients. Records each round's reply nodes in arrival order."""


@vertical_app.main()
def vertical_main(grid: Grid, context: Context) -> None:
    nodes = sorted(grid.get_node_ids())
    rounds: list[list[int]] = []
    for r in range(int(context.run_config["rounds"])):
        replies = grid.send_and_receive([_query(n, f"q{r}") for n in nodes])
        rounds.append([int(m.metadata.src_node_id) for m in replies])
        grid.push_messages([_query(n, f"g{r}", "train.custom") for n in nodes])
    _tell(context, {"rounds": rounds})
