"""Hostile input, part three (safety): no code runs from the files users exchange.

Classes: malicious data files (pickled calls in every CIFAR and FedScale file simfl reads, at
every nesting and pickle protocol), and the examples of the issue by name (a CIFAR batch, archive
and CIFAR-100 file holding ``os.system`` read by ``simfl run``). Every case ends in one line and
exit 2 (or an :class:`InputError` naming the file), and the marker file a payload would create
(``PWNED``) never appears. Counts per class go to :data:`tests.reliability.hostile.COUNTS`.
"""

from __future__ import annotations

import builtins
import functools
import os
import pickle
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from simfl import unpickle
from simfl.data.cifar import Cifar10, Cifar100
from simfl.errors import InputError
from simfl.latency.fedscale import read_fedscale
from tests.data.helpers import write_cifar
from tests.reliability.hostile import COUNTS, cli

PART = {"kind": "iid", "clients": 2}


class Call:
    """Pickles as a call of ``function(*args)``: what unpickling it would run."""

    def __init__(self, function: Any, *args: Any) -> None:
        self.function, self.args = function, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.function, self.args


def payloads(marker: Path) -> dict[str, Any]:
    """Objects whose unpickling would create ``marker`` (each by another route)."""
    m = str(marker)
    inner = pickle.dumps(Call(os.system, f"touch {m}"))
    return {
        "os.system": Call(os.system, f"touch {m}"),
        "subprocess.call": Call(subprocess.call, ["touch", m]),
        "exec": Call(builtins.exec, f"open({m!r}, 'w').close()"),
        "eval": Call(builtins.eval, f"open({m!r}, 'w').close()"),
        "open": Call(builtins.open, m, "w"),
        "partial": Call(functools.partial(os.system, f"touch {m}")),
        "shutil.copy": Call(shutil.copy, __file__, m),
        "numpy.save": Call(np.save, m, np.zeros(1)),
        "torch.save": Call(torch.save, {}, m),
        "nested pickle.loads": Call(pickle.loads, inner),
        "getattr route": Call(getattr, os.system, "__call__"),
    }


NESTINGS = ["top", "in_dict", "in_list"]
LOCATIONS = ["cifar10_batch", "cifar10_test", "cifar10_archive", "cifar100_train", "cifar100_archive",
             "fedscale_capacity", "fedscale_behave"]
PAYLOADS = list(payloads(Path("x")))
CASES = [(p, n, loc, (i + j + k) % 6) for i, p in enumerate(PAYLOADS) for j, n in enumerate(NESTINGS)
         for k, loc in enumerate(LOCATIONS)]


def nest(payload: Any, nesting: str, key: str | None) -> Any:
    """``payload`` as the whole file, or deep inside data of the file's format (``key``: None for FedScale)."""
    if nesting == "top":
        return payload
    if key is None:
        return {1: {"computation": payload}} if nesting == "in_dict" else {1: [payload]}
    if nesting == "in_dict":
        return {"data": np.zeros((1, 3072), dtype=np.uint8), key: [0], "extra": {"x": payload}}
    return {"data": np.zeros((1, 3072), dtype=np.uint8), key: [0, payload]}


def plant(root: Path, location: str, blob: bytes) -> Any:
    """Write benign files for ``location`` with ``blob`` in place of one of them; returns how to read them."""
    if location.startswith("fedscale"):
        capacity, behave = root / "capacity", root / "behave"
        capacity.write_bytes(pickle.dumps({1: {"computation": 10.0, "communication": 800.0}}))
        behave.write_bytes(pickle.dumps({1: {"active": [0], "inactive": [50], "finish_time": 100}}))
        (capacity if location == "fedscale_capacity" else behave).write_bytes(blob)
        return lambda: read_fedscale(str(capacity), str(behave), 3.0)
    classes = 10 if location.startswith("cifar10_") else 100
    folder = root / ("cifar-10-batches-py" if classes == 10 else "cifar-100-python")
    name = {"cifar10_batch": "data_batch_1", "cifar10_test": "test_batch", "cifar10_archive": "data_batch_2",
            "cifar100_train": "train", "cifar100_archive": "test"}[location]
    write_cifar(root, classes)
    (folder / name).write_bytes(blob)
    if location.endswith("archive"):
        archive = root / ("cifar-10-python.tar.gz" if classes == 10 else "cifar-100-python.tar.gz")
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(folder, arcname=folder.name)
        shutil.rmtree(folder)
    loader, config = (Cifar10, Cifar10.Config) if classes == 10 else (Cifar100, Cifar100.Config)
    return lambda: loader.load(config(root=root, partition=PART))


@pytest.mark.parametrize(("payload", "nesting", "location", "protocol"), CASES,
                         ids=[f"{p}-{n}-{loc}-p{pr}" for p, n, loc, pr in CASES])
def test_a_pickled_call_in_a_data_file_never_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payload: str,
                                                  nesting: str, location: str, protocol: int) -> None:
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    key = None if location.startswith("fedscale") else "fine_labels" if location.startswith("cifar100") else "labels"
    blob = pickle.dumps(nest(payloads(marker)[payload], nesting, key), protocol=protocol)
    (tmp_path / "data").mkdir()
    read = plant(tmp_path / "data", location, blob)
    with pytest.raises(InputError) as err:
        read()
    assert "\n" not in str(err.value) and "refusing" in str(err.value)
    assert not marker.exists()
    COUNTS[("malicious data files", "refused")] += 1


def test_the_restricted_unpickler_reads_what_the_formats_hold() -> None:
    """Plain data, bytes (protocol 2 from Python 3 goes through _codecs.encode) and numpy arrays come back."""
    data = {"a": [1, 2.5, "x", b"\x00\xff", (True, None)], "n": np.arange(6, dtype=np.uint8).reshape(2, 3),
            "s": np.float32(1.5), "set": {1, 2}, "fs": frozenset({3})}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        got = unpickle.loads(pickle.dumps(data, protocol=protocol), arrays=True)
        assert got["a"] == data["a"] and got["set"] == {1, 2} and got["fs"] == frozenset({3})
        assert (got["n"] == data["n"]).all() and got["n"].dtype == np.uint8 and got["s"] == np.float32(1.5)
    with pytest.raises(unpickle.Refused):
        unpickle.loads(pickle.dumps({"n": np.zeros(2)}))  # arrays only where the format holds them


# -- the examples, end to end through `simfl run` --------------------------------------------------


def _cifar_scenario(folder: Path, dataset: str) -> Path:
    raw = {"name": "evil", "seeds": [0],
           "data": {"dataset": dataset, "root": "data", "partition": {"kind": "iid", "clients": 2}},
           "model": {"name": "smallcnn", "channels": 4}, "train": {"epochs": 1, "batch_size": 8, "lr": 0.1},
           "latency": {"model": "constant", "seconds": [1.0, 2.0]}, "budget": {"time": 2.0}, "eval": {"every": 1.0},
           "algorithms": [{"name": "fedasync"}]}
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize("location", ["cifar10_batch", "cifar10_archive", "cifar100_train"])
def test_a_downloaded_bundle_with_os_system_in_a_cifar_file_runs_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], location: str) -> None:
    """The issue's bundle: a scenario with data.root: data beside a batch holding a pickled os.system call."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    plant(tmp_path / "data", location, pickle.dumps(Call(os.system, f"touch {marker}")))
    scenario = _cifar_scenario(tmp_path, "cifar100" if location.startswith("cifar100") else "cifar10")
    before = scenario.read_bytes()
    _code, err = cli(capsys, ["run", scenario, "--out", tmp_path / "out", "--quiet"], "malicious data files", expect=2)
    assert "refusing posix.system" in err or "refusing os.system" in err, err
    assert not marker.exists() and scenario.read_bytes() == before
    assert not (tmp_path / "out").exists()


# -- import paths ----------------------------------------------------------------------------------------------

FIELDS = ["algorithm", "dataset", "model", "latency"]
MODULES = ["evil", "evil_pkg.mod", "evil2"]


def _evil_scenario(folder: Path, field: str, path: str) -> Path:
    raw: dict[str, Any] = {"name": "evil", "seeds": [0],
                           "data": {"dataset": "synthetic", "train_size": 60, "test_size": 30, "features": 4,
                                    "classes": 3, "partition": {"kind": "iid", "clients": 3}},
                           "model": {"name": "mlp", "hidden": [4]}, "train": {"epochs": 1, "batch_size": 16},
                           "latency": {"model": "constant", "seconds": [1.0, 2.0, 3.0]}, "budget": {"time": 4.0},
                           "eval": {"every": 2.0}, "algorithms": [{"name": "fedasync"}]}
    if field == "algorithm":
        raw["algorithms"] = [{"name": path}]
    elif field == "dataset":
        raw["data"] = {"dataset": path, "partition": {"kind": "iid", "clients": 3}}
    elif field == "model":
        raw["model"] = {"name": path}
    else:
        raw["latency"] = {"model": path}
    scenario = folder / "s.yaml"
    scenario.write_text(yaml.safe_dump(raw))
    return scenario


def _plant_module(folder: Path, module: str, marker: Path) -> None:
    parts = module.split(".")
    for i in range(len(parts) - 1):
        pkg = folder.joinpath(*parts[: i + 1])
        pkg.mkdir(exist_ok=True)
        (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'a').close()\n")
    folder.joinpath(*parts[:-1], f"{parts[-1]}.py").write_text(
        f"open({str(marker)!r}, 'a').close()\n\nclass X:\n    pass\n")


@pytest.mark.parametrize("command", ["validate", "run", "sweep"])
@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("module", MODULES)
def test_an_import_path_in_a_scenario_runs_nothing_without_permission(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str, field: str,
        module: str) -> None:
    """The issue's `algorithms[0].name: evil:X`: evil.py's top-level code ran on `simfl validate`."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SIMFL_ALLOW_IMPORTS", raising=False)
    marker = tmp_path / "PWNED"
    _plant_module(tmp_path, module, marker)
    scenario = _evil_scenario(tmp_path, field, f"{module}:X")
    args = [command, scenario] + ([] if command == "validate" else ["--out", tmp_path / "out", "--quiet"])
    if command == "sweep":
        args += ["--set", "sweep={train.lr: [0.1, 0.2]}"]
    _code, err = cli(capsys, args, "import paths", expect=2)
    assert f"'{module}:X' is an import path" in err and "--allow-imports" in err, err
    assert not marker.exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("field", FIELDS)
def test_with_permission_the_module_is_imported_and_its_class_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], field: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SIMFL_ALLOW_IMPORTS", raising=False)
    marker = tmp_path / "PWNED"
    _plant_module(tmp_path, f"evil_{field}", marker)
    scenario = _evil_scenario(tmp_path, field, f"evil_{field}:X")
    _code, err = cli(capsys, ["validate", scenario, "--allow-imports"], "import paths", expect=2)
    assert "is not a valid" in err and marker.exists()  # imported on the user's word, then refused as no component
    assert "SIMFL_ALLOW_IMPORTS" not in os.environ  # the permission ends with the command


def test_the_environment_variable_and_the_api_keyword_allow_import_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import simfl

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SIMFL_ALLOW_IMPORTS", raising=False)
    # A module of this test's own: one another test passed as a class object would already be known (and allowed).
    (tmp_path / "api_own_rule.py").write_text(
        "from simfl.algorithms.fedasync import FedAsync\n\n\nclass Mine(FedAsync):\n    pass\n")
    raw = yaml.safe_load(_evil_scenario(tmp_path, "algorithm", "api_own_rule:Mine").read_text())
    with pytest.raises(InputError, match="is an import path"):
        simfl.run(raw, out=tmp_path / "a")
    assert not (tmp_path / "a").exists()
    assert simfl.run(raw, out=tmp_path / "b", allow_imports=True).summary.shape[0] == 1
    monkeypatch.setenv("SIMFL_ALLOW_IMPORTS", "1")
    assert simfl.run(raw, out=tmp_path / "c").summary.shape[0] == 1
