"""Units side by side: any number of workers gives the same files; a killed or interrupted launch resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from simfl.cli import main
from simfl.launch.checkpoint import CHECKPOINT_FILE, INCOMPLETE_FILE, RUNNING_DIR, load_checkpoint
from tests.conftest import tiny_scenario

ROOT = Path(__file__).resolve().parents[2]


def busy_scenario(**changes: Any) -> dict[str, Any]:
    """Six units (two entries x three seeds) of a second or two each: time to kill a launch midway."""
    raw = tiny_scenario(
        seeds=[0, 1, 2],
        latency={"model": "exponential", "mean": 1.5},
        budget={"time": 250.0},
        eval={"every": 25.0},
        algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}],
    )
    raw.update(changes)
    return raw


def result_files(out: Path) -> dict[str, bytes]:
    """Every file of a result folder; summary.csv without its wall_seconds (which measures the machine)."""
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    summary = pd.read_csv(out / "summary.csv")
    assert (summary["wall_seconds"] > 0).all()
    files["summary.csv"] = summary.drop(columns="wall_seconds").to_csv(index=False).encode()
    return files


def child(*args: str) -> subprocess.Popen[bytes]:
    """``simfl`` in a child process with SIGINT at its default (see tests/reliability/test_checkpoint.py)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SIMFL_WORKERS", None)
    return subprocess.Popen([sys.executable, "-m", "simfl", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def children(pid: int) -> list[int]:
    """The live child processes of ``pid``."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def gone(pids: list[int]) -> bool:
    """Whether every process of ``pids`` has ended (within a few seconds)."""
    deadline = time.monotonic() + 30
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(alive(p) for p in pids)


def wait_until(proc: subprocess.Popen[bytes], ready: Any, what: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1].decode()
        try:
            if ready():
                return
        except Exception:  # a file being replaced at that instant
            pass
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The scenario file and its result folder run one unit after another in this process (once per module:
    the tests only read it)."""
    folder = tmp_path_factory.mktemp("reference")
    scn = folder / "s.yaml"
    scn.write_text(yaml.safe_dump(busy_scenario()))
    assert main(["run", str(scn), "--out", str(folder / "ref"), "--quiet", "--workers", "1"]) == 0
    return scn, folder / "ref"


def test_two_workers_give_the_files_of_one(reference: tuple[Path, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    scn, ref = reference
    assert main(["run", str(scn), "--out", str(tmp_path / "two"), "--workers", "2"]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[")]
    assert len(lines) == 6 and lines[-1].startswith("[6/6] ")  # a line per finished unit
    assert result_files(tmp_path / "two") == result_files(ref)
    # rows in the scenario's order (seeds, then entries) whatever order the units finished in
    summary = pd.read_csv(tmp_path / "two" / "summary.csv")
    assert list(zip(summary["seed"], summary["algorithm"], strict=True)) == [
        (s, a) for s in (0, 1, 2) for a in ("fedasync", "fedavg")]


def test_a_sweep_over_workers_gives_the_files_of_one(write_scenario: Any, tmp_path: Path) -> None:
    path = write_scenario(busy_scenario(seeds=[0], sweep={"algorithms[0].alpha": [0.3, 0.6]}))
    for count in ("1", "2"):
        assert main(["sweep", str(path), "--out", str(tmp_path / count), "--workers", count, "--quiet"]) == 0
    cells = sorted(p.name for p in (tmp_path / "1").iterdir() if p.is_dir())
    assert len(cells) == 2
    for cell in cells:
        assert result_files(tmp_path / "2" / cell) == result_files(tmp_path / "1" / cell)


def test_killed_launch_resumes_only_its_unfinished_units(reference: tuple[Path, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    scn, ref = reference
    out, stage = tmp_path / "out", tmp_path / "out.partial"
    proc = child("run", str(scn), "--out", str(out), "--workers", "2", "--checkpoint-every", "25", "--quiet")

    def midway() -> bool:  # a unit finished and another one checkpointed mid-run
        finished = load_checkpoint(stage / CHECKPOINT_FILE)["finished"]
        return len(finished) >= 1 and len(finished) <= 4 and any((stage / RUNNING_DIR).rglob("*.pt"))

    wait_until(proc, midway, "a finished unit and a checkpoint")
    proc.send_signal(signal.SIGSTOP)  # hold the launch while its state is read
    workers = children(proc.pid)
    finished = {(f["algorithm"], f["seed"]) for f in load_checkpoint(stage / CHECKPOINT_FILE)["finished"]}
    held = {(p.parent.name, int(p.stem.removeprefix("seed"))) for p in (stage / RUNNING_DIR).rglob("*.pt")}
    stamps = {p.relative_to(stage): p.stat().st_mtime_ns for a, s in finished for p in (stage / a / f"seed{s}").iterdir()}
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert len(workers) >= 2  # the two workers (and multiprocessing's resource tracker)
    assert gone(workers)  # the workers died with the launch: nothing writes any more
    assert not out.exists() and (stage / INCOMPLETE_FILE).is_file()
    assert held - finished

    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--workers", "2"]) == 0
    ran = {(ln.split()[1], int(ln.split()[2].rstrip(":").removeprefix("seed")))
           for ln in capsys.readouterr().err.splitlines() if ln.startswith("[")}
    every = {(a, s) for s in (0, 1, 2) for a in ("fedasync", "fedavg")}
    assert ran == every - finished  # only the unfinished units ran again
    assert stamps and all((out / p).stat().st_mtime_ns == t for p, t in stamps.items())  # finished files untouched
    assert not stage.exists()
    assert result_files(out) == result_files(ref)


def test_ctrl_c_stops_every_worker_and_leaves_a_resumable_folder(reference: tuple[Path, Path], tmp_path: Path
                                                                 ) -> None:
    scn, ref = reference
    out, stage = tmp_path / "out", tmp_path / "out.partial"
    proc = child("run", str(scn), "--out", str(out), "--workers", "2", "--checkpoint-every", "25", "--quiet")
    wait_until(proc, lambda: any((stage / RUNNING_DIR).rglob("*.pt")), "a checkpoint")
    workers = children(proc.pid)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert "interrupted" in err.decode() and len(err.decode().strip().splitlines()) == 1
    assert len(workers) >= 2 and gone(workers)
    assert "interrupted by SIGINT" in (stage / INCOMPLETE_FILE).read_text()
    assert not list(stage.rglob("*.tmp"))
    assert main(["run", "--resume", str(out), "--quiet", "--workers", "2"]) == 0
    assert result_files(out) == result_files(ref)


def test_more_workers_than_cores_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scn = tmp_path / "s.yaml"
    scn.write_text(yaml.safe_dump(tiny_scenario(executor={"kind": "inline", "threads": 2})))
    cores = len(os.sched_getaffinity(0))
    assert main(["run", str(scn), "--out", str(tmp_path / "o"), "--workers", str(cores)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("simfl: --workers: ") and f"{2 * cores} cores" in err
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.partial").exists()


def test_default_workers_fill_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    from simfl.launch.runner import workers_for
    from simfl.schema.scenario import validate

    monkeypatch.delenv("SIMFL_WORKERS")
    cores = len(os.sched_getaffinity(0))
    one = validate(tiny_scenario())
    two = validate(tiny_scenario(executor={"kind": "process", "workers": 2, "threads": 1}))
    assert workers_for(None, [one], 100) == cores
    assert workers_for(None, [one], 1) == 1  # never more than the units
    assert workers_for(None, [two], 100) == max(1, cores // 2)  # a unit's own pool counts
    monkeypatch.setenv("SIMFL_WORKERS", "1")
    assert workers_for(None, [one], 100) == 1


def test_validate_shows_the_wall_time_over_workers(write_scenario: Any, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMFL_WORKERS", "2")
    assert main(["validate", str(write_scenario(busy_scenario()))]) == 0
    out = capsys.readouterr().out
    assert "in all with 1 worker" in out and "with 2 workers" in out


def test_a_worker_killed_under_a_unit_is_one_line_and_the_folder_resumes(reference: tuple[Path, Path],
                                                                         tmp_path: Path) -> None:
    scn, ref = reference
    out, stage = tmp_path / "out", tmp_path / "out.partial"
    proc = child("run", str(scn), "--out", str(out), "--workers", "2", "--checkpoint-every", "25", "--quiet")
    wait_until(proc, lambda: any((stage / RUNNING_DIR).rglob("*.pt")), "a checkpoint")
    workers = [p for p in children(proc.pid) if "resource_tracker" not in Path(f"/proc/{p}/cmdline").read_text()]
    os.kill(workers[0], signal.SIGKILL)  # as the kernel's out-of-memory killer would
    _, err = proc.communicate(timeout=60)
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, err.decode()
    assert "its worker process was killed by SIGKILL" in lines[0] and "internal error" not in lines[0]
    assert f"`simfl run --resume {out}` runs the rest" in lines[0]
    assert gone(workers) and (stage / INCOMPLETE_FILE).is_file()
    assert main(["run", "--resume", str(out), "--quiet", "--workers", "2"]) == 0
    assert result_files(out) == result_files(ref)


def _ends_at_once(tasks: Any, results: Any) -> None:
    """A worker process that ends before it takes a unit."""
    os._exit(3)


def test_workers_that_all_end_before_a_unit_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """When every worker process has ended and units remain, the launch says so in one line instead of waiting
    (a script without a main guard does not end them: tests/api/test_any_script.py), and leaves no folder."""
    from simfl.launch import parallel

    monkeypatch.setattr(parallel, "_worker", _ends_at_once)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(tiny_scenario(seeds=[0, 1])))
    assert main(["run", str(scenario), "--out", str(tmp_path / "out"), "--quiet", "--workers", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "workers: every worker process ended before it ran a unit (exit code 3)" in err and "--workers 1" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]
