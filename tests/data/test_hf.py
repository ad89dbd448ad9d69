"""The hf dataset kind on small local parquet/CSV/saved files, and by_column / by_writer natural partitions."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from simfl.cli import main
from simfl.data import DATASETS
from simfl.data.hf import Hf, HfConfig
from simfl.data.partition import ByColumnConfig, IIDConfig, split
from simfl.errors import InputError
from tests.conftest import tiny_scenario

pytestmark = pytest.mark.data  # reads the data folder or ../shared: also run without them (.ci/run)

datasets = pytest.importorskip("datasets")
pd = pytest.importorskip("pandas")


def frame(n: int = 60) -> pd.DataFrame:
    gen = np.random.default_rng(0)
    return pd.DataFrame({
        "a": gen.normal(size=n), "b": gen.normal(size=n), "label": gen.integers(0, 3, n),
        "writer": gen.choice(["w1", "w2", "w3", "w4"], n), "name": gen.choice(["cat", "dog"], n),
    })


def config(tmp_path: Path, **fields: object) -> HfConfig:
    raw = {"features": ["a", "b"], "partition": {"kind": "iid", "clients": 2}, "cache_dir": str(tmp_path / "cache")}
    return HfConfig.model_validate({**raw, **fields})


def test_parquet_folder_splits_columns_and_writers(tmp_path: Path) -> None:
    df = frame()
    (tmp_path / "data").mkdir()
    df.iloc[:40].to_parquet(tmp_path / "data" / "train.parquet")
    df.iloc[40:].to_parquet(tmp_path / "data" / "test.parquet")
    cfg = config(tmp_path, root=str(tmp_path / "data"), group="writer", partition={"kind": "by_writer"})
    d = Hf.load(cfg)
    assert DATASETS["hf"] is Hf
    assert d.x_train.shape == (40, 2) and d.x_test.shape == (20, 2) and d.num_classes == 3
    assert np.allclose(d.x_train[:, 0].numpy(), df["a"].iloc[:40].to_numpy(), atol=1e-6)
    assert d.y_test.tolist() == df["label"].iloc[40:].tolist()
    parts = split(cfg.partition, d.y_train.numpy(), np.random.default_rng(0), d.groups_train)
    writers = sorted(df["writer"].iloc[:40].unique())
    assert [len(p) for p in parts] == [int((df["writer"].iloc[:40] == w).sum()) for w in writers]
    assert sorted(np.concatenate(parts).tolist()) == list(range(40))
    by_name = config(tmp_path, root=str(tmp_path / "data"), partition={"kind": "by_column", "column": "name"})
    assert len(np.unique(Hf.load(by_name).groups_train)) == 2


def test_csv_file_held_out_test_and_string_labels(tmp_path: Path) -> None:
    df = frame()
    df.to_csv(tmp_path / "all.csv", index=False)
    cfg = config(tmp_path, root=str(tmp_path / "all.csv"), label="name", test_split=None, test_fraction=0.25)
    d = Hf.load(cfg)
    assert d.x_train.shape == (45, 2) and d.x_test.shape == (15, 2) and d.num_classes == 2
    again = Hf.load(cfg)
    assert d.x_test.equal(again.x_test) and d.y_train.equal(again.y_train)  # same data seed, same held-out rows
    assert set(d.y_train.tolist()) <= {0, 1}  # cat = 0, dog = 1


def test_saved_dataset_with_image_columns(tmp_path: Path) -> None:
    gen = np.random.default_rng(1)
    grey = datasets.Dataset.from_dict({"img": gen.random((6, 8, 8)).tolist(), "label": [0, 1, 2, 0, 1, 2]})
    colour = datasets.Dataset.from_dict({"img": gen.random((6, 5, 5, 3)).tolist(), "label": [0, 1, 2, 0, 1, 2]})
    datasets.DatasetDict({"train": grey, "test": grey}).save_to_disk(str(tmp_path / "grey"))
    datasets.DatasetDict({"train": colour, "test": colour}).save_to_disk(str(tmp_path / "colour"))
    g = Hf.load(config(tmp_path, root=str(tmp_path / "grey"), features="img", scale=2.0))
    assert g.input_shape == (1, 8, 8)
    assert np.allclose(g.x_train[0, 0].numpy(), 2 * np.asarray(grey[0]["img"]), atol=1e-6)
    c = Hf.load(config(tmp_path, root=str(tmp_path / "colour"), features="img"))
    assert c.input_shape == (3, 5, 5)
    assert np.allclose(c.x_train[0, :, 1, 2].numpy(), np.asarray(colour[0]["img"])[1, 2], atol=1e-6)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"label": "nope"}, "data.label: no column 'nope'; columns: a, b, label, writer, name"),
        ({"test_split": "valid"}, "data.test_split: no split 'valid'; the dataset has"),
        ({"features": ["a", "zz"]}, "data.features: no column 'zz'"),
        ({"classes": 2}, "data.classes: is 2 but the labels need 3"),
        ({"features": ["a", "writer"]}, "data.features: column 'writer' of split 'train' is not numeric"),
        ({"root": None, "name": "someone/data"}, "data.download: loading 'someone/data' from the Hugging Face hub "
         "needs download: true"),
        ({"root": None}, "data.root: hf needs data.root"),
        ({"root": "missing"}, "does not exist"),
    ],
)
def test_mistakes_are_one_line(tmp_path: Path, fields: dict[str, object], expected: str) -> None:
    (tmp_path / "data").mkdir()
    frame().to_parquet(tmp_path / "data" / "train.parquet")
    frame(10).to_parquet(tmp_path / "data" / "test.parquet")
    raw: dict[str, object] = {"root": str(tmp_path / "data"), **fields}
    if raw["root"] == "missing":
        raw["root"] = str(tmp_path / "missing")
    with pytest.raises(InputError) as err:
        Hf.load(config(tmp_path, **raw))
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(InputError, match=r"data.dataset: hf needs the Hugging Face datasets package: pip install 'simfl\[hf\]'"):
        Hf.load(config(tmp_path, root=str(tmp_path)))


def test_by_column_partition_rules() -> None:
    labels = np.zeros(7, dtype=np.int64)
    groups = np.array([2, 0, 2, 1, 2, 0, 1])
    gen = np.random.default_rng(0)
    parts = split(ByColumnConfig(kind="by_column", min_samples=2), labels, gen, groups)
    assert [p.tolist() for p in parts] == [[1, 5], [3, 6], [0, 2, 4]]
    assert len(split(ByColumnConfig(min_samples=3), labels, gen, groups)) == 1
    with pytest.raises(InputError, match="by_writer gives one client per value: 3, got 4"):
        split(ByColumnConfig(kind="by_writer", clients=4), labels, gen, groups)
    with pytest.raises(InputError, match="by_column needs a dataset with a client column"):
        split(ByColumnConfig(), labels, gen, None)
    assert len(split(IIDConfig(clients=7), labels, gen, groups)) == 7


def test_scenario_runs_on_a_parquet_dataset_by_writer(tmp_path: Path, write_scenario) -> None:  # type: ignore[no-untyped-def]
    df = frame()
    (tmp_path / "data").mkdir()
    df.iloc[:40].to_parquet(tmp_path / "data" / "train.parquet")
    df.iloc[40:].to_parquet(tmp_path / "data" / "test.parquet")
    raw = tiny_scenario(
        data={"dataset": "hf", "root": "data", "features": ["a", "b"], "group": "writer", "cache_dir": "cache",
              "partition": {"kind": "by_writer", "clients": 4}},
        latency={"model": "constant", "seconds": [1.0, 2.0, 3.0, 4.0]},
    )
    out = tmp_path / "out"
    assert main(["run", str(write_scenario(raw)), "--out", str(out), "--quiet"]) == 0
    assert (out / "summary.csv").is_file()
