"""A client round as plain data both ways: the server's message out, the client's reply back.

The server sends each dispatched client a :class:`Message` built for that client and
round (:meth:`simfl.algorithms.base.Algorithm.message`): local-training hooks with their
values, named arrays (e.g. control variates) and plain config. The local trainer applies
the hooks (:mod:`simfl.train.hooks`) and answers with a :class:`Reply`: the trained flat
weights, arrays a hook computed on the client (e.g. an updated control variate) and
metrics of the round (optimizer steps taken, mean training loss). Both are tensors,
numbers and strings only, so they travel to worker processes and Ray tasks and into
checkpoints (``weights_only`` loading) unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotations only: the messages are plain data and load without torch
    import torch

MEMORY = "client.memory"
"""The array key of what a client keeps on its device between its rounds (a Flower ClientApp's
``context.state``, serialised): the reply carries it back, the simulation keeps it with the client
(``ClientState.memory``, so checkpoints hold it) and puts it into the client's next message."""


@dataclass(frozen=True, slots=True)
class Message:
    """What a client receives besides its start weights (read-only by convention)."""

    hooks: Mapping[str, Any] = field(default_factory=dict)
    """Local-training hooks by key (:data:`simfl.train.hooks.HOOKS` or ``module:name``) and their plain values."""
    arrays: Mapping[str, torch.Tensor] = field(default_factory=dict)
    """Named float tensors for the hooks (e.g. SCAFFOLD's server and client control variates)."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """Plain numbers, strings and booleans for the hooks."""

    def to_data(self) -> dict[str, Any]:
        """Plain dicts for a checkpoint or a pipe."""
        return {"hooks": dict(self.hooks), "arrays": dict(self.arrays), "config": dict(self.config)}

    @staticmethod
    def from_data(data: Mapping[str, Any]) -> Message:
        """The message of :meth:`to_data` output."""
        return Message(dict(data["hooks"]), dict(data["arrays"]), dict(data["config"]))


NO_MESSAGE = Message()
"""The empty message (plain SGD), shared: a message is immutable."""


@dataclass(slots=True)
class Reply:
    """What a client sends back after its round (read-only by convention: built once per arrival, and a frozen
    dataclass costs several times as much to build)."""

    weights: torch.Tensor
    """The client's flat weights after local training."""
    arrays: Mapping[str, torch.Tensor] = field(default_factory=dict)
    """Named tensors the hooks computed on the client (empty when no hook answers)."""
    metrics: Mapping[str, float] = field(default_factory=dict)
    """``steps`` (optimizer steps taken) and ``loss`` (mean training loss over them); empty when nothing trained."""


def to_numpy(arrays: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Named arrays as numpy copies, which pickle by value through pipes and Ray (tensors would move to shared memory)."""
    return {k: v.detach().cpu().numpy().copy() for k, v in arrays.items()}


def from_numpy(arrays: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """The tensors of :func:`to_numpy` output (own, writable copies)."""
    import torch

    return {k: torch.from_numpy(np.array(v, copy=True)) for k, v in arrays.items()}
