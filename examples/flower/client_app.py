"""A Flower ClientApp (Message API), as a Flower user writes it; simfl calls it for each client's round.

The one simfl-specific line: the app gets its partition from `client_data(context)`, where a Flower
app run by Flower would load it with flwr-datasets' `FederatedDataset` (which downloads it).
"""

from __future__ import annotations

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from task import Net, test, train

from simfl.train.flower import client_data

app = ClientApp()


@app.train()
def train_round(msg: Message, context: Context) -> Message:
    """Train the received model on this client's data; reply with the trained model and metrics."""
    torch.manual_seed(int(context.node_config["partition-id"]))  # the app's own shuffling, seeded per client
    net = Net()
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    x, y = client_data(context)
    config = msg.content["config"]
    lr = float(config["lr"]) if "lr" in config else float(context.run_config["lr"])
    loss = train(net, x, y, int(context.run_config["local-epochs"]), lr, int(context.run_config["batch-size"]))
    metrics = MetricRecord({"train_loss": loss, "num-examples": len(y)})
    return Message(RecordDict({"arrays": ArrayRecord(net.state_dict()), "metrics": metrics}), reply_to=msg)


@app.evaluate()
def evaluate_round(msg: Message, context: Context) -> Message:
    """Evaluate the received global model on this client's data (Flower's federated evaluation)."""
    net = Net()
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    x, y = client_data(context)
    loss, accuracy = test(net, x, y)
    metrics = MetricRecord({"eval_loss": loss, "eval_acc": accuracy, "num-examples": len(y)})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)
