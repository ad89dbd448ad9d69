"""FedAdam (Reddi et al., "Adaptive Federated Optimization", ICLR 2021).

Update rule: ``m <- b1 m + (1-b1) D``, ``v <- b2 v + (1-b2) D^2``, ``W <- W + lr m / (sqrt(v) + tau)``,
with ``D`` the round's mean client delta.

``D = (1/K) sum_k (W_k - W)`` is the unweighted mean, as in the paper's Algorithm 2;
``m`` starts at 0 and ``v`` at ``tau^2`` (the paper requires ``v_{-1} >= tau^2``);
there is no bias correction. ``clients_per_round`` must not exceed the number of
clients (the scenario layer checks it).

Batch norm: trainable BN weights take the Adam step like every parameter; float
buffers (running statistics) are not gradients and are set to the round's mean
(``W + D`` there), so they stay valid statistics.
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms import ops
from simfl.algorithms.base import Arrival, Setup, SyncAlgorithm
from simfl.algorithms.configs import FedAdamConfig


class FedAdam(SyncAlgorithm[FedAdamConfig]):
    """Synchronous rounds; the server runs Adam on the round's mean delta."""

    Config = FedAdamConfig

    def __init__(self, config: FedAdamConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()
        self.m = torch.zeros_like(self.w)
        self.v = torch.full_like(self.w, config.tau**2)
        self.buffers = setup.layout.mask("buffer")

    @property
    def clients_per_round(self) -> int:
        return self.config.clients_per_round

    def round_weights(self) -> torch.Tensor:
        return self.w

    def aggregate(self, arrivals: list[Arrival]) -> None:
        if not arrivals:
            raise ValueError("a round needs at least one arrival")
        # every client of the round started from self.w, so the mean delta is mean(W_k) - W
        delta = ops.mean([a.weights for a in arrivals]) - self.w
        self.m, self.v = ops.adam_moments(self.m, self.v, delta, self.config.beta1, self.config.beta2)
        stepped = ops.adam_step(self.w, self.m, self.v, self.config.lr, self.config.tau)
        buffers = self.buffers.to(self.w.device)
        self.w = torch.where(buffers, self.w + delta, stepped)

    def global_weights(self) -> torch.Tensor:
        return self.w

    def state(self) -> dict[str, Any]:
        return {"w": self.w, "m": self.m, "v": self.v}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.m = state["m"]
        self.v = state["v"]
