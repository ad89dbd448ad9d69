"""The ServerApp, as Flower's fl-dp-sa example writes one: FedAvg wrapped for client-side fixed clipping with
server-side Gaussian noise, its fit rounds run by the SecAgg+ workflow inside Flower's DefaultWorkflow; a
server-side evaluation of each round's model."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from flwr.common import Context, ndarrays_to_parameters
from flwr.server import Grid, LegacyContext, ServerApp, ServerConfig
from flwr.server.strategy import DifferentialPrivacyClientSideFixedClipping, FedAvg
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow

from digits_secagg.task import get_weights, held_out, model, set_weights

app = ServerApp()


def evaluate(server_round: int, weights: list[np.ndarray], config: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    net = model()
    set_weights(net, weights)
    loss, accuracy = held_out(net)
    return loss, {"accuracy": accuracy}


@app.main()
def main(grid: Grid, context: Context) -> None:
    config = context.run_config
    nodes = len(list(grid.get_node_ids()))
    strategy = FedAvg(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=nodes, min_available_clients=nodes,
                      initial_parameters=ndarrays_to_parameters(get_weights(model())), evaluate_fn=evaluate)
    strategy = DifferentialPrivacyClientSideFixedClipping(strategy, noise_multiplier=float(config["noise-multiplier"]),
                                                          clipping_norm=float(config["clipping-norm"]),
                                                          num_sampled_clients=nodes)
    legacy = LegacyContext(context=context, config=ServerConfig(num_rounds=int(config["num-server-rounds"])),
                           strategy=strategy)
    workflow = DefaultWorkflow(fit_workflow=SecAggPlusWorkflow(
        num_shares=int(config["num-shares"]), reconstruction_threshold=int(config["reconstruction-threshold"])))
    workflow(grid, legacy)
    target = str(config["save-to"])
    if target:
        history = legacy.history
        with open(target, "w", encoding="utf-8") as fh:
            json.dump({"losses": history.losses_centralized, "metrics": history.metrics_centralized}, fh)
