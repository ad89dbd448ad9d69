"""CIFAR-10 and CIFAR-100 from the standard python pickled batches (folder or .tar.gz).

Parsing: every batch, from the extracted folder (``cifar-10-batches-py/`` or
``cifar-100-python/``, as ``simfl data fetch`` leaves it) or straight from the
``.tar.gz``, is read by simfl's own reader through the restricted unpickler of
:mod:`simfl.unpickle`: a batch can rebuild only dicts, lists, strings, numbers and
numpy arrays, so a data folder a user was given cannot run code when it is read
(torchvision's reader unpickles without restriction and is not used). Any batches in
the standard format are accepted, e.g. a smaller set made for a test; downloads are
checked against the published checksum (``simfl data fetch``). The arrays are those
torchvision reads from the same files (``tests/data/test_cifar.py`` compares them).
A damaged or refused batch ends in one line naming the file.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simfl import unpickle
from simfl.data.base import Dataset
from simfl.data.configs import Cifar10Config, Cifar100Config, DataConfigBase
from simfl.data.files import data_root, missing
from simfl.errors import InputError


class _Spec:
    """Where one CIFAR variant's batches live and what their label key is."""

    def __init__(self, name: str, folder: str, archive: str, train: list[str], test: str, key: str, classes: int,
                 mean: tuple[float, float, float], std: tuple[float, float, float]) -> None:
        self.name, self.folder, self.archive = name, folder, archive
        self.train, self.test, self.key, self.classes = train, test, key, classes
        self.mean, self.std = mean, std

    @property
    def how(self) -> str:
        return (f"put {self.folder}/ or {self.archive} (https://www.cs.toronto.edu/~kriz/cifar.html) in the data "
                "folder, or set data.download: true")


CIFAR10 = _Spec("cifar10", "cifar-10-batches-py", "cifar-10-python.tar.gz",
                [f"data_batch_{i}" for i in range(1, 6)], "test_batch", "labels", 10,
                (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
CIFAR100 = _Spec("cifar100", "cifar-100-python", "cifar-100-python.tar.gz",
                 ["train"], "test", "fine_labels", 100,
                 (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762))


def _unpickle(raw: bytes, where: str, key: str) -> tuple[np.ndarray, np.ndarray]:
    """Images (n, 3, 32, 32) uint8 and labels of one pickled batch."""
    try:
        batch: dict[Any, Any] = unpickle.loads(raw, arrays=True, encoding="bytes")
    except unpickle.Refused as exc:
        raise InputError(where, f"not a CIFAR python batch of plain data: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - pickle raises many types on corrupt input
        raise InputError(where, f"not a CIFAR python batch: {exc}") from None
    if not isinstance(batch, dict):
        raise InputError(where, "not a CIFAR python batch (no dict inside)")
    batch = {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
    if "data" not in batch or key not in batch:
        raise InputError(where, f"CIFAR batch lacks 'data' or '{key}'")
    data = np.asarray(batch["data"], dtype=np.uint8)
    labels = np.asarray(batch[key], dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3072 or len(data) != len(labels):
        raise InputError(where, f"CIFAR batch has data {data.shape} and {len(labels)} labels, expected (n, 3072)")
    return data.reshape(-1, 3, 32, 32), labels


def _read_batches(root: Path, spec: _Spec) -> dict[str, bytes]:
    """Raw bytes of every batch, from the extracted folder or the archive."""
    names = [*spec.train, spec.test]
    folder = root / spec.folder
    if folder.is_dir():
        out = {}
        for n in names:
            if not (folder / n).is_file():
                raise missing(folder / n, spec.how, (spec.name, root))
            out[n] = (folder / n).read_bytes()
        return out
    archive = root / spec.archive
    if not archive.is_file():
        raise missing(folder, spec.how, (spec.name, root))
    try:
        with tarfile.open(archive, "r:gz") as tar:
            out = {}
            for n in names:
                member = tar.extractfile(f"{spec.folder}/{n}")
                if member is None:
                    raise KeyError(n)
                out[n] = member.read()
            return out
    except KeyError as exc:
        raise InputError(str(archive), f"archive lacks {spec.folder}/{exc.args[0]}") from exc
    except (OSError, EOFError, tarfile.TarError) as exc:
        raise InputError(str(archive), f"cannot read archive: {exc}") from exc


Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Training images (n, 3, 32, 32) uint8, training labels int64, test images, test labels."""


def read_own(root: Path, spec: _Spec) -> Arrays:
    """The arrays as simfl's reader reads them (folder or archive)."""
    raw = _read_batches(root, spec)
    parts = [_unpickle(raw[n], str(root / spec.folder / n), spec.key) for n in spec.train]
    x_test, y_test = _unpickle(raw[spec.test], str(root / spec.folder / spec.test), spec.key)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), x_test, y_test


def _load(config: DataConfigBase, spec: _Spec, normalize: bool) -> Dataset:
    root = data_root(config.root)
    if config.download and not (root / spec.folder).is_dir() and not (root / spec.archive).is_file():
        from simfl.data.download import fetch

        fetch(spec.name, root, progress=True)
    x_train, y_train, x_test, y_test = read_own(root, spec)
    for where, y in ((spec.folder, y_train), (spec.test, y_test)):
        if len(y) and (y.min() < 0 or y.max() >= spec.classes):
            raise InputError(str(root / where), f"labels outside 0..{spec.classes - 1}")
    mean = torch.tensor(spec.mean).view(1, 3, 1, 1)
    std = torch.tensor(spec.std).view(1, 3, 1, 1)

    def images(a: np.ndarray) -> torch.Tensor:
        x = torch.from_numpy(a).float().div_(255.0)
        return (x - mean) / std if normalize else x

    return Dataset(spec.name, images(x_train), torch.from_numpy(y_train), images(x_test), torch.from_numpy(y_test),
                   num_classes=spec.classes)


class Cifar10:
    """Loader of CIFAR-10."""

    Config = Cifar10Config

    @staticmethod
    def load(config: Cifar10Config) -> Dataset:
        return _load(config, CIFAR10, config.normalize)


class Cifar100:
    """Loader of CIFAR-100 (fine labels)."""

    Config = Cifar100Config

    @staticmethod
    def load(config: Cifar100Config) -> Dataset:
        return _load(config, CIFAR100, config.normalize)
