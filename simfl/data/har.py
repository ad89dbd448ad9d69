"""Human activity recognition: UCI HAR windows (``har``) and HAPT-derived windows (``hapt``).

``har`` reads the official UCI HAR folder: 9 inertial channels x 128 steps
per window, with subject ids. ``hapt`` cuts 128-sample windows with 50%
overlap (6 channels: body-frame accelerometer and gyroscope) out of the raw
UCI HAPT recordings of the same 30 volunteers, keeping activities 1-6 and
the UCI HAR subject split (21 training subjects). Those windows approximate
UCI HAR (no filtering, slightly different counts) and are called
HAPT-derived everywhere. Both provide subject ids as ``groups_train``.

``hapt_raw.npz`` holds the raw recordings as arrays (:mod:`simfl.data.hapt_raw`, which
``simfl data fetch hapt`` uses to build it from the official UCI HAPT zip).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import torch

from simfl.data.base import Dataset
from simfl.data.configs import HaptConfig, HarConfig
from simfl.data.files import data_root, find_first, missing
from simfl.data.hapt_raw import read_table
from simfl.errors import InputError

CHANNELS = [f"{kind}_{axis}" for kind in ("total_acc", "body_acc", "body_gyro") for axis in "xyz"]
"""The nine UCI HAR inertial signals, in the order stacked into a window."""
HAR_HOW = (
    "put the 'UCI HAR Dataset' folder (train/, test/ with 'Inertial Signals') in the data folder "
    "(https://archive.ics.uci.edu/dataset/240)"
)
HAPT_HOW = (
    "put hapt_raw.npz (the raw UCI HAPT recordings as arrays: signals, label, user, experiment, "
    "uci_har_train_subjects) in the data folder"
)


def _standardize(x_train: torch.Tensor, x_test: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean = x_train.mean(dim=(0, 2), keepdim=True)
    std = x_train.std(dim=(0, 2), keepdim=True).clamp_min(1e-6)
    return (x_train - mean) / std, (x_test - mean) / std


def _har_split(folder: Path, split: str, root: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Windows (n, 9, 128), labels 0..5 and subject ids of one split."""
    base = folder / split
    fetch = ("har", root)
    signals = [read_table(base / "Inertial Signals" / f"{c}_{split}.txt", HAR_HOW, fetch) for c in CHANNELS]
    y = read_table(base / f"y_{split}.txt", HAR_HOW, fetch).reshape(-1).astype(np.int64) - 1
    subjects = read_table(base / f"subject_{split}.txt", HAR_HOW, fetch).reshape(-1).astype(np.int64)
    shapes = {s.shape for s in signals}
    if len(shapes) != 1 or len(y) != len(signals[0]) or len(subjects) != len(y):
        raise InputError(str(base), f"inconsistent UCI HAR files: signals {sorted(shapes)}, {len(y)} labels, "
                         f"{len(subjects)} subjects")
    if len(y) and (y.min() < 0 or y.max() > 5):
        raise InputError(str(base / f"y_{split}.txt"), "labels must be 1..6")
    return np.stack(signals, axis=1), y, subjects


class Har:
    """Loader of the official UCI HAR inertial-signal windows."""

    Config = HarConfig

    @staticmethod
    def load(config: HarConfig) -> Dataset:
        root = data_root(config.root)
        if config.download and not (root / "UCI HAR Dataset" / "train").is_dir():
            from simfl.data.download import fetch

            fetch("har", root, progress=True)
        folder = find_first([root / "UCI HAR Dataset", root / "UCI_HAR_Dataset", root])
        if folder is None or not (folder / "train").is_dir():
            if (root / "UCI HAR Dataset.zip").is_file() or (root / "human+activity+recognition+using+smartphones.zip").is_file():
                raise InputError(str(root), "extract the UCI HAR zip first (simfl reads the extracted folder)")
            raise missing(root / "UCI HAR Dataset" / "train", HAR_HOW, ("har", root))
        x_train, y_train, g_train = _har_split(folder, "train", root)
        x_test, y_test, _ = _har_split(folder, "test", root)
        xt, xs = torch.from_numpy(x_train), torch.from_numpy(x_test)
        if config.standardize:
            xt, xs = _standardize(xt, xs)
        return Dataset("har", xt, torch.from_numpy(y_train), xs, torch.from_numpy(y_test), num_classes=6,
                       groups_train=g_train)


def cut_windows(
    signals: np.ndarray, label: np.ndarray, run_id: np.ndarray, window: int, step: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Start indices and labels of windows lying inside one run of a constant label (1..6) and ``run_id``."""
    keep = (label >= 1) & (label <= 6)
    change = np.flatnonzero((np.diff(label) != 0) | (np.diff(run_id) != 0)) + 1
    bounds = np.concatenate([[0], change, [len(label)]])
    starts: list[np.ndarray] = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        if keep[lo] and hi - lo >= window:
            starts.append(np.arange(lo, hi - window + 1, step))
    s = np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64)
    return s.astype(np.int64), label[s].astype(np.int64) - 1


class Hapt:
    """Loader of HAPT-derived windows (an approximation of UCI HAR; see the module docstring)."""

    Config = HaptConfig

    @staticmethod
    def load(config: HaptConfig) -> Dataset:
        root = data_root(config.root)
        path = root / config.file
        if config.download and not path.is_file() and config.file == "hapt_raw.npz":
            from simfl.data.download import fetch

            fetch("hapt", root, progress=True)
        if not path.is_file():
            raise missing(path, HAPT_HOW, ("hapt", root) if config.file == "hapt_raw.npz" else None)
        keys = ("signals", "label", "user", "experiment", "uci_har_train_subjects")
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in keys}
        except KeyError as exc:
            raise InputError(str(path), f"lacks array {exc} (needs {', '.join(keys)})") from exc
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise InputError(str(path), f"not a readable .npz file: {exc}") from exc
        sig = arrays["signals"].astype(np.float32)
        label = arrays["label"].astype(np.int64)
        user = arrays["user"].astype(np.int64)
        exp = arrays["experiment"].astype(np.int64)
        if sig.ndim != 2 or not (len(sig) == len(label) == len(user) == len(exp)):
            raise InputError(str(path), "signals, label, user and experiment must have one row per sample")
        starts, y = cut_windows(sig, label, exp * 1000 + user, config.window, config.step)
        offsets = starts[:, None] + np.arange(config.window)[None, :]
        x = torch.from_numpy(np.ascontiguousarray(sig[offsets].transpose(0, 2, 1)))  # (n, channels, window)
        groups = user[starts]
        train = np.isin(groups, arrays["uci_har_train_subjects"].astype(np.int64))
        xt, xs = x[torch.from_numpy(train)], x[torch.from_numpy(~train)]
        if config.standardize:
            xt, xs = _standardize(xt, xs)
        return Dataset("hapt", xt, torch.from_numpy(y[train]), xs, torch.from_numpy(y[~train]), num_classes=6,
                       groups_train=groups[train])
