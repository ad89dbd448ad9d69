"""A client's local training: plain SGD epochs over its in-memory tensors.

The result of a job depends only on its start weights, the client's data and
the stream ``(seed, "train", client, round)``, never on when it runs, which
is what lets executors train in-flight clients in any order or in parallel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from pydantic import Field
from torch import nn

from simfl import rng
from simfl.fields import NonNegFloat, PositiveFloat, PositiveInt, Section
from simfl.models.flat import Layout
from simfl.train import hooks


class TrainConfig(Section):
    """Local training on each client."""

    epochs: PositiveInt = Field(5, description="Local epochs E per round.")
    batch_size: PositiveInt = Field(32, description="Mini-batch size.")
    lr: PositiveFloat = Field(0.01, description="SGD learning rate.")
    momentum: NonNegFloat = Field(0.0, description="SGD momentum (fresh every round).")
    weight_decay: NonNegFloat = Field(0.0, description="SGD weight decay.")


@dataclass(slots=True)
class Job:
    """One round of local training, as submitted when the client is dispatched (read-only by convention)."""

    client: int
    round: int
    """k: the client's round index (0 for its first), which names its batch-order stream."""
    start: torch.Tensor
    """Flat weights the client starts from."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """The algorithm's changes to local training (:mod:`simfl.train.hooks`), plain data; empty: plain SGD."""


def channels_last_helps(model: nn.Module) -> bool:
    """Whether to train ``model`` in channels-last layout: CPU models with 2-D convolutions.

    oneDNN's convolutions (forward and backward) run about 20-25% faster on
    channels-last weights (LeNet5 on MNIST, 1 or 2 threads); the results agree
    with the default layout to float32 rounding. GPU models are left as built.
    """
    first = next(model.parameters(), None)
    return (first is not None and first.device.type == "cpu"
            and any(isinstance(m, nn.Conv2d) for m in model.modules()))


class LocalTrainer:
    """Trains jobs of any client on one model replica."""

    def __init__(
        self, model: nn.Module, layout: Layout, shards: list[tuple[torch.Tensor, torch.Tensor]],
        config: TrainConfig, seed: int,
    ) -> None:
        self.model = model
        self.layout = layout
        self.shards = shards
        self.config = config
        self.seed = seed
        self.loss_fn = nn.CrossEntropyLoss()
        self.has_bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
        """Batch norm cannot train on a batch of one: such a trailing batch is skipped."""
        if channels_last_helps(model):
            model.to(memory_format=torch.channels_last)

    def run(self, job: Job) -> torch.Tensor:
        """Train ``job`` and return the client's new flat weights."""
        cfg = self.config
        model = self.model
        self.layout.load(model, job.start)
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
        extra = hooks.penalties(params, job.options) if job.options else []
        x, y = self.shards[job.client]
        device = params[0].device if params else x.device
        if x.device != device:  # shards normally live on the model's device already
            x, y = x.to(device), y.to(device)
        n = len(y)
        stop = n - 1 if self.has_bn and n > 1 and n % cfg.batch_size == 1 else n
        gen = rng.torch_generator(self.seed, "train", job.client, job.round)
        for _ in range(cfg.epochs):
            order = torch.randperm(n, generator=gen).to(device)
            for i in range(0, stop, cfg.batch_size):
                idx = order[i : i + cfg.batch_size]
                loss = self.loss_fn(model(x[idx]), y[idx])
                for penalty in extra:
                    loss = loss + penalty()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        return self.layout.flatten(model)
