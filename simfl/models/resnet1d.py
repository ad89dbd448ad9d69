"""ResNet18-1D for sensor windows (channels x steps, e.g. 9 x 128 UCI HAR or 6 x 128 HAPT-derived).

A strided stem, four stages of two basic blocks (3-tap convolutions with
batch norm and an identity shortcut), a strided 3-tap convolution between
stages that doubles the width, adaptive average pooling to 2 steps and a
bias-free linear classifier. With the default base width 10 it has about
119K parameters (Table 5 of the paper); ``width: 32`` gives the wider
variant (about 1.18M).
"""

from __future__ import annotations

import torch
from torch import nn

from simfl.models.configs import ResNet18_1DConfig


class BasicBlock1d(nn.Module):
    """conv-bn-relu-conv-bn plus identity, then relu (width and length unchanged)."""

    def __init__(self, width: int, kernel: int) -> None:
        super().__init__()
        pad = kernel // 2
        self.conv1 = nn.Conv1d(width, width, kernel, padding=pad, bias=False)
        self.bn1 = nn.BatchNorm1d(width)
        self.conv2 = nn.Conv1d(width, width, kernel, padding=pad, bias=False)
        self.bn2 = nn.BatchNorm1d(width)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + x)


class ResNet18_1D:
    """Builder of ResNet18-1D (input: channels x steps)."""

    Config = ResNet18_1DConfig

    @staticmethod
    def build(config: ResNet18_1DConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        c_in = input_shape[0]
        w = config.width
        layers: list[nn.Module] = [
            nn.Conv1d(c_in, w, config.stem_kernel, stride=config.stem_stride, bias=False),
            nn.BatchNorm1d(w), nn.ReLU(inplace=True),
        ]
        for stage in range(4):
            if stage > 0:
                layers += [nn.Conv1d(w, 2 * w, 3, stride=2, padding=1, bias=False), nn.ReLU(inplace=True)]
                w *= 2
            layers += [BasicBlock1d(w, config.kernel) for _ in range(config.blocks)]
        layers += [nn.AdaptiveAvgPool1d(2), nn.Flatten(), nn.Linear(2 * w, num_classes, bias=False)]
        return nn.Sequential(*layers)
