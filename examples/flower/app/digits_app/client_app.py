"""The ClientApp, as Flower's quickstart writes one."""

from __future__ import annotations

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from digits_app.task import Net, load_data, test, train

app = ClientApp()


@app.train()
def train_handler(msg: Message, context: Context) -> Message:
    net = Net()
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    pid, parts = int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])
    x, y = load_data(pid, parts)
    server_round = int(msg.content["config"]["server-round"])
    loss = train(net, x, y, int(context.run_config["local-epochs"]), int(context.run_config["batch-size"]),
                 float(msg.content["config"]["lr"]), seed=1000 * server_round + pid)
    metrics = MetricRecord({"train_loss": loss, "num-examples": len(y)})
    return Message(RecordDict({"arrays": ArrayRecord(net.state_dict()), "metrics": metrics}), reply_to=msg)


@app.evaluate()
def evaluate_handler(msg: Message, context: Context) -> Message:
    net = Net()
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    x, y = load_data(int(context.node_config["partition-id"]), int(context.node_config["num-partitions"]))
    loss, acc = test(net, x, y)
    metrics = MetricRecord({"eval_loss": loss, "eval_acc": acc, "num-examples": len(y)})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)
