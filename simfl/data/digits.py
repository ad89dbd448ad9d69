"""scikit-learn's 8x8 handwritten digits (1,797 images, ships with scikit-learn): the offline quickstart data."""

from __future__ import annotations

import torch

from simfl.data.base import Dataset
from simfl.data.configs import DigitsConfig

TEST_SIZE = 297
"""The last 297 images are the test set (a fixed split, the same for every seed)."""


class Digits:
    """Loader of sklearn digits."""

    Config = DigitsConfig

    @staticmethod
    def load(config: DigitsConfig) -> Dataset:
        from sklearn.datasets import load_digits  # imported here: sklearn.datasets takes seconds to import

        bunch = load_digits()
        x = torch.tensor(bunch.data, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
        y = torch.tensor(bunch.target, dtype=torch.int64)
        cut = len(y) - TEST_SIZE
        return Dataset("digits", x[:cut], y[:cut], x[cut:], y[cut:], num_classes=10)
