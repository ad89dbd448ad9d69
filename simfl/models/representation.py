"""A model's representation of its inputs: what its output layer receives.

Rules that compare representations (MOON's model-contrastive loss) need, for a batch, the features a model computes
before it classifies them. simfl's models have no projection head, so the representation read here is the input of
the model's output layer, its penultimate activations, flattened per sample: for every built-in model but the text
one the last ``nn.Linear`` of its ``nn.Sequential`` (LeNet5's 84 activations, an MLP's last hidden layer, VGG11's and
MobileNetV2's pooled features). It is read by a forward pre-hook on that layer during the model's own forward pass, so
the outputs are the model's to the bit, and nothing is hooked unless a rule asks (:class:`Representation`).

Which layer is the output layer: the module a model names as its attribute ``output_layer`` (a plugin's model with
another head may say so), else the last ``nn.Linear`` the model registers (``model.modules()`` order), which is the
classifier of every built-in model and of the usual Hugging Face classification heads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn

from simfl.errors import InputError
from simfl.models.flat import Layout

Features = Callable[[torch.Tensor], torch.Tensor]
"""A frozen model's representation of a batch of inputs: ``(batch, d)`` features, without gradient."""


def output_layer(model: nn.Module) -> nn.Module:
    """The layer whose input is ``model``'s representation: its ``output_layer`` attribute, else its last
    ``nn.Linear``; a model with neither is refused in one line (a representation-based rule cannot run on it)."""
    named = getattr(model, "output_layer", None)
    if isinstance(named, nn.Module):
        return named
    last: nn.Module | None = None
    for module in model.modules():
        if isinstance(module, nn.Linear):
            last = module
    if last is None:
        raise InputError("model", f"{type(model).__name__} has no nn.Linear output layer, whose input a rule that "
                         "compares representations (moon) reads; a model may name its own as its attribute output_layer")
    return last


class Representation:
    """Forward passes of one model that also return its representation (the input of its output layer)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.layer = output_layer(model)

    def forward(self, inputs: torch.Tensor, weights: Mapping[str, torch.Tensor] | None = None,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """The model's outputs on ``inputs`` and its representation of them, ``(batch, d)``; with ``weights`` (tensors
        by the model's parameter and buffer names) the model is run at those weights, its own left untouched."""
        seen: list[torch.Tensor] = []
        handle = self.layer.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
        try:
            outputs = self.model(inputs) if weights is None else torch.func.functional_call(self.model, dict(weights),
                                                                                              (inputs,))
        finally:
            handle.remove()
        if len(seen) != 1:
            raise ValueError(f"the output layer {type(self.layer).__name__} ran {len(seen)} times in one forward pass")
        return outputs, seen[0].flatten(1)

    def frozen(self, layout: Layout, flat: torch.Tensor) -> Features:
        """The model at the flat weights ``flat`` (laid out by ``layout``), frozen: its representation of a batch in
        evaluation mode (batch norm on the weights' running statistics, no dropout), without gradient, and the model
        being trained left as it was (its weights, its mode, its autograd graph)."""
        own: dict[str, torch.Tensor] = dict(self.model.named_parameters())
        own.update(self.model.named_buffers())
        weights = {name: view.to(device=own[name].device, dtype=own[name].dtype)
                   for name, view in layout.split(flat).items()}

        def features(inputs: torch.Tensor) -> torch.Tensor:
            training = self.model.training
            self.model.eval()
            try:
                with torch.no_grad():
                    return self.forward(inputs, weights)[1]
            finally:
                self.model.train(training)

        return features
