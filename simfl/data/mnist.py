"""MNIST from its four idx files (.gz or uncompressed), in ``root/`` or torchvision's ``root/MNIST/raw/``.

Parsing: where the four files lie uncompressed in torchvision's layout
(``<root>/MNIST/raw/`` or ``<root>/mnist/MNIST/raw/``, as ``simfl data fetch mnist``
leaves them), ``torchvision.datasets.MNIST`` reads them. torchvision reads only
that layout, so the other layouts simfl accepts (idx files directly in the
root or in ``<root>/mnist/``, gzipped or not) go through simfl's own idx parser
(``files.parse_idx``), which gives the same arrays (``tests/data/test_mnist.py``
compares the two). When torchvision refuses a file, simfl's parser reads it
again, so a damaged file ends in simfl's one-line error naming the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from simfl.data.base import Dataset
from simfl.data.configs import MnistConfig
from simfl.data.files import data_root, find_first, missing, parse_idx
from simfl.errors import InputError

FILES = {
    "x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte",
}
HOW = (
    "put the four MNIST idx files (e.g. train-images-idx3-ubyte.gz) in the data folder or its MNIST/raw "
    "(https://yann.lecun.com/exdb/mnist/), or set data.download: true"
)
MEAN, STD = 0.1307, 0.3081
"""The usual MNIST normalisation."""


def _locate(root: Path, stem: str) -> Path | None:
    dirs = [root, root / "MNIST" / "raw", root / "mnist", root / "mnist" / "MNIST" / "raw"]
    return find_first([d / f"{stem}{ext}" for d in dirs for ext in ("", ".gz")])


def _torchvision_base(root: Path) -> Path | None:
    """The folder torchvision's MNIST reads (holding MNIST/raw/ with the four uncompressed files), if any."""
    for base in (root, root / "mnist"):
        if all((base / "MNIST" / "raw" / stem).is_file() for stem in FILES.values()):
            return base
    return None


def read_torchvision(base: Path) -> dict[str, np.ndarray]:
    """The four arrays as ``torchvision.datasets.MNIST`` reads them from ``base/MNIST/raw``."""
    from torchvision.datasets import MNIST

    arrays: dict[str, np.ndarray] = {}
    for split, train in (("train", True), ("test", False)):
        ds = MNIST(str(base), train=train, download=False)
        arrays[f"x_{split}"], arrays[f"y_{split}"] = ds.data.numpy(), ds.targets.numpy()
    return arrays


def read_idx(paths: dict[str, Path]) -> dict[str, np.ndarray]:
    """The four arrays as simfl's idx parser reads them."""
    return {k: parse_idx(p, 3 if k.startswith("x") else 1) for k, p in paths.items()}


def _read(root: Path, paths: dict[str, Path]) -> dict[str, np.ndarray]:
    base = _torchvision_base(root)
    if base is not None and all(p.parent == base / "MNIST" / "raw" for p in paths.values()):
        try:
            return read_torchvision(base)
        except Exception:  # noqa: BLE001 - torchvision raises many types on bad files; simfl's parser names the fault
            pass
    return read_idx(paths)


class Mnist:
    """Loader of MNIST."""

    Config = MnistConfig

    @staticmethod
    def load(config: MnistConfig) -> Dataset:
        root = data_root(config.root)
        located = {k: _locate(root, stem) for k, stem in FILES.items()}
        if config.download and any(p is None for p in located.values()):
            from simfl.data.download import fetch

            fetch("mnist", root, progress=True)
            located = {k: _locate(root, stem) for k, stem in FILES.items()}
        paths: dict[str, Path] = {}
        for k, p in located.items():
            if p is None:
                raise missing(root / f"{FILES[k]}.gz", HOW, ("mnist", root))
            paths[k] = p
        arrays = _read(root, paths)
        for split in ("train", "test"):
            x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
            if len(x) != len(y):
                raise InputError(str(paths[f"y_{split}"]), f"{len(y)} labels for {len(x)} images")
            if x.shape[1:] != (28, 28):
                raise InputError(str(paths[f"x_{split}"]), f"images are {x.shape[1:]}, expected (28, 28)")
            if len(y) and (int(y.max()) > 9 or int(y.min()) < 0):
                bad = int(y.max()) if int(y.max()) > 9 else int(y.min())
                raise InputError(str(paths[f"y_{split}"]), f"label {bad} outside 0..9")

        def images(a: np.ndarray) -> torch.Tensor:
            x = torch.from_numpy(a).float().div_(255.0).unsqueeze(1)
            return (x - MEAN) / STD if config.normalize else x

        return Dataset(
            "mnist",
            images(arrays["x_train"]), torch.from_numpy(arrays["y_train"]).long(),
            images(arrays["x_test"]), torch.from_numpy(arrays["y_test"]).long(),
            num_classes=10,
        )
