"""Hostile input, part five (ClientApps and other crashes): user code is named, nothing waits forever.

Classes: a Flower ClientApp that misbehaves (exits, raises a ``BaseException``, replaces
``context.state``, replies a ``num-examples`` that is no positive count, returns list metrics from a
legacy client) in its train or evaluate handler, on the inline and the process executor; an app that
never returns (bounded by ``client.timeout``); an app module that exits or raises while imported;
and other crashes: a FIFO, socket or folder at ``<out>.lock``, and the disk client-state store under a
file-size limit. Every case ends in one line naming the code or the path, exit 2, no traceback, in
bounded time. Most cases call the code in this process (the trainer, the executor, the CLI); a few
real ``python -m simfl`` runs check the exit code and stderr of the command itself. Counts per class go
to :data:`tests.reliability.hostile.COUNTS`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

pytest.importorskip("flwr")

import simfl  # noqa: E402
from simfl.algorithms.store import DiskVectors  # noqa: E402
from simfl.data.base import Shards  # noqa: E402
from simfl.data.partition import Parts  # noqa: E402
from simfl.errors import InputError, NoSpace, UserCodeFailed  # noqa: E402
from simfl.models.flat import Layout  # noqa: E402
from simfl.models.small import MLP, MLPConfig  # noqa: E402
from simfl.names import allowing_imports  # noqa: E402
from simfl.train.flower import ClientAppEvaluator, ClientAppTrainer, ClientConfig  # noqa: E402
from simfl.train.local import Job, TrainConfig  # noqa: E402
from simfl.train.message import Message  # noqa: E402
from simfl.train.pool import ProcessExecutor  # noqa: E402
from tests.conftest import tiny_scenario  # noqa: E402
from tests.flower.hostile_apps import ACTS, LEGACY, MESSAGE, STATES  # noqa: E402
from tests.reliability.hostile import COUNTS, bounded, cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
APPS = "tests.flower.hostile_apps"
WAITS = ("sleep", "wait")
"""Behaviours that block without using a core: safe to leave behind in this process after their limit."""
ACCEPTED = ("metrics_text", "metrics_bytes", "metrics_flag")
"""Legacy metrics Flower's legacy API allows (scalars): the reply is taken, the value not kept."""
FAILING = {"message": [b for b in MESSAGE if b not in (*WAITS, "loop")],
           "legacy": [b for b in LEGACY if b not in (*WAITS, "loop")]}
"""Per API, the behaviours that answer at once (with something wrong, or accepted)."""
BOTH = [(api, b) for api, behaviours in FAILING.items() for b in behaviours]
"""Every (API, behaviour) that answers at once."""
LIMIT = 1.0
"""``client.timeout`` of the process workers here, in seconds."""


def _expected(api: str, behaviour: str) -> tuple[str, ...]:
    """Words one of which the line about ``behaviour`` must hold (what went wrong, as the line names it)."""
    if behaviour in ACTS:
        return {"exit_0": (" raised SystemExit: 0",), "exit_1": (" raised SystemExit: 1",),
                "exit_3": (" raised SystemExit: 3",), "exit_none": (" raised SystemExit",),
                "exit_text": (" raised SystemExit: the app gave up",), "quit": (" raised Quit: 4",),
                "oddity": (" raised Oddity: the user's app failed",),
                "generator_exit": (" raised GeneratorExit: the user's app failed",),
                "base_exception": (" raised BaseException: the user's app failed",)}[behaviour]
    if behaviour in STATES:
        kind = type(STATES[behaviour]()).__name__
        return (f" set context.state to {kind} ",)
    if behaviour.startswith("examples_"):
        if api == "message":
            return (" replied num-examples ",)
        return (" returned num_examples ", " raised TypeError")  # Flower's NumPyClient refuses some counts itself
    return (" returned metric 'bad' = list ",)


# -- the trainer and the executors, in this process ------------------------------------------------------------


def _model() -> torch.nn.Module:
    return MLP.build(MLPConfig(hidden=[8]), (8,), 3)


def _shards(clients: int = 3) -> Shards:
    """Client c holds 10 + c samples, drawn in turn (each client's x, then its y)."""
    gen = torch.Generator().manual_seed(0)
    pairs = [(torch.randn(10 + c, 8, generator=gen), torch.randint(0, 3, (10 + c,), generator=gen))
             for c in range(clients)]
    ends = np.cumsum([len(y) for _, y in pairs])
    return Shards(torch.cat([x for x, _ in pairs]), torch.cat([y for _, y in pairs]),
                  Parts.of([np.arange(end - len(y), end) for end, (_, y) in zip(ends, pairs, strict=True)]))


def _client(api: str, timeout: float | None = 600.0, app: str = "switch") -> ClientConfig:
    return ClientConfig(flower_app=f"{APPS}:{api}_{app}", timeout=timeout)


def _job(behaviour: str, layout: Layout, model: torch.nn.Module) -> Job:
    return Job(1, 2, layout.flatten(model), Message(config={"behaviour": behaviour}))


@pytest.fixture(autouse=True)
def _imports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Import paths allowed, as ``--allow-imports`` does."""
    monkeypatch.setattr("simfl.names.imports_allowed", lambda: True)


def _refused(exc: BaseException, api: str, behaviour: str, where: str) -> None:
    """``exc`` is one line naming the app, the client and its call, and what ``behaviour`` did wrong."""
    assert isinstance(exc, UserCodeFailed), repr(exc)
    text = str(exc)
    assert "\n" not in text and "this is a bug in simfl" not in text, text
    assert f"{APPS}:{api}_" in text and where in text, text
    assert any(words in text for words in _expected(api, behaviour)), text


@pytest.mark.parametrize("behaviour", FAILING["message"], ids=lambda b: f"message-{b}")
def test_a_message_app_misbehaving_in_training_is_named_inline(behaviour: str) -> None:
    """The issue: context.state replaced and num-examples 0 were internal errors or a ZeroDivisionError in the
    strategy; an app's exit or BaseException must be named as the app's too."""
    _train_inline("message", behaviour)


@pytest.mark.parametrize("behaviour", FAILING["legacy"], ids=lambda b: f"legacy-{b}")
def test_a_legacy_app_misbehaving_in_training_is_named_inline(behaviour: str) -> None:
    """The issue: list metrics from a NumPyClient ended in Flower's TypeError, an internal error."""
    _train_inline("legacy", behaviour)


def _train_inline(api: str, behaviour: str) -> None:
    model = _model()
    layout = Layout.of(model)
    trainer = ClientAppTrainer(_client(api), model, layout, _shards(), TrainConfig(), 0)
    kind = "ClientApps misbehaving (train, inline)"
    if behaviour in ACCEPTED:
        reply = trainer.run(_job(behaviour, layout, model))
        assert "bad" not in reply.metrics and reply.metrics["num-examples"] == 11
        COUNTS[(kind, "accepted")] += 1
        return
    with pytest.raises(UserCodeFailed) as caught:
        trainer.run(_job(behaviour, layout, model))
    _refused(caught.value, api, behaviour, "client 1, node 2, its round 3")
    COUNTS[(kind, "one line")] += 1


@pytest.mark.parametrize(("api", "behaviour"), BOTH)
def test_an_app_misbehaving_in_evaluation_is_named(api: str, behaviour: str) -> None:
    """The federated evaluation calls the app through the same checks (the evaluate handler, a client's evaluate)."""
    model = _model()
    layout = Layout.of(model)
    evaluate = ClientAppEvaluator(_client(api), model, layout, _shards(), 0, lambda client: None)
    kind = "ClientApps misbehaving (evaluate)"
    if behaviour in ACCEPTED:
        metrics = evaluate(1, layout.flatten(model), {"behaviour": behaviour, "server-round": 4})
        assert metrics is not None and metrics["num-examples"] == 11 and "bad" not in metrics
        COUNTS[(kind, "accepted")] += 1
        return
    with pytest.raises(UserCodeFailed) as caught:
        evaluate(1, layout.flatten(model), {"behaviour": behaviour, "server-round": 4})
    _refused(caught.value, api, behaviour, "client 1, node 2, evaluation of round 4")
    COUNTS[(kind, "one line")] += 1


@pytest.fixture(scope="module")
def workers() -> Iterator[dict[str, ProcessExecutor]]:
    """One process executor per API (one forked worker each), serving every behaviour in turn."""
    model = _model()
    layout = Layout.of(model)
    with allowing_imports(True):  # the forked workers inherit the permission
        pools = {api: ProcessExecutor(model, layout, _shards(), TrainConfig(), 0, workers=1, threads=1,
                                      start_method="fork", client=_client(api, timeout=LIMIT))
                 for api in ("message", "legacy")}
    try:
        yield pools
    finally:
        for pool in pools.values():
            pool.close()


@pytest.mark.parametrize(("api", "behaviour"), BOTH + [(api, b) for api in FAILING for b in WAITS])
def test_an_app_misbehaving_in_a_process_worker_is_named_as_inline(
        workers: dict[str, ProcessExecutor], api: str, behaviour: str) -> None:
    """The issue: under ``executor: {kind: process}`` a replaced context.state said only "training job failed in
    a worker:"; the worker's line must be the inline one (and a call past the limit ends there too)."""
    model = _model()
    layout = Layout.of(model)
    pool = workers[api]
    kind = "ClientApps misbehaving (train, process worker)"
    with bounded(30):
        handle = pool.submit(_job(behaviour, layout, model))
        if behaviour in ACCEPTED:
            assert "bad" not in pool.collect(handle).metrics
            COUNTS[(kind, "accepted")] += 1
            return
        with pytest.raises(UserCodeFailed) as caught:
            pool.collect(handle)
    if behaviour in WAITS:
        assert f"was still running after {LIMIT:g} s, the limit client.timeout sets" in str(caught.value)
    else:
        _refused(caught.value, api, behaviour, "client 1, node 2, its round 3")
    COUNTS[(kind, "one line")] += 1
    fine = pool.submit(_job("none", layout, model))  # the worker still serves
    assert pool.collect(fine).metrics["num-examples"] == 11


@pytest.mark.parametrize(("api", "behaviour"), [(api, b) for api in FAILING for b in WAITS] + [("legacy", "fn_sleep")])
@pytest.mark.parametrize("seconds", [0.2, 0.4])
def test_an_app_that_never_returns_ends_at_its_time_limit_inline(api: str, behaviour: str, seconds: float) -> None:
    """The issue: an app that never returns had no time limit; inline, the call waits in a thread of its own."""
    model = _model()
    layout = Layout.of(model)
    app = behaviour if behaviour.startswith("fn_") else "switch"
    trainer = ClientAppTrainer(_client(api, seconds, app), model, layout, _shards(), TrainConfig(), 0)
    started = time.monotonic()
    with bounded(30), pytest.raises(UserCodeFailed) as caught:
        trainer.run(_job(behaviour, layout, model))
    took = time.monotonic() - started
    text = str(caught.value)
    assert f"was still running after {seconds:g} s, the limit client.timeout sets" in text and f"{APPS}:{api}_" in text
    assert seconds <= took < seconds + 10, took
    assert "misbehave" in caught.value.details or "client_fn" in caught.value.details  # the call's stack
    COUNTS[("ClientApps that never return", "one line")] += 1


@pytest.mark.parametrize("value", [0, -1, -0.5, float("nan"), float("inf"), 10**7, "ten minutes", [600]])
def test_client_timeout_is_a_positive_number_of_seconds_or_null(value: Any) -> None:
    """``client.timeout`` is checked like every field: one line saying what is allowed."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="timeout"):
        ClientConfig(timeout=value)
    COUNTS[("client.timeout values", "refused")] += 1


# -- the CLI, in this process ----------------------------------------------------------------------------------


def _scenario(app: str, entry: dict[str, Any], **client: Any) -> dict[str, Any]:
    """A tiny synthetic federation of 3 clients whose ClientApp is ``app``."""
    return tiny_scenario(algorithms=[entry], budget={"updates": 4}, executor={"kind": "inline"},
                         client={"flower_app": f"{APPS}:{app}", **client})


ENTRIES: dict[str, dict[str, Any]] = {"FedAvg": {"name": "flower", "strategy": "FedAvg"},
           "legacy FedAvg": {"name": "flower", "strategy": "flwr.server.strategy:FedAvg"},
           "FedProx": {"name": "flower", "strategy": "FedProx", "options": {"proximal_mu": 0.1}},
           "fedbuff": {"name": "fedbuff", "buffer": 2}}
CLI_CASES = [(app, entry) for app in ("message_examples_zero", "legacy_examples_zero") for entry in ENTRIES] + [
    ("message_state_dict", "fedbuff"), ("legacy_state_none", "FedAvg"), ("legacy_metrics_list", "fedbuff"),
    ("legacy_metrics_ints", "legacy FedAvg"), ("message_exit_3", "fedbuff"), ("legacy_exit_3", "FedAvg"),
    ("legacy_fn_exit_3", "fedbuff"), ("message_oddity", "FedAvg"), ("legacy_base_exception", "fedbuff"),
    ("message_generator_exit", "legacy FedAvg"), ("message_sleep", "fedbuff"), ("legacy_wait", "FedAvg")]


@pytest.mark.parametrize(("app", "entry"), CLI_CASES)
def test_a_misbehaving_app_ends_the_run_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], app: str,
                                                   entry: str) -> None:
    """The issue: num-examples 0 under Flower's FedAvg ended in a ZeroDivisionError blamed on the strategy; the
    run must end in one line naming the app, the client and its round, exit 2, the traceback in crash.txt."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_scenario(app, ENTRIES[entry], timeout=0.5)))
    argv: list[Any] = ["run", path, "--out", tmp_path / "out", "--quiet", "--allow-imports"]
    _code, err = cli(capsys, argv, "ClientApps misbehaving (simfl run)", expect=2)
    assert err.startswith("simfl: client.flower_app (client ") and f"{APPS}:{app}" in err, err
    assert "algorithms.strategy" not in err and "ZeroDivisionError" not in err, err
    crash = Path(err.rsplit(" ", 1)[-1])
    assert crash.is_file() and crash.parent == tmp_path / "out.partial", err


@pytest.mark.parametrize("app", ["sgd_app", "legacy_sgd_app"])
def test_a_well_behaved_app_gives_the_same_files_with_and_without_a_time_limit(tmp_path: Path, app: str) -> None:
    """The time limit runs each call in a thread: the numbers must not change (grad mode, context, streams)."""
    raw = tiny_scenario(data={"dataset": "digits", "partition": {"kind": "iid", "clients": 3}}, model={"name": "mlp"},
                        algorithms=[{"name": "fedbuff", "buffer": 2}], budget={"updates": 4},
                        executor={"kind": "inline"})
    files = {}
    for timeout in (None, 600.0):
        client = {"flower_app": f"tests.flower.apps:{app}", "timeout": timeout,
                  "run_config": {"lr": 0.05, "local-epochs": 1, "batch-size": 16}}
        out = tmp_path / f"limit-{timeout}"
        simfl.run({**raw, "client": client}, out=out, allow_imports=True, quiet=True)
        files[timeout] = [(out / "fedbuff" / "seed0" / name).read_bytes() for name in ("metrics.csv", "events.csv")]
    assert files[None] == files[600.0]
    assert len(pd.read_csv(tmp_path / "limit-None" / "fedbuff" / "seed0" / "metrics.csv")) > 1
    COUNTS[("ClientApps within their limit", "same files")] += 1


IMPORT_FAILURES = {
    "exit 3": ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    "exit 0": ("import sys\nsys.exit(0)\n", "SystemExit: 0"),
    "exit None": ("import sys\nsys.exit()\n", "SystemExit"),
    "exit text": ("import sys\nsys.exit('no data here')\n", "SystemExit: no data here"),
    "BaseException subclass": ("class Oddity(BaseException):\n    pass\nraise Oddity('odd')\n", "Oddity: odd"),
    "GeneratorExit": ("raise GeneratorExit('gone')\n", "GeneratorExit: gone"),
    "SystemExit subclass": ("class Quit(SystemExit):\n    pass\nraise Quit(4)\n", "Quit: 4"),
    "bare BaseException": ("raise BaseException()\n", "BaseException"),
}


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("case", sorted(IMPORT_FAILURES))
def test_an_app_module_that_exits_while_imported_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: str,
        command: str) -> None:
    """The issue: ``sys.exit(3)`` in the app's module exited 3 with nothing printed, and a BaseException printed
    its traceback."""
    source, words = IMPORT_FAILURES[case]
    name = f"hostile_import_{command}_{sorted(IMPORT_FAILURES).index(case)}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_scenario("message_switch", ENTRIES["fedbuff"])).replace(
        f"{APPS}:message_switch", f"{name}:app"))
    argv: list[Any] = [command, path, "--allow-imports"] + (["--out", tmp_path / "out", "--quiet"]
                                                            if command == "run" else [])
    with contextlib.suppress(SystemExit):  # a SystemExit escaping is the bug: cli() then sees no exit code
        _code, err = cli(capsys, argv, "ClientApp modules exiting while imported", expect=2)
        assert "client.flower_app" in err and f"cannot import module '{name}'" in err and words in err, err
        assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()
        return
    pytest.fail("SystemExit escaped the command")


# -- other crashes: the lock file, the disk store --------------------------------------------------------------


def _special(path: Path, kind: str) -> Any:
    """Put a ``kind`` (fifo, socket, folder) at ``path``; what keeps it alive (a bound socket)."""
    if kind == "fifo":
        os.mkfifo(path)
        return None
    if kind == "folder":
        path.mkdir()
        return None
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    return sock


KINDS = {"fifo": "a named pipe (FIFO)", "socket": "a socket", "folder": "a folder"}
"""What each special file at the lock is called on the line."""


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("how", ["run", "run --force", "resume", "api"])
def test_a_special_file_at_the_lock_is_one_line_without_blocking(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kind: str,
        how: str) -> None:
    """The issue: a FIFO at ``<out>.lock`` was an internal error (and then removed); it must be one line naming the
    path, at once, and left in place."""
    monkeypatch.chdir(tmp_path)
    lock = tmp_path / "out.lock"
    keep = _special(lock, kind)
    try:
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(tiny_scenario(budget={"time": 3.0})))
        if how == "api":
            with bounded(30), pytest.raises(InputError) as caught:
                simfl.run(path, out=tmp_path / "out", quiet=True)
            err = f"simfl: {caught.value}"
            COUNTS[("special files at <out>.lock", "InputError")] += 1
        else:
            argv: list[Any] = (["run", "--resume", tmp_path / "out"] if how == "resume" else
                               ["run", path, "--out", tmp_path / "out", "--quiet", *how.split()[1:]])
            _code, err = cli(capsys, argv, "special files at <out>.lock", expect=2)
        assert "out.lock: " in err, err
        assert f"is {KINDS[kind]}, not a regular file" in err, err
        assert os.path.lexists(lock)
        assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()
    finally:
        if keep is not None:
            keep.close()


@contextlib.contextmanager
def _file_size_limit(size: int) -> Iterator[None]:
    """This process may write no file past ``size`` bytes in the block (``ulimit -f``; SIGXFSZ ignored)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)


@pytest.mark.parametrize("shape", [(3, 1000), (10, 10**4), (100, 100), (1, 10**5), (7, 333)])
@pytest.mark.parametrize("folder", ["temp", "given"])
def test_the_disk_store_under_a_file_size_limit_is_one_error_and_no_finalizer_noise(
        tmp_path: Path, shape: tuple[int, int], folder: str) -> None:
    """The issue: after its one line, the store printed "Exception ignored in DiskVectors.__del__" and a traceback."""
    noise: list[Any] = []
    where = str(tmp_path) if folder == "given" else None
    hook = sys.unraisablehook
    sys.unraisablehook = noise.append
    try:
        with _file_size_limit(512), pytest.raises(NoSpace) as caught:
            DiskVectors(*shape, dir=where)
        text = str(caught.value)
        del caught  # the traceback holds the half-made store: collected now, its finalizer runs here
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert noise == [], [repr(n.exc_value) for n in noise]
    assert "client_state.dir" in text and (where or tempfile.gettempdir()) in text, text
    assert list(tmp_path.iterdir()) == []
    COUNTS[("the disk store under a file-size limit", "NoSpace, no noise")] += 1


# -- the command itself: exit code and stderr ------------------------------------------------------------------


def _command(argv: list[str], size: int | None = None) -> subprocess.Popen[str]:
    """``python -m simfl argv`` from the checkout (with a file-size limit of ``size`` bytes when given)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        if size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen([sys.executable, "-m", "simfl", *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=limit)


@pytest.fixture(scope="module", autouse=True)
def commands(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[subprocess.Popen[str], Path]]]:
    """The real commands of this file, started together when the module starts (each is mostly interpreter
    start-up, so they run beside the cases in this process)."""
    base = tmp_path_factory.mktemp("commands")
    started: dict[str, tuple[subprocess.Popen[str], Path]] = {}
    (base / "exits_on_import.py").write_text("import sys\nsys.exit(3)\n")
    loop = base / "loop.yaml"
    loop.write_text(yaml.safe_dump(_scenario("message_loop", ENTRIES["fedbuff"], timeout=1.0)))
    exits = base / "exits.yaml"
    exits.write_text(yaml.safe_dump(_scenario("message_switch", ENTRIES["fedbuff"])).replace(
        f"{APPS}:message_switch", "exits_on_import:app"))
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = f"{base}{os.pathsep}{env_path}"
    try:
        started["import exit"] = (_command(["validate", str(exits), "--allow-imports"]), base / "x")
        started["loop inline"] = (_command(["run", str(loop), "--out", str(base / "loop"), "--quiet",
                                            "--allow-imports"]), base / "loop")
        for algorithm in ("orthofl", "ca2fl"):
            raw = tiny_scenario(algorithms=[{"name": algorithm}], budget={"time": 3.0}, model={"name": "mlp",
                                "hidden": [64]}, client_state={"store": "disk", "dir": str(base)})
            scn = base / f"{algorithm}.yaml"
            scn.write_text(yaml.safe_dump(raw))
            started[f"store {algorithm}"] = (_command(["run", str(scn), "--out", str(base / algorithm), "--quiet"],
                                                      size=8000), base / algorithm)
    finally:
        os.environ["PYTHONPATH"] = env_path
    yield started
    for proc, _ in started.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(("case", "words"), [
    ("import exit", "cannot import module 'exits_on_import' of 'exits_on_import:app': SystemExit: 3"),
    ("loop inline", "was still running after 1 s, the limit client.timeout sets"),
    ("store orthofl", "the client-state store's file in"),
    ("store ca2fl", "the client-state store's file in"),
])
def test_the_command_ends_in_one_line_and_exit_2(commands: dict[str, tuple[subprocess.Popen[str], Path]],
                                                 case: str, words: str) -> None:
    """The command's own exit code and stderr: 2 and one line, never the app's exit code, a traceback or
    "Exception ignored"; an app in an endless loop (inline, a busy thread) ends at its limit."""
    proc, _out = commands[case]
    try:
        _stdout, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        COUNTS[("simfl command", "hang")] += 1
        raise
    lines = stderr.strip().splitlines()
    COUNTS[("simfl command", f"exit{proc.returncode}")] += 1
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("simfl: "), (proc.returncode, stderr)
    assert words in lines[0] and "Traceback" not in stderr and "Exception ignored" not in stderr, stderr


@pytest.mark.parametrize("api", ["message", "legacy"])
def test_an_app_in_an_endless_loop_in_a_process_worker_ends_at_its_limit(
        workers: dict[str, ProcessExecutor], api: str) -> None:
    """A busy loop in a worker: the worker's wait ends at the limit; the loop stays in that worker until it closes
    (last in this file, so it spins only until the module's workers are closed)."""
    model = _model()
    layout = Layout.of(model)
    with bounded(30), pytest.raises(UserCodeFailed) as caught:
        workers[api].collect(workers[api].submit(_job("loop", layout, model)))
    assert f"was still running after {LIMIT:g} s, the limit client.timeout sets" in str(caught.value)
    COUNTS[("ClientApps that never return", "one line")] += 1
