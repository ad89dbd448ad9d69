"""Hostile input, class by class: every case ends in exit 0 or in one line and exit 2, within a time bound.

Classes: output paths, resume folders, report inputs, trace files, data files, YAML bombs, overflowing
parameters, memory and time estimates, model/data mismatch. Each is property-based (hypothesis, with
``derandomize``: a fixed set of examples on every run) and calls the CLI in-process. Beyond the exit
code, the data-loss properties are checked: a file simfl did not write is never removed or changed.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from hypothesis import assume, given
from hypothesis import strategies as st

from simfl import outdir
from simfl.launch.checkpoint import CHECKPOINT_FILE
from simfl.models import MODELS
from tests.conftest import tiny_scenario
from tests.reliability.helpers import interrupted_run
from tests.reliability.hostile import cli, fuzz

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "latency_traces"

HUGE = st.sampled_from([1e308, -1e308, 1e300, 1e-320, 5e-324, 2**63, 2**70, -(2**70), 10**400, float("nan"),
                        float("inf"), float("-inf"), 0, -1, 1e20, 1e-9, "1e999", "NaN", True, None, [], {}])
NUMBER = st.one_of(HUGE, st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**80), 2**80))


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` (not following links) and a hash of its bytes."""
    out: dict[str, str] = {}
    for root, _dirs, files in os.walk(folder):
        for name in files:
            p = Path(root) / name
            if not p.is_symlink():
                out[str(p.relative_to(folder))] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out


# -- output paths --------------------------------------------------------------------------------------------

OUT_KINDS = ["dot", "dotdot", "root", "proc", "sys", "dev", "under_file", "long_name", "long_path", "nul",
             "symlink_dir", "symlink_dangling", "foreign_folder", "foreign_folder_force", "ours_force",
             "fresh", "empty_dir", "partial_foreign", "file"]


def _out_path(kind: str, base: Path, text: str) -> tuple[str, list[str]]:
    """An --out value of ``kind`` under ``base`` (prepared on disk) and extra CLI options."""
    if kind == "dot":
        return ".", []
    if kind == "dotdot":
        return "..", ["--force"]
    if kind == "root":
        return "/", ["--force"]
    if kind in ("proc", "sys", "dev"):
        return f"/{kind}/simfl-{abs(hash(text)) % 1000}", []
    if kind == "under_file":
        (base / "f.txt").write_text("user file")
        return str(base / "f.txt" / "sub"), []
    if kind == "long_name":
        return str(base / ("n" * (256 + len(text)))), []
    if kind == "long_path":
        return str(base / "/".join(["d" * 200] * 25)), []
    if kind == "nul":
        return str(base / f"a\x00{text}"), []
    if kind == "symlink_dir":
        (base / "real").mkdir(exist_ok=True)
        (base / "real" / "mine.txt").write_text("user file")
        (base / "link").symlink_to(base / "real")
        return str(base / "link"), ["--force"]
    if kind == "symlink_dangling":
        (base / "dangling").symlink_to(base / "nowhere")
        return str(base / "dangling"), []
    if kind in ("foreign_folder", "foreign_folder_force"):
        (base / "foreign").mkdir()
        (base / "foreign" / "thesis.tex").write_text("user file")
        return str(base / "foreign"), ["--force"] if kind.endswith("force") else []
    if kind == "file":
        (base / "plain").write_text("user file")
        return str(base / "plain"), ["--force"]
    if kind == "empty_dir":
        (base / "empty").mkdir()
        return str(base / "empty"), []
    if kind == "ours_force":
        (base / "ours").mkdir()
        (base / "ours" / "summary.csv").write_text("old results")
        outdir.mark_complete(base / "ours")
        (base / "ours" / "notes.txt").write_text("user file, added later")
        return str(base / "ours"), ["--force"]
    if kind == "partial_foreign":
        (base / "p.partial").mkdir()
        (base / "p.partial" / "scenario.yaml").write_text("name: mine\n")
        return str(base / "p"), ["--force"]
    return str(base / "fresh" / text), []


@fuzz(100)
@given(kind=st.sampled_from(OUT_KINDS), text=st.text(alphabet="abc-_.", min_size=1, max_size=8))
def test_output_paths(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
                      monkeypatch: pytest.MonkeyPatch, kind: str, text: str) -> None:
    base = tmp_path_factory.mktemp("outpaths")
    scn = base / "s.yaml"
    scn.write_text(yaml.safe_dump(tiny_scenario(budget={"time": 2.0})))
    monkeypatch.chdir(base)
    out, extra = _out_path(kind, base, text)
    before = _snapshot(base)
    code, _ = cli(capsys, ["run", scn, "--out", out, "--quiet", *extra], "output paths",
                  expect=0 if kind in ("fresh", "empty_dir", "ours_force") else 2)
    after = _snapshot(base)
    lost = {f for f in before if f not in after or after[f] != before[f]} - {"ours/summary.csv", "ours/.simfl"}
    assert not lost, f"user files removed or changed: {sorted(lost)}"


@fuzz(60)
@given(name=st.one_of(st.text(max_size=12), st.sampled_from(["..", ".", "/", "../escape", "/abs/x", "a/b", "x" * 300,
                                                                 "\x00", "ok\nline", "..\\x"])))
def test_scenario_names(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
                        monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    base = tmp_path_factory.mktemp("names")
    work = base / "work"
    work.mkdir()
    (work / "keep.txt").write_text("user file")
    scn = work / "s.yaml"
    raw = tiny_scenario(budget={"time": 2.0})
    raw["name"] = name
    scn.write_text(yaml.safe_dump(raw, allow_unicode=True))
    monkeypatch.chdir(work)
    before = _snapshot(base)
    code, _ = cli(capsys, ["run", scn, "--quiet", "--force"], "output paths")
    after = _snapshot(base)
    assert all(after.get(f) == h for f, h in before.items()), "a user file was removed"
    if code == 0:  # only ever under runs/, in one folder named exactly like the scenario
        new = {Path(f).parts[0:2] for f in after if f not in before}
        assert new == {("work", "runs")}, new
        assert (work / "runs" / name / "summary.csv").is_file()


# -- resume folders --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def partial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real unfinished folder: one run finished, the next checkpointed mid-way, then interrupted."""
    _, stage = interrupted_run(tmp_path_factory.mktemp("partial"))
    assert (stage / CHECKPOINT_FILE).is_file() and (stage / "fedasync" / "seed0" / "metrics.csv").is_file()
    return stage


def _damage_checkpoint(path: Path, data: st.DataObject) -> None:
    saved = torch.load(path, weights_only=True)
    node: Any = saved
    keys: list[Any] = []
    for _ in range(data.draw(st.integers(1, 5), label="depth")):
        if isinstance(node, dict) and node:
            k = data.draw(st.sampled_from(sorted(node, key=str)), label="key")
        elif isinstance(node, list) and node:
            k = data.draw(st.integers(0, len(node) - 1), label="index")
        else:
            break
        keys.append(k)
        parent, node = node, node[k]
    if not keys:
        return
    action = data.draw(st.sampled_from(["delete", "replace", "replace"]), label="action")
    if action == "delete" and isinstance(parent, dict):
        del parent[keys[-1]]
    else:
        parent[keys[-1]] = data.draw(st.one_of(HUGE, st.text(max_size=5), st.just(torch.zeros(3)),
                                               st.just({"x": 1}), st.just([1, 2])), label="value")
    torch.save(saved, path)


@fuzz(90)
@given(target=st.sampled_from(["checkpoint.pt", "checkpoint.pt", "checkpoint.pt", "INCOMPLETE", "scenario.yaml",
                               "fedasync/seed0/metrics.csv", ".simfl"]),
       action=st.sampled_from(["structure", "truncate", "flip", "junk", "empty", "delete", "folder"]),
       data=st.data())
def test_resume_folders(partial: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
                        target: str, action: str, data: st.DataObject) -> None:
    base = tmp_path_factory.mktemp("resume")
    stage = base / "out.partial"
    shutil.copytree(partial, stage)
    path = stage / target
    blob = path.read_bytes()
    if action == "structure" and target == "checkpoint.pt":
        _damage_checkpoint(path, data)
    elif action == "truncate":
        path.write_bytes(blob[: data.draw(st.integers(0, max(len(blob) - 1, 0)), label="cut")])
    elif action == "flip" and blob:
        raw = bytearray(blob)
        for _ in range(data.draw(st.integers(1, 8), label="flips")):
            raw[data.draw(st.integers(0, len(raw) - 1), label="pos")] = data.draw(st.integers(0, 255), label="byte")
        path.write_bytes(bytes(raw))
    elif action == "junk":
        path.write_bytes(data.draw(st.binary(max_size=200), label="junk"))
    elif action == "empty":
        path.write_bytes(b"")
    elif action == "delete":
        path.unlink()
    elif action == "folder":
        path.unlink()
        path.mkdir()
    cli(capsys, ["run", "--resume", base / "out", "--quiet"], "resume folders")


# -- report inputs ----------------------------------------------------------------------------------------------


def _result_folder(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "scenario.yaml").write_text("name: toy\n")
    rows = []
    for algo in ("fedavg", "orthofl"):
        run = folder / algo / "seed0"
        run.mkdir(parents=True)
        pd.DataFrame({"virtual_time": [0.0, 10.0, 20.0], "updates": [0, 5, 9], "accuracy": [0.1, 0.5, 0.7],
                      "loss": [2.0, 1.0, 0.5]}).to_csv(run / "metrics.csv", index=False)
        rows.append({"algorithm": algo, "seed": 0, "final_accuracy": 0.7})
    pd.DataFrame(rows).to_csv(folder / "summary.csv", index=False)


CELLS = st.sampled_from(["", "x", "nan", "-1", "1e999", "-0", "1.5", "99999999999999999999999", "☃", "\x00", "\"",
                         "inf", "0x10", " 3 ", "1,2", "../../etc", "fedavg"])


@fuzz(110)
@given(target=st.sampled_from(["summary.csv", "fedavg/seed0/metrics.csv", "scenario.yaml"]),
       action=st.sampled_from(["header_only", "cell", "drop_column", "binary", "latin1", "empty", "truncate",
                               "folder", "out_unwritable", "extra_rows"]),
       cell=CELLS, row=st.integers(0, 5), col=st.integers(0, 5), junk=st.binary(max_size=64))
def test_report_inputs(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], target: str,
                       action: str, cell: str, row: int, col: int, junk: bytes) -> None:
    base = tmp_path_factory.mktemp("report")
    _result_folder(base / "runs" / "a")
    path = base / "runs" / "a" / target
    lines = path.read_text().splitlines()
    out = base / "rep"
    if action == "header_only":
        path.write_text(lines[0] + "\n")
    elif action == "cell" and len(lines) > 1:
        r = 1 + row % (len(lines) - 1)
        cells = lines[r].split(",")
        cells[col % len(cells)] = cell
        lines[r] = ",".join(cells)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif action == "drop_column":
        table = [ln.split(",") for ln in lines]
        k = col % len(table[0])
        path.write_text("\n".join(",".join(c[:k] + c[k + 1:]) for c in table) + "\n")
    elif action == "binary":
        path.write_bytes(junk + b"\x00" + junk)
    elif action == "latin1":
        path.write_bytes(path.read_bytes().replace(b"fedavg", "fédavg".encode("latin-1")))
    elif action == "empty":
        path.write_bytes(b"")
    elif action == "truncate":
        text = path.read_bytes()
        path.write_bytes(text[: row * 7 % max(len(text), 1)])
    elif action == "folder":
        path.unlink()
        path.mkdir()
    elif action == "out_unwritable":
        (base / "file").write_text("user file")
        out = base / "file" / "rep" if row % 2 else Path("/proc/simfl-report")
    elif action == "extra_rows":
        path.write_text("\n".join(lines + [lines[-1]] * (row + 1)) + "\n")
    cli(capsys, ["report", base / "runs", "--out", out], "report inputs")


# -- trace files ------------------------------------------------------------------------------------------------


@fuzz(90)
@given(target=st.sampled_from(["devices.csv", "pooled.json", "uploads.csv"]),
       action=st.sampled_from(["latin1", "binary", "cell", "big_id", "drop_device", "empty", "header", "deep_json",
                               "json_value"]),
       model=st.sampled_from(["rpi_gaussian", "replay", "lognormal", "halfnormal", "uniform", "pareto"]),
       cell=CELLS, row=st.integers(1, 40), col=st.integers(0, 9), value=HUGE)
def test_trace_files(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], target: str,
                     action: str, model: str, cell: str, row: int, col: int, value: Any) -> None:
    base = tmp_path_factory.mktemp("traces")
    folder = base / "tr"
    folder.mkdir()
    for name in ("devices.csv", "pooled.json", "uploads.csv"):
        shutil.copyfile(TRACES / name, folder / name)
    path = folder / target
    text = path.read_text()
    lines = text.splitlines()
    if action == "latin1":
        path.write_bytes(text.encode() + "é,ü\n".encode("latin-1"))
    elif action == "binary":
        path.write_bytes(b"\x00\xff" * 20)
    elif action == "cell" and target.endswith(".csv"):
        r = row % (len(lines) - 1) + 1
        cells = lines[r].split(",")
        cells[col % len(cells)] = cell
        lines[r] = ",".join(cells)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif action == "big_id" and target.endswith(".csv"):
        r = row % (len(lines) - 1) + 1
        lines[r] = "99999999999999999999999" + lines[r][lines[r].index(","):]
        path.write_text("\n".join(lines) + "\n")
    elif action == "drop_device" and target.endswith(".csv"):
        device = lines[row % (len(lines) - 1) + 1].split(",")[0]
        path.write_text("\n".join(ln for ln in lines if ln.split(",")[0] != device) + "\n")
    elif action == "empty":
        path.write_text("")
    elif action == "header":
        path.write_text("\n".join(lines[1:]) + "\n")
    elif action == "deep_json":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif action == "json_value" and target == "pooled.json":
        import json

        data = json.loads(text)
        data[sorted(data)[col % len(data)]] = value if not isinstance(value, float) or value == value else None
        path.write_text(json.dumps(data, allow_nan=True) if not isinstance(value, int) or abs(value) < 10**300
                        else text.replace(str(data.get("uploads")), str(value)))
    raw = tiny_scenario(latency={"model": model, "traces": str(folder)}, budget={"time": 30.0}, eval={"every": 10.0})
    scn = base / "s.yaml"
    scn.write_text(yaml.safe_dump(raw))
    cli(capsys, ["validate", scn], "trace files")


@fuzz(30)
@given(clients=st.one_of(st.integers(-3, 3), st.integers(10**4, 10**7)), rounds=st.integers(-3, 10**6),
       suffix=st.sampled_from([".png", ".txt", ".pdf", "", ".PNG"]))
def test_traces_show_arguments(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
                               clients: int, rounds: int, suffix: str) -> None:
    base = tmp_path_factory.mktemp("show")
    # every case is refused: a valid count with a .png name gets 10^8 rounds, above the limit of draws for any client
    rounds = rounds if clients * rounds > 10**8 or clients < 1 or rounds < 1 or suffix.lower() != ".png" else 10**8
    cli(capsys, ["traces", "show", "--clients", clients, "--rounds", rounds, "--out", base / f"fig{suffix}"],
        "trace files", expect=2)


# -- data files -------------------------------------------------------------------------------------------------


def _idx(path: Path, dtype: int, shape: tuple[int, ...], body: bytes) -> None:
    head = bytes([0, 0, dtype, len(shape)]) + b"".join(int(n).to_bytes(4, "big") for n in shape)
    path.write_bytes(gzip.compress(head + body))


@fuzz(50)
@given(which=st.sampled_from(["labels_negative", "labels_big", "dims_overflow", "dims_zero", "dtype_float"]),
       n=st.integers(0, 40), dims=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=3), label=st.integers(-128, 127))
def test_data_files(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], which: str, n: int,
                    dims: list[int], label: int) -> None:
    root = tmp_path_factory.mktemp("mnist")
    gen = np.random.default_rng(n)
    for split, count in (("train", 30), ("t10k", 10)):
        pixels = gen.integers(0, 256, (count, 28, 28), np.uint8).tobytes()
        _idx(root / f"{split}-images-idx3-ubyte.gz", 8, (count, 28, 28), pixels)
        _idx(root / f"{split}-labels-idx1-ubyte.gz", 8, (count,), gen.integers(0, 10, count, np.uint8).tobytes())
    target = root / "train-labels-idx1-ubyte.gz"
    if which == "labels_negative":
        body = np.full(30, min(label, -1), np.int8).tobytes()
        _idx(target, 9, (30,), body)
    elif which == "labels_big":
        _idx(target, 0x0C, (30,), np.full(30, 10 + abs(label), ">i4").tobytes())
    elif which == "dims_overflow":
        _idx(root / "train-images-idx3-ubyte.gz", 8, (2**32 - 1, 2**32 - 1, max(dims[0], 1)), b"\x00" * (n * 8))
    elif which == "dims_zero":
        _idx(root / "train-images-idx3-ubyte.gz", 8, (0, 28, 28), b"")
    elif which == "dtype_float":
        _idx(target, 0x0D, (30,), np.full(30, float(label), ">f4").tobytes())
    raw = tiny_scenario(data={"dataset": "mnist", "root": str(root), "partition": {"kind": "iid", "clients": 3}},
                        model={"name": "mlp", "hidden": [4]}, budget={"time": 2.0})
    (root / "s.yaml").write_text(yaml.safe_dump(raw))
    cli(capsys, ["run", root / "s.yaml", "--out", root / "out", "--quiet"], "data files")


# -- YAML bombs ----------------------------------------------------------------------------------------------------


def _bomb(kind: str, size: int, width: int) -> str:
    if kind == "flow_nesting":
        return "name: " + "[" * size + "]" * size + "\n"
    if kind == "map_nesting":
        return "name: x\ndata: " + "{a: " * size + "1" + "}" * size + "\n"
    if kind == "block_nesting":
        return "name: x\n" + "".join("  " * i + "k:\n" for i in range(min(size, 400))) + "  " * min(size, 400) + "v\n"
    if kind == "laughs":
        lines = [f'a0: &a0 [{", ".join(["lol"] * width)}]']
        for i in range(1, max(2, size % 14)):
            lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
        return "\n".join(lines) + "\n"
    if kind == "recursive":
        return "name: &a [*a]\n" if size % 2 else "a: &x {b: *x}\n"
    if kind == "many_aliases":
        return "a: &a 1\nb: [" + ", ".join(["*a"] * (size * 10)) + "]\n"
    return "name: x\n" + "k: v\n" * size  # duplicate keys


@fuzz(70)
@given(kind=st.sampled_from(["flow_nesting", "map_nesting", "block_nesting", "laughs", "recursive", "many_aliases",
                             "duplicates"]),
       size=st.integers(1, 5000), width=st.integers(2, 12), where=st.sampled_from(["file", "set"]))
def test_yaml_bombs(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], kind: str, size: int,
                    width: int, where: str) -> None:
    base = tmp_path_factory.mktemp("yaml")
    text = _bomb(kind, size, width)
    if where == "file":
        (base / "s.yaml").write_text(text)
        cli(capsys, ["validate", base / "s.yaml"], "YAML bombs", expect=2)
    else:
        (base / "s.yaml").write_text(yaml.safe_dump(tiny_scenario()))
        value = text.replace("\n", " ").split(":", 1)[1] if kind in ("flow_nesting", "map_nesting") else text
        cli(capsys, ["validate", base / "s.yaml", "--set", f"train.lr={value}"], "YAML bombs", expect=2)


# -- overflowing parameters ----------------------------------------------------------------------------------------

PARAMETERS = [
    ("latency", {"model": "lognormal", "mean": 10.0, "std": 1.0}, ["mean", "std"]),
    ("latency", {"model": "exponential", "mean": 2.0}, ["mean", "floor"]),
    ("latency", {"model": "halfnormal", "scale": 2.0}, ["scale"]),
    ("latency", {"model": "uniform", "low": 1.0, "high": 3.0}, ["low", "high"]),
    ("latency", {"model": "pareto", "shape": 3.0, "scale": 2.0}, ["shape", "scale"]),
    ("latency", {"model": "lognormal", "mode": "per_client", "jitter": 0.1, "mean": 10.0, "std": 1.0}, ["jitter"]),
    ("train", {"epochs": 1, "batch_size": 16, "lr": 0.1}, ["lr", "epochs", "batch_size"]),
    ("budget", {"time": 8.0}, ["time", "updates"]),
    ("eval", {"every": 2.0}, ["every", "target"]),
    ("server_time", None, [""]),
    ("algorithms", [{"name": "fedasync", "alpha": 0.6}], ["0.alpha"]),
    ("availability", {"p": 0.1, "rejoin_delay": 0.5}, ["p", "rejoin_delay"]),
    ("rounds", {"deadline": 2.0, "over_select": 0.5}, ["deadline", "over_select"]),
]


@fuzz(110)
@given(which=st.integers(0, len(PARAMETERS) - 1), pick=st.integers(0, 2), value=NUMBER, run=st.booleans())
def test_overflowing_parameters(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
                                which: int, pick: int, value: Any, run: bool) -> None:
    base = tmp_path_factory.mktemp("overflow")
    section, default, keys = PARAMETERS[which]
    raw = tiny_scenario(budget={"time": 6.0}, eval={"every": 2.0})
    if section == "algorithms":
        raw["algorithms"] = copy.deepcopy(default)
        raw["algorithms"].append({"name": "fedavg", "clients_per_round": 2})
        raw["algorithms"][0]["alpha"] = value
    elif default is None:
        raw[section] = value
    else:
        raw[section] = copy.deepcopy(default)
        raw[section][keys[pick % len(keys)]] = value
    if section == "latency" and raw["latency"].get("model") == "lognormal" and "mode" not in raw["latency"]:
        raw["latency"].setdefault("std", 1.0)
    (base / "s.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True))
    command = ["run", base / "s.yaml", "--out", base / "out", "--quiet"] if run else ["validate", base / "s.yaml"]
    cli(capsys, command, "overflow parameters")


# -- memory and time estimates ---------------------------------------------------------------------------------------


@fuzz(90)
@given(features=st.sampled_from([8, 8, 8, 10**4, 10**8, 10**12]), train=st.sampled_from([120, 120, 10**6, 10**10]),
       clients=st.sampled_from([3, 3, 100, 10**5, 10**9]), every=st.sampled_from([2.0, 2.0, 1e-3, 1e-9, 1e300]),
       budget=st.sampled_from([{"time": 8.0}, {"time": 8.0}, {"time": 1e300}, {"updates": 10}, {"updates": 2**62}]),
       latency=st.sampled_from([{"model": "exponential", "mean": 1e308}, {"model": "exponential", "mean": 1e-300},
                                {"model": "exponential", "mean": 1.0}, {"model": "exponential", "mean": 1.0}]),
       checkpoint=st.sampled_from([None, "1e-9s", "1", "1e300s", "500"]),
       cells=st.sampled_from([0, 0, 0, 10**5, 10**6]), command=st.sampled_from(["validate", "run", "sweep"]),
       max_memory=st.sampled_from([None, "1M", "64G", "1"]))
def test_estimates(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], features: int,
                   train: int, clients: int, every: float, budget: dict[str, Any], latency: dict[str, Any],
                   checkpoint: str | None, cells: int, command: str, max_memory: str | None) -> None:
    base = tmp_path_factory.mktemp("estimate")
    raw = tiny_scenario(data={"dataset": "synthetic", "features": features, "train_size": train, "test_size": 60,
                              "classes": 3, "partition": {"kind": "iid", "clients": clients}},
                        latency=latency, budget=budget, eval={"every": every})
    if cells:  # a grid of `cells` points from three short lists
        raw["sweep"] = {"train.lr": [0.1] * 100, "algorithms[0].alpha": [0.5] * 100, "eval.every": [2.0] * (cells // 10**4)}
    (base / "s.yaml").write_text(yaml.safe_dump(raw))
    argv: list[Any] = [command, base / "s.yaml"]
    if command != "validate":  # only tiny scenarios may start: a limit 1 MiB over the runtime refuses anything bigger
        argv += ["--out", base / "out"] + (["--quiet"] if command == "run" else [])
        max_memory = max_memory if max_memory == "1" else "1025M"  # 1 MiB over the runtime
    if command == "run" and checkpoint is not None:
        argv += ["--checkpoint-every", checkpoint]
    if max_memory is not None:
        argv += ["--max-memory", max_memory]
    absurd = (features >= 10**8 or train >= 10**10 or clients >= 10**9 or every <= 1e-9 or cells >= 10**5
              or budget == {"time": 1e300} or max_memory == "1")
    cli(capsys, argv, "memory estimates", expect=2 if absurd else None)


# -- model/data mismatch ----------------------------------------------------------------------------------------------

DATASETS = {
    "digits": {"dataset": "digits"},
    "synthetic": {"dataset": "synthetic", "features": 8, "train_size": 120, "test_size": 60, "classes": 3},
    "synthetic_square": {"dataset": "synthetic", "features": 784, "train_size": 120, "test_size": 60, "classes": 3},
    "mnist": {"dataset": "mnist", "root": "/nonexistent-data"},
    "cifar10": {"dataset": "cifar10", "root": "/nonexistent-data"},
    "har": {"dataset": "har", "root": "/nonexistent-data"},
    "newsgroups": {"dataset": "newsgroups", "root": "/nonexistent-data"},
}


HEAVY = {"mobilenetv2"}
"""Models whose run, where it fits the data, trains for tens of seconds on two cores: validated, not run, here."""


@fuzz(60)
@given(model=st.sampled_from(sorted(MODELS)), dataset=st.sampled_from(sorted(DATASETS)),
       command=st.sampled_from(["validate", "validate", "run"]))
def test_model_data_mismatch(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], model: str,
                             dataset: str, command: str) -> None:
    assume(not (command == "run" and model in HEAVY))
    base = tmp_path_factory.mktemp("mismatch")
    data = {**DATASETS[dataset], "partition": {"kind": "iid", "clients": 3}}
    raw = tiny_scenario(data=data, model={"name": model}, budget={"time": 2.0})
    (base / "s.yaml").write_text(yaml.safe_dump(raw))
    argv: list[Any] = [command, base / "s.yaml"] + (["--out", base / "out", "--quiet"] if command == "run" else [])
    code, err = cli(capsys, argv, "model/data mismatch")
    if code == 2 and "model.name" in err:
        assert f"data.dataset {DATASETS[dataset]['dataset']} gives" in err
