"""VGG11 for 32x32 images: 3x3 convolutions without biases, each followed by batch norm (9.2M parameters)."""

from __future__ import annotations

from torch import nn

from simfl.models.configs import VGG11Config

LAYERS: list[int | str] = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]
"""VGG11's convolution widths; "M" is a 2x2 max-pool."""


class VGG11:
    """Builder of VGG11-BN."""

    Config = VGG11Config

    @staticmethod
    def build(config: VGG11Config, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        c_in, h, w = input_shape
        layers: list[nn.Module] = []
        for v in LAYERS:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
                h, w = h // 2, w // 2
            else:
                assert isinstance(v, int)
                layers += [nn.Conv2d(c_in, v, 3, padding=1, bias=False), nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
                c_in = v
        layers += [nn.Flatten(), nn.Linear(c_in * h * w, num_classes, bias=False)]
        return nn.Sequential(*layers)
