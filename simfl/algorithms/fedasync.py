"""FedAsync (Xie, Koyejo and Gupta, "Asynchronous Federated Optimization", 2019).

Update rule: ``W <- (1 - alpha_t) W + alpha_t W_m`` with ``alpha_t = alpha * S(s)``;
the client is re-dispatched the new global model.

``S`` is one of the paper's staleness functions of ``t - tau``: constant (``S = 1``),
polynomial (``(t - tau + 1)^(-a)``) or hinge (``1`` while ``t - tau <= b``, else
``1 / (a (t - tau - b) + 1)``). The paper's ``t - tau`` is 0 for an update with no
other update processed in between (the ``+ 1`` of the polynomial gives it weight 1),
so with simfl's staleness ``s >= 1`` it is ``s - 1``: the polynomial is ``s^(-a)``,
the hinge undiscounted while ``s <= b + 1``.

``first_weight`` sets the mixing weight of the very first update. The paper has no
special case (null: ``alpha_t`` as for every update); the OrthoFL authors' released
code (``code/model_aggregation.py``, class ``FedAsync``) mixes the first update at
weight 1, i.e. ``first_weight: 1``.

Batch norm: weights and running statistics are averaged like every other
entry of the flat vector (the client trains on the global model).
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms import ops
from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup
from simfl.algorithms.configs import FedAsyncConfig


class FedAsync(AsyncAlgorithm[FedAsyncConfig]):
    """Moving average of the global model with each arriving client model."""

    Config = FedAsyncConfig

    def __init__(self, config: FedAsyncConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()
        self.arrivals = 0

    def initial_weights(self, client: int) -> torch.Tensor:
        return self.w

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        if self.arrivals == 0 and self.config.first_weight is not None:
            weight = self.config.first_weight
        else:
            weight = self.config.alpha * self.config.staleness.discount(arrival.staleness)
        self.w = ops.mix(self.w, arrival.weights, weight)
        self.arrivals += 1
        return self.w, weight

    def global_weights(self) -> torch.Tensor:
        return self.w

    def state(self) -> dict[str, Any]:
        return {"w": self.w, "arrivals": self.arrivals}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.arrivals = int(state["arrivals"])

