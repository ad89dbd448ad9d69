"""The ServerApp, as Flower's quickstart writes one: FedAvg, a server-side evaluation, the final model saved."""

from __future__ import annotations

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from digits_app.task import Net, test, test_data

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    seed = int(context.run_config.get("app-seed", -1))
    if seed >= 0:  # the app seeds its own initial model (by default, as the quickstart, it does not)
        torch.manual_seed(seed)
    net = Net()
    strategy = FedAvg(fraction_train=float(context.run_config["fraction-train"]),
                      fraction_evaluate=float(context.run_config["fraction-evaluate"]))

    def global_evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        model = Net()
        model.load_state_dict(arrays.to_torch_state_dict())
        loss, accuracy = test(model, *test_data())
        return MetricRecord({"loss": loss, "accuracy": accuracy})

    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(net.state_dict()),
                            train_config=ConfigRecord({"lr": float(context.run_config["lr"])}),
                            num_rounds=int(context.run_config["num-server-rounds"]), evaluate_fn=global_evaluate)
    target = str(context.run_config["save-to"])
    if target:
        torch.save({"arrays": result.arrays.to_torch_state_dict(),
                    "server": {r: dict(m) for r, m in result.evaluate_metrics_serverapp.items()},
                    "train": {r: dict(m) for r, m in result.train_metrics_clientapp.items()},
                    "federated": {r: dict(m) for r, m in result.evaluate_metrics_clientapp.items()}}, target)
