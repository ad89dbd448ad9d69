"""Hostile input, part three (limits): no silent pooling, no hang, no user mistake called a bug, an API in Python.

Classes: report pooling (runs of one scenario name whose settings differ, refused naming both
folders and the key, or labelled apart with ``--apart``), network trackers (unreachable servers,
a store that is not SQLite, W&B online without a key: one line within seconds), API argument types
(a TypeError naming the argument), API iterators (an argument given as a generator or other iterator,
endless ones included, read once: what it holds is applied, never consumed by the check or read
forever), and the issue's remaining examples by name (a never-ending
run, a fleet period that unrolls without bound, HF without network, a latin-1 fleet CSV, bad
FedScale numbers, a corrupt parquet file, a binary sweep.yaml, tampered fetched files, workers
beyond the machine, a dict past the YAML limits). Counts per class go to
:data:`tests.reliability.hostile.COUNTS`.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import itertools
import pickle
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import simfl
from simfl.cli import main
from tests.conftest import tiny_scenario
from tests.data.helpers import write_mnist
from tests.reliability.hostile import COUNTS, bounded, cli, fuzz


def _write(folder: Path, raw: dict[str, Any], name: str = "s.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# -- report pooling -------------------------------------------------------------------------------------------------

CHANGES: dict[str, tuple[list[str], Any]] = {
    "train.lr": (["train", "lr"], 0.05),
    "train.epochs": (["train", "epochs"], 2),
    "train.batch_size": (["train", "batch_size"], 8),
    "budget.time": (["budget", "time"], 16.0),
    "eval.every": (["eval", "every"], 1.0),
    "data.partition.kind": (["data", "partition"], {"kind": "dirichlet", "alpha": 0.3, "clients": 3}),
    "data.train_size": (["data", "train_size"], 150),
    "data.features": (["data", "features"], 6),
    "model.hidden": (["model", "hidden"], [16]),
    "latency.seconds": (["latency", "seconds"], [1.0, 1.0, 4.0]),
    "algorithms[fedasync].alpha": (["algorithms"], [{"name": "fedasync", "alpha": 0.3}]),
    "algorithms[fedasync].staleness": (["algorithms"], [{"name": "fedasync", "alpha": 0.6,
                                                          "staleness": {"kind": "polynomial", "a": 0.9}}]),
    "train.momentum": (["train", "momentum"], 0.9),
    "budget.updates": (["budget"], {"time": 8.0, "updates": 5}),
    "algorithms[orthofl].beta": (["algorithms"], [{"name": "fedasync", "alpha": 0.6}, {"name": "orthofl", "beta": 0.9}]),
}


def _resolved(folder: Path, raw: dict[str, Any]) -> dict[str, Any]:
    """The resolved scenario (defaults filled in) as `simfl run` would write it."""
    from simfl.schema import scenario as scenario_mod

    return yaml.safe_load(scenario_mod.dump(scenario_mod.load(_write(folder, raw, "resolve.yaml"))))


def _fake_folder(folder: Path, scenario: dict[str, Any], seed: int) -> Path:
    """A result folder (scenario.yaml, summary.csv, one metrics.csv) of ``scenario``'s fedasync run ``seed``."""
    run = folder / "fedasync" / f"seed{seed}"
    run.mkdir(parents=True)
    (folder / "scenario.yaml").write_text(yaml.safe_dump({**scenario, "seeds": [seed]}, sort_keys=False))
    (folder / "summary.csv").write_text(
        "algorithm,seed,final_accuracy,best_accuracy,updates,virtual_time,wall_seconds,time_to_target\n"
        f"fedasync,{seed},0.5,0.5,4,8.0,0.1,\n")
    (run / "metrics.csv").write_text("virtual_time,updates,accuracy,loss\n0.0,0,0.3,1.0\n8.0,4,0.5,0.9\n")
    return folder


@pytest.mark.parametrize("apart", [False, True])
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_runs_with_different_settings_are_never_pooled_as_seeds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str, apart: bool) -> None:
    """The issue: `simfl report A B` pooled runs whose lr, budget, partition or beta differed as seeds of one."""
    first = tiny_scenario(algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "orthofl"}])
    base = _resolved(tmp_path, first)
    path, value = CHANGES[change]
    edited = yaml.safe_load(yaml.safe_dump(first))
    target = edited
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    other = _resolved(tmp_path, edited)
    a = _fake_folder(tmp_path / "a", base, 0)
    b = _fake_folder(tmp_path / "b", other, 1)
    before = _digests(tmp_path)
    argv = ["report", a, b, "--out", tmp_path / "rep"] + (["--apart"] if apart else [])
    _code, err = cli(capsys, argv, "report pooling", expect=0 if apart else 2)
    assert {k: v for k, v in _digests(tmp_path).items() if not k.startswith("rep/")} == before
    if apart:
        table = (tmp_path / "rep" / "table.csv").read_text()
        assert "tiny," in table and "tiny [b]," in table, table
    else:
        assert str(a) in err and str(b) in err and change.split(".")[0].split("[")[0] in err, err
        assert not (tmp_path / "rep").exists()


SAME = {"data.root": ("data", "root", "/elsewhere/datasets"), "tracking": ("tracking", None, {"tensorboard": {}}),
        "seeds": ("seeds", None, [7]), "labels order": ("algorithms", None, [{"alpha": 0.6, "name": "fedasync"}])}


@pytest.mark.parametrize("same", sorted(SAME))
def test_runs_that_differ_only_in_where_they_ran_pool(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], same: str) -> None:
    base = _resolved(tmp_path, tiny_scenario())
    other = yaml.safe_load(yaml.safe_dump(base))
    section, key, value = SAME[same]
    if key is None:
        other[section] = value
    else:
        other[section][key] = value
    a = _fake_folder(tmp_path / "a", base, 0)
    b = _fake_folder(tmp_path / "b", other, 1)
    cli(capsys, ["report", a, b, "--out", tmp_path / "rep"], "report pooling", expect=0)
    assert "tiny,fedasync,2," in (tmp_path / "rep" / "table.csv").read_text()  # two seeds of one setting


# -- network trackers ---------------------------------------------------------------------------------------------

TRACKERS: dict[str, tuple[dict[str, Any], str]] = {
    "mlflow closed port": ({"mlflow": {"uri": "http://127.0.0.1:9"}}, "cannot connect to 127.0.0.1:9"),
    "mlflow closed port https": ({"mlflow": {"uri": "https://127.0.0.1:9"}}, "cannot connect to 127.0.0.1:9"),
    "mlflow unknown host": ({"mlflow": {"uri": "http://no-such-host.invalid:5000"}}, "cannot connect"),
    "mlflow bad port": ({"mlflow": {"uri": "http://127.0.0.1:99999"}}, "port"),
    "mlflow no host": ({"mlflow": {"uri": "http://:5000"}}, "names no host"),
    "mlflow text db": ({"mlflow": {"uri": "sqlite:///{dir}/notes.db"}}, "not an SQLite database"),
    "mlflow binary db": ({"mlflow": {"uri": "sqlite:///{dir}/blob.db"}}, "not an SQLite database"),
    "mlflow default db": ({"mlflow": {}}, "not an SQLite database"),
    "wandb online without a key": ({"wandb": {"mode": "online"}}, "needs a W&B login"),
}


@pytest.mark.parametrize("case", sorted(TRACKERS))
def test_a_tracker_that_cannot_work_is_one_line_within_seconds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """The issue: an MLflow URI on a closed port printed nothing for over 120 s; W&B online without a key and a
    mlflow.db that is not SQLite were internal errors."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    (tmp_path / "notes.db").write_text("my notes, not a database\n")
    (tmp_path / "blob.db").write_bytes(bytes(range(256)))
    (tmp_path / "mlflow.db").write_text("a file of mine that happens to be called mlflow.db\n")
    tracking, expected = TRACKERS[case]
    tracking = yaml.safe_load(yaml.safe_dump(tracking).replace("{dir}", str(tmp_path)))
    scenario = _write(tmp_path, tiny_scenario(tracking=tracking))
    before = _digests(tmp_path)
    start = time.monotonic()
    _code, err = cli(capsys, ["run", scenario, "--out", tmp_path / "out", "--quiet", "--workers", "1"],
                     "network trackers", expect=2)
    assert time.monotonic() - start < 25, "took too long"
    assert expected in err and "tracking." in err, err
    assert {k: v for k, v in _digests(tmp_path).items() if k in before} == before
    assert not (tmp_path / "out").exists()


# -- API argument types --------------------------------------------------------------------------------------------

BAD_RUN_ARGUMENTS: dict[str, tuple[dict[str, Any], str]] = {
    "seeds=0": ({"seeds": 0}, "seeds"),
    "seeds='0'": ({"seeds": "0"}, "seeds"),
    "seeds=[0.5]": ({"seeds": [0.5]}, "seeds[0]"),
    "seeds=[True]": ({"seeds": [True]}, "seeds[0]"),
    "seeds={0: 1}": ({"seeds": {0: 1}}, "seeds"),
    "overrides=str": ({"overrides": "train.lr=0.1"}, "overrides"),
    "overrides=bytes": ({"overrides": b"train.lr=0.1"}, "overrides"),
    "overrides=[42]": ({"overrides": [42]}, "overrides[0]"),
    "overrides=[None]": ({"overrides": [None]}, "overrides[0]"),
    "overrides=dict": ({"overrides": {"train.lr": 0.1}}, "overrides"),
    "overrides=3": ({"overrides": 3}, "overrides"),
    "workers='2'": ({"workers": "2"}, "workers"),
    "workers=1.5": ({"workers": 1.5}, "workers"),
    "workers=True": ({"workers": True}, "workers"),
    "ray=1": ({"ray": 1}, "ray"),
    "out=3": ({"out": 3}, "out"),
    "force='yes'": ({"force": "yes"}, "force"),
    "quiet=1": ({"quiet": 1}, "quiet"),
    "allow_imports=1": ({"allow_imports": 1}, "allow_imports"),
}
BAD_SWEEP_ARGUMENTS: dict[str, tuple[dict[str, Any], str]] = {
    "over str values": ({"over": {"train.lr": "0.05"}}, "over['train.lr']"),
    "over list": ({"over": [("train.lr", [0.1])]}, "over must be a mapping"),
    "over number": ({"over": {"train.lr": 0.1}}, "over['train.lr']"),
    "over key": ({"over": {3: [0.1]}}, "over's keys"),
    "over dict values": ({"over": {"train.lr": {"a": 1}}}, "over['train.lr']"),
    "sweep seeds=0": ({"seeds": 0}, "seeds"),
    "sweep overrides=str": ({"overrides": "train.lr=0.1"}, "overrides"),
    "sweep overrides=[42]": ({"overrides": [42]}, "overrides[0]"),
}


@pytest.mark.parametrize("case", sorted(BAD_RUN_ARGUMENTS))
def test_a_wrong_argument_type_of_run_is_a_type_error_naming_it(tmp_path: Path, case: str) -> None:
    """The issue: `seeds=0`, `overrides="train.lr=0.1"` (iterated per character) and `overrides=[42]` gave raw
    errors that did not name the argument."""
    kwargs, name = BAD_RUN_ARGUMENTS[case]
    with pytest.raises(TypeError, match="^" + re.escape(name) + " must be"):
        simfl.run(tiny_scenario(), **{"out": tmp_path / "o", **kwargs})
    assert not (tmp_path / "o").exists()
    COUNTS[("API argument types", "TypeError")] += 1


@pytest.mark.parametrize("case", sorted(BAD_SWEEP_ARGUMENTS))
def test_a_wrong_argument_type_of_sweep_is_a_type_error_naming_it(tmp_path: Path, case: str) -> None:
    """The issue: `over={"train.lr": "0.05"}` made cells '0', '.', ...; `over=[...]` gave a raw error."""
    kwargs, name = BAD_SWEEP_ARGUMENTS[case]
    with pytest.raises(TypeError, match=re.escape(name)):
        simfl.sweep(tiny_scenario(), **{"out": tmp_path / "o", **kwargs})
    assert not (tmp_path / "o").exists()
    COUNTS[("API argument types", "TypeError")] += 1


def _shared_levels(levels: int) -> list[Any]:
    item: list[Any] = [0] * 10
    for _ in range(levels):
        item = [item] * 10
    return item


@pytest.mark.parametrize("where", ["scenario", "over"])
def test_a_dict_passed_to_the_api_has_the_limits_of_yaml(tmp_path: Path, where: str) -> None:
    """The issue: a 9-level shared-reference list in a dict reached MemoryError after 25 s."""
    start = time.monotonic()
    deep = _shared_levels(9)
    with pytest.raises(ValueError, match="holds more than"):
        if where == "scenario":
            simfl.run(tiny_scenario(latency={"model": "constant", "seconds": deep}), out=tmp_path / "o")
        else:
            simfl.sweep(tiny_scenario(), over={"train.lr": deep}, out=tmp_path / "o")
    nested: Any = 1
    for _ in range(80):
        nested = {"k": nested}
    with pytest.raises(ValueError, match="nested deeper"):
        simfl.run(tiny_scenario(extra=nested), out=tmp_path / "o")
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="contains itself"):
        simfl.run(tiny_scenario(extra=looped), out=tmp_path / "o")
    assert time.monotonic() - start < 10 and not (tmp_path / "o").exists()
    COUNTS[("API argument types", "ValueError")] += 3


# -- API iterators ------------------------------------------------------------------------------------------------


def _generator(items: list[Any]) -> Any:
    yield from items


def _endless(items: list[Any]) -> Any:
    while True:
        yield from items or [0]


FINITE: dict[str, Any] = {
    "generator": _generator,
    "iter(list)": lambda items: iter(list(items)),
    "iter(tuple)": lambda items: iter(tuple(items)),
    "map": lambda items: map(lambda x: x, items),
    "filter": lambda items: filter(lambda x: True, items),
    "chain": lambda items: itertools.chain(items[:1], items[1:]),
    "reversed": lambda items: reversed(list(reversed(items))),
    "islice": lambda items: itertools.islice(itertools.chain(items, itertools.count()), len(items)),
    "enumerate": lambda items: (x for _, x in enumerate(items)),
    "tuple": tuple,
}
"""Iterables holding ``items`` once: iterators (read once) and, as a control, a tuple."""
ENDLESS: dict[str, Any] = {
    "count": lambda items: itertools.count(),
    "cycle": lambda items: itertools.cycle(items or [0]),
    "repeat": lambda items: itertools.repeat(items[0] if items else 0),
    "generator": _endless,
    "chain with count": lambda items: itertools.chain(items, itertools.count()),
}
"""Iterators that never end."""

PROBES: dict[str, tuple[list[Any], type[Exception], str]] = {
    # argument: (items that show they were read, the exception they give, words of its message)
    "run seeds": ([0, 0], ValueError, "seeds must be distinct"),
    "run seeds negative": ([3, -1], ValueError, "seeds"),
    "run seeds wrong type": ([0, "1"], TypeError, "seeds[1] must be an integer"),
    "run overrides": (["train.lr=-1"], ValueError, "train.lr"),
    "run overrides later": (["train.epochs=1", "budget.time=-3"], ValueError, "budget.time"),
    "run overrides wrong type": (["train.lr=0.1", 7], TypeError, "overrides[1] must be"),
    "sweep seeds": ([1, 1], ValueError, "seeds must be distinct"),
    "sweep overrides": (["eval.every=-2"], ValueError, "eval.every"),
    "sweep over values": ([0.1, -1.0], ValueError, "sweep cell [train.lr=-1.0]"),
    "sweep over section": ([{"model": "constant", "seconds": -1.0}], ValueError, "latency"),
    "scenario seeds": ([0, 0], ValueError, "seeds must be distinct"),
    "scenario algorithms": ([{"name": "fedasync", "alpha": 7.0}], ValueError, "alpha"),
    "scenario latency seconds": ([1.0, -2.0], ValueError, "latency.seconds"),
}


def _call(argument: str, tmp: Path, value: Any) -> Any:
    """``simfl.run`` or ``simfl.sweep`` with ``value`` in the place ``argument`` names."""
    out = tmp / "o"
    what, _, name = argument.partition(" ")
    name = name.split(" ")[0]
    if what == "scenario":
        raw = tiny_scenario()
        if name == "latency":
            raw["latency"] = {"model": "constant", "seconds": value}
        else:
            raw[name] = value
        return simfl.run(raw, out=out)
    if what == "run":
        return simfl.run(tiny_scenario(), out=out, **{name: value})
    if name == "over":
        key = "latency" if argument.endswith("section") else "train.lr"
        return simfl.sweep(tiny_scenario(), over={key: value}, out=out)
    return simfl.sweep(tiny_scenario(sweep={"train.lr": [0.1]}), out=out, **{name: value})


def _refused_in_time(tmp: Path, argument: str, value: Any, errors: Any) -> BaseException:
    """Call the API with ``value`` as ``argument``: it must raise one of ``errors`` within 20 s, writing nothing."""
    start = time.monotonic()
    with bounded(20), pytest.raises(errors) as caught:
        _call(argument, tmp, value)
    assert time.monotonic() - start < 20 and not (tmp / "o").exists()
    return caught.value


@fuzz(150)
@given(argument=st.sampled_from(sorted(PROBES)), wrapper=st.sampled_from(sorted(FINITE)))
def test_an_iterator_argument_is_read_once_and_what_it_holds_applies(
        tmp_path_factory: pytest.TempPathFactory, argument: str, wrapper: str) -> None:
    """The issue: overrides=<a generator> ran with none of them applied; seeds=<a generator> found no seed."""
    tmp = tmp_path_factory.mktemp("iterators")
    items, error, words = PROBES[argument]
    caught = _refused_in_time(tmp, argument, FINITE[wrapper](items), error)
    assert words in str(caught) and "\n" not in str(caught), str(caught)
    COUNTS[("API iterators", error.__name__)] += 1


@fuzz(65)
@given(argument=st.sampled_from(sorted(PROBES)), wrapper=st.sampled_from(sorted(ENDLESS)))
def test_an_endless_iterator_argument_is_refused_at_once(
        tmp_path_factory: pytest.TempPathFactory, argument: str, wrapper: str) -> None:
    """The issue: seeds=itertools.count() and over={'train.lr': itertools.count()} spun or ate memory."""
    tmp = tmp_path_factory.mktemp("endless")
    items, _, _ = PROBES[argument]
    caught = _refused_in_time(tmp, argument, ENDLESS[wrapper](items), (TypeError, ValueError))
    text = str(caught)
    assert "more than 200000 items" in text or (isinstance(caught, TypeError) and " must be" in text), text
    COUNTS[("API iterators", type(caught).__name__)] += 1


@pytest.mark.parametrize("call", ["run", "sweep"])
def test_generators_give_the_results_of_lists(tmp_path: Path, call: str) -> None:
    """An iterator argument runs exactly what the same items in a list run."""
    tables = []
    for kind in ("list", "generator"):
        wrap = list if kind == "list" else _generator
        overrides = wrap(["train.lr=0.05", "budget.time=4"])
        if call == "run":
            done = simfl.run(tiny_scenario(), out=tmp_path / kind, seeds=wrap([2, 1]), overrides=overrides)
        else:
            done = simfl.sweep(tiny_scenario(), over={"train.epochs": wrap([1, 2])}, out=tmp_path / kind,
                               seeds=wrap([1]), overrides=overrides)
        tables.append(done.summary.drop(columns=["wall_seconds"]))
    assert tables[0].equals(tables[1]) and len(tables[0]) == 2, tables
    assert "lr: 0.05" in (tmp_path / "generator" / ("" if call == "run" else "epochs=1__seed=1")
                          / "scenario.yaml").read_text()
    COUNTS[("API iterators", "ok")] += 1


# -- the other examples, by name ------------------------------------------------------------------------------


def test_a_never_ending_run_is_refused_by_its_estimate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue: `train.epochs=1e12` was estimated at 571 million hours, accepted, and ran forever."""
    scenario = _write(tmp_path, tiny_scenario())
    for command in (["validate", scenario], ["run", scenario, "--out", tmp_path / "o", "--quiet"],
                    ["sweep", scenario, "--out", tmp_path / "o", "--quiet", "--set", "sweep={train.lr: [0.1]}"]):
        _code, err = cli(capsys, [*command, "--set", "train.epochs=1000000000000"], "estimate limits", expect=2)
        assert "wall time" in err and "--max-hours" in err, err
    _code, err = cli(capsys, ["validate", scenario, "--set", "train.epochs=100000000", "--max-hours", "0.001"],
                     "estimate limits", expect=2)
    assert "--max-hours" in err
    cli(capsys, ["validate", scenario, "--max-hours", "1"], "estimate limits", expect=0)
    assert not (tmp_path / "o").exists()


def _fleet(folder: Path, rows: list[str], encoding: str = "utf-8") -> Path:
    path = folder / "fleet.csv"
    path.write_bytes(("\n".join(["client,seconds_per_sample,bandwidth,windows,period", *rows]) + "\n").encode(encoding))
    return path


@pytest.mark.parametrize("trace", ["fleet_csv", "fedscale"])
def test_a_fleet_period_that_unrolls_without_bound_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], trace: str) -> None:
    """The issue: a fleet trace with `period: 1e-9` passed the estimate and was killed for memory after 108 s."""
    if trace == "fleet_csv":
        _fleet(tmp_path, [f"{i},0.001,1e6,0-0.0000005,0.000001" for i in range(3)])
        latency = {"model": "fleet_csv", "path": "fleet.csv", "horizon": 8.0}
    else:
        (tmp_path / "capacity").write_bytes(pickle.dumps({i: {"computation": 10.0, "communication": 1000.0}
                                                          for i in range(3)}))
        (tmp_path / "behave").write_bytes(pickle.dumps({i: {"active": [0.0], "inactive": [5e-10],
                                                            "finish_time": 1e-9} for i in range(3)}))
        latency = {"model": "fedscale", "path": "capacity", "behavior": "behave", "horizon": 8.0}
    scenario = _write(tmp_path, tiny_scenario(latency=latency))
    start = time.monotonic()
    for command in (["validate", scenario], ["run", scenario, "--out", tmp_path / "o", "--quiet"]):
        _code, err = cli(capsys, command, "estimate limits", expect=2)
        assert "availability windows" in err and ("fleet.csv" in err or "capacity" in err), err
    assert time.monotonic() - start < 20 and not (tmp_path / "o").exists()


def test_a_latin1_fleet_csv_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue: a latin-1 fleet CSV was an internal error."""
    path = tmp_path / "fleet.csv"
    path.write_bytes("client,seconds_per_sample,bandwidth,windows\n0,0.001,1e6,café\n".encode("latin-1"))
    scenario = _write(tmp_path, tiny_scenario(latency={"model": "fleet_csv", "path": "fleet.csv"}))
    _code, err = cli(capsys, ["validate", scenario], "data files", expect=2)
    assert "fleet.csv" in err and "UTF-8" in err, err


@pytest.mark.parametrize("bad", ["text", "nan", "inf", "negative", "none", "list"])
def test_bad_numbers_in_fedscale_traces_are_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str) -> None:
    """The issue: bad numbers in FedScale pickles were internal errors."""
    value = {"text": "soon", "nan": float("nan"), "inf": float("inf"), "negative": -4.0, "none": None,
             "list": [1, 2]}[bad]
    (tmp_path / "capacity").write_bytes(pickle.dumps({i: {"computation": 10.0, "communication": 1000.0}
                                                      for i in range(3)}))
    (tmp_path / "behave").write_bytes(pickle.dumps({i: {"active": [0.0, value], "inactive": [5.0, 30.0],
                                                        "finish_time": 40.0} for i in range(3)}))
    scenario = _write(tmp_path, tiny_scenario(latency={"model": "fedscale", "path": "capacity", "behavior": "behave",
                                                       "horizon": 8.0}))
    _code, err = cli(capsys, ["validate", scenario], "data files", expect=2)
    assert "behave" in err, err


def test_a_corrupt_parquet_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue: a corrupt parquet file was an internal error."""
    pytest.importorskip("datasets")
    data = tmp_path / "hfdata"
    data.mkdir()
    (data / "train.parquet").write_bytes(b"PAR1" + bytes(range(200)) + b"PAR1")
    scenario = _write(tmp_path, tiny_scenario(data={"dataset": "hf", "root": "hfdata", "features": ["x"],
                                                    "label": "y", "partition": {"kind": "iid", "clients": 3}}))
    _code, err = cli(capsys, ["run", scenario, "--out", tmp_path / "o", "--quiet", "--workers", "1"], "data files",
                     expect=2)
    assert "hfdata" in err and "cannot be read" in err, err
    assert not (tmp_path / "o").exists()


def test_hf_download_without_network_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue: an HF dataset with `download: true` and no network printed 12 lines in 26 s, then an internal
    error. The hub endpoint here is a closed local port: no network."""
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    scenario = _write(tmp_path, tiny_scenario(data={"dataset": "hf", "name": "someone/data", "download": True,
                                                    "features": ["x"], "label": "y",
                                                    "partition": {"kind": "iid", "clients": 3}}))
    start = time.monotonic()
    _code, err = cli(capsys, ["run", scenario, "--out", tmp_path / "o", "--quiet", "--workers", "1"], "data files",
                     expect=2)
    assert "data.name someone/data" in err and "cannot connect" in err, err
    assert time.monotonic() - start < 20 and not (tmp_path / "o").exists()


@pytest.mark.parametrize("content", [bytes(range(256)), b"\xff\xfe\x00n\x00a", b"name: other\n"])
def test_a_binary_or_foreign_sweep_yaml_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes) -> None:
    """The issue: a binary sweep.yaml in the output folder was an internal error."""
    scenario = _write(tmp_path, tiny_scenario())
    out = tmp_path / "o"
    out.mkdir()
    (out / "sweep.yaml").write_bytes(content)
    _code, err = cli(capsys, ["sweep", scenario, "--out", out, "--quiet", "--set", "sweep={train.lr: [0.1]}"],
                     "data files", expect=2)
    assert "sweep.yaml differs" in err, err
    assert (out / "sweep.yaml").read_bytes() == content and [p.name for p in out.iterdir()] == ["sweep.yaml"]


@pytest.fixture
def generated_mnist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Generated MNIST files (idx and .gz) in a fetch root, with their checksums standing in for the published
    ones, so that each check of ``simfl data fetch`` is what refuses each tampering."""
    from simfl.data import download, verify

    raw = tmp_path / "root" / "MNIST" / "raw"
    write_mnist(raw, compress=False)
    write_mnist(raw, compress=True)
    source = download.SOURCES["mnist"]
    files = tuple(dataclasses.replace(r, digest="md5:" + hashlib.md5((raw / r.name).read_bytes()).hexdigest())
                  for r in source.files)
    monkeypatch.setitem(download.SOURCES, "mnist", dataclasses.replace(source, files=files))
    monkeypatch.setitem(verify.UNPACKED_DIGESTS, "mnist", {
        r.name[:-3]: "md5:" + hashlib.md5((raw / r.name[:-3]).read_bytes()).hexdigest() for r in source.files})
    return tmp_path / "root"


TAMPERING = {
    "idx byte": "differs from its copy in t10k-labels-idx1-ubyte.gz",
    "truncated idx": "differs from its copy in t10k-labels-idx1-ubyte.gz",
    "gz byte": "t10k-labels-idx1-ubyte.gz: ",
    "idx without its archive": "t10k-labels-idx1-ubyte: md5 is",
    "labels out of range, nothing published": "outside 0..9",
}


@pytest.mark.parametrize("tamper", sorted(TAMPERING))
def test_fetch_checks_files_already_present(
        generated_mnist: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tamper: str) -> None:
    """The issue: `simfl data fetch` said "ready" for tampered files without checking them."""
    from simfl.data import verify

    raw = generated_mnist / "MNIST" / "raw"
    idx, gz = raw / "t10k-labels-idx1-ubyte", raw / "t10k-labels-idx1-ubyte.gz"
    data = bytearray(idx.read_bytes())
    if tamper == "gz byte":
        packed = bytearray(gz.read_bytes())
        packed[len(packed) // 2] ^= 0xFF
        gz.write_bytes(bytes(packed))
    elif tamper == "truncated idx":
        idx.write_bytes(bytes(data[:-3]))
    else:
        data[-1] = 42 if tamper.startswith("labels") else data[-1] ^ 1
        idx.write_bytes(bytes(data))
        if tamper != "idx byte":
            gz.unlink()
        if tamper.startswith("labels"):
            monkeypatch.setitem(verify.UNPACKED_DIGESTS, "mnist", {})
    before = _digests(generated_mnist)
    _code, err = cli(capsys, ["data", "fetch", "mnist", "--root", generated_mnist, "--quiet"], "data files", expect=2)
    assert TAMPERING[tamper] in err and "fetch mnist --force" in err, err
    assert _digests(generated_mnist) == before


def test_fetch_of_intact_files_says_what_it_checked(generated_mnist: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["data", "fetch", "mnist", "--root", str(generated_mnist)])
    out, err = capsys.readouterr()
    assert code == 0 and "ready in" in out, err
    assert err.count("matches the published checksum") == 8 and "content read by simfl's loader" in err, err


@pytest.mark.data
def test_fetch_accepts_the_real_mnist_recompressed_and_refuses_one_changed_byte(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The published checksums themselves, on the real files (their .gz recompressed, their content official)."""
    from simfl.data.files import data_root

    shared = data_root(None) / "mnist"
    if not (shared / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("the real MNIST files are not in the data folder")
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for gz in shared.glob("*.gz"):
        shutil.copyfile(gz, raw / gz.name)
        (raw / gz.stem).write_bytes(gzip.decompress(gz.read_bytes()))
    cli(capsys, ["data", "fetch", "mnist", "--root", tmp_path, "--quiet"], "data files", expect=0)
    labels = raw / "train-labels-idx1-ubyte"
    data = bytearray(labels.read_bytes())
    data[100] = (data[100] + 1) % 10  # a valid label, so only a checksum can tell
    labels.write_bytes(bytes(data))
    (raw / "train-labels-idx1-ubyte.gz").unlink()
    _code, err = cli(capsys, ["data", "fetch", "mnist", "--root", tmp_path, "--quiet"], "data files", expect=2)
    assert "train-labels-idx1-ubyte: md5 is" in err and "not the published a25bea73" in err, err


def test_workers_beyond_the_machine_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue: `simfl sweep --workers` had no upper bound."""
    scenario = _write(tmp_path, tiny_scenario())
    for command in (["sweep", scenario, "--set", "sweep={train.lr: [0.1, 0.2]}"], ["run", scenario]):
        _code, err = cli(capsys, [*command, "--out", tmp_path / "o", "--workers", "100000", "--quiet"],
                         "API argument types", expect=2)
        assert "--workers" in err, err
    assert not (tmp_path / "o").exists()
    shutil.rmtree(tmp_path / "o", ignore_errors=True)
