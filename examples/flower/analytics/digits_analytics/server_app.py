"""The ServerApp: a loop of its own that sends query messages, no model. Round 1 asks every node for its label
counts (``query``), round 2 for a histogram of its pixel intensities (``query.pixels``); the sums are the whole
federation's, logged and saved (``save-to``, JSON). ``rounds`` (default 1) asks both again that many times, the last
answers kept: a run of many small messages (``python -m benchmarks.flower_engine --app analytics``)."""

from __future__ import annotations

import json
from logging import INFO

import numpy as np
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.common import log
from flwr.serverapp import Grid, ServerApp

app = ServerApp()


def ask(grid: Grid, message_type: str, config: ConfigRecord) -> list[Message]:
    """One message of ``message_type`` to every node; the replies."""
    nodes = list(grid.get_node_ids())
    messages = [Message(RecordDict({"config": config}), dst_node_id=node, message_type=message_type)
                for node in nodes]
    replies = list(grid.send_and_receive(messages))
    log(INFO, "%s: %d replies from %d nodes", message_type, len(replies), len(nodes))
    return [reply for reply in replies if reply.has_content()]


@app.main()
def main(grid: Grid, context: Context) -> None:
    bins = int(context.run_config["bins"])
    for _ in range(int(context.run_config.get("rounds", 1))):  # the same two queries again: a message-heavy run
        counts = sum(np.array(r.content["answer"]["counts"]) for r in ask(grid, "query", ConfigRecord({})))
        answers = [r.content["answer"] for r in ask(grid, "query.pixels", ConfigRecord({"bins": bins}))]
    histogram = sum(np.array(a["histogram"]) for a in answers)
    mean = sum(a["sum"] for a in answers) / sum(a["pixels"] for a in answers)
    log(INFO, "label counts %s, pixel histogram %s, mean intensity %.4f", counts.tolist(), histogram.tolist(), mean)
    target = str(context.run_config["save-to"])
    if target:
        with open(target, "w", encoding="utf-8") as fh:
            json.dump({"counts": counts.tolist(), "histogram": histogram.tolist(), "mean": mean}, fh)
