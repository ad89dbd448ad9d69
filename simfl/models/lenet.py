"""LeNet5 as in the paper's released code: no padding, average pooling, no biases (44,190 parameters for MNIST)."""

from __future__ import annotations

from torch import nn

from simfl.models.configs import LeNet5Config


class LeNet5:
    """Builder of LeNet5 (for 1x28x28 or 3x32x32 images)."""

    Config = LeNet5Config

    @staticmethod
    def build(config: LeNet5Config, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        c_in, h, w = input_shape
        side_h, side_w = ((h - 4) // 2 - 4) // 2, ((w - 4) // 2 - 4) // 2
        return nn.Sequential(
            nn.Conv2d(c_in, 6, 5, bias=False), nn.ReLU(), nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 5, bias=False), nn.ReLU(), nn.AvgPool2d(2),
            nn.Flatten(),
            nn.Linear(16 * side_h * side_w, 120, bias=False), nn.ReLU(),
            nn.Linear(120, 84, bias=False), nn.ReLU(),
            nn.Linear(84, num_classes, bias=False),
        )
