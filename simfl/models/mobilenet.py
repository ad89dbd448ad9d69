"""MobileNetV2 adapted to 32x32 images (stride-1 stem and first stage), bias-free (2.4M parameters for CIFAR-100)."""

from __future__ import annotations

import torch
from torch import nn

from simfl.models.configs import MobileNetV2Config

STAGES: list[tuple[int, int, int, int]] = [
    (1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
]
"""(expansion, out channels, blocks, first stride) per stage; stage 2 keeps stride 1 for 32x32 inputs."""


def _conv_bn(c_in: int, c_out: int, kernel: int = 1, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(c_out)]


class InvertedResidual(nn.Module):
    """Expand (1x1) -> depthwise 3x3 -> project (1x1); a residual when the stride is 1.

    With stride 1 and a change of width the residual goes through a 1x1
    convolution with batch norm.
    """

    def __init__(self, c_in: int, c_out: int, expansion: int, stride: int) -> None:
        super().__init__()
        mid = c_in * expansion
        self.body = nn.Sequential(
            *_conv_bn(c_in, mid), nn.ReLU(inplace=True),
            *_conv_bn(mid, mid, 3, stride, groups=mid), nn.ReLU(inplace=True),
            *_conv_bn(mid, c_out),
        )
        self.stride = stride
        self.shortcut = nn.Sequential(*_conv_bn(c_in, c_out)) if stride == 1 and c_in != c_out else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.body(x)
        return out + self.shortcut(x) if self.stride == 1 else out


class MobileNetV2:
    """Builder of MobileNetV2 for small images."""

    Config = MobileNetV2Config

    @staticmethod
    def build(config: MobileNetV2Config, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        c_in = input_shape[0]
        layers: list[nn.Module] = [*_conv_bn(c_in, 32, 3), nn.ReLU(inplace=True)]
        width = 32
        for expansion, c_out, blocks, stride in STAGES:
            for i in range(blocks):
                layers.append(InvertedResidual(width, c_out, expansion, stride if i == 0 else 1))
                width = c_out
        layers += [*_conv_bn(width, 1280), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                   nn.Linear(1280, num_classes, bias=False)]
        return nn.Sequential(*layers)
