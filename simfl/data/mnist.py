"""MNIST from its four idx files (.gz or uncompressed), in ``root/`` or torchvision's ``root/MNIST/raw/``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from pydantic import Field

from simfl.data.base import DataConfigBase, Dataset
from simfl.data.files import find_first, missing, parse_idx, require_root
from simfl.errors import InputError

FILES = {
    "x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte",
}
HOW = (
    "put the four MNIST idx files (e.g. train-images-idx3-ubyte.gz) in data.root or data.root/MNIST/raw "
    "(from https://yann.lecun.com/exdb/mnist/ or torchvision), or set data.download: true"
)
MEAN, STD = 0.1307, 0.3081
"""The usual MNIST normalisation."""


class MnistConfig(DataConfigBase):
    """MNIST: 60,000 training and 10,000 test 1x28x28 digits, 10 classes."""

    dataset: Literal["mnist"] = Field("mnist", description="Dataset name.")
    normalize: bool = Field(True, description="Standardise pixels with the MNIST mean/std (else scale to [0, 1]).")


def _locate(root: Path, stem: str) -> Path | None:
    dirs = [root, root / "MNIST" / "raw", root / "mnist", root / "mnist" / "MNIST" / "raw"]
    return find_first([d / f"{stem}{ext}" for d in dirs for ext in ("", ".gz")])


def _download(root: Path) -> None:
    """Fetch the files through torchvision (only with ``download: true``)."""
    from torchvision.datasets import MNIST

    try:
        MNIST(str(root), train=True, download=True)
        MNIST(str(root), train=False, download=True)
    except Exception as exc:  # network errors come in many types
        raise InputError("data.download", f"downloading MNIST into {root} failed: {exc}") from exc


class Mnist:
    """Loader of MNIST."""

    Config = MnistConfig

    @staticmethod
    def load(config: MnistConfig) -> Dataset:
        root = require_root(config.root, "mnist", HOW)
        paths = {k: _locate(root, stem) for k, stem in FILES.items()}
        if config.download and any(p is None for p in paths.values()):
            _download(root)
            paths = {k: _locate(root, stem) for k, stem in FILES.items()}
        for k, p in paths.items():
            if p is None:
                raise missing(root / f"{FILES[k]}.gz", HOW)
        arrays = {k: parse_idx(p, 3 if k.startswith("x") else 1) for k, p in paths.items() if p is not None}
        for split in ("train", "test"):
            x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
            if len(x) != len(y):
                raise InputError(str(paths[f"y_{split}"]), f"{len(y)} labels for {len(x)} images")
            if x.shape[1:] != (28, 28):
                raise InputError(str(paths[f"x_{split}"]), f"images are {x.shape[1:]}, expected (28, 28)")
            if len(y) and (int(y.max()) > 9 or int(y.min()) < 0):
                bad = int(y.max()) if int(y.max()) > 9 else int(y.min())
                raise InputError(str(paths[f"y_{split}"]), f"label {bad} outside 0..9")

        def images(a: object) -> torch.Tensor:
            x = torch.from_numpy(a).float().div_(255.0).unsqueeze(1)  # type: ignore[arg-type]
            return (x - MEAN) / STD if config.normalize else x

        return Dataset(
            "mnist",
            images(arrays["x_train"]), torch.from_numpy(arrays["y_train"]).long(),
            images(arrays["x_test"]), torch.from_numpy(arrays["y_test"]).long(),
            num_classes=10,
        )
