"""``kind: flwr``: Flower Datasets' partitioners split the training set, offline, seeded by simfl, errors in one line."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from simfl import rng
from simfl.cli import main
from simfl.data.flwr import INSTALL_HINT, FlwrConfig, flwr_split
from simfl.data.mnist import read_idx
from simfl.data.partition import ByColumnConfig, split
from simfl.errors import InputError
from simfl.schema.scenario import validate
from tests.conftest import tiny_scenario

from .helpers import SHARED

pytestmark = pytest.mark.data  # reads the data folder or ../shared: also run without them (.ci/run)

pytest.importorskip("flwr_datasets")
fp = pytest.importorskip("flwr_datasets.partitioner")
Dataset = pytest.importorskip("datasets").Dataset

MNIST_LABELS = SHARED / "mnist" / "train-labels-idx1-ubyte.gz"
LABELS = np.repeat(np.arange(10), 200)
GROUPS = np.tile(np.array([7, 3, 11, 5]), 500)
DIRICHLET = {"kind": "flwr", "partitioner": "DirichletPartitioner", "clients": 20,
             "options": {"alpha": 0.3, "partition_by": "label"}}


def training_labels() -> np.ndarray:
    """MNIST's 60,000 training labels when the shared data is there, else 6,000 drawn ones."""
    if MNIST_LABELS.is_file():
        return read_idx({"y_train": MNIST_LABELS})["y_train"].astype(np.int64)
    return np.random.default_rng(3).integers(0, 10, 6000)


def config(**raw: Any) -> FlwrConfig:
    return FlwrConfig(**{**DIRICHLET, **raw})


def stream(seed: int = 0) -> np.random.Generator:
    return rng.stream(seed, "partition")


def flowers_own(cls: type, labels: np.ndarray, order: np.ndarray | None = None, arrow: bool = False,
                **kwargs: Any) -> list[np.ndarray]:
    """The partitions as Flower Datasets makes them on its own (rows in ``order``; python format unless ``arrow``)."""
    order = np.arange(len(labels)) if order is None else order
    p = cls(**kwargs)
    table = Dataset.from_dict({"label": labels[order], "idx": order})
    p.dataset = table.with_format("arrow") if arrow else table
    return [np.sort(np.asarray(p.load_partition(i)["idx"])) for i in range(p.num_partitions)]


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def check_covering(parts: list[np.ndarray], n: int, whole: bool = True) -> None:
    every = np.concatenate(parts)
    assert len(np.unique(every)) == len(every) and every.min() >= 0 and every.max() < n
    assert all(np.array_equal(p, np.sort(p)) and p.dtype == np.int64 and len(p) for p in parts)
    if whole:
        assert len(every) == n


@pytest.mark.parametrize("shuffle", [False, True])
def test_dirichlet_equals_flowers_own_partitioner(shuffle: bool) -> None:
    labels = training_labels()
    parts = split(config(shuffle=shuffle), labels, stream(0))
    gen = stream(0)  # the partitioner's seed is the first draw of the partition stream, the row order the second
    seed, order = int(gen.integers(2**32)), gen.permutation(len(labels)) if shuffle else None
    own = flowers_own(fp.DirichletPartitioner, labels, order, arrow=shuffle, num_partitions=20, partition_by="label",
                      alpha=0.3, seed=seed)
    assert [len(p) for p in parts] == [len(p) for p in own]
    for m, (mine, theirs) in enumerate(zip(parts, own, strict=True)):
        assert np.array_equal(mine, theirs), f"client {m}"
    check_covering(parts, len(labels))


def test_shuffled_rows_as_federated_dataset_does() -> None:
    parts, kept = split(config(), LABELS, stream(0)), split(config(shuffle=False), LABELS, stream(0))
    assert not same(parts, kept) and [len(p) for p in parts] == [len(p) for p in kept]  # Dirichlet sizes: order-free
    iid = FlwrConfig(kind="flwr", partitioner="IidPartitioner", clients=10)
    assert min(len(np.unique(LABELS[p])) for p in split(iid, LABELS, stream(0))) >= 8
    sliced = split(iid.model_copy(update={"shuffle": False}), LABELS, stream(0))  # contiguous slices of sorted labels
    assert [len(np.unique(LABELS[p])) for p in sliced] == [1] * 10


def test_seeds() -> None:
    a, b, c = (split(config(), LABELS, stream(s)) for s in (0, 0, 1))
    assert same(a, b) and not same(a, c)
    fixed = config(shuffle=False, options={**DIRICHLET["options"], "seed": 7})
    x, y = split(fixed, LABELS, stream(0)), split(fixed, LABELS, stream(1))
    own = flowers_own(fp.DirichletPartitioner, LABELS, num_partitions=20, partition_by="label", alpha=0.3, seed=7)
    assert same(x, y) and same(x, own) and not same(x, split(config(shuffle=False), LABELS, stream(0)))
    shuffled = fixed.model_copy(update={"shuffle": True})
    order = stream(0).permutation(len(LABELS))  # no seed drawn (options.seed is given): the order is the first draw
    own = flowers_own(fp.DirichletPartitioner, LABELS, order, num_partitions=20, partition_by="label", alpha=0.3, seed=7)
    assert same(split(shuffled, LABELS, stream(0)), own)


@pytest.mark.parametrize(
    ("partitioner", "options"),
    [
        ("IidPartitioner", {}),
        ("ShardPartitioner", {"partition_by": "label", "num_shards_per_partition": 2}),
        ("PathologicalPartitioner", {"partition_by": "label", "num_classes_per_partition": 2}),
    ],
)
def test_other_partitioners(partitioner: str, options: dict[str, Any]) -> None:
    parts = split(FlwrConfig(kind="flwr", partitioner=partitioner, clients=10, options=options), LABELS, stream(0))
    assert len(parts) == 10
    check_covering(parts, len(LABELS), whole=partitioner != "PathologicalPartitioner")
    classes = [len(np.unique(LABELS[p])) for p in parts]
    if partitioner == "IidPartitioner":
        assert [len(p) for p in parts] == [200] * 10 and min(classes) >= 8
    elif partitioner == "ShardPartitioner":
        assert [len(p) for p in parts] == [200] * 10 and max(classes) <= 2
    else:
        assert classes == [2] * 10


def test_natural_ids_over_groups_and_sizes() -> None:
    natural = FlwrConfig(kind="flwr", partitioner="NaturalIdPartitioner", options={"partition_by": "group"})
    parts = split(natural, LABELS, stream(0), GROUPS)
    assert same(parts, split(ByColumnConfig(), LABELS, stream(0), GROUPS))  # one client per group, ascending
    assert [int(GROUPS[p[0]]) for p in parts] == [3, 5, 7, 11]
    assert len(split(natural.model_copy(update={"clients": 4}), LABELS, stream(0), GROUPS)) == 4
    sized = FlwrConfig(kind="flwr", partitioner="SizePartitioner", options={"partition_sizes": [5, 10, 20]})
    assert [len(p) for p in split(sized, LABELS, stream(0))] == [5, 10, 20]


def test_offline_and_quiet(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"network use: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    natural = FlwrConfig(kind="flwr", partitioner="NaturalIdPartitioner", options={"partition_by": "group"})
    split(natural, LABELS, stream(0), GROUPS)  # draws a tqdm bar of its own
    with pytest.raises(InputError, match="max number of attempts"):  # warns on every retry, then gives up
        split(config(clients=50, options={"alpha": 0.05, "partition_by": "label", "min_partition_size": 30}), LABELS,
              stream(0))
    out, err = capfd.readouterr()
    assert out == "" and err == ""


# ---- errors: one line each, naming the key -------------------------------------------------------------


def scenario_error(partition: dict[str, Any]) -> str:
    raw = tiny_scenario()
    raw["data"] = {**raw["data"], "partition": partition}
    with pytest.raises(InputError) as info:
        validate(raw)
    return str(info.value)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"partitioner": "Nope"}, "data.partition.partitioner: unknown partitioner 'Nope'; allowed: "),
        ({"partitioner": "VerticalEvenPartitioner"}, "data.partition.partitioner: VerticalEvenPartitioner splits the "
         "features"),
        ({"options": {"alfa": 0.3, "partition_by": "label"}}, "data.partition.options: DirichletPartitioner has no "
         "option 'alfa'; its options: partition_by, alpha, min_partition_size"),
        ({"options": {"partition_by": "label"}}, "data.partition.options: DirichletPartitioner needs option alpha"),
        ({"options": {"alpha": 0.3, "partition_by": "writer"}}, "data.partition.options: partition_by must be label"),
        ({"options": {"alpha": 0.3, "partition_by": "label", "num_partitions": 5}},
         "data.partition.options: num_partitions is set by data.partition.clients"),
        ({"clients": None}, "data.partition.clients: DirichletPartitioner needs the number of clients"),
        ({"options": {"alpha": {"a": 1}, "partition_by": "label"}}, "data.partition.options: alpha: must be a number, "
         "string or boolean, a list of them or a list of such lists, got {'a': 1}"),
    ],
)
def test_scenario_errors(change: dict[str, Any], expected: str) -> None:
    partition = {**DIRICHLET, **change}
    if change.get("clients", 1) is None:
        del partition["clients"]
    message = scenario_error(partition)
    assert expected in message and "\n" not in message


def test_without_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    made = config()
    monkeypatch.setitem(sys.modules, "flwr_datasets", None)
    monkeypatch.setitem(sys.modules, "flwr_datasets.partitioner", None)
    assert f"data.partition.partitioner: {INSTALL_HINT}" in scenario_error(DIRICHLET)
    with pytest.raises(InputError) as info:
        flwr_split(made, LABELS, stream(0))
    assert info.value.where == "data.partition.partitioner" and info.value.message == INSTALL_HINT


def test_options_the_constructor_refuses_are_refused_with_the_section() -> None:
    """As ``simfl validate`` sees it: the partitioner is built from the options, without the data."""
    with pytest.raises(ValidationError, match="DirichletPartitioner refuses {alpha: -1.0, partition_by: label}: "
                                              "ValueError: "):
        config(options={"alpha": -1.0, "partition_by": "label"})


@pytest.mark.parametrize(
    ("raw", "groups", "where", "expected"),
    [
        ({"options": {"alpha": 0.01, "partition_by": "label", "min_partition_size": 150}}, None, "options",
         "cannot split the 2000 training samples over 20 clients with {alpha: 0.01, partition_by: label, "
         "min_partition_size: 150} (ValueError: The max number of attempts (10) was reached"),
        ({"clients": 60, "options": {"alpha": 0.01, "partition_by": "label", "min_partition_size": 0}}, None, "options",
         "clients without samples"),
        ({"clients": 3000}, None, "clients", "must be at most the 2000 training samples, got 3000"),
        ({"options": {"alpha": 0.3, "partition_by": "group"}}, None, "options", "partition_by: group needs a dataset "
         "with natural clients"),
        ({"partitioner": "NaturalIdPartitioner", "clients": 3, "options": {"partition_by": "group"}}, GROUPS, "clients",
         "NaturalIdPartitioner gives 4 clients here, got 3"),
    ],
)
def test_split_errors(raw: dict[str, Any], groups: np.ndarray | None, where: str, expected: str) -> None:
    with pytest.raises(InputError) as info:
        split(config(**raw), LABELS, stream(0), groups)
    assert info.value.where == f"data.partition.{where}"
    assert expected in info.value.message and "\n" not in str(info.value)


# ---- through the command line ----------------------------------------------------------------------------


def flwr_scenario(partition: dict[str, Any]) -> dict[str, Any]:
    raw = tiny_scenario(latency={"model": "constant", "seconds": [1.0 + 0.5 * m for m in range(10)]},
                        budget={"time": 4.0})
    raw["data"] = {**raw["data"], "train_size": 1500, "classes": 5, "partition": partition}
    return raw


def test_run_uses_flowers_partition(write_scenario, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import simfl.launch.units as units
    from simfl.launch.experiment import load_dataset

    partition = {"kind": "flwr", "partitioner": "DirichletPartitioner", "clients": 10,
                 "options": {"alpha": 0.5, "partition_by": "label"}}
    path = write_scenario(flwr_scenario(partition))
    sizes: list[list[int]] = []
    federation = units.federation

    def watched(*args: Any, **kwargs: Any) -> Any:
        fed = federation(*args, **kwargs)
        sizes.append(list(fed.client_sizes))
        return fed

    monkeypatch.setattr(units, "federation", watched)
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert (tmp_path / "out" / "fedasync" / "seed0" / "metrics.csv").is_file()
    labels = load_dataset(validate(flwr_scenario(partition))).y_train.numpy()
    gen = stream(0)  # the run's seed 0: the partitioner's seed, then the row order
    seed, order = int(gen.integers(2**32)), gen.permutation(len(labels))
    own = flowers_own(fp.DirichletPartitioner, labels, order, num_partitions=10, partition_by="label", alpha=0.5,
                      seed=seed)
    assert sizes == [[len(p) for p in own]]


def test_validate_refuses_an_unknown_partitioner(write_scenario, capsys) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(flwr_scenario({"kind": "flwr", "partitioner": "DirichletPartitionr", "clients": 10}))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "data.partition.partitioner: unknown partitioner 'DirichletPartitionr'; allowed: " in err
    assert "DirichletPartitioner" in err and "IidPartitioner" in err
