"""A client's local training: plain SGD epochs over its in-memory tensors.

The result of a job depends only on its start weights, the client's data and
the stream ``(seed, "train", client, round)``, never on when it runs, which
is what lets executors train in-flight clients in any order or in parallel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional

from simfl import rng
from simfl.models.flat import Layout
from simfl.models.representation import Features, Representation
from simfl.train import hooks
from simfl.train.configs import TrainConfig
from simfl.train.message import Message, Reply


@dataclass(slots=True)
class Job:
    """One round of local training, as submitted when the client is dispatched (read-only by convention)."""

    client: int
    round: int
    """k: the client's round index (0 for its first), which names its batch-order stream."""
    start: torch.Tensor
    """Flat weights the client starts from."""
    message: Message = field(default_factory=Message)
    """What the server sent with the weights (:mod:`simfl.train.message`); empty: plain SGD."""
    epochs: int | None = None
    """The epochs this round trains, when the server cut it short (an asynchronous rule's recall,
    :meth:`simfl.sim.world.World.recall`); None: ``train.epochs``. A job of k epochs is the first k epochs of the
    full one: each epoch's batch order is the next permutation drawn from the round's one stream."""


def channels_last_helps(model: nn.Module) -> bool:
    """Whether to train ``model`` in channels-last layout: CPU models with 2-D convolutions, when oneDNN is on.

    oneDNN's convolutions (forward and backward) run about 20-25% faster on
    channels-last weights (LeNet5 on MNIST, 1 or 2 threads); the results agree
    with the default layout to float32 rounding. Without oneDNN (the portable
    numerics, :mod:`simfl.numerics`) ATen's own im2col convolutions run 2.6-3.7x
    slower channels-last than contiguous, a LeNet5 step 1.7x (``benchmarks/README.md``,
    numerics), so the model stays as built. GPU models are left as built.
    """
    first = next(model.parameters(), None)
    return (first is not None and first.device.type == "cpu" and bool(torch.backends.mkldnn.enabled)
            and torch.backends.mkldnn.is_available() and any(isinstance(m, nn.Conv2d) for m in model.modules()))


class LocalTrainer:
    """Trains jobs of any client on one model replica."""

    def __init__(
        self, model: nn.Module, layout: Layout, shards: Sequence[tuple[torch.Tensor, torch.Tensor]],
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
        self._representation: Representation | None = None
        """Built when a job's hook first reads representations (a model without an output layer trains the rest)."""

    def representation(self) -> Representation:
        """The model's forward passes with its representation (:mod:`simfl.models.representation`), built once."""
        if self._representation is None:
            self._representation = Representation(self.model)
        return self._representation

    def frozen(self, flat: torch.Tensor) -> Features:
        """The model at the flat weights ``flat``, frozen (:meth:`simfl.train.hooks.Round.features_at`)."""
        return self.representation().frozen(self.layout, flat)

    def run(self, job: Job) -> Reply:
        """Train ``job``: the client's new flat weights, the arrays its hooks send back, its steps, its mean loss
        over the steps and ``loss_sq``, the mean over every sample it trained on (each epoch's) of the sample's loss
        squared (Oort's statistical utility reads it, :mod:`simfl.algorithms.pisces`)."""
        cfg = self.config
        model = self.model
        self.layout.load(model, job.start)
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
        message = job.message
        built = hooks.build(hooks.Round(params, self.layout, job.start, message, cfg.lr, self.frozen), message.hooks) \
            if message.hooks else []
        terms, corrections = hooks.overrides(built, "loss"), hooks.overrides(built, "correct")
        batch_terms = hooks.overrides(built, "batch_loss")
        represent = self.representation().forward if batch_terms else None
        x, y = self.shards[job.client]
        device = params[0].device if params else x.device
        if x.device != device:  # shards normally live on the model's device already
            x, y = x.to(device), y.to(device)
        n = len(y)
        stop = n - 1 if self.has_bn and n > 1 and n % cfg.batch_size == 1 else n
        gen = rng.torch_generator(self.seed, "train", job.client, job.round)
        steps = samples = 0
        total = torch.zeros((), device=device)
        squares = torch.zeros((), device=device)
        for _ in range(cfg.epochs if job.epochs is None else job.epochs):
            order = torch.randperm(n, generator=gen).to(device)
            for i in range(0, stop, cfg.batch_size):
                idx = order[i : i + cfg.batch_size]
                inputs, labels = x[idx], y[idx]
                if represent is None:
                    outputs = model(inputs)
                else:  # a hook reads the batch: the same forward pass, its representation kept
                    outputs, features = represent(inputs)
                loss = self.loss_fn(outputs, labels)
                total += loss.detach()
                each = functional.cross_entropy(outputs.detach(), labels, reduction="none").reshape(-1)
                squares += torch.dot(each, each)  # each sample's loss, squared, summed: the reply's loss_sq
                samples += each.numel()
                for h in terms:
                    term = h.loss()
                    if term is not None:
                        loss = loss + term
                if represent is not None:
                    batch = hooks.Batch(inputs, labels, outputs, features)
                    for h in batch_terms:
                        term = h.batch_loss(batch)
                        if term is not None:
                            loss = loss + term
                opt.zero_grad(set_to_none=True)
                loss.backward()
                for h in corrections:
                    h.correct()
                opt.step()
                steps += 1
        trained = self.layout.flatten(model)
        arrays: dict[str, torch.Tensor] = {}
        for h in hooks.overrides(built, "reply"):
            arrays.update(h.reply(trained, steps))
        return Reply(trained, arrays, {"steps": float(steps), "loss": float(total) / steps if steps else float("nan"),
                                       "loss_sq": float(squares) / samples if samples else float("nan")})
