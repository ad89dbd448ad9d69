"""Hugging Face ``datasets`` as a simfl dataset (``data: {dataset: hf, ...}``; extra ``hf``).

Where the data comes from: ``root`` (relative to the scenario file) is a local
copy, either a folder saved with ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``,
or parquet, CSV, JSON or arrow files (one file, or a folder whose file names give
the splits, e.g. ``train.parquet`` and ``test.parquet``); without ``root``,
``name`` is a hub id, fetched only with ``download: true``.

Column mapping: ``features`` is one column holding an array (or an image) per
sample, or a list of numeric columns stacked into a vector; ``label`` holds
the class (integers as they are; anything else numbered in sorted order of
its values); ``group`` (optional) holds the natural client of each sample
(e.g. the writer) for ``by_column`` / ``by_writer`` partitions. Images and
2-D samples get a channel axis in front (channels-last images are turned
channels-first), and features are multiplied by ``scale``.

Splits: ``train_split`` and ``test_split``; with ``test_split: null`` a
``test_fraction`` of the training split is held out (stream ``(seed,
"hf-test")`` of the data's own ``seed``).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simfl import rng
from simfl.data.base import Dataset
from simfl.data.configs import HfConfig
from simfl.data.partition import ByColumnConfig
from simfl.errors import InputError
from simfl.network import check_reachable

FILE_BUILDERS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".arrow": "arrow"}
"""File suffix to the ``datasets`` builder that reads it."""


def _datasets() -> Any:
    try:
        return importlib.import_module("datasets")
    except ImportError:
        raise InputError(
            "data.dataset", "hf needs the Hugging Face datasets package: pip install 'simfl[hf]'"
        ) from None


@contextlib.contextmanager
def _as_input_error(where: str, what: str, hint: str) -> Iterator[None]:
    """A failure of the datasets library inside the block (a corrupt file, no network, an unknown hub id) is one
    line naming ``where``: each is a problem of the user's files or machine, not of simfl."""
    library = logging.getLogger("datasets")
    level = library.level
    library.setLevel(logging.CRITICAL)  # its own ERROR lines would repeat the one line below
    try:
        yield
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything the library raises on bad input or no network
        detail = (str(exc).strip().splitlines() or [""])[0][:200]
        raise InputError(where, f"{what} ({type(exc).__name__}{': ' + detail if detail else ''}); {hint}") from None
    finally:
        library.setLevel(level)


def _load_local(lib: Any, root: Path, cache_dir: str | None) -> Any:
    """A DatasetDict (or Dataset) from a saved folder or from data files."""
    if not root.exists():
        raise InputError("data.root", f"{root} does not exist")
    if root.is_dir() and ((root / "dataset_dict.json").is_file() or (root / "state.json").is_file()):
        return lib.load_from_disk(str(root))
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in FILE_BUILDERS)
    builders = {FILE_BUILDERS.get(p.suffix) for p in files}
    if not files or None in builders or len(builders) != 1:
        raise InputError(
            "data.root", f"{root}: expected a saved dataset folder or files of one kind ({', '.join(sorted(FILE_BUILDERS))})"
        )
    (builder,) = builders
    splits: dict[str, list[str]] = {}
    for p in files:
        stem = p.stem.split("-")[0].split(".")[0]
        splits.setdefault(stem if root.is_dir() else "train", []).append(str(p))
    return lib.load_dataset(builder, data_files=splits, cache_dir=cache_dir)


def _split(data: Any, split: str, where: str) -> Any:
    names = list(data.keys()) if hasattr(data, "keys") else ["train"]
    if split not in names:
        raise InputError(where, f"no split {split!r}; the dataset has {', '.join(names)}")
    return data[split] if hasattr(data, "keys") else data


def _column(table: Any, column: str, where: str) -> Any:
    if column not in table.column_names:
        raise InputError(where, f"no column {column!r}; columns: {', '.join(table.column_names)}")
    return table.select_columns([column]).with_format("numpy")[:][column]


def _features(table: Any, config: HfConfig, split: str) -> torch.Tensor:
    """The feature tensor of one split: float32, channel axis first for images."""
    if isinstance(config.features, list):
        cols = []
        for c in config.features:
            try:
                cols.append(np.asarray(_column(table, c, "data.features"), dtype=np.float64))
            except InputError:
                raise
            except (ValueError, TypeError):
                raise InputError("data.features", f"column {c!r} of split {split!r} is not numeric") from None
        if any(c.ndim != 1 for c in cols):
            raise InputError("data.features", "a list of columns must name scalar columns; name one array column instead")
        x = np.stack(cols, axis=1)
    else:
        values = _column(table, config.features, "data.features")
        try:
            x = (np.stack([np.asarray(v, dtype=np.float64) for v in values]) if values.dtype == object
                 else np.asarray(values, dtype=np.float64))
        except (ValueError, TypeError) as exc:
            raise InputError("data.features", f"column {config.features!r} of split {split!r} is not numeric arrays of "
                             f"one shape ({exc})") from None
        if x.ndim == 1:
            x = x[:, None]
        elif x.ndim == 3:
            x = x[:, None]  # 2-D samples (grey images): one channel
        elif x.ndim == 4 and x.shape[-1] <= 4 < x.shape[1]:
            x = x.transpose(0, 3, 1, 2)  # channels-last images
    if not np.isfinite(x).all():
        raise InputError("data.features", f"split {split!r} holds NaN or infinite values")
    return torch.from_numpy(np.ascontiguousarray(x * config.scale, dtype=np.float32))


def _codes(values: np.ndarray, known: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Values as integer codes in sorted order of the distinct values (of ``known`` when given)."""
    keys = np.unique(values) if known is None else known
    codes = np.searchsorted(keys, values)
    return codes.astype(np.int64), keys


class Hf:
    """Loader of Hugging Face ``datasets`` data (local files or, with download: true, the hub)."""

    Config = HfConfig

    @staticmethod
    def load(config: HfConfig) -> Dataset:
        lib = _datasets()
        cache = None if config.cache_dir is None else str(config.cache_dir)
        if config.root is not None:
            root = Path(config.root)
            with _as_input_error(f"data.root {root}", "cannot be read as a dataset", "check the files"):
                data = _load_local(lib, root, cache)
        elif config.name is None:
            raise InputError("data.root", "hf needs data.root (a local copy) or data.name (a hub id with download: true)")
        elif not config.download:
            raise InputError(
                "data.download", f"loading {config.name!r} from the Hugging Face hub needs download: true "
                "(or data.root pointing at a local copy)"
            )
        else:
            if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in ("1", "true", "yes"):
                check_reachable(os.environ.get("HF_ENDPOINT", "https://huggingface.co"), f"data.name {config.name}",
                                "download: true needs the Hugging Face hub; check the network, or point data.root "
                                "at a local copy")
            with _as_input_error(f"data.name {config.name}", "could not be loaded from the Hugging Face hub",
                                 "check the name and the network, or point data.root at a local copy"):
                data = lib.load_dataset(config.name, config.subset, cache_dir=cache)
        train = _split(data, config.train_split, "data.train_split")
        if config.test_split is not None:
            test = _split(data, config.test_split, "data.test_split")
            train_ix, test_ix = np.arange(len(train)), None
        else:
            test = train
            order = rng.stream(config.seed, "hf-test").permutation(len(train))
            held = max(1, round(config.test_fraction * len(train)))
            if held >= len(train):
                raise InputError("data.test_fraction", f"leaves no training sample of {len(train)}")
            train_ix, test_ix = np.sort(order[held:]), np.sort(order[:held])
        x_all = _features(train, config, config.train_split)
        y_all = np.asarray(_column(train, config.label, "data.label"))
        x_test = _features(test, config, config.test_split or config.train_split)
        y_test = np.asarray(_column(test, config.label, "data.label"))
        if test_ix is not None:
            x_test, y_test = x_test[torch.from_numpy(test_ix)], y_test[test_ix]
        x_train, y_train = x_all[torch.from_numpy(train_ix)], y_all[train_ix]
        if y_train.dtype.kind in "iu" and y_test.dtype.kind in "iu":
            if min(y_train.min(), y_test.min()) < 0:
                raise InputError("data.label", "integer labels must be >= 0")
            y_tr, y_te = y_train.astype(np.int64), y_test.astype(np.int64)
            found = int(max(y_tr.max(), y_te.max())) + 1
        else:
            keys = np.unique(np.concatenate([y_train.astype(str), y_test.astype(str)]))
            y_tr, _ = _codes(y_train.astype(str), keys)
            y_te, _ = _codes(y_test.astype(str), keys)
            found = len(keys)
        classes = config.classes if config.classes is not None else found
        if classes < found:
            raise InputError("data.classes", f"is {classes} but the labels need {found}")
        partition = config.partition
        group = partition.column if isinstance(partition, ByColumnConfig) and partition.column else config.group
        groups = None
        if group is not None:
            values = np.asarray(_column(train, group, "data.partition.column" if group != config.group else "data.group"))
            kept = values[train_ix]
            groups, _ = _codes(kept.astype(str) if kept.dtype == object else kept)
        return Dataset(
            config.name or Path(str(config.root)).name, x_train, torch.from_numpy(y_tr), x_test, torch.from_numpy(y_te),
            num_classes=classes, groups_train=groups,
        )
