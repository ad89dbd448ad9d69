"""The ClientApp: a legacy NumPyClient under two client mods, SecAgg+ (its updates are masked: the server sees only
their sum) and fixed clipping (client-side differential privacy: each update clipped before it is masked)."""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.client import NumPyClient
from flwr.client.mod import fixedclipping_mod, secaggplus_mod
from flwr.clientapp import ClientApp
from flwr.common import Context

from digits_secagg.task import fit, get_weights, load_data, model, set_weights


class DigitsClient(NumPyClient):
    def __init__(self, context: Context) -> None:
        self.context = context
        self.net = model()

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[list[np.ndarray], int, dict[str, Any]]:
        set_weights(self.net, parameters)
        loader = load_data(int(self.context.node_config["partition-id"]),
                           int(self.context.node_config["num-partitions"]))
        loss = fit(self.net, loader, float(self.context.run_config["lr"]))
        return get_weights(self.net), len(loader.dataset), {"train_loss": loss}


app = ClientApp(client_fn=lambda context: DigitsClient(context).to_client(), mods=[secaggplus_mod, fixedclipping_mod])
