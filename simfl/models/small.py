"""Small models for the quickstart and tests: a CNN for 8x8 digits and an MLP for feature vectors."""

from __future__ import annotations

import math

from torch import nn

from simfl.models.configs import MLPConfig, SmallCNNConfig


class SmallCNN:
    """Builder of the small CNN (for 1x8x8 digits or any small single-channel image)."""

    Config = SmallCNNConfig

    @staticmethod
    def build(config: SmallCNNConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        c_in, h, w = input_shape
        ch = config.channels
        return nn.Sequential(
            nn.Conv2d(c_in, ch, 3, padding=1), nn.ReLU(),
            nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(ch * (h // 2) * (w // 2), num_classes),
        )


class MLP:
    """Builder of the MLP."""

    Config = MLPConfig

    @staticmethod
    def build(config: MLPConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        layers: list[nn.Module] = [nn.Flatten()]
        width = math.prod(input_shape)
        for h in config.hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, num_classes))
        return nn.Sequential(*layers)
