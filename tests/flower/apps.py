"""Flower ClientApps the tests run under simfl: simfl's own local SGD written as a Flower app, and faulty ones."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.client import NumPyClient
from flwr.clientapp import ClientApp
from torch import nn

from simfl.models.small import MLP, MLPConfig
from simfl.train.flower import batch_generator, client_data

sgd_app = ClientApp()
"""simfl's LocalTrainer, line for line, as a Flower app: same model, batches, loss and optimizer."""


def mlp() -> nn.Module:
    """The scenario's model (simfl's mlp on digits: 8x8 inputs, 10 classes)."""
    return MLP.build(MLPConfig(), (1, 8, 8), 10)


def sgd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, epochs: int, batch: int, mu: float) -> float:
    """simfl's local SGD on the round's batch stream; the mean training loss."""
    gen = batch_generator()
    params = [p for p in model.parameters() if p.requires_grad]
    anchor = [p.detach().clone() for p in params]
    opt = torch.optim.SGD(params, lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    total, steps = torch.zeros(()), 0
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), batch):
            idx = order[i : i + batch]
            loss = loss_fn(model(x[idx]), y[idx])
            total += loss.detach()
            if mu > 0:
                loss = loss + 0.5 * mu * sum(((p - a) ** 2).sum() for p, a in zip(params, anchor, strict=True))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
    return float(total) / steps


@sgd_app.train()
def sgd_train(msg: Message, context: Context) -> Message:
    model = mlp()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    lr = float(context.run_config["lr"])
    epochs, batch = int(context.run_config["local-epochs"]), int(context.run_config["batch-size"])
    mu = float(msg.content["config"].get("proximal-mu", 0.0))
    x, y = client_data(context)
    mean_loss = sgd(model, x, y, lr, epochs, batch, mu)
    calls = int(context.state["seen"]["rounds"]) + 1 if "seen" in context.state else 1
    context.state["seen"] = MetricRecord({"rounds": calls})
    metrics = MetricRecord({"train_loss": mean_loss, "num-examples": len(y), "rounds-seen": calls})
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}), reply_to=msg)


raising_app = ClientApp()


@raising_app.train()
def raising_train(msg: Message, context: Context) -> Message:
    if int(context.node_config["partition-id"]) == 3:
        raise ValueError("the user's training code failed")
    return sgd_train(msg, context)


wrong_shapes_app = ClientApp()


@wrong_shapes_app.train()
def wrong_train(msg: Message, context: Context) -> Message:
    state = msg.content["arrays"].to_torch_state_dict()
    first = next(iter(state))
    state[first] = torch.zeros(3, 3)
    metrics = MetricRecord({"num-examples": 1})
    return Message(RecordDict({"arrays": ArrayRecord(state), "metrics": metrics}), reply_to=msg)


not_an_app = object()


frozen_app = ClientApp()
"""Trains nothing: replies with the weights it was sent (the global model stays the initial one) and its partition id
as a metric."""


@frozen_app.train()
def frozen_train(msg: Message, context: Context) -> Message:
    x, y = client_data(context)
    metrics = MetricRecord({"num-examples": len(y), "partition": int(context.node_config["partition-id"])})
    return Message(RecordDict({"arrays": msg.content["arrays"], "metrics": metrics}), reply_to=msg)


evaluating_app = ClientApp()
"""simfl's SGD for training, and an evaluate handler that reports what it was given: its partition id, the
rounds its state has seen, and the server round and tag of its config."""


@evaluating_app.train()
def evaluating_train(msg: Message, context: Context) -> Message:
    return sgd_train(msg, context)


@evaluating_app.evaluate()
def evaluating_evaluate(msg: Message, context: Context) -> Message:
    x, y = client_data(context)
    seen = int(context.state["seen"]["rounds"]) if "seen" in context.state else 0
    context.state["seen"] = MetricRecord({"rounds": -1})  # not kept: an evaluation is not a round
    mlp().load_state_dict(msg.content["arrays"].to_torch_state_dict())  # the model's whole state dict arrives
    metrics = MetricRecord({"num-examples": len(y), "partition": int(context.node_config["partition-id"]),
                            "rounds-seen": seen, "server-round": int(msg.content["config"]["server-round"]),
                            "tag": float(msg.content["config"]["tag"])})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)


class LegacySGD(NumPyClient):
    """simfl's local SGD as a legacy Flower NumPyClient (fit only: it does not evaluate)."""

    def __init__(self, context: Context) -> None:
        self.context = context

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[list[np.ndarray], int, dict[str, Any]]:
        model = mlp()
        keys = list(model.state_dict())
        model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in zip(keys, parameters, strict=True)})
        run = self.context.run_config
        x, y = client_data(self.context)
        loss = sgd(model, x, y, float(run["lr"]), int(run["local-epochs"]), int(run["batch-size"]),
                   float(config.get("proximal-mu", 0.0)))
        return [v.detach().numpy() for v in model.state_dict().values()], len(y), {"train_loss": loss}


legacy_sgd_app = ClientApp(client_fn=lambda context: LegacySGD(context).to_client())
"""A legacy ClientApp (client_fn), the way Flower's NumPyClient examples are written."""


every_type_app = ClientApp()
"""Answers every message type a ServerApp may send, telling what it received: the dtypes and values of its arrays
(sent back as they came, floats plus one), the type of the message, and list- and int-valued metrics."""


def _told(msg: Message, context: Context) -> Message:
    arrays = msg.content.array_records
    record = next(iter(arrays.values())) if arrays else ArrayRecord()
    back = ArrayRecord({k: Array(v.numpy() + 1 if np.issubdtype(v.numpy().dtype, np.floating) else v.numpy())
                        for k, v in record.items()})
    config = {k: v for c in msg.content.config_records.values() for k, v in c.items()}
    told = MetricRecord({"num-examples": 10 + int(context.node_config["partition-id"]),
                         "histogram": [1.0, 2.0, float(context.node_config["partition-id"])],
                         "run-id-low": int(context.run_id) % 1000,
                         "list-sent": list(config.get("list", [])) if isinstance(config.get("list"), list) else []})
    seen = ConfigRecord({"type": msg.metadata.message_type,
                         "dtypes": [str(v.numpy().dtype) for v in record.values()]})
    content = RecordDict({"arrays": back, "metrics": told, "seen": seen})
    return Message(content, reply_to=msg)


for _kind in ("train", "evaluate", "query"):
    getattr(every_type_app, _kind)()(_told)
every_type_app.query("histogram")(_told)
every_type_app.train("custom")(_told)


loader_app = ClientApp()
"""Trains simfl's mlp on the client's partition with an unseeded, shuffling DataLoader and an unseeded dropout draw:
its numbers come from the global generators only."""


@loader_app.train()
def loader_train(msg: Message, context: Context) -> Message:
    from torch.utils.data import DataLoader, TensorDataset

    model = mlp()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    x, y = client_data(context)
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    total = 0.0
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(torch.nn.functional.dropout(xb, 0.1)), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += float(loss)
    metrics = MetricRecord({"train_loss": total, "num-examples": len(y), "noise": float(np.random.rand())})
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}), reply_to=msg)


lingering_app = ClientApp()
"""simfl's SGD, and a thread of its own left running after each call (it waits a second, then ends)."""


@lingering_app.train()
def lingering_train(msg: Message, context: Context) -> Message:
    import threading
    import time

    threading.Thread(target=time.sleep, args=(1.0,), name="left-behind", daemon=True).start()
    return sgd_train(msg, context)
