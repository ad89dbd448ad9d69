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

Batch norm: BN weights take the buffered step like every other weight; running
statistics take it too (``bn_stats: step``, the default), or are set at each flush
to the mean of the arrivals' (``bn_stats: mean``): :mod:`simfl.algorithms.bn_stats`
says why (a stepped running variance can move below zero).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup, VersionedModel, Versions
from simfl.algorithms.bn_stats import BufferedStats
from simfl.algorithms.configs import FedBuffConfig


class FedBuff(VersionedModel, AsyncAlgorithm[FedBuffConfig]):
    """Buffered asynchronous aggregation of staleness-weighted client deltas."""

    Config = FedBuffConfig

    def __init__(self, config: FedBuffConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()
        self.versions = Versions(setup.num_clients)
        self.acc = torch.zeros_like(self.w)
        self.count = 0
        self.stats = BufferedStats(setup.layout, config.bn_stats)

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        m = arrival.client
        weight = 1.0 / math.sqrt(1.0 + self.versions.staleness(m))
        self.acc = self.acc + weight * (arrival.weights - arrival.start)
        self.stats.add(arrival.weights)
        self.count += 1
        if self.count == self.config.buffer:
            self.w = self.stats.flush(self.w + (self.config.server_lr / self.config.buffer) * self.acc, self.count)
            self.versions.publish()
            self.acc = torch.zeros_like(self.w)
            self.count = 0
        self.versions.dispatch(m)
        return self.w, weight

    def state(self) -> dict[str, Any]:
        return {
            "w": self.w,
            **self.versions.state(),
            "acc": self.acc,
            "count": self.count,
            **self.stats.state(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.versions.load_state(state)
        self.acc = state["acc"]
        self.count = int(state["count"])
        self.stats.load_state(state)
