"""CIFAR-10/100 loaders on generated files in the standard python-batch format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from simfl.data.cifar import CIFAR10, CIFAR100, Cifar10, Cifar100, read_own
from simfl.errors import InputError

from .helpers import write_cifar

pytestmark = pytest.mark.data  # reads the data folder or ../shared: also run without them (.ci/run)

PART = {"kind": "iid", "clients": 2}


@pytest.mark.parametrize("archive", [False, True])
def test_cifar10(tmp_path: Path, archive: bool) -> None:
    write_cifar(tmp_path, 10, archive=archive)
    d = Cifar10.load(Cifar10.Config(root=tmp_path, partition=PART))
    assert d.x_train.shape == (30, 3, 32, 32) and d.x_test.shape == (6, 3, 32, 32)
    assert d.num_classes == 10 and d.y_train.dtype == torch.int64
    assert d.y_train[:7].tolist() == [0, 1, 2, 3, 4, 5, 1]


@pytest.mark.parametrize("archive", [False, True])
def test_cifar100(tmp_path: Path, archive: bool) -> None:
    write_cifar(tmp_path, 100, archive=archive)
    d = Cifar100.load(Cifar100.Config(root=tmp_path, partition=PART, normalize=False))
    assert d.x_train.shape == (6, 3, 32, 32) and d.num_classes == 100
    assert 0.0 <= float(d.x_train.min()) and float(d.x_train.max()) <= 1.0


def test_pixel_order(tmp_path: Path) -> None:
    """Rows of 3072 bytes are channel-major: R plane, G plane, B plane."""
    write_cifar(tmp_path, 10)
    import pickle

    batch = pickle.loads((tmp_path / "cifar-10-batches-py" / "data_batch_1").read_bytes())
    d = Cifar10.load(Cifar10.Config(root=tmp_path, partition=PART, normalize=False))
    assert d.x_train[0, 1, 0, 5].item() == pytest.approx(batch["data"][0, 1024 + 5] / 255.0)


def test_missing_and_corrupt(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cifar-10-batches-py.*not found.*cifar.html"):
        Cifar10.load(Cifar10.Config(root=tmp_path, partition=PART))
    write_cifar(tmp_path, 10)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").write_bytes(b"garbage")
    with pytest.raises(InputError, match="data_batch_3"):
        Cifar10.load(Cifar10.Config(root=tmp_path, partition=PART))


def read_torchvision(root: Path, classes: int) -> list[np.ndarray]:
    """The arrays torchvision's CIFAR classes read from a folder of generated (trusted) batches, channels first."""
    from torchvision.datasets import CIFAR10 as TV10
    from torchvision.datasets import CIFAR100 as TV100

    class Reader(TV10 if classes == 10 else TV100):  # type: ignore[misc]
        def _check_integrity(self) -> bool:  # generated batches have no official MD5
            return True

        def _load_meta(self) -> None:
            self.classes = []

    out: list[np.ndarray] = []
    for train in (True, False):
        ds = Reader(str(root), train=train, download=False)
        out += [np.ascontiguousarray(np.asarray(ds.data, dtype=np.uint8).transpose(0, 3, 1, 2)),
                np.asarray(ds.targets, dtype=np.int64)]
    return out


@pytest.mark.parametrize(("classes", "spec"), [(10, CIFAR10), (100, CIFAR100)])
def test_torchvision_and_own_reader_agree(tmp_path: Path, classes: int, spec: object) -> None:
    """torchvision reads the extracted folder; simfl's reader gives the same arrays (folder and archive)."""
    write_cifar(tmp_path / "folder", classes, test_rows=4)
    write_cifar(tmp_path / "archive", classes, test_rows=4, archive=True)
    tv = read_torchvision(tmp_path / "folder", classes)
    for own in (read_own(tmp_path / "folder", spec), read_own(tmp_path / "archive", spec)):  # type: ignore[arg-type]
        for a, b in zip(tv, own, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape and (a == b).all()


def test_loaded_tensors_identical_across_layouts(tmp_path: Path) -> None:
    """Folder, archive and bytes-keyed batches load to the same tensors."""
    write_cifar(tmp_path / "a", 10)
    write_cifar(tmp_path / "b", 10, archive=True)
    write_cifar(tmp_path / "c", 10, bytes_keys=True)
    loaded = [Cifar10.load(Cifar10.Config(root=tmp_path / n, partition=PART)) for n in "abc"]
    for d in loaded[1:]:
        assert torch.equal(d.x_train, loaded[0].x_train) and torch.equal(d.y_train, loaded[0].y_train)
        assert torch.equal(d.x_test, loaded[0].x_test) and torch.equal(d.y_test, loaded[0].y_test)


def test_missing_names_data_folder_and_fetch_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMFL_DATA", str(tmp_path))
    with pytest.raises(InputError) as err:
        Cifar100.load(Cifar100.Config(partition=PART))
    text = str(err.value)
    assert f"data folder {tmp_path}" in text and text.endswith("simfl data fetch cifar100") and "\n" not in text


def test_batch_of_the_wrong_width_is_refused_by_name(tmp_path: Path) -> None:
    """Rows of 1536 bytes reshape to whole images in torchvision; simfl's reader names the batch instead."""
    import pickle

    import numpy as np

    write_cifar(tmp_path, 10)
    path = tmp_path / "cifar-10-batches-py" / "data_batch_2"
    path.write_bytes(pickle.dumps({"data": np.zeros((6, 1536), np.uint8), "labels": [0] * 6}))
    with pytest.raises(InputError, match="data_batch_2.*expected \\(n, 3072\\)"):
        Cifar10.load(Cifar10.Config(root=tmp_path, partition=PART))
