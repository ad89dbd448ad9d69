"""The ClientApp, as Flower's quickstart writes one."""

from __future__ import annotations

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from digits_app.task import Net, load_data, test, train

app = ClientApp()


def _seed(context: Context, server_round: int) -> int | None:
    """The shuffle's seed when the app seeds itself (``app-seed`` >= 0), else None (torch's global generator)."""
    base = int(context.run_config.get("app-seed", -1))
    return None if base < 0 else base + 1000 * server_round + int(context.node_config["partition-id"])


@app.train()
def train_handler(msg: Message, context: Context) -> Message:
    net = Net()
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    pid, parts = int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])
    server_round = int(msg.content["config"]["server-round"])
    loader = load_data(pid, parts, int(context.run_config["batch-size"]), _seed(context, server_round))
    loss = train(net, loader, int(context.run_config["local-epochs"]), float(msg.content["config"]["lr"]))
    metrics = MetricRecord({"train_loss": loss, "num-examples": len(loader.dataset)})
    return Message(RecordDict({"arrays": ArrayRecord(net.state_dict()), "metrics": metrics}), reply_to=msg)


@app.evaluate()
def evaluate_handler(msg: Message, context: Context) -> Message:
    net = Net()
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    pid, parts = int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])
    x, y = load_data(pid, parts, int(context.run_config["batch-size"])).dataset.tensors
    loss, acc = test(net, x, y)
    metrics = MetricRecord({"eval_loss": loss, "eval_acc": acc, "num-examples": len(y)})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)
