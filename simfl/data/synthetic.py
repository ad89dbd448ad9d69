"""A synthetic classification task for tests: Gaussian class blobs in ``features`` dimensions."""

from __future__ import annotations

import torch

from simfl import rng
from simfl.data.base import Dataset
from simfl.data.configs import SyntheticConfig


class Synthetic:
    """Loader of the synthetic blobs."""

    Config = SyntheticConfig

    @staticmethod
    def load(config: SyntheticConfig) -> Dataset:
        gen = rng.torch_generator(config.seed, "synthetic-data")
        means = torch.randn(config.classes, config.features, generator=gen) * 2.0

        def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
            y = torch.randint(0, config.classes, (n,), generator=gen)
            x = means[y] + config.spread * torch.randn(n, config.features, generator=gen)
            return x, y

        x_train, y_train = draw(config.train_size)
        x_test, y_test = draw(config.test_size)
        return Dataset("synthetic", x_train, y_train, x_test, y_test, num_classes=config.classes)
