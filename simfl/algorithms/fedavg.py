"""FedAvg (McMahan et al., "Communication-Efficient Learning of Deep Networks from Decentralized Data", 2017).

Update rule: ``W <- sum_k n_k W_k / sum_k n_k`` over the round's K clients (``n_k``: client sample counts).

Every round the engine samples ``clients_per_round`` clients, sends all of them
:meth:`FedAvg.round_weights`, and hands their arrivals to :meth:`FedAvg.aggregate`.
``clients_per_round`` must not exceed the number of clients (the scenario layer
checks it); while clients are away the engine samples among those present.

Batch norm: BN weights and running statistics are averaged like every other weight.
"""

from __future__ import annotations

import torch

from simfl.algorithms import ops
from simfl.algorithms.base import Arrival, Setup, SingleModel, SyncAlgorithm
from simfl.algorithms.configs import FedAvgConfig


def sample_weighted_mean(arrivals: list[Arrival]) -> torch.Tensor:
    """The clients' trained weights averaged with weights proportional to their sample counts."""
    if not arrivals:
        raise ValueError("a round needs at least one arrival")
    return ops.weighted_mean([a.weights for a in arrivals], [float(a.num_samples) for a in arrivals])




class FedAvg(SingleModel, SyncAlgorithm[FedAvgConfig]):
    """Synchronous rounds; the new global model is the sample-weighted mean of the round's models."""

    Config = FedAvgConfig

    def __init__(self, config: FedAvgConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()

    @property
    def clients_per_round(self) -> int:
        return self.config.clients_per_round

    def round_weights(self) -> torch.Tensor:
        return self.w

    def aggregate(self, arrivals: list[Arrival]) -> None:
        self.w = sample_weighted_mean(arrivals)

