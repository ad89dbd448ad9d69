"""FedBuff (Nguyen et al., "Federated Learning with Buffered Asynchronous Aggregation", AISTATS 2022).

Update rule: after K arrivals ``W <- W + server_lr * (1/K) sum_i delta_i / sqrt(1 + v_i)``.

Each client sends its delta ``delta_i = W_i - W_start`` (trained minus dispatched
weights). ``v_i`` is the number of global versions published (buffer flushes)
since the client was dispatched, 0 when none; the server records per client the
version it was dispatched with. The buffer holds the weighted sum and is divided
by K (the number of arrivals, not the sum of weights) on flush. Every arriving
client is re-dispatched at once with the current global model, which is the
post-flush model when its arrival completed the buffer. The returned mixing weight
is the arrival's staleness weight ``1/sqrt(1 + v)``.

Batch norm: running statistics and BN weights are float entries of the flat
vector and take the same buffered delta step as every other weight. A step of
deltas taken from older models can move a running variance below zero; the
model's outputs in evaluation are then not finite until later steps move it back
(training uses batch statistics and is not affected). ``simfl report`` notes the
evaluations whose loss was not finite (HAR at E = 5: ``results/README.md``).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup
from simfl.algorithms.configs import FedBuffConfig


class FedBuff(AsyncAlgorithm[FedBuffConfig]):
    """Buffered asynchronous aggregation of staleness-weighted client deltas."""

    Config = FedBuffConfig

    def __init__(self, config: FedBuffConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()
        self.version = 0
        """Number of global models published (flushes) so far."""
        self.dispatched = [0] * setup.num_clients
        """Global version each client was last dispatched with (0 for the time-0 dispatch)."""
        self.acc = torch.zeros_like(self.w)
        self.count = 0

    def initial_weights(self, client: int) -> torch.Tensor:
        # no side effect: at time 0 every client is dispatched version 0, as set in __init__
        return self.w

    def on_join(self, client: int) -> torch.Tensor:
        # a late joiner is dispatched the current version: its staleness counts from here
        self.dispatched[client] = self.version
        return self.w

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        m = arrival.client
        weight = 1.0 / math.sqrt(1.0 + (self.version - self.dispatched[m]))
        self.acc = self.acc + weight * (arrival.weights - arrival.start)
        self.count += 1
        if self.count == self.config.buffer:
            self.w = self.w + (self.config.server_lr / self.config.buffer) * self.acc
            self.version += 1
            self.acc = torch.zeros_like(self.w)
            self.count = 0
        self.dispatched[m] = self.version
        return self.w, weight

    def global_weights(self) -> torch.Tensor:
        return self.w

    def state(self) -> dict[str, Any]:
        return {
            "w": self.w,
            "version": self.version,
            "dispatched": list(self.dispatched),
            "acc": self.acc,
            "count": self.count,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.version = int(state["version"])
        self.dispatched = [int(v) for v in state["dispatched"]]
        self.acc = state["acc"]
        self.count = int(state["count"])
