"""A model given as named arrays, not as code: what a Flower ServerApp sends first (``model: {name: flower_app}``).

``simfl flwr run APP_DIR`` without a ``model:`` section takes the app's model from the app: the arrays of the
first train message its ServerApp's ``main`` sends (:func:`simfl.algorithms.serverapp.probe`). simfl needs the
names, shapes and values of the tensors it exchanges (the flat layout, the initial weights, the ArrayRecords it
sends the ClientApp), never the network's code: the ClientApp trains it and the app's ``evaluate_fn`` scores it.
:class:`ArraysNet` holds exactly that, as an ``nn.Module`` tree with the same state-dict names, and cannot run.

Which tensors are parameters: an ArrayRecord does not say. Floating-point tensors are parameters, except the
running statistics of batch norm (``running_mean``, ``running_var``), which are buffers as in torch; others
(``num_batches_tracked``) are integer buffers, kept for the ClientApp's ``load_state_dict`` and not exchanged as
weights. The module holding ``running_mean`` is taken for a batch norm, so that its tensors are marked as any
batch norm's are (what OrthoFL's and the ablations' ``bn`` options read). The layout
(:class:`~simfl.models.flat.Layout`) orders parameters before buffers, as for any model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from simfl.errors import InputError
from simfl.models.configs import FlowerAppModelConfig

BUFFERS = ("running_mean", "running_var")
"""Floating-point state-dict entries that torch keeps as buffers, not parameters."""


class _Norm(nn.modules.batchnorm._BatchNorm):
    """The holder of a batch norm's tensors: a batch norm to :class:`~simfl.models.flat.Layout`, which marks its
    tensors (``bn``) as it marks any batch norm's. It holds tensors only."""

    def __init__(self) -> None:
        nn.Module.__init__(self)

    def extra_repr(self) -> str:
        return ""


class ArraysNet(nn.Module):
    """Named tensors in an ``nn.Module`` tree (state-dict names as given); it has no forward pass. A module holding
    ``running_mean`` is a batch norm."""

    def __init__(self, arrays: Mapping[str, np.ndarray]) -> None:
        super().__init__()
        norms = {name.rpartition(".")[0] for name in arrays if name.rpartition(".")[2] == "running_mean"}
        for name, array in arrays.items():
            *path, leaf = name.split(".")
            owner: nn.Module = self
            for depth, part in enumerate(path):
                if not hasattr(owner, part):
                    owner.add_module(part, _Norm() if ".".join(path[: depth + 1]) in norms else nn.Module())
                owner = getattr(owner, part)
            tensor = torch.from_numpy(np.array(array, copy=True))
            if tensor.is_floating_point() and leaf not in BUFFERS:
                owner.register_parameter(leaf, nn.Parameter(tensor))
            else:
                owner.register_buffer(leaf, tensor)

    def forward(self, *args: object) -> torch.Tensor:
        raise InputError("model.name", "flower_app is the Flower app's model as arrays; simfl cannot run it (the "
                         "ClientApp trains it and the ServerApp's evaluate_fn scores it)")


HELD = "held_by_the_serverapp"
"""The one value of :func:`held`."""


def held() -> ArraysNet:
    """The stand-in of a model a Flower ServerApp holds itself (``simfl flwr run`` with the app's model): simfl
    relays the app's messages as they are and never reads the model as weights, so its flat state is one number,
    the version of the model the app sent last (:class:`simfl.algorithms.serverapp.ServerAppRounds`), which tells
    simfl's evaluation grid when the model changed."""
    return ArraysNet({HELD: np.zeros(1, dtype=np.float32)})


class FromApp:
    """``model: {name: flower_app}``: built by the run from the app's ServerApp (:mod:`simfl.launch.experiment`),
    not from a config alone."""

    Config = FlowerAppModelConfig
    summarised: ClassVar[bool] = False
    """``simfl models`` has no size to show: the model is whatever the app sends."""

    @staticmethod
    def build(config: FlowerAppModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        raise InputError("model.name", f"flower_app is the model the ServerApp {config.app} sends first; only a run "
                         "(simfl flwr run, or a scenario with client.flower_app) builds it")
