"""Where the shared real data lives, and writers of small files in the standard formats."""

from __future__ import annotations

import gzip
import pickle
import struct
import tarfile
from pathlib import Path

import numpy as np

from tests.conftest import SHARED as _SHARED

SHARED = _SHARED / "datasets"


def write_idx(path: Path, array: np.ndarray, compress: bool) -> Path:
    """Write ``array`` (uint8) as an idx file, gzipped when ``compress``."""
    head = bytes([0, 0, 0x08, array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape)
    data = head + array.astype(np.uint8).tobytes()
    path = path.with_name(path.name + ".gz") if compress else path
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def write_mnist(folder: Path, n_train: int = 30, n_test: int = 10, compress: bool = True) -> None:
    """Four tiny MNIST idx files in ``folder``."""
    gen = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    write_idx(folder / "train-images-idx3-ubyte", gen.integers(0, 256, (n_train, 28, 28)), compress)
    write_idx(folder / "train-labels-idx1-ubyte", np.arange(n_train) % 10, compress)
    write_idx(folder / "t10k-images-idx3-ubyte", gen.integers(0, 256, (n_test, 28, 28)), compress)
    write_idx(folder / "t10k-labels-idx1-ubyte", np.arange(n_test) % 10, compress)


def write_cifar(root: Path, classes: int, per_batch: int = 6, archive: bool = False, test_rows: int | None = None,
                bytes_keys: bool = False) -> None:
    """CIFAR-10 (5 batches + test) or CIFAR-100 (train + test) python batches, optionally as .tar.gz.

    Every batch holds ``per_batch`` images, the test batch ``test_rows`` (default: ``per_batch``).
    Keys are str, as the official batches unpickle with ``encoding="latin1"``; ``bytes_keys`` writes
    them as bytes instead (as the official batches unpickle with ``encoding="bytes"``).
    """
    gen = np.random.default_rng(1)
    if classes == 10:
        folder, names, key = "cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"], "labels"
    else:
        folder, names, key = "cifar-100-python", ["train", "test"], "fine_labels"
    (root / folder).mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        rows = test_rows if name.startswith("test") and test_rows is not None else per_batch
        batch = {"data": gen.integers(0, 256, (rows, 3072), dtype=np.uint8),
                 key: [int(v) for v in (np.arange(rows) + i) % classes]}
        if bytes_keys:
            batch = {k.encode(): v for k, v in batch.items()}
        (root / folder / name).write_bytes(pickle.dumps(batch))
    if archive:
        with tarfile.open(root / f"{folder.replace('-batches-py', '-python')}.tar.gz"
                          if classes == 10 else root / "cifar-100-python.tar.gz", "w:gz") as tar:
            tar.add(root / folder, arcname=folder)
        for name in names:
            (root / folder / name).unlink()
        (root / folder).rmdir()
