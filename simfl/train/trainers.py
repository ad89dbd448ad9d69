"""Which code trains a client: simfl's local SGD or a user's Flower ClientApp (scenario ``client:``).

Every executor builds its trainer here, in the simulating process or in each worker,
so that the choice reaches inline, process, Ray and CUDA training alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from torch import nn

from simfl.models.flat import Layout
from simfl.train.configs import ClientConfig, TrainConfig
from simfl.train.flower import ClientAppTrainer
from simfl.train.local import Job, LocalTrainer
from simfl.train.message import Reply


class Trainer(Protocol):
    """Trains one job of any client."""

    def run(self, job: Job) -> Reply: ...


def make_trainer(
    model: nn.Module, layout: Layout, shards: Sequence[tuple[torch.Tensor, torch.Tensor]], config: TrainConfig,
    seed: int, client: ClientConfig | None = None,
) -> Trainer:
    """simfl's :class:`LocalTrainer` on ``model``, or the Flower ClientApp that ``client`` names."""
    if client is not None and client.flower_app is not None:
        return ClientAppTrainer(client, model, layout, shards, config, seed)
    return LocalTrainer(model, layout, shards, config, seed)
