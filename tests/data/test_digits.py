"""The digits are scikit-learn's, read from the file it ships without importing it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from sklearn.datasets import load_digits

from simfl.data.configs import DigitsConfig
from simfl.data.digits import TEST_SIZE, Digits, read_digits


def test_the_shipped_file_gives_load_digits_exactly() -> None:
    data, target = read_digits()
    bunch = load_digits()
    assert data.dtype == bunch.data.dtype and np.array_equal(data, bunch.data)
    assert target.dtype == bunch.target.dtype and np.array_equal(target, bunch.target)
    dataset = Digits.load(DigitsConfig(partition={"kind": "iid", "clients": 2}))
    assert len(dataset.y_test) == TEST_SIZE and len(dataset.y_train) == len(target) - TEST_SIZE
    assert float(dataset.x_train.max()) == 1.0 and tuple(dataset.x_train.shape[1:]) == (1, 8, 8)


def test_loading_the_digits_imports_no_sklearn() -> None:
    code = ("import sys; from simfl.data.configs import DigitsConfig; from simfl.data.digits import Digits; "
            "Digits.load(DigitsConfig(partition={'kind': 'iid', 'clients': 2})); print('sklearn' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
