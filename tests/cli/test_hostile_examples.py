"""One test per hostile-input example: data loss, output paths, damaged resume folders, report inputs, trace and
data files, YAML bombs, overflowing numbers, estimates and limits, model/data mismatch, noise, the last resort."""

from __future__ import annotations

import gzip
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from simfl import outdir
from simfl.cli import main
from simfl.launch.checkpoint import CHECKPOINT_FILE, INCOMPLETE_FILE, RUNNING_DIR
from simfl.launch.grid import CELL_BYTES, plan
from tests.conftest import tiny_scenario
from tests.reliability.helpers import interrupted_run

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
TRACES = ROOT / "latency_traces"


def one_line(capsys: pytest.CaptureFixture[str], argv: list[Any], *expected: str) -> str:
    """``simfl argv`` exits 2 with one line holding every ``expected`` text; returns the line."""
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("simfl: ") and "Traceback" not in err, err
    for text in expected:
        assert text in err, err
    return err


def interrupted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """A scenario and an unfinished, resumable ``out.partial`` (checkpointed, then interrupted)."""
    made = interrupted_run(tmp_path)
    capsys.readouterr()
    return made


# -- data loss ---------------------------------------------------------------------------------------------------


def test_name_dotdot_with_force_deletes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copyfile(QUICKSTART, work / "quickstart.yaml")
    (work / "notes.txt").write_text("mine")
    monkeypatch.chdir(work)
    one_line(capsys, ["run", "quickstart.yaml", "--set", "name=..", "--force"], "name: must be a folder name, not '..'")
    assert sorted(p.name for p in work.iterdir()) == ["notes.txt", "quickstart.yaml"]


@pytest.mark.parametrize("name", ["../escape", "/tmp/absolute", "a/b", ".", "x\x00y", "n" * 300])
def test_scenario_name_is_one_folder_name(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.chdir(tmp_path)
    raw = tiny_scenario(name=name)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    one_line(capsys, ["run", "s.yaml", "--quiet"], "name: must")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_fresh_run_keeps_a_resumable_partial_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scn, stage = interrupted(tmp_path, capsys)
    saved = (stage / CHECKPOINT_FILE).read_bytes()
    one_line(capsys, ["run", scn, "--out", tmp_path / "out", "--quiet"], "holds an unfinished run",
             f"simfl run --resume {tmp_path / 'out'}", "--force")
    assert (stage / CHECKPOINT_FILE).read_bytes() == saved
    assert main(["run", str(scn), "--out", str(tmp_path / "out"), "--quiet", "--force"]) == 0
    assert not stage.exists() and (tmp_path / "out" / "summary.csv").is_file()


def test_force_refuses_a_folder_simfl_did_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "thesis").mkdir()
    (tmp_path / "thesis" / "chapter1.tex").write_text("mine")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny_scenario()))
    one_line(capsys, ["run", tmp_path / "s.yaml", "--out", tmp_path / "thesis", "--force"],
             "was not written by simfl (no .simfl file in it)")
    assert (tmp_path / "thesis" / "chapter1.tex").read_text() == "mine"


@pytest.mark.parametrize("existing", [True, False])
def test_a_file_dropped_into_the_output_during_a_run_survives_publish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    scn, out = tmp_path / "s.yaml", tmp_path / "out"
    scn.write_text(yaml.safe_dump(tiny_scenario()))
    if existing:
        assert main(["run", str(scn), "--out", str(out), "--quiet"]) == 0
    import simfl.launch.runner

    original = simfl.launch.runner.write_run

    def write_and_drop(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        out.mkdir(exist_ok=True)
        (out / "mine.txt").write_text("dropped while the run went")

    monkeypatch.setattr(simfl.launch.runner, "write_run", write_and_drop)
    assert main(["run", str(scn), "--out", str(out), "--quiet", "--force"]) == 0
    assert (out / "mine.txt").read_text() == "dropped while the run went"
    assert (out / "summary.csv").is_file() and not (tmp_path / "out.partial").exists()
    assert "mine.txt" not in outdir.listed(out)  # and a later --force keeps it too
    monkeypatch.setattr(simfl.launch.runner, "write_run", original)
    assert main(["run", str(scn), "--out", str(out), "--quiet", "--force"]) == 0
    assert (out / "mine.txt").is_file()


def test_report_needs_force_and_replaces_only_its_own_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny_scenario()))
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "runs" / "a"), "--quiet"]) == 0
    rep = tmp_path / "rep"
    assert main(["report", str(tmp_path / "runs"), "--out", str(rep)]) == 0
    (rep / "my-notes.md").write_text("mine")
    capsys.readouterr()
    one_line(capsys, ["report", tmp_path / "runs", "--out", rep], "pass --force")
    assert main(["report", str(tmp_path / "runs"), "--out", str(rep), "--force"]) == 0
    assert (rep / "my-notes.md").read_text() == "mine" and (rep / "table.md").is_file()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "table.md").write_text("mine")
    capsys.readouterr()
    one_line(capsys, ["report", tmp_path / "runs", "--out", tmp_path / "docs", "--force"], "was not written by simfl")
    assert (tmp_path / "docs" / "table.md").read_text() == "mine"


def test_traces_import_and_show_need_force_and_keep_foreign_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                                  ) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    for g in (1, 2):
        (raw / f"gw{g}_comp_delay.txt").write_text("1.0,0\n0,2.0\n")
        (raw / f"gw{g}_round_delay.txt").write_text("3.0,0\n0,5.0\n")
    out = tmp_path / "tr"
    assert main(["traces", "import", str(raw), "--out", str(out)]) == 0
    one_line(capsys, ["traces", "import", raw, "--out", out], "devices.csv: exists; pass --force")
    assert main(["traces", "import", str(raw), "--out", str(out), "--force"]) == 0
    (out / "devices.csv").write_text("my own table\n")
    capsys.readouterr()
    one_line(capsys, ["traces", "import", raw, "--out", out, "--force"], "devices.csv: was not written by simfl")
    assert (out / "devices.csv").read_text() == "my own table\n"
    fig = tmp_path / "mine.png"
    fig.write_bytes(b"\x89PNG\r\n\x1a\n my own figure")
    one_line(capsys, ["traces", "show", "--out", fig, "--force", "--clients", 2, "--rounds", 5], "was not written by simfl")
    one_line(capsys, ["traces", "show", "--out", fig, "--clients", 2, "--rounds", 5], "exists; pass --force")


# -- output paths -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("out", "expected"), [
    (".", "not '.', '..' or '/'"), ("..", "not '.', '..' or '/'"), ("/", "not '.', '..' or '/'"),
    ("FILE/sub", "is a file, not a folder"), ("/proc/simfl-out", "is under /proc"), ("/sys/simfl-out", "is under /sys"),
    ("N" * 300, "over 255 bytes"), ("bad\x00name", "NUL byte"), ("LINK", "is a symbolic link"),
])
def test_output_paths_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                   out: str, expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny_scenario()))
    (tmp_path / "FILE").write_text("mine")
    (tmp_path / "real").mkdir()
    (tmp_path / "LINK").symlink_to(tmp_path / "real")
    before = sorted(p.name for p in tmp_path.iterdir())
    one_line(capsys, ["run", "s.yaml", "--out", out, "--quiet", "--force"], expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_long_sweep_values_give_short_cell_names_and_an_index(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    raw = tiny_scenario(sweep={
        "train.lr": [0.1234567890123456, 0.2234567890123456], "train.momentum": [0.1234567890123456],
        "train.weight_decay": [0.0001234567890123], "eval.every": [2.000000000000123], "eval.target": [0.1234567890123456],
        "server_time": [0.0001234567890123], "algorithms[0].alpha": [0.3123456789012345], "data.spread": [1.000000000000123],
    })
    _, cells = plan(write_scenario(raw))
    assert len(cells) == 2 and all(len(c.name.encode()) <= CELL_BYTES and "~" in c.name for c in cells)
    assert len({c.name for c in cells}) == 2 and all(len(c.group.encode()) <= 240 for c in cells)
    out = tmp_path / "sw"
    from simfl.launch.grid import _prepare

    _prepare(out, raw, cells)
    index = pd.read_csv(out / "cells.csv")
    assert index["cell"].tolist() == [c.name for c in cells] and index["train.lr"].tolist() == [0.1234567890123456,
                                                                                                  0.2234567890123456]


def test_short_sweep_cell_names_are_unchanged(write_scenario) -> None:  # type: ignore[no-untyped-def]
    raw = tiny_scenario(sweep={"latency": [{"model": "constant", "seconds": [1.0, 2.5, 4.0]}],
                               "algorithms[0].alpha": [0.3, 0.6]})
    _, cells = plan(write_scenario(raw))
    assert [c.name for c in cells] == ["latency=constant__alpha=0.3__seed=0", "latency=constant__alpha=0.6__seed=0"]
    committed = [p.name for p in (ROOT / "results").glob("*/*=*") if p.is_dir()]
    assert all(len(n.encode()) <= CELL_BYTES and "~" not in n for n in committed)


# -- damaged resume folders -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("damage", "expected"), [
    (lambda d: d.pop("finished"), "'finished' must be a list"),
    (lambda d: d["finished"][0].pop("seed"), "finished[0] needs"),
    (lambda d: d.update(every=17), "'every' must be text"),
    (lambda d: d.update(spare_pool="yes"), "'spare_pool' must be true or false"),
    (lambda d: d.update(format="simfl-checkpoint/9"), "not a simfl checkpoint"),
])
def test_damaged_checkpoint_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Any, expected: str
                                     ) -> None:
    _, stage = interrupted(tmp_path, capsys)
    data = torch.load(stage / CHECKPOINT_FILE, weights_only=True)
    damage(data)
    torch.save(data, stage / CHECKPOINT_FILE)
    one_line(capsys, ["run", "--resume", tmp_path / "out", "--quiet"], f"{stage / CHECKPOINT_FILE}: ", expected,
             "--force")


@pytest.mark.parametrize(("damage", "expected"), [
    (lambda d: d["sim"].pop("state"), "sim needs state"),
    (lambda d: d.update(seed="zero"), "the run needs algorithm"),
    (lambda d: d["sim"]["state"].update(now="soon"), "sim.state needs now"),
    (lambda d: d["sim"]["state"]["clients"].pop(), "damaged simulation data"),
    (lambda d: d["sim"]["latency"].pop("rngs"), "damaged simulation data"),
    (lambda d: d["sim"]["state"]["pending"].append(["teleport", 99, 1.0, None]), "sim.state.pending"),
    (lambda d: d["sim"]["state"]["pending"].append(["deliver", 99, -1.0, 0]), "sim.state.pending"),
    (lambda d: d.update(format="simfl-checkpoint/2"), "not a simfl run checkpoint"),
])
def test_damaged_run_checkpoint_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Any,
                                         expected: str) -> None:
    _, stage = interrupted(tmp_path, capsys)
    path = stage / RUNNING_DIR / "fedbuff" / "seed0.pt"
    data = torch.load(path, weights_only=True)
    damage(data)
    torch.save(data, path)
    one_line(capsys, ["run", "--resume", tmp_path / "out", "--quiet"], f"{path}: ", expected, "--force")


@pytest.mark.parametrize("target", ["scenario.yaml", "fedasync/seed0/metrics.csv", INCOMPLETE_FILE])
def test_damaged_resume_files_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str) -> None:
    _, stage = interrupted(tmp_path, capsys)
    (stage / target).unlink()
    (stage / target).mkdir()
    err = one_line(capsys, ["run", "--resume", tmp_path / "out", "--quiet"])
    assert target.split("/")[-1] in err or "nothing to resume" in err


def test_malicious_checkpoint_is_refused_quietly(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    _, stage = interrupted(tmp_path, capfd)  # type: ignore[arg-type]

    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    torch.save({"format": "simfl-checkpoint/1", "x": Evil()}, stage / CHECKPOINT_FILE)
    assert main(["run", "--resume", str(tmp_path / "out"), "--quiet"]) == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "refused" in err and "weights_only" not in err, err
    assert not (tmp_path / "pwned").exists()


# -- report inputs ------------------------------------------------------------------------------------------------------


def _runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "a"
    run = folder / "fedavg" / "seed0"
    run.mkdir(parents=True)
    (folder / "scenario.yaml").write_text("name: toy\n")
    run.joinpath("metrics.csv").write_text("virtual_time,updates,accuracy,loss\n0,0,0.1,2\n10,4,0.6,1\n")
    (folder / "summary.csv").write_text("algorithm,seed,final_accuracy\nfedavg,0,0.6\n")
    return folder


@pytest.mark.parametrize(("file", "content", "expected"), [
    ("summary.csv", b"algorithm,seed,final_accuracy\n", "has a header but no result rows"),
    ("summary.csv", b"algorithm,seed,final_accuracy\nfedavg,zero,0.6\n", "line 2: seed='zero' must be a whole number"),
    ("summary.csv", b"algorithm,seed,final_accuracy\nfedavg,,0.6\n", "line 2: seed='' must be a whole number"),
    ("fedavg/seed0/metrics.csv", b"updates,accuracy,loss\n0,0.1,2\n", "missing columns ['virtual_time']"),
    ("fedavg/seed0/metrics.csv", b"virtual_time,updates,accuracy,loss\n0,0,high,2\n", "accuracy='high' must be a number"),
    ("summary.csv", b"\x00\x01\x02PK\x03\x04", "binary data"),
    ("summary.csv", "algorithm,seed,final_accuracy\nfédavg,0,0.6\n".encode("latin-1"), "not UTF-8 text"),
    ("summary.csv", b"", "is empty"),
    ("summary.csv", b"algorithm,seed,final_accuracy\n../../x,0,0.6\n", "algorithm must be a single folder name"),
])
def test_report_inputs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, content: bytes,
                                    expected: str) -> None:
    folder = _runs(tmp_path)
    (folder / file).write_bytes(content)
    one_line(capsys, ["report", tmp_path / "runs", "--out", tmp_path / "rep"], expected)
    assert not (tmp_path / "rep").exists() and not (tmp_path / "rep.partial").exists()


@pytest.mark.parametrize("out", ["/proc/simfl-report", "FILE/rep"])
def test_report_unwritable_out(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                               out: str) -> None:
    _runs(tmp_path)
    (tmp_path / "FILE").write_text("mine")
    monkeypatch.chdir(tmp_path)
    one_line(capsys, ["report", "runs", "--out", out])


# -- trace and data files -------------------------------------------------------------------------------------------


def _traces(tmp_path: Path) -> Path:
    folder = tmp_path / "tr"
    folder.mkdir()
    for name in ("devices.csv", "pooled.json", "uploads.csv"):
        shutil.copyfile(TRACES / name, folder / name)
    return folder


@pytest.mark.parametrize(("file", "model", "edit", "expected"), [
    ("devices.csv", "rpi_gaussian", lambda t: t + "é".encode("latin-1"), "devices.csv: not UTF-8"),
    ("pooled.json", "lognormal", lambda t: t[:-2] + b"\xff\xfe}", "pooled.json: not UTF-8"),
    ("devices.csv", "rpi_gaussian", lambda t: t.replace(b"\n10,", b"\n99999999999999999999999,"),
     "device=99999999999999999999999 must be a whole number"),
    ("uploads.csv", "replay", lambda t: b"\n".join(ln for ln in t.split(b"\n") if not ln.startswith(b"10,")),
     "devices [10] of profile set 'paper9' have no uploads"),
])
def test_trace_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, model: str, edit: Any,
                                  expected: str) -> None:
    folder = _traces(tmp_path)
    (folder / file).write_bytes(edit((folder / file).read_bytes()))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny_scenario(latency={"model": model, "traces": str(folder)})))
    one_line(capsys, ["validate", tmp_path / "s.yaml"], expected)


def _mnist(root: Path, labels: tuple[int, bytes] | None = None, image_shape: tuple[int, ...] | None = None) -> None:
    def idx(name: str, dtype: int, shape: tuple[int, ...], body: bytes) -> None:
        head = bytes([0, 0, dtype, len(shape)]) + b"".join(int(n).to_bytes(4, "big") for n in shape)
        (root / f"{name}.gz").write_bytes(gzip.compress(head + body))

    for split, n in (("train", 30), ("t10k", 10)):
        idx(f"{split}-images-idx3-ubyte", 8, (n, 28, 28), bytes(n * 784))
        idx(f"{split}-labels-idx1-ubyte", 8, (n,), bytes(n))
    if labels is not None:
        idx("train-labels-idx1-ubyte", labels[0], (30,), labels[1])
    if image_shape is not None:
        idx("train-images-idx3-ubyte", 8, image_shape, bytes(64))


@pytest.mark.parametrize(("labels", "shape", "expected"), [
    ((9, np.full(30, -3, np.int8).tobytes()), None, "label -3 outside 0..9"),
    (None, (2**32 - 1, 2**32 - 1, 2**32 - 1), "idx size mismatch"),
])
def test_mnist_idx_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], labels: Any, shape: Any,
                                      expected: str) -> None:
    _mnist(tmp_path, labels, shape)
    raw = tiny_scenario(data={"dataset": "mnist", "root": str(tmp_path), "partition": {"kind": "iid", "clients": 3}},
                        model={"name": "mlp", "hidden": [4]})
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    one_line(capsys, ["run", tmp_path / "s.yaml", "--out", tmp_path / "out", "--quiet"], expected)


# -- YAML bombs ------------------------------------------------------------------------------------------------------------


def test_yaml_nesting_3000_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.yaml").write_text("name: " + "[" * 3000 + "]" * 3000 + "\n")
    one_line(capsys, ["validate", tmp_path / "s.yaml"], "YAML refused: nested deeper than 64 levels")


def test_yaml_billion_laughs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)]
    (tmp_path / "s.yaml").write_text("\n".join(lines) + "\n")
    start = time.perf_counter()
    one_line(capsys, ["validate", tmp_path / "s.yaml"], "YAML refused: expands to more than")
    assert time.perf_counter() - start < 5


# -- overflowing numbers ------------------------------------------------------------------------------------------------


def test_lognormal_std_1e308(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one_line(capsys, ["validate", QUICKSTART, "--set", "latency={model: lognormal, mean: 10, std: 1e308}"],
             "latency: mean 10 and std 1e+308 give no finite lognormal parameters")


def test_nan_latency_stream_names_the_model(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from simfl.latency.exponential import Exponential

    calls = {"n": 0}
    original = Exponential.draws

    def draws(self: Exponential, client: int, gen: np.random.Generator, n: int) -> list[float]:
        calls["n"] += 1
        values = original(self, client, gen, n)
        return values if calls["n"] < 40 else [float("nan")] * n

    monkeypatch.setattr(Exponential, "draws", draws)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny_scenario(latency={"model": "exponential", "mean": 0.01},
                                                                  budget={"time": 50.0})))
    one_line(capsys, ["run", tmp_path / "s.yaml", "--out", tmp_path / "out", "--quiet"],
             "latency.model exponential: drew the latency nan")


# -- estimates and limits ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "expected"), [
    (["--set", "data={dataset: synthetic, features: 100000000, partition: {kind: iid, clients: 10}}",
      "--set", "model={name: mlp}"], "of memory per run (runtime 1.0 GiB, dataset"),
    (["--set", "eval.every=1e-9"], "would evaluate about 600,000,000,001 times per run"),
    (["--set", "latency={model: exponential, mean: 1e300}", "--set", "budget={updates: 1000}"], "would evaluate about"),
    (["--set", "latency={model: exponential, mean: 1e308}", "--set", "budget={updates: 1000}"],
     "budget.updates 1,000 is never reached: latency.model exponential states mean round times of 1e+308 s and "
     "more; set budget.time"),
    (["--max-memory", "1M"], "the limit is 1.0 MiB (--max-memory)"),
])
def test_absurd_scenarios_are_refused_with_the_estimate(capsys: pytest.CaptureFixture[str], args: list[str],
                                                        expected: str) -> None:
    one_line(capsys, ["validate", QUICKSTART, *args], expected)


def test_checkpoint_every_tiny_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny_scenario()))
    one_line(capsys, ["run", tmp_path / "s.yaml", "--out", tmp_path / "o", "--checkpoint-every", "1e-9s"],
             "--checkpoint-every: would write about 8,000,000,000 checkpoints")
    assert not (tmp_path / "o.partial").exists()


@pytest.mark.parametrize("command", ["validate", "run", "sweep"])
def test_million_cell_sweep_is_refused_before_any_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       command: str) -> None:
    raw = tiny_scenario(sweep={"train.lr": [0.1] * 100, "train.momentum": [0.0] * 100, "server_time": [0.0] * 100})
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    start = time.perf_counter()
    one_line(capsys, [command, tmp_path / "s.yaml", "--out", tmp_path / "o"] if command != "validate"
             else [command, tmp_path / "s.yaml"], "sweep: the grid has 1,000,000 cells; the limit is 10,000")
    assert time.perf_counter() - start < 10


def test_traces_show_huge_and_wrong_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one_line(capsys, ["traces", "show", "--clients", 100000, "--rounds", 100000, "--out", tmp_path / "x.png"],
             "--clients x --rounds: 100,000 x 100,000")
    one_line(capsys, ["traces", "show", "--out", tmp_path / "x.txt"], "unsupported figure format '.txt'; allowed: .png")


def test_validate_prints_the_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    for path, dataset in ((QUICKSTART, "1,500 train + 297 test samples of 1x8x8"),
                          (ROOT / "scenarios" / "paper" / "mnist.yaml", "60,000 train + 10,000 test samples of 1x28x28")):
        assert main(["validate", str(path)]) == 0
        out = capsys.readouterr().out
        assert "# estimate" in out and dataset in out and "parameters" in out and "client updates" in out
        assert yaml.safe_load(out)["name"]  # the output stays valid YAML


# -- model and data that do not fit ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "data", "expected"), [
    ("lenet5", None, "model.name: lenet5 needs 28x28 (or 32x32) images (C x H x W); data.dataset digits gives 1x8x8"),
    ("vgg11", None, "model.name: vgg11 needs images of at least 32x32"),
    ("resnet18_1d", None, "model.name: resnet18_1d needs multichannel series"),
    ("lenet5", "synthetic", "data.dataset synthetic gives 16"),
    ("vgg11", "synthetic", "data.dataset synthetic gives 16"),
    ("resnet18_1d", "synthetic", "data.dataset synthetic gives 16"),
])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_model_and_data_that_do_not_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str,
                                        data: str | None, expected: str, command: str) -> None:
    args = ["--set", f"model={{name: {model}}}"]
    if data:
        args += ["--set", "data={dataset: synthetic, partition: {kind: iid, clients: 10}}"]
    out = ["--out", tmp_path / "o"] if command == "run" else []
    one_line(capsys, [command, QUICKSTART, *args, *out], expected)
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.partial").exists()


# -- noise and the last resort -----------------------------------------------------------------------------------------


def test_unreachable_ray_is_one_line_without_ray_noise(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's core logs to file descriptor 2 once a second while it fails to reach a cluster (about 20 lines)."""
    ray = pytest.importorskip("ray")

    def failing_init(**kwargs: Any) -> None:
        for _ in range(21):
            os.write(2, b"[2026-01-01 W 1 1] gcs_client.cc:210: Failed to get cluster ID from GCS server\n")
        raise ConnectionError(f"Failed to connect to Ray cluster at {kwargs.get('address')}")

    monkeypatch.setattr(ray, "init", failing_init)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr("simfl.train.ray_executor._probe", lambda address, where: None)  # the cluster seems to answer
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny_scenario(executor={"kind": "ray", "address": "10.0.0.1:6379"})))
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capfd.readouterr().err.strip()
    assert err == "simfl: executor: cannot start or reach Ray: Failed to connect to Ray cluster at 10.0.0.1:6379", err


def test_a_bug_is_one_line_with_a_crash_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import simfl.schema.estimate

    def broken(*args: Any, **kwargs: Any) -> None:
        raise ZeroDivisionError("deliberately broken")

    monkeypatch.setattr(simfl.schema.estimate, "estimate", broken)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    assert main(["validate", str(QUICKSTART)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "this is a bug in simfl: please report it with the file" in err, err
    crash = Path(err.rsplit(" ", 1)[-1])
    text = crash.read_text()
    assert "ZeroDivisionError: deliberately broken" in text and "command: simfl validate" in text and "torch" in text


def test_os_errors_on_user_paths_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "dir.yaml").mkdir()
    one_line(capsys, ["validate", tmp_path / "dir.yaml"], "dir.yaml")
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00")
    one_line(capsys, ["validate", tmp_path / "bin.yaml"], "bin.yaml")
