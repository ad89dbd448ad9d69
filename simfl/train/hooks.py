"""Changes an algorithm makes to local training, applied by the local trainer through one small hook.

An algorithm asks for them with :meth:`simfl.algorithms.base.Algorithm.local_options`: a
mapping of plain data (it travels to worker processes and Ray actors) that
:class:`~simfl.train.local.Job` carries opaquely. For each key, :data:`HOOKS` holds a
function that the trainer calls once per job with the trainable parameters (at the
round's start weights) and the option's value; it returns a term added to every batch's
loss. FedProx's proximal term is the first such hook; an algorithm that changes local
training adds its own entry here and touches no executor (docs/architecture.md).

A plugin algorithm (docs/plugins.md) names its own hook by import path instead: an option
key ``package.module:function`` is imported where the job trains (worker processes and Ray
actors import it too, so the module must be importable there) and called like the
built-in hooks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from simfl.errors import InputError
from simfl.names import import_object, is_import_path

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


@functools.cache
def hook(key: str) -> Hook:
    """The hook of option ``key``: a built-in name of :data:`HOOKS` or an import path ``module:function``."""
    if key in HOOKS:
        return HOOKS[key]
    if is_import_path(key):
        try:
            obj = import_object(key, "local training")
        except InputError as exc:
            raise KeyError(f"local-training hook '{key}' cannot be imported: {exc.message}") from None
        if callable(obj):
            return obj  # type: ignore[no-any-return]
    raise KeyError(f"no local-training hook '{key}'; known: {sorted(HOOKS)} or an import path module:function")


def penalties(params: list[nn.Parameter], options: Mapping[str, Any]) -> list[Penalty]:
    """The loss terms of a job's options, in the options' order."""
    return [hook(key)(params, value) for key, value in options.items()]
