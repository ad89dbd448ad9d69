"""The ClientApp: answers queries about its partition of scikit-learn's digits; it trains nothing."""

from __future__ import annotations

import numpy as np
from flwr.app import Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from sklearn.datasets import load_digits

app = ClientApp()


def partition(context: Context) -> tuple[np.ndarray, np.ndarray]:
    """This node's rows of the digits (all 1,797, split evenly in their order)."""
    x, y = load_digits(return_X_y=True)
    pid, parts = int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])
    rows = np.array_split(np.arange(len(y)), parts)[pid]
    return x[rows], y[rows]


@app.query()
def labels(msg: Message, context: Context) -> Message:
    """How many samples of each digit this node holds."""
    _, y = partition(context)
    counts = np.bincount(y, minlength=10)
    return Message(RecordDict({"answer": MetricRecord({"counts": counts.tolist(), "rows": len(y)})}), reply_to=msg)


@app.query("pixels")
def pixels(msg: Message, context: Context) -> Message:
    """A histogram of this node's pixel intensities (0 to 16) in the bins the query asks for, and their sum."""
    x, _ = partition(context)
    bins = int(msg.content["config"]["bins"])
    histogram, _ = np.histogram(x, bins=bins, range=(0.0, 16.0))
    answer = MetricRecord({"histogram": histogram.tolist(), "sum": float(x.sum()), "pixels": int(x.size)})
    return Message(RecordDict({"answer": answer}), reply_to=msg)
