"""MNIST loader: real files when present, generated idx files otherwise, and bad files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import torch

from simfl.data.mnist import FILES, Mnist, MnistConfig, read_idx, read_torchvision
from simfl.errors import InputError

from .helpers import SHARED, write_mnist

pytestmark = pytest.mark.data  # reads the data folder or ../shared: also run without them (.ci/run)

PART = {"kind": "iid", "clients": 2}


def load(root: Path) -> object:
    return Mnist.load(MnistConfig(root=root, partition=PART))


@pytest.mark.skipif(not (SHARED / "mnist").is_dir(), reason=f"real MNIST not found at {SHARED / 'mnist'}")
def test_real_mnist_shapes_and_labels() -> None:
    d = Mnist.load(MnistConfig(root=SHARED, partition=PART))  # found under root/mnist
    assert d.x_train.shape == (60000, 1, 28, 28) and d.x_test.shape == (10000, 1, 28, 28)
    assert d.y_train[:5].tolist() == [5, 0, 4, 1, 9]
    assert torch.bincount(d.y_test).tolist()[0] == 980


@pytest.mark.parametrize("compress", [True, False])
@pytest.mark.parametrize("layout", ["flat", "torchvision"])
def test_generated_idx(tmp_path: Path, compress: bool, layout: str) -> None:
    folder = tmp_path if layout == "flat" else tmp_path / "MNIST" / "raw"
    write_mnist(folder, compress=compress)
    d = load(tmp_path)
    assert d.x_train.shape == (30, 1, 28, 28) and d.y_train.tolist() == [i % 10 for i in range(30)]
    assert d.x_test.dtype == torch.float32 and d.input_shape == (1, 28, 28) and d.num_classes == 10


def test_missing_file_names_path_and_source(tmp_path: Path) -> None:
    write_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(InputError) as err:
        load(tmp_path)
    assert "t10k-labels-idx1-ubyte" in str(err.value) and "download" in str(err.value)


def test_no_root_reads_the_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without data.root, $SIMFL_DATA is read; a missing file names that folder and the fetch command."""
    monkeypatch.setenv("SIMFL_DATA", str(tmp_path / "empty"))
    with pytest.raises(InputError) as err:
        Mnist.load(MnistConfig(partition=PART))
    text = str(err.value)
    assert f"data folder {tmp_path / 'empty'}" in text and text.endswith("or run: simfl data fetch mnist")
    write_mnist(tmp_path / "empty" / "mnist")
    assert Mnist.load(MnistConfig(partition=PART)).x_train.shape == (30, 1, 28, 28)


def test_explicit_root_names_it_in_the_fetch_command(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load(tmp_path)
    assert str(err.value).endswith(f"simfl data fetch mnist --root '{tmp_path}'")


def test_torchvision_and_idx_parser_agree(tmp_path: Path) -> None:
    """torchvision reads root/MNIST/raw; simfl's idx parser gives the same arrays and the same loaded tensors."""
    raw = tmp_path / "tv" / "MNIST" / "raw"
    write_mnist(raw, compress=False)
    paths = {k: raw / stem for k, stem in FILES.items()}
    tv, own = read_torchvision(tmp_path / "tv"), read_idx(paths)
    for k in FILES:  # labels: int64 from torchvision, uint8 from the idx file; both become int64 tensors
        assert tv[k].shape == own[k].shape and (tv[k] == own[k]).all() and (k[0] == "y" or tv[k].dtype == own[k].dtype)
    write_mnist(tmp_path / "flat")  # gzipped, directly in the root: simfl's parser
    a, b = load(tmp_path / "tv"), load(tmp_path / "flat")
    for name in ("x_train", "y_train", "x_test", "y_test"):
        assert torch.equal(getattr(a, name), getattr(b, name))


def test_damaged_file_in_torchvision_layout_is_one_line(tmp_path: Path) -> None:
    raw = tmp_path / "MNIST" / "raw"
    write_mnist(raw, compress=False)
    path = raw / "t10k-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(InputError, match="size mismatch") as err:
        load(tmp_path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_truncated_idx(tmp_path: Path) -> None:
    write_mnist(tmp_path, compress=False)
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(InputError, match="size mismatch"):
        load(tmp_path)


def test_truncated_gzip(tmp_path: Path) -> None:
    write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(InputError, match="cannot read"):
        load(tmp_path)


def test_wrong_magic(tmp_path: Path) -> None:
    write_mnist(tmp_path)
    path = tmp_path / "train-labels-idx1-ubyte.gz"
    data = bytearray(gzip.decompress(path.read_bytes()))
    data[3] = 3  # claims three dimensions
    path.write_bytes(gzip.compress(bytes(data)))
    with pytest.raises(InputError, match="bad magic"):
        load(tmp_path)
    path.write_bytes(gzip.compress(b"PK\x03\x04 not idx at all"))
    with pytest.raises(InputError) as err:
        load(tmp_path)
    assert str(err.value).count("\n") == 0


def test_scenario_root_is_relative_to_the_file_and_defaults_to_the_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_scenario  # type: ignore[no-untyped-def]
) -> None:
    from simfl.data.files import data_root
    from simfl.schema import scenario

    from ..conftest import tiny_scenario

    data = {"dataset": "mnist", "root": "mine", "partition": PART}
    path = write_scenario(tiny_scenario(data=data))
    assert scenario.load(path).data.root == tmp_path / "mine"
    monkeypatch.setenv("SIMFL_DATA", "rel/data")
    monkeypatch.chdir(tmp_path)
    unset = scenario.load(write_scenario(tiny_scenario(data={**data, "root": None}), "b.yaml")).data.root
    assert unset is None and data_root(unset) == tmp_path / "rel" / "data"
    monkeypatch.delenv("SIMFL_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_root(None) == tmp_path / "home" / ".cache" / "simfl"
