"""UCI HAR (generated folder layout) and HAPT-derived windows (real file when present, generated otherwise)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simfl.data.har import CHANNELS, Hapt, Har, cut_windows
from simfl.data.partition import BySubjectConfig, split
from simfl.errors import InputError

from .helpers import SHARED

pytestmark = pytest.mark.data  # reads the data folder or ../shared: also run without them (.ci/run)

PART = {"kind": "by_subject"}


def write_uci_har(root: Path, n: dict[str, int]) -> None:
    gen = np.random.default_rng(2)
    for split_name, count in n.items():
        base = root / "UCI HAR Dataset" / split_name
        (base / "Inertial Signals").mkdir(parents=True)
        for c in CHANNELS:
            np.savetxt(base / "Inertial Signals" / f"{c}_{split_name}.txt", gen.normal(size=(count, 128)), fmt="%.6e")
        np.savetxt(base / f"y_{split_name}.txt", np.arange(count) % 6 + 1, fmt="%d")
        np.savetxt(base / f"subject_{split_name}.txt", np.arange(count) % 3 + 1, fmt="%d")


def test_uci_har_layout(tmp_path: Path) -> None:
    write_uci_har(tmp_path, {"train": 12, "test": 6})
    d = Har.load(Har.Config(root=tmp_path, partition=PART))
    assert d.x_train.shape == (12, 9, 128) and d.x_test.shape == (6, 9, 128)
    assert d.y_train.tolist() == [i % 6 for i in range(12)] and d.num_classes == 6
    assert d.groups_train is not None and sorted(set(d.groups_train.tolist())) == [1, 2, 3]
    parts = split(BySubjectConfig(), d.y_train.numpy(), np.random.default_rng(0), d.groups_train)
    assert [len(p) for p in parts] == [4, 4, 4]


def test_uci_har_missing_file(tmp_path: Path) -> None:
    write_uci_har(tmp_path, {"train": 6, "test": 6})
    (tmp_path / "UCI HAR Dataset" / "test" / "Inertial Signals" / "body_gyro_z_test.txt").unlink()
    with pytest.raises(InputError, match="body_gyro_z_test.txt: file not found"):
        Har.load(Har.Config(root=tmp_path, partition=PART))
    with pytest.raises(InputError, match="UCI HAR Dataset"):
        Har.load(Har.Config(root=tmp_path / "nothing", partition=PART))


def test_cut_windows_stay_inside_runs() -> None:
    label = np.array([1] * 300 + [-1] * 10 + [2] * 128 + [7] * 200)
    run = np.zeros(len(label), dtype=np.int64)
    starts, y = cut_windows(np.zeros((len(label), 6)), label, run, 128, 64)
    assert starts.tolist() == [0, 64, 128, 310] and y.tolist() == [0, 0, 0, 1]


def write_hapt(path: Path) -> None:
    gen = np.random.default_rng(3)
    users = np.repeat([1, 2, 3], 600)
    label = np.tile(np.repeat([1, 4, -1], [300, 256, 44]), 3)
    np.savez(path, signals=gen.normal(size=(1800, 6)).astype(np.float32), label=label.astype(np.int8),
             user=users.astype(np.int8), experiment=users.astype(np.int8),
             uci_har_train_subjects=np.array([1, 3], dtype=np.int8))


def test_hapt_generated(tmp_path: Path) -> None:
    write_hapt(tmp_path / "hapt_raw.npz")
    d = Hapt.load(Hapt.Config(root=tmp_path, partition=PART))
    # per user: 3 windows in the 300-sample walk, 3 in the 256-sample sit
    assert d.x_train.shape == (12, 6, 128) and d.x_test.shape == (6, 6, 128)
    assert d.groups_train is not None and sorted(set(d.groups_train.tolist())) == [1, 3]
    assert sorted(set(d.y_train.tolist())) == [0, 3]


def test_hapt_bad_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="hapt_raw.npz: file not found"):
        Hapt.load(Hapt.Config(root=tmp_path, partition=PART))
    (tmp_path / "hapt_raw.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a readable .npz"):
        Hapt.load(Hapt.Config(root=tmp_path, partition=PART))
    np.savez(tmp_path / "hapt_raw.npz", signals=np.zeros((3, 6)))
    with pytest.raises(InputError, match="lacks array"):
        Hapt.load(Hapt.Config(root=tmp_path, partition=PART))


@pytest.mark.skipif(not (SHARED / "hapt_raw.npz").is_file(), reason=f"hapt_raw.npz not found in {SHARED}")
def test_hapt_real() -> None:
    d = Hapt.load(Hapt.Config(root=SHARED, partition=PART))
    assert d.x_train.shape == (7415, 6, 128) and d.x_test.shape == (2996, 6, 128)
    assert d.groups_train is not None and len(np.unique(d.groups_train)) == 21
    parts = split(BySubjectConfig(clients=21), d.y_train.numpy(), np.random.default_rng(0), d.groups_train)
    assert len(parts) == 21 and sum(len(p) for p in parts) == 7415
    assert sorted(set(d.y_test.tolist())) == [0, 1, 2, 3, 4, 5]


@pytest.mark.skipif(not (SHARED / "hapt_raw.npz").is_file(), reason=f"hapt_raw.npz not found in {SHARED}")
@pytest.mark.parametrize(("window", "step"), [(128, 64), (256, 128), (50, 25)])
def test_hapt_states_the_windows_it_cuts(window: int, step: int) -> None:
    """The sizes the estimate reads are the loaded dataset's (they were 1.8x the training windows at 128/64)."""
    config = Hapt.Config(root=SHARED, partition=PART, window=window, step=step)
    d, facts = Hapt.load(config), config.facts()
    assert facts.shape == tuple(d.x_train.shape[1:])
    assert facts.train == pytest.approx(len(d.y_train), rel=0.01)
    assert facts.test == pytest.approx(len(d.y_test), rel=0.01)
