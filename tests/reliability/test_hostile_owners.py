"""Hostile input, part three (owners): one command per output folder, markers trusted only inside it.

Classes: concurrent commands on one folder (a second run, resume, sweep or report while one holds
it, ``--force`` included), tampered markers (entries that are absolute, climb out, pass through a
symbolic link), a user's files in a staging folder (kept by ``--force``, never listed as simfl's),
a resumed folder whose scenario was edited, SIGTERM, and a full disk (``ulimit -f``). Every case
ends in one line and exit 2 (or 0 where nothing is wrong), no user file changes, and the folder
a command refused is left as it was. Counts per class go to :data:`tests.reliability.hostile.COUNTS`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from simfl import outdir
from simfl.cli import main
from tests.conftest import tiny_scenario
from tests.reliability.hostile import COUNTS, cli

ROOT = Path(__file__).resolve().parents[2]
SIMFL = [sys.executable, "-m", "simfl"]


def _write(folder: Path, raw: dict[str, Any], name: str = "s.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _tree(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` (links not followed) with the SHA-256 of its bytes (or its link target)."""
    out = {}
    for rel in outdir.files_under(folder):
        path = folder / rel
        out[rel] = ("link:" + os.readlink(path)) if path.is_symlink() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete result folder of the tiny scenario (copied by each case that changes it)."""
    base = tmp_path_factory.mktemp("finished")
    scenario = _write(base, tiny_scenario())
    assert main(["run", str(scenario), "--out", str(base / "out"), "--quiet", "--workers", "1"]) == 0
    return base / "out"


# -- concurrent commands on one folder --------------------------------------------------------------------------

SECOND = {
    "run": lambda s, o: ["run", s, "--out", o, "--quiet", "--workers", "1"],
    "run --force": lambda s, o: ["run", s, "--out", o, "--force", "--quiet", "--workers", "1"],
    "run --resume": lambda s, o: ["run", "--resume", o, "--quiet", "--workers", "1"],
    "sweep": lambda s, o: ["sweep", s, "--out", o, "--quiet", "--workers", "1", "--set", "sweep={train.lr: [0.1]}"],
    "report": lambda s, o: ["report", o.parent / "finished", "--out", o],
    "report --force": lambda s, o: ["report", o.parent / "finished", "--out", o, "--force"],
}
STATES = ["absent", "complete", "partial"]


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("second", sorted(SECOND))
def test_a_held_folder_refuses_every_second_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], finished: Path, second: str, state: str) -> None:
    """While one command holds ``out``, any other on it (``--force`` too) is refused naming the holder."""
    shutil.copytree(finished, tmp_path / "finished")
    out = tmp_path / "out"
    if state == "complete":
        shutil.copytree(finished, out)
    elif state == "partial":
        shutil.copytree(finished, tmp_path / "out.partial")
    scenario = _write(tmp_path, tiny_scenario())
    before = _tree(tmp_path)
    with outdir.hold(out):
        _code, err = cli(capsys, SECOND[second](scenario, out), "concurrent commands", expect=2)
    assert "is in use by another simfl command" in err and f"pid {os.getpid()}" in err, err
    assert _tree(tmp_path) == before
    assert not outdir.lock_path(out).exists()  # released with the block


def test_the_lock_is_released_by_a_crash_and_taken_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A holder killed by SIGKILL leaves its lock file, which the next command takes over."""
    out = tmp_path / "out"
    code = ("import sys, time; from pathlib import Path; from simfl import outdir\n"
            f"with outdir.hold(Path({str(out)!r})):\n    print('held', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    scenario = _write(tmp_path, tiny_scenario())
    _code, err = cli(capsys, ["run", scenario, "--out", out, "--quiet"], "concurrent commands", expect=2)
    assert f"pid {proc.pid}" in err and "-c" in err and "since" in err, err
    proc.kill()
    proc.wait()
    assert outdir.lock_path(out).exists()  # stale: the file stays, the lock went with the process
    cli(capsys, ["run", scenario, "--out", out, "--quiet", "--workers", "1"], "concurrent commands", expect=0)
    assert (out / "summary.csv").is_file() and not outdir.lock_path(out).exists()


def _slow_scenario(folder: Path) -> Path:
    return _write(folder, tiny_scenario(budget={"time": 500.0}, eval={"every": 5.0}))


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([*SIMFL, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, proc: subprocess.Popen[str], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.parametrize("second", ["run --force", "run --resume", "sweep"])
def test_the_issue_s_two_commands_in_one_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, second: str) -> None:
    """The issue: a second `run --force` deleted the first run's staging folder, `--resume` truncated its growing
    CSVs (both exited 0), and two sweeps into one --out raced. Now the second command (here in this process,
    the first in its own) is refused naming the first, which publishes every file and row."""
    _slow_scenario(tmp_path)
    monkeypatch.chdir(tmp_path)
    if second == "sweep":
        args = ["sweep", "s.yaml", "--out", "o", "--quiet", "--workers", "1", "--set", "sweep={train.lr: [0.1, 0.2]}"]
        first = _start(args, tmp_path)
        _wait_for(tmp_path / "o" / "lr=0.1__seed=0.partial" / "fedasync" / "seed0" / "metrics.csv", first)
    else:
        first = _start(["run", "s.yaml", "--out", "o", "--quiet", "--workers", "1"], tmp_path)
        _wait_for(tmp_path / "o.partial" / "fedasync" / "seed0" / "metrics.csv", first)
        args = ["run", "s.yaml", "--out", "o", "--force"] if second == "run --force" else ["run", "--resume", "o"]
    _code, err = cli(capsys, args, "concurrent commands", expect=2)
    assert "is in use by another simfl command" in err and f"pid {first.pid}" in err, err
    assert first.poll() is None, "the first command ended before the second was tried"
    _out, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err
    cells = ["lr=0.1__seed=0", "lr=0.2__seed=0"] if second == "sweep" else [""]
    for cell in cells:
        published = tmp_path / "o" / cell
        assert (published / "scenario.yaml").is_file() and (published / "fedasync/seed0/events.csv").is_file()
        metrics = (published / "fedasync" / "seed0" / "metrics.csv").read_text().splitlines()
        assert len(metrics) == 1 + 101  # header and an evaluation every 5 s from 0 to 500 s


# -- tampered markers ---------------------------------------------------------------------------------------------

ENTRIES = {
    "absolute": lambda v: str(v),
    "parent": lambda v: "../victim.txt",
    "climbing": lambda v: "fedasync/../../victim.txt",
    "dot": lambda v: "./victim.txt",
    "double slash": lambda v: "fedasync//victim.txt",
    "backslash": lambda v: "..\\victim.txt",
    "link": lambda v: "link.txt",
    "through a link": lambda v: "linkdir/victim.txt",
}


def _tamper(folder: Path, victim: Path, entry: str) -> None:
    (folder / "link.txt").symlink_to(victim)
    (folder / "linkdir").symlink_to(victim.parent, target_is_directory=True)
    with (folder / outdir.MARKER).open("a") as fh:
        fh.write(ENTRIES[entry](victim) + "\n")


@pytest.mark.parametrize("command", ["run --force", "report --force", "sweep cell"])
@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_a_tampered_marker_removes_nothing_outside_the_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], finished: Path, entry: str, command: str) -> None:
    """The issue: a `.simfl` listing an absolute path made `--force` unlink that file outside the folder."""
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    scenario = _write(tmp_path, tiny_scenario())
    if command == "sweep cell":  # a finished cell's folder is replaced only by a run --force into it
        out = tmp_path / "sweep" / "seed=0"
        shutil.copytree(finished, out)
    else:
        out = tmp_path / "out"
        shutil.copytree(finished, out)
    _tamper(out, victim, entry)
    before = _tree(tmp_path)
    if command == "report --force":
        argv = ["report", finished, "--out", out, "--force"]
    else:
        argv = ["run", scenario, "--out", out, "--force", "--quiet", "--workers", "1"]
    _code, err = cli(capsys, argv, "tampered markers", expect=2)
    assert "marker was edited" in err and outdir.MARKER in err, err
    assert victim.read_text() == "the user's own file\n"
    assert _tree(tmp_path) == before


# -- a user's files in a staging folder ----------------------------------------------------------------------------

USER_FILES = ["notes.txt", "fedasync/notes.txt", "fedasync/seed0/mine.csv", "running/keep.pt", "user.tmp",
              "sub/deeper/data.bin"]


@pytest.mark.parametrize("how", ["run --force", "resume"])
@pytest.mark.parametrize("name", USER_FILES)
def test_a_user_file_in_the_staging_folder_survives_and_is_never_listed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, how: str) -> None:
    """The issue: `--force` deleted a user's file in o.partial, and after `--resume` it was listed as simfl's."""
    scenario = _write(tmp_path, tiny_scenario())
    out = tmp_path / "o"
    stage = tmp_path / "o.partial"
    outdir.make_dir(stage)  # an unfinished run's staging folder
    (stage / "scenario.yaml").write_text(yaml.safe_dump(tiny_scenario()))
    user = stage / name
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_bytes(b"mine")
    if how == "run --force":
        cli(capsys, ["run", scenario, "--out", out, "--force", "--quiet", "--workers", "1"], "user files", expect=0)
    else:
        cli(capsys, ["run", scenario, "--out", tmp_path / "first", "--quiet", "--workers", "1"], "user files", expect=0)
        shutil.rmtree(stage)
        shutil.copytree(tmp_path / "first", stage)
        (stage / outdir.MARKER).write_text(outdir.MARKER_HEAD + "\n")  # as a staging folder's marker
        (stage / "summary.csv").unlink()
        user.parent.mkdir(parents=True, exist_ok=True)
        user.write_bytes(b"mine")
        cli(capsys, ["run", "--resume", out, "--quiet", "--workers", "1"], "user files", expect=0)
    assert (out / name).read_bytes() == b"mine"
    assert name not in outdir.listed(out)
    assert (out / "summary.csv").is_file()
    cli(capsys, ["run", scenario, "--out", out, "--force", "--quiet", "--workers", "1"], "user files", expect=0)
    assert (out / name).read_bytes() == b"mine"  # a later --force keeps it too


LINKS = {"a result file": "fedasync/seed0/metrics.csv", "a run folder": "fedasync",
         "a temporary file": "checkpoint.pt.tmp", "a checkpoint folder": "running"}


@pytest.mark.parametrize("how", ["run --force", "resume"])
@pytest.mark.parametrize("link", sorted(LINKS))
def test_a_link_planted_in_a_staging_folder_never_redirects_a_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], link: str, how: str) -> None:
    """A symbolic link named like one of simfl's files or folders in `.partial` must not make simfl write
    (or truncate) a file elsewhere: `--force` removes the link (never its target), `--resume` refuses it."""
    victim_dir = tmp_path / "elsewhere"
    victim_dir.mkdir()
    (victim_dir / "victim.txt").write_text("the user's own file\n")
    scenario = _write(tmp_path, tiny_scenario())
    out, stage = tmp_path / "o", tmp_path / "o.partial"
    outdir.make_dir(stage)
    (stage / "scenario.yaml").write_text(yaml.safe_dump(tiny_scenario()))
    rel = LINKS[link]
    (stage / rel).parent.mkdir(parents=True, exist_ok=True)
    target = victim_dir if "folder" in link else victim_dir / "victim.txt"
    (stage / rel).symlink_to(target, target_is_directory="folder" in link)
    if how == "run --force":
        cli(capsys, ["run", scenario, "--out", out, "--force", "--quiet", "--workers", "1", "--checkpoint-every", "2"],
            "planted links", expect=0)
        assert not (out / rel).is_symlink()
    else:
        _code, err = cli(capsys, ["run", "--resume", out, "--quiet", "--workers", "1", "--checkpoint-every", "2"],
                         "planted links")
        if _code == 2:
            assert "symbolic link" in err, err
    assert sorted(p.name for p in victim_dir.iterdir()) == ["victim.txt"]
    assert (victim_dir / "victim.txt").read_text() == "the user's own file\n"


# -- a resumed folder whose scenario changed -------------------------------------------------------------------------

EDITS = {"train.lr": ("train", "lr", 0.05), "budget.time": ("budget", "time", 16.0),
         "eval.every": ("eval", "every", 1.0), "latency.seconds": ("latency", "seconds", [1.0, 1.0, 1.0]),
         "algorithms": ("algorithms", None, [{"name": "fedavg"}])}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_resume_after_the_scenario_changed_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: str) -> None:
    """The issue: editing o.partial/scenario.yaml before `--resume` published one folder with mixed budgets."""
    scenario = _write(tmp_path, tiny_scenario(seeds=[0, 1]))
    out = tmp_path / "o"
    # an unfinished folder as a run stopped after its first (of two) runs leaves it
    cli(capsys, ["run", scenario, "--out", tmp_path / "whole", "--quiet", "--workers", "1"], "resume edits", expect=0)
    stage = tmp_path / "o.partial"
    shutil.copytree(tmp_path / "whole", stage)
    from simfl.launch.checkpoint import Session

    for name in ("summary.csv", "accuracy.png"):
        (stage / name).unlink()
    (stage / outdir.MARKER).write_text(outdir.MARKER_HEAD + "\n")
    session = Session(stage, None, False)
    session.finish("fedasync", 0, {"algorithm": "fedasync", "seed": 0})
    shutil.rmtree(stage / "fedasync" / "seed1")
    raw = yaml.safe_load((stage / "scenario.yaml").read_text())
    section, key, value = EDITS[edit]
    if key is None:
        raw[section] = value
    else:
        raw[section][key] = value
    (stage / "scenario.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    before = _tree(tmp_path)
    _code, err = cli(capsys, ["run", "--resume", out, "--quiet", "--workers", "1"], "resume edits", expect=2)
    assert "changed after the runs began" in err, err
    assert _tree(tmp_path) == before and not out.exists()


# -- SIGTERM ------------------------------------------------------------------------------------------------------------


def test_sigterm_leaves_the_folder_and_message_of_ctrl_c(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue: SIGTERM stopped a run without a word. Now: one line, exit 143, a resumable folder (two worker
    processes, which ignore the signal: the command stops them)."""
    _write(tmp_path, tiny_scenario(seeds=[0, 1], budget={"time": 500.0}, eval={"every": 5.0}))
    proc = _start(["run", "s.yaml", "--out", "o", "--quiet", "--workers", "2", "--checkpoint-every", "300"], tmp_path)
    _wait_for(tmp_path / "o.partial" / "fedasync" / "seed0" / "metrics.csv", proc)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err.strip().splitlines() == ["simfl: terminated by SIGTERM; what finished is in the .partial folder (see "
                                        "its INCOMPLETE file)"], err
    incomplete = (tmp_path / "o.partial" / "INCOMPLETE").read_text()
    assert "interrupted by SIGTERM" in incomplete and "simfl run --resume o" in incomplete
    monkeypatch.chdir(tmp_path)
    cli(capsys, ["run", "--resume", "o", "--quiet", "--workers", "1"], "sigterm", expect=0)
    assert (tmp_path / "o" / "summary.csv").is_file()
    COUNTS[("sigterm", "exit143")] += 1


# -- a full disk ---------------------------------------------------------------------------------------------------------

LIMITS_KB = [1, 16]


def _limited(tmp_path: Path, kb: int, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", f"ulimit -f {kb}; exec \"$@\"", "simfl", *SIMFL, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def _full_disk_args(command: str, out: str = "o") -> list[str]:
    if command == "run":
        return ["run", "s.yaml", "--out", out, "--quiet", "--workers", "1"]
    return ["sweep", "s.yaml", "--out", out, "--set", "sweep={train.lr: [0.1]}", "--quiet", "--workers", "1"]


@pytest.mark.parametrize("kb", LIMITS_KB)
@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_full_disk_is_one_line_naming_the_file(tmp_path: Path, command: str, kb: int) -> None:
    """The issue: a full disk or file-size limit was an internal error leaving truncated files in .partial. Now
    one line naming the file, exit 2, no temporary or truncated file, and a resumable folder."""
    _write(tmp_path, tiny_scenario(budget={"time": 200.0}, eval={"every": 0.5}))
    limited = _limited(tmp_path, kb, _full_disk_args(command))
    err = limited.stderr.strip()
    assert limited.returncode == 2 and len(err.splitlines()) == 1, err
    assert "cannot be written" in err and "file-size limit" in err and "continues" in err, err
    COUNTS[("disk full", "exit2")] += 1
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.rglob("*.tmp.png"))
    stage = tmp_path / "o.partial" if command == "run" else tmp_path / "o" / "lr=0.1__seed=0.partial"
    assert (stage / "scenario.yaml").is_file() and (tmp_path / "s.yaml").is_file()
    if (stage / "INCOMPLETE").is_file():  # absent only when the limit stopped the very first bookkeeping write
        assert "stopped:" in (stage / "INCOMPLETE").read_text()
    else:
        assert "checkpoint.pt" in err or "INCOMPLETE" in err, err
    for csv_file in stage.rglob("*.csv"):  # none ends in a cut row
        assert csv_file.read_bytes().endswith(b"\n"), csv_file


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_after_a_full_disk_the_folder_resumes_to_the_same_numbers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, tiny_scenario(budget={"time": 200.0}, eval={"every": 0.5}))
    assert _limited(tmp_path, 8, _full_disk_args(command)).returncode == 2
    again = ["run", "--resume", "o", "--quiet", "--workers", "1"] if command == "run" else _full_disk_args(command)
    assert main(again) == 0
    assert main(_full_disk_args(command, "whole")) == 0
    cell = "" if command == "run" else "lr=0.1__seed=0"
    for name in ("fedasync/seed0/metrics.csv", "fedasync/seed0/events.csv", "summary.csv"):
        got, ref = (tmp_path / "o" / cell / name).read_text(), (tmp_path / "whole" / cell / name).read_text()
        if name == "summary.csv":  # wall_seconds differs
            got, ref = (re.sub(r",[0-9.]+,([^,]*)$", r",\1", t, flags=re.M) for t in (got, ref))
        assert got == ref, name
