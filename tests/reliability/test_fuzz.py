"""Hostile input: mutated scenario files, corrupt dataset files and corrupt trace logs.

Every example must end in exit code 0 or 2 with exactly one line on stderr for an
error (at most one otherwise), never a traceback.
"""

from __future__ import annotations

import copy
import gzip
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from simfl.cli import main
from tests.conftest import SHARED, tiny_scenario
from tests.reliability.hostile import fuzz

RAW_TRACES = SHARED / "latency_traces_raw"
FUZZ = fuzz(300)

HOSTILE: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1e308, -1e308, float("nan"), float("inf"), float("-inf"), 1e-320, 10**6]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20), st.sampled_from(["", "ünïcödé ☃", "\x00", "fedavg", "constant", "1e9", "[1,2"]),
    st.lists(st.integers(-3, 3), max_size=5),
    st.builds(lambda: list(range(5000))),
    st.recursive(st.integers(0, 3), lambda inner: st.dictionaries(st.text(max_size=3), inner, max_size=2)
                 | st.lists(inner, max_size=2), max_leaves=30),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path inside a nested mapping/list."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:10]):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(raw: dict[str, Any], data: st.DataObject, avoid_data: bool) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    raw.setdefault("rounds", {"deadline": 2.0, "over_select": 0.5})
    raw.setdefault("availability", {"p": 0.1, "rejoin_delay": 0.2, "departures": [{"client": 1, "leave": 1.0, "rejoin": 3.0}]})
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        paths = [p for p in _paths(raw) if not (avoid_data and p[0] in ("data", "model", "train", "budget", "eval"))]
        path = data.draw(st.sampled_from(paths), label="path")
        parent: Any = raw
        for key in path[:-1]:
            parent = parent[key]
        action = data.draw(st.sampled_from(["replace", "replace", "delete", "add"]), label="action")
        if action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[data.draw(st.text(max_size=8), label="key")] = data.draw(HOSTILE, label="value")
        else:
            parent[path[-1]] = data.draw(HOSTILE, label="value")
    return raw


def _check(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 if code == 2 else len(lines) <= 1, err


@FUZZ
@given(data=st.data())
def test_mutated_scenarios_validate_or_fail_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                       capsys: pytest.CaptureFixture[str], data: st.DataObject) -> None:
    raw = _mutate(tiny_scenario(), data, avoid_data=False)
    path = tmp_path_factory.mktemp("fuzz") / "s.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    _check(capsys, ["validate", str(path)])


@fuzz(12)
@given(data=st.data())
def test_mutated_scenarios_run_or_fail_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                  capsys: pytest.CaptureFixture[str], data: st.DataObject) -> None:
    raw = _mutate(tiny_scenario(algorithms=[{"name": "fedasync", "alpha": 0.5},
                                            {"name": "fedavg", "clients_per_round": 2}]), data, avoid_data=True)
    folder = tmp_path_factory.mktemp("fuzzrun")
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    _check(capsys, ["run", str(path), "--out", str(folder / "out"), "--quiet", "--verify", "--set", "budget.time=2",
                    "--set", "budget.updates=null", "--set", "eval.every=1"])


def _idx_files(root: Path) -> None:
    """Four small valid MNIST idx files (gzip)."""
    gen = np.random.default_rng(0)
    for name, shape in [("train-images-idx3-ubyte", (30, 28, 28)), ("train-labels-idx1-ubyte", (30,)),
                        ("t10k-images-idx3-ubyte", (10, 28, 28)), ("t10k-labels-idx1-ubyte", (10,))]:
        body = gen.integers(0, 10 if len(shape) == 1 else 256, size=shape, dtype=np.uint8)
        head = bytes([0, 0, 8, len(shape)]) + b"".join(int(n).to_bytes(4, "big") for n in shape)
        (root / f"{name}.gz").write_bytes(gzip.compress(head + body.tobytes()))


@fuzz(100)
@given(which=st.sampled_from(["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-labels-idx1-ubyte"]),
       gz=st.booleans(), cut=st.integers(0, 3000), flips=st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 255)),
                                                                   max_size=4))
def test_corrupt_mnist_files_fail_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                              capsys: pytest.CaptureFixture[str], which: str, gz: bool, cut: int,
                                              flips: list[tuple[int, int]]) -> None:
    root = tmp_path_factory.mktemp("mnist")
    _idx_files(root)
    target = root / f"{which}.gz"
    blob = bytearray(target.read_bytes() if gz else gzip.decompress(target.read_bytes()))
    for pos, value in flips:
        if blob:
            blob[pos % len(blob)] = value
    blob = blob[: max(0, len(blob) - cut)] if cut % 2 else blob
    if not gz:
        target.unlink()
        target = root / which
    target.write_bytes(bytes(blob))
    raw = tiny_scenario(data={"dataset": "mnist", "root": str(root), "partition": {"kind": "iid", "clients": 3}},
                        model={"name": "mlp", "hidden": [4]}, budget={"time": 2.0})
    path = root / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    _check(capsys, ["run", str(path), "--out", str(root / "out"), "--quiet"])


@pytest.fixture(scope="module")
def raw_traces() -> Path:
    if not (RAW_TRACES / "gw1_round_delay.txt").is_file():
        pytest.skip(f"raw latency logs not found at {RAW_TRACES}")
    return RAW_TRACES


@pytest.mark.data
@fuzz(100)
@given(file=st.sampled_from(["gw1_round_delay.txt", "gw1_comp_delay.txt", "gw2_round_delay.txt"]),
       edit=st.sampled_from(["cell", "drop_line", "truncate", "bytes", "empty", "columns"]),
       line=st.integers(0, 10**6), text=st.sampled_from(["nan", "-1", "inf", "x", "", "1e999", "☃", "0", "5,5", "\x00"]),
       junk=st.binary(max_size=40))
def test_corrupt_trace_logs_fail_in_one_line(raw_traces: Path, tmp_path_factory: pytest.TempPathFactory,
                                             capsys: pytest.CaptureFixture[str], file: str, edit: str, line: int,
                                             text: str, junk: bytes) -> None:
    folder = tmp_path_factory.mktemp("traces")
    for p in raw_traces.glob("gw*_delay.txt"):
        shutil.copyfile(p, folder / p.name)
    target = folder / file
    lines = target.read_bytes().splitlines()
    i = line % len(lines)
    if edit == "cell":
        cells = lines[i].split(b",")
        cells[line % len(cells)] = text.encode()
        lines[i] = b",".join(cells)
    elif edit == "drop_line":
        del lines[i]
    elif edit == "columns":
        lines[i] = lines[i] + b",0"
    elif edit == "bytes":
        lines[i] = junk
    elif edit == "empty":
        lines = []
    body = b"\n".join(lines)
    if edit == "truncate":
        body = body[: line % max(len(body), 1)]
    target.write_bytes(body)
    _check(capsys, ["traces", "import", str(folder), "--out", str(folder / "out")])
