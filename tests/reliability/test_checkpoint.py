"""Checkpoint and resume: exact continuation in-process, after a real SIGKILL, and after SIGINT."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from simfl.cli import main
from simfl.errors import InputError
from simfl.launch.checkpoint import CHECKPOINT_FILE, INCOMPLETE_FILE, RUNNING_DIR, load_checkpoint, load_run, parse_every
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod
from simfl.sim.engine import Checkpointing
from tests.conftest import tiny_scenario
from tests.reliability.helpers import Saves, faulty_scenario
from tests.sim.same import assert_same_state

ROOT = Path(__file__).resolve().parents[2]


SCAFFOLD = [{"name": "scaffold", "clients_per_round": 2}]


CROSS_DEVICE = [{"name": "orthofl"}, {"name": "fedbuff", "buffer": 2}, {"name": "fedavg", "clients_per_round": 2}]
STORED = [{"name": "orthofl", "shift_source": "global"}, {"name": "ca2fl", "buffer": 2}, {"name": "orthofl_pairwise"},
          {"name": "scaffold", "clients_per_round": 2}]
"""Every algorithm with per-client vectors (simfl.algorithms.store)."""


@pytest.mark.parametrize(("server_time", "algorithms", "server", "store"), [
    (0.0, None, None, None), (0.4, None, None, None), (0.4, SCAFFOLD, None, None),
    (0.0, CROSS_DEVICE, {"concurrency": 2}, None), (0.4, CROSS_DEVICE, {"concurrency": 2, "selection": "by_data"}, None),
    (0.0, STORED, {"concurrency": 2}, "disk"),
])
def test_resuming_from_every_checkpoint_reproduces_the_run(server_time: float, algorithms: Any, server: Any,
                                                           store: str | None) -> None:
    """Async (FedAsync, FedBuff) and sync (FedAvg, SCAFFOLD's messages both ways, with deadline and
    over-selection), failures and a departure; and the same under cross-device serving (the pool and
    the selection stream's draw count, OrthoFL's kept client models), also with every per-client vector
    in the disk store (its rows go into the checkpoint and back)."""
    changes: dict[str, Any] = {} if algorithms is None else {"algorithms": algorithms}
    if server is not None:
        changes["server"] = server
    if store is not None:
        changes["client_state"] = {"store": store}
    scn = scenario_mod.validate(faulty_scenario(server_time=server_time, **changes))
    fed = federation(scn, load_dataset(scn), 0)
    for i in range(len(scn.algorithms)):
        saved = Saves()
        full = run_one(scn, fed, i, checkpointing=Checkpointing(saved, every_updates=3, every_time=2.5)).state
        plain = run_one(scn, fed, i).state
        assert (plain.events, plain.metrics) == (full.events, full.metrics), "checkpointing changed the run"
        kinds = {e.event for e in full.events}
        assert "failure" in kinds and len(saved) > 10
        for data in saved.loaded():
            resumed = run_one(scn, fed, i, resume=data).state
            assert resumed.events == full.events
            assert [m.row() for m in resumed.metrics] == [m.row() for m in full.metrics]


@pytest.mark.parametrize(
    ("text", "updates", "seconds"), [("500", 500, None), ("300s", None, 300.0), (" 2.5s ", None, 2.5)]
)
def test_checkpoint_every_syntax(text: str, updates: int | None, seconds: float | None) -> None:
    every = parse_every(text)
    assert (every.updates, every.seconds) == (updates, seconds)


@pytest.mark.parametrize("text", ["0", "-3", "1.5", "abc", "0s", "5m", "", "infs", "1e400s"])
def test_checkpoint_every_rejects(text: str) -> None:
    with pytest.raises(InputError, match="--checkpoint-every"):
        parse_every(text)


# -- real processes --------------------------------------------------------------------------------


def _scenario(tmp_path: Path) -> Path:
    raw = faulty_scenario(budget={"time": 120.0}, eval={"every": 5.0},
                          algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}])
    raw["data"]["train_size"] = 900
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _child(*args: str) -> subprocess.Popen[bytes]:
    """``simfl run ARGS`` in a child that reacts to SIGINT as from a terminal.

    An ignored SIGINT is inherited across exec (and a library loaded by an earlier test in the same
    worker may have set it so), and Python then installs no KeyboardInterrupt handler: the child's
    SIGINT is reset to the default before exec.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "simfl", "run", *args, "--quiet"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for_checkpoint(proc: subprocess.Popen[bytes], stage: Path, algorithm: str) -> dict[str, Any]:
    """Poll until the checkpoint holds a run of ``algorithm`` under way, and return it with the child
    *stopped* (SIGSTOP): the child is held while the checkpoint is read, so even on a loaded machine it
    cannot finish between the check and the caller's signal (send SIGCONT after a SIGINT)."""
    deadline = time.monotonic() + 120
    path = stage / RUNNING_DIR / algorithm / "seed0.pt"
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1].decode()
        if path.exists():
            proc.send_signal(signal.SIGSTOP)
            cur = load_run(path)
            state = cur["sim"]["state"]
            # the latest checkpoint while the child is held: it is mid-run (before 60 + 5 s of its 120 s)
            if state["updates"] > 0 and state["now"] <= 60:
                return {**load_checkpoint(stage / CHECKPOINT_FILE), "current": cur}
            proc.send_signal(signal.SIGCONT)
        time.sleep(0.005)
    raise AssertionError("no checkpoint appeared")


def _files(out: Path) -> dict[str, bytes]:
    return {f"{a}/{n}": (out / a / "seed0" / n).read_bytes() for a in ("fedasync", "fedavg")
            for n in ("metrics.csv", "events.csv")}


def test_sigkill_then_resume_gives_identical_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scn = _scenario(tmp_path)
    ref = tmp_path / "ref"
    assert main(["run", str(scn), "--out", str(ref), "--quiet"]) == 0
    out = tmp_path / "out"
    stage = tmp_path / "out.partial"
    # Killed for real during the async run, then again during the sync run.
    proc = _child(str(scn), "--out", str(out), "--checkpoint-every", "7")
    first = _wait_for_checkpoint(proc, stage, "fedasync")
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert not out.exists() and (stage / INCOMPLETE_FILE).exists()
    assert first["finished"] == []
    proc = _child("--resume", str(out))
    second = _wait_for_checkpoint(proc, stage, "fedavg")
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert [(f["algorithm"], f["seed"]) for f in second["finished"]] == [("fedasync", 0)]
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert not stage.exists() and not (out / CHECKPOINT_FILE).exists() and not (out / INCOMPLETE_FILE).exists()
    assert _files(out) == _files(ref)


def test_sigint_leaves_a_marked_consistent_folder_that_resumes(tmp_path: Path) -> None:
    scn = _scenario(tmp_path)
    ref = tmp_path / "ref"
    assert main(["run", str(scn), "--out", str(ref), "--quiet"]) == 0
    out = tmp_path / "out"
    stage = tmp_path / "out.partial"
    proc = _child(str(scn), "--out", str(out), "--checkpoint-every", "5s")
    _wait_for_checkpoint(proc, stage, "fedavg")
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0] and "Traceback" not in err.decode()
    marker = (stage / INCOMPLETE_FILE).read_text()
    assert "interrupted by SIGINT" in marker and "finished: fedasync seed0" in marker
    assert not out.exists() and not list(stage.rglob("*.tmp"))
    assert (stage / "fedasync" / "seed0" / "events.csv").read_bytes() == (ref / "fedasync" / "seed0" / "events.csv").read_bytes()
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert _files(out) == _files(ref)


def test_resume_mistakes_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--resume", str(tmp_path / "nothing")]) == 2
    assert "nothing to resume" in capsys.readouterr().err
    stage = tmp_path / "x.partial"
    stage.mkdir()
    (stage / "scenario.yaml").write_text(yaml.safe_dump(faulty_scenario()))
    (stage / CHECKPOINT_FILE).write_bytes(b"not a checkpoint")
    assert main(["run", "--resume", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unreadable checkpoint" in err
    assert main(["run", str(tmp_path / "s.yaml"), "--resume", str(tmp_path / "x")]) == 2
    assert "--resume" in capsys.readouterr().err


def test_the_serving_resume_divergence_is_gone() -> None:
    """OrthoFL chain returning to the server, concurrency 2 by data, lognormal latencies, a checkpoint at every
    update: a checkpoint read the latency streams of clients not yet sent out, which built their generators at
    their start, so once such a client had used the first block derived for it, it drew that block again (update
    186 here; in a killed and resumed run, client 3's 4.786 s instead of 0.393 s). Checkpointing changes nothing,
    and a run resumed from a checkpoint (before, at and after that update) ends in the same state."""
    raw = tiny_scenario(
        seeds=[1], data={"dataset": "synthetic", "train_size": 60, "test_size": 20, "features": 4, "classes": 2,
                         "partition": {"kind": "dirichlet", "alpha": 0.5, "clients": 3}},
        model={"name": "mlp", "hidden": [4]}, executor={"kind": "none"},
        latency={"model": "lognormal", "mean": 1.5, "std": 0.8}, budget={"updates": 200}, eval={"every": 5.0},
        algorithms=[{"name": "orthofl", "shift_source": "chain", "returning": "server"}],
        server={"concurrency": 2, "selection": "by_data"})
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), 1)
    saved: list[bytes] = []

    def save(data: dict[str, Any]) -> None:
        buf = io.BytesIO()
        torch.save(data, buf)
        saved.append(buf.getvalue())

    full = run_one(scn, fed, 0, checkpointing=Checkpointing(save, every_updates=1)).state
    plain = run_one(scn, fed, 0).state
    assert plain.events == full.events and len(saved) == 199
    quiet = Checkpointing(lambda data: None, every_updates=1)  # the same wake-ups as the checkpointed run
    for k in (0, 184, 185, 198):
        resumed = run_one(scn, fed, 0, resume=torch.load(io.BytesIO(saved[k]), weights_only=True), checkpointing=quiet)
        assert_same_state(resumed.state, full)
