"""Tiny NumPy Flower apps (a model of four numbers) whose ClientApps evaluate, for simfl's own rules over them: a
ServerApp without a server-side evaluation, ClientApps whose evaluate handler reports the model's mean shifted per
node, and apps that fail or exchange no model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.client import NumPyClient
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

server_app = ServerApp()
"""Flower's FedAvg from four zeros, no evaluate_fn (so no server-side evaluation)."""


@server_app.main()
def server_main(grid: Grid, context: Context) -> None:
    FedAvg().start(grid=grid, initial_arrays=ArrayRecord({"w": Array(np.zeros(4, dtype=np.float32))}),
                   num_rounds=int(context.run_config.get("num-server-rounds", 2)), train_config=ConfigRecord({"lr": 0.1}))


def _trained(msg: Message) -> Message:
    """Each number of the model it was sent plus the config's lr; 10 examples."""
    (arrays,) = msg.content.array_records.values()
    lr = float(msg.content["config"].get("lr", 0.1))
    trained = ArrayRecord({k: Array(v.numpy() + np.float32(lr)) for k, v in arrays.items()})
    return Message(RecordDict({"arrays": trained, "metrics": MetricRecord({"num-examples": 10})}), reply_to=msg)


def _seen(context: Context, msg: Message) -> None:
    """Append what this evaluation saw (node, server-round, the model's mean) to the run config's ``log`` file."""
    log = str(context.run_config.get("log", ""))
    if log:
        (arrays,) = msg.content.array_records.values()
        seen = {"node": int(context.node_config["partition-id"]) + 1,
                "server-round": int(msg.content["config"]["server-round"]),
                "mean": float(np.mean(arrays["w"].numpy(), dtype=np.float64))}
        with Path(log).open("a") as file:
            file.write(json.dumps(seen) + "\n")


client_app = ClientApp()
"""Trains as :func:`_trained`; node i + 1 (partition i) evaluates to ``eval_acc = mean(w) + 0.1 i`` and
``eval_loss = 1 - eval_acc`` on ``i + 1`` examples (Flower's PyTorch template's keys)."""


@client_app.train()
def client_train(msg: Message, context: Context) -> Message:
    return _trained(msg)


@client_app.evaluate()
def client_evaluate(msg: Message, context: Context) -> Message:
    _seen(context, msg)
    i = int(context.node_config["partition-id"])
    (arrays,) = msg.content.array_records.values()
    accuracy = float(np.mean(arrays["w"].numpy(), dtype=np.float64)) + 0.1 * i
    metrics = MetricRecord({"eval_acc": accuracy, "eval_loss": 1.0 - accuracy, "num-examples": i + 1})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)


loss_only_app = ClientApp()
"""Trains as :func:`_trained`; evaluates to a loss only (``eval_loss = 1 - mean(w)``, 5 examples)."""


@loss_only_app.train()
def loss_only_train(msg: Message, context: Context) -> Message:
    return _trained(msg)


@loss_only_app.evaluate()
def loss_only_evaluate(msg: Message, context: Context) -> Message:
    (arrays,) = msg.content.array_records.values()
    loss = 1.0 - float(np.mean(arrays["w"].numpy(), dtype=np.float64))
    return Message(RecordDict({"metrics": MetricRecord({"eval_loss": loss, "num-examples": 5})}), reply_to=msg)


class _Legacy(NumPyClient):
    """A legacy client: fit adds 0.1; evaluate returns loss ``1 - mean(w)`` and accuracy ``mean(w) + 0.1 i`` on
    ``i + 1`` examples."""

    def __init__(self, partition: int) -> None:
        self.partition = partition

    def fit(self, parameters: list[np.ndarray], config: dict) -> tuple[list[np.ndarray], int, dict]:
        return [p + np.float32(0.1) for p in parameters], 10, {}

    def evaluate(self, parameters: list[np.ndarray], config: dict) -> tuple[float, int, dict]:
        mean = float(np.mean(parameters[0], dtype=np.float64))
        return 1.0 - mean, self.partition + 1, {"accuracy": mean + 0.1 * self.partition}


legacy_app = ClientApp(client_fn=lambda context: _Legacy(int(context.node_config["partition-id"])).to_client())
"""The legacy client of :class:`_Legacy`."""


raising_app = ClientApp()
"""Node 2's training raises."""


@raising_app.train()
def raising_train(msg: Message, context: Context) -> Message:
    if int(context.node_config["partition-id"]) == 1:
        raise ValueError("the app's own training failed")
    return _trained(msg)


modelless_app = ClientApp()
"""Replies to a train message with metrics only, as a vertical or analytics app does: no model."""


@modelless_app.train()
def modelless_train(msg: Message, context: Context) -> Message:
    return Message(RecordDict({"metrics": MetricRecord({"num-examples": 10, "rows": 3})}), reply_to=msg)


embedding_app = ClientApp()
"""Replies with arrays that are not the model (a vertical app's embeddings)."""


@embedding_app.train()
def embedding_train(msg: Message, context: Context) -> Message:
    embedding = ArrayRecord({"embedding": Array(np.ones((3, 2), dtype=np.float32))})
    return Message(RecordDict({"embedding": embedding, "metrics": MetricRecord({"num-examples": 10})}), reply_to=msg)


query_server_app = ServerApp()
"""Sends its nodes a query with a config only (an analytics app): no model in any message."""


@query_server_app.main()
def query_main(grid: Grid, context: Context) -> None:
    messages = [Message(RecordDict({"config": ConfigRecord({"k": 1})}), dst_node_id=n, message_type="query")
                for n in grid.get_node_ids()]
    grid.send_and_receive(messages)


def app_folder(folder: Path, clientapp: str, serverapp: str = "server_app", config: str = "") -> Path:
    """A Flower App folder in ``folder`` of this module's ``serverapp`` and ``clientapp``, 2 rounds plus ``config``
    (TOML lines) as its run config, and a federation of 3 supernodes."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "tiny-eval"\nversion = "1.0.0"\n\n[tool.flwr.app.components]\n'
        f'serverapp = "tests.flower.eval_apps:{serverapp}"\nclientapp = "tests.flower.eval_apps:{clientapp}"\n\n'
        f'[tool.flwr.app.config]\nnum-server-rounds = 2\n{config}\n[tool.flwr.federations]\ndefault = "local"\n\n'
        '[tool.flwr.federations.local]\noptions.num-supernodes = 3\n')
    return folder
