"""Flower ServerApps the tests run under simfl, written as Flower's quickstart writes them."""

from __future__ import annotations

from pathlib import Path

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


@fedavg_app.main()
def fedavg_main(grid: Grid, context: Context) -> None:
    rounds = int(context.run_config["num-server-rounds"])
    strategy = FedAvg(fraction_train=float(context.run_config.get("fraction-train", 1.0)),
                      fraction_evaluate=float(context.run_config.get("fraction-evaluate", 0.0)),
                      min_available_nodes=int(context.run_config.get("min-available", 2)))
    evaluated: list[int] = []

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        evaluated.append(server_round)
        weight = next(iter(arrays.values())).numpy()  # the first layer's weights
        return MetricRecord({"norm": float((weight.astype("float64") ** 2).sum()), "calls": len(evaluated)})

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
