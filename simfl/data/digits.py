"""scikit-learn's 8x8 handwritten digits (1,797 images, ships with scikit-learn): the offline quickstart data."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np
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
        data, target = read_digits()
        x = torch.tensor(data, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
        y = torch.tensor(target, dtype=torch.int64)
        cut = len(y) - TEST_SIZE
        return Dataset("digits", x[:cut], y[:cut], x[cut:], y[cut:], num_classes=10)


def read_digits() -> tuple[np.ndarray, np.ndarray]:
    """The images (1,797 x 64, float64) and labels, as ``sklearn.datasets.load_digits`` gives them: read from the
    file scikit-learn ships (``sklearn/datasets/data/digits.csv.gz``, one image and its label per row) without
    importing scikit-learn, whose import takes a second or more of every process; where that file is not found,
    ``load_digits`` itself."""
    spec = importlib.util.find_spec("sklearn")
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    shipped = origin.parent / "datasets" / "data" / "digits.csv.gz" if origin is not None else None
    if shipped is None or not shipped.is_file():
        from sklearn.datasets import load_digits

        bunch = load_digits()
        return bunch.data, bunch.target
    with gzip.open(shipped, "rt") as fh:
        rows = np.loadtxt(fh, delimiter=",")
    return rows[:, :-1], rows[:, -1].astype(int)
