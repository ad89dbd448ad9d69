"""Batch-norm running statistics under a buffered rule (FedBuff, CA2FL): stepped, or the mean of the arrivals'.

A buffered rule's global step adds client deltas, taken from the older models each client started from (and, in
CA2FL, cached deltas), to every entry of the flat vector. Batch norm's running mean and variance are no learned
weights but estimates of the activations' statistics, which only evaluation uses (training normalises with the
batch's own). Stepped like weights, a running variance can move below zero, and the model's outputs in evaluation
are then not finite until later steps move it back: HAR at E = 5 (``results/README.md``). The OrthoFL paper, whose
HAR setting shows it, does not say how its baselines treat these statistics, so the scenario chooses (``bn_stats``
of ``fedbuff`` and ``ca2fl``):

- ``step`` (default): the statistics take the rule's step like every other entry;
- ``mean``: at each flush they are set to the mean of the statistics the buffer's arrivals sent, as FedAvg takes
  them from its round's clients; the rule's step, server learning rate and staleness weights apply to every other
  entry. A mean of running variances stays above zero.

A model without batch norm has no such entries: both readings are then the same rule.
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms.configs import BnStats
from simfl.models.flat import Layout


class BufferedStats:
    """The running statistics a buffer's arrivals sent, summed until the flush sets them (``mean``); nothing to do
    for ``step`` or a model without batch norm."""

    def __init__(self, layout: Layout, reading: BnStats) -> None:
        self.index = (layout.mask("bn") & layout.mask("buffer")).nonzero().flatten()
        """Positions of the running statistics in the flat vector."""
        self.acc = torch.zeros(len(self.index), dtype=torch.float32) if reading == "mean" and len(self.index) else None
        """Their sum over the buffer's arrivals so far (None: the rule's step sets them)."""

    def add(self, weights: torch.Tensor) -> None:
        """An arrival's trained model: its statistics join the buffer's."""
        if self.acc is not None:
            self.acc = self.acc + weights[self.index].to(self.acc.dtype)

    def flush(self, stepped: torch.Tensor, count: int) -> torch.Tensor:
        """The new global model: ``stepped`` (the rule's step of every entry) with the statistics set to the mean of
        the ``count`` arrivals' (a new tensor), and the sum emptied for the next buffer."""
        if self.acc is None:
            return stepped
        out = stepped.index_copy(0, self.index, (self.acc / count).to(stepped.dtype))
        self.acc = torch.zeros_like(self.acc)
        return out

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the sum so far (nothing when the reading keeps none)."""
        return {} if self.acc is None else {"stats": self.acc}

    def load_state(self, state: dict[str, Any]) -> None:
        if self.acc is not None:
            self.acc = state["stats"]

