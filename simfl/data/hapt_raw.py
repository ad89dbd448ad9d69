"""The raw UCI HAPT recordings as arrays: ``hapt_raw.npz``, built from the official ``RawData`` folder.

Both the ``hapt`` loader (:mod:`simfl.data.har`, which cuts windows from the arrays) and
``simfl data fetch hapt`` (:mod:`simfl.data.download`, which builds the file from the zip)
import from here. ``RawData/`` holds one accelerometer and one gyroscope file per
experiment, and ``labels.txt`` with rows ``experiment user activity start end``, where
``start`` and ``end`` are 0-based sample indices, both inclusive.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from simfl.data.files import missing
from simfl.errors import InputError

UCI_HAR_TRAIN_SUBJECTS = (1, 3, 5, 6, 7, 8, 11, 14, 15, 16, 17, 19, 21, 22, 23, 25, 26, 27, 28, 29, 30)
"""The 21 volunteers of UCI HAR's training split (the other 9 form its test split)."""
HAPT_ACTIVITIES = ("WALKING", "WALKING_UPSTAIRS", "WALKING_DOWNSTAIRS", "SITTING", "STANDING", "LAYING",
                   "STAND_TO_SIT", "SIT_TO_STAND", "SIT_TO_LIE", "LIE_TO_SIT", "STAND_TO_LIE", "LIE_TO_STAND")
"""HAPT activity ids 1..12 by name (1-6 are UCI HAR's classes)."""
def read_table(path: Path, how: str, fetch: tuple[str, Path] | None) -> np.ndarray:
    """A whitespace-separated number table; a missing file names ``how`` to get it (and the fetch command)."""
    if not path.is_file():
        raise missing(path, how, fetch)
    try:
        return np.loadtxt(path, dtype=np.float32, ndmin=2)
    except ValueError as exc:
        raise InputError(str(path), f"not a whitespace-separated number table: {exc}") from exc


def hapt_arrays(raw: Path) -> dict[str, np.ndarray]:
    """The arrays of ``hapt_raw.npz`` from the official HAPT ``RawData`` folder (see the module docstring)."""
    pattern = re.compile(r"acc_exp(\d+)_user(\d+)\.txt")
    runs = sorted((int(m.group(1)), int(m.group(2)), p) for p in raw.glob("acc_exp*_user*.txt")
                  if (m := pattern.fullmatch(p.name)))
    labels_path = raw / "labels.txt"
    if not runs or not labels_path.is_file():
        raise InputError(str(raw), "expected acc_expNN_userNN.txt, gyro_expNN_userNN.txt and labels.txt (UCI HAPT RawData)")
    try:
        rows = np.loadtxt(labels_path, dtype=np.int64, ndmin=2)
    except ValueError as exc:
        raise InputError(str(labels_path), f"not a whitespace-separated integer table: {exc}") from exc
    if rows.shape[1] != 5:
        raise InputError(str(labels_path), f"expected 5 columns (experiment user activity start end), got {rows.shape[1]}")
    signals, label, user, experiment = [], [], [], []
    for exp, usr, acc_path in runs:
        gyro_path = raw / acc_path.name.replace("acc_", "gyro_", 1)
        acc = read_table(acc_path, "every acc_ file needs its gyro_ file", None)
        gyro = read_table(gyro_path, "every acc_ file needs its gyro_ file", None)
        if acc.shape[1] != 3 or acc.shape != gyro.shape:
            raise InputError(str(gyro_path), f"accelerometer {acc.shape} and gyroscope {gyro.shape}: expected n x 3 each")
        lab = np.full(len(acc), -1, dtype=np.int8)
        for _, _, act, start, end in rows[(rows[:, 0] == exp) & (rows[:, 1] == usr)]:
            if not (0 <= start <= end < len(acc)) or not 1 <= act <= len(HAPT_ACTIVITIES):
                raise InputError(str(labels_path), f"row {exp} {usr} {act} {start} {end} outside experiment {exp}")
            lab[start:end + 1] = act
        signals.append(np.concatenate([acc, gyro], axis=1))
        label.append(lab)
        user.append(np.full(len(acc), usr, dtype=np.int8))
        experiment.append(np.full(len(acc), exp, dtype=np.int8))
    train = np.array(UCI_HAR_TRAIN_SUBJECTS, dtype=np.int64)
    return {
        "signals": np.concatenate(signals).astype(np.float32), "label": np.concatenate(label),
        "user": np.concatenate(user), "experiment": np.concatenate(experiment),
        "channel_names": np.array(["acc_x", "acc_y", "acc_z", "gyro_x", "gyro_y", "gyro_z"]),
        "activity_names": np.array(HAPT_ACTIVITIES), "sampling_rate_hz": np.array(50),
        "uci_har_train_subjects": train,
        "uci_har_test_subjects": np.setdiff1d(np.arange(1, 31), train),
    }


def write_hapt_npz(raw: Path, out: Path) -> None:
    """Write ``hapt_raw.npz`` from a HAPT ``RawData`` folder (temporary file, then rename)."""
    arrays = hapt_arrays(raw)
    tmp = out.with_name(out.name + ".part")
    try:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, **arrays)  # type: ignore[arg-type]
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(str(out), f"cannot write: {exc.strerror or exc}") from exc
