"""Evaluation on a client's own data (federated evaluation): what a client replies when asked to evaluate.

A Flower strategy asks the clients it samples to evaluate the new global model after each
round (``configure_evaluate``/``aggregate_evaluate``, :mod:`simfl.algorithms.flower`). Each
asked client answers here, in the simulating process, with the reply metrics Flower's
strategies aggregate (weighted by ``num-examples``):

- a Flower ClientApp (``client: {flower_app: ...}``) with an ``@app.evaluate()`` handler, or a
  legacy one (``ClientApp(client_fn=...)``) whose client implements ``evaluate``, answers
  itself: it is called with the message Flower would send it (the weights and the strategy's
  evaluate config) and the client's context, whose ``state`` is what its last training round
  left there (read only: an evaluation is not a round of the client, so what the handler
  writes there is not kept);
- otherwise simfl scores the weights on the client's partition (its training data: simfl
  holds no per-client test split) and replies ``{"num-examples": n, "eval_loss": mean
  cross-entropy, "eval_acc": accuracy}``, the keys of Flower's PyTorch quickstart.

The latency model decides virtual time for training rounds only: an evaluation costs none.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

import torch
from torch import nn

from simfl.models.flat import Layout
from simfl.train.configs import ClientConfig
from simfl.train.evaluate import Evaluator
from simfl.train.flower import ClientAppEvaluator, has_handler

Memory = Callable[[int], torch.Tensor | None]
"""Client ``m``'s kept state (:data:`simfl.train.message.MEMORY` bytes), None when it keeps nothing."""


class ClientEvaluator:
    """Answers ``(client, flat weights, config)`` with the client's evaluation metrics.

    Every run is given one; only an algorithm that asks clients to evaluate calls it, so the app and
    the model replica are made at the first call."""

    def __init__(self, model: nn.Module, layout: Layout, shards: Sequence[tuple[torch.Tensor, torch.Tensor]], seed: int,
                 client: ClientConfig | None, memory: Memory) -> None:
        self.source = model
        self.layout = layout
        self.shards = shards
        self.seed = seed
        self.client = client
        self.memory = memory

    @cached_property
    def app(self) -> ClientAppEvaluator | None:
        """The ClientApp that answers, when the scenario names one that evaluates."""
        if self.client is None or self.client.flower_app is None:
            return None
        app = ClientAppEvaluator(self.client, self.source, self.layout, self.shards, self.seed, self.memory)
        return app if has_handler(app.app, "evaluate") else None

    @cached_property
    def model(self) -> nn.Module:
        """The replica simfl scores with."""
        return copy.deepcopy(self.source)

    def __call__(self, client: int, weights: torch.Tensor, config: Mapping[str, Any]) -> dict[str, int | float]:
        if self.app is not None:
            answer = self.app(client, weights, config)
            if answer is not None:
                return answer
        x, y = self.shards[client]
        scores = Evaluator(self.model, self.layout, x, y)(weights)
        return {"num-examples": len(y), "eval_loss": scores.loss, "eval_acc": scores.accuracy}
