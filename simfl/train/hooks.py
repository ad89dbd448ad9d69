"""Changes an algorithm makes to local training, applied by the local trainer through one small hook.

An algorithm asks for them with :meth:`simfl.algorithms.base.Algorithm.local_options`: a
mapping of plain data (it travels to worker processes and Ray actors) that
:class:`~simfl.train.local.Job` carries opaquely. For each key, :data:`HOOKS` holds a
function that the trainer calls once per job with the trainable parameters (at the
round's start weights) and the option's value; it returns a term added to every batch's
loss. FedProx's proximal term is the first such hook; an algorithm that changes local
training adds its own entry here and touches no executor (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

Penalty = Callable[[], torch.Tensor]
"""A term added to each batch's loss (it may read the parameters as they train)."""
Hook = Callable[[list[nn.Parameter], Any], Penalty]


def proximal(params: list[nn.Parameter], mu: Any) -> Penalty:
    """FedProx: ``mu/2 ||w - w_start||^2`` over the trainable parameters."""
    anchor = [p.detach().clone() for p in params]
    weight = float(mu)

    def penalty() -> torch.Tensor:
        prox = sum(((p - a) ** 2).sum() for p, a in zip(params, anchor, strict=True))
        return 0.5 * weight * prox  # type: ignore[return-value]

    return penalty


HOOKS: dict[str, Hook] = {"prox_mu": proximal}


def penalties(params: list[nn.Parameter], options: Mapping[str, Any]) -> list[Penalty]:
    """The loss terms of a job's options, in the options' order."""
    unknown = [key for key in options if key not in HOOKS]
    if unknown:
        raise KeyError(f"no local-training hook for option(s) {unknown}; known: {sorted(HOOKS)}")
    return [HOOKS[key](params, value) for key, value in options.items()]
