"""Hostile input, class 2: a Ray address where no cluster answers ends in one line, in bounded time.

``ray.init(address=...)`` retries for minutes in silence when nothing listens, or when a port accepts
connections but no Ray cluster speaks there. simfl first opens one TCP connection (bounded by
``network.CONNECT_TIMEOUT``) and then tries a first connection in a child process it kills after
``$SIMFL_RAY_TIMEOUT`` seconds. The cases run ``--ray ADDRESS`` and ``executor: {kind: ray, address}``
against ports where nothing listens, listeners that never answer, names that do not resolve, malformed
ports and bad timeout values; and SIGTERM during the wait.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import tiny_scenario
from tests.reliability.hostile import cli

pytest.importorskip("ray", reason="the ray extra is not installed")
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    """A loopback port where nothing listens (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections (into the backlog) and never says a word."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        yield int(sock.getsockname()[1])


FORMS = ["127.0.0.1:{port}", "localhost:{port}", "ray://127.0.0.1:{port}", "ray://localhost:{port}"]
"""How a user writes an address: Ray's GCS address and the Ray Client form."""

HOW = ["--ray", "executor"]
"""The two places an address is given: the run's backend and the training executor."""


def _case(tmp_path: Path, how: str, address: str) -> list[str]:
    """The ``simfl run`` arguments of one case."""
    raw = tiny_scenario(budget={"time": 4.0})
    if how == "executor":
        raw["executor"] = {"kind": "ray", "workers": 1, "address": address}
    scn = tmp_path / "s.yaml"
    scn.write_text(yaml.safe_dump(raw))
    argv = ["run", str(scn), "--out", str(tmp_path / "out"), "--quiet", "--workers", "1"]
    return argv + (["--ray", address] if how == "--ray" else [])


def _refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, how: str, address: str, words: str,
             seconds: float) -> None:
    """One line with ``words``, exit 2, within ``seconds``, no output folder."""
    start = time.monotonic()
    _, err = cli(capsys, _case(tmp_path, how, address), "2 ray address", expect=2)
    assert words in err, err
    assert time.monotonic() - start < seconds, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("repeat", range(3))
def test_nothing_listens(capsys: pytest.CaptureFixture[str], tmp_path: Path, form: str, how: str, repeat: int) -> None:
    _refused(capsys, tmp_path, how, form.format(port=_free_port()), "Connection refused", 20)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("limit", ["1", "1.5"])
def test_a_port_that_never_answers(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   silent_port: int, form: str, how: str, limit: str) -> None:
    monkeypatch.setenv("SIMFL_RAY_TIMEOUT", limit)
    _refused(capsys, tmp_path, how, form.format(port=silent_port), f"answered within {limit} s", 30)


BAD_PORTS = ["127.0.0.1:70000", "127.0.0.1:-1", "127.0.0.1:port", "ray://127.0.0.1:99999", "127.0.0.1:0",
             "localhost:6379x", "ray://localhost:1e3"]


@pytest.mark.parametrize("address", BAD_PORTS)
@pytest.mark.parametrize("how", HOW)
def test_a_malformed_port(capsys: pytest.CaptureFixture[str], tmp_path: Path, address: str, how: str) -> None:
    _refused(capsys, tmp_path, how, address, "port", 20)


@pytest.mark.parametrize("host", ["no-such-host.invalid", "cluster.example.invalid", "x..y"])
@pytest.mark.parametrize("how", HOW)
def test_a_name_that_does_not_resolve(capsys: pytest.CaptureFixture[str], tmp_path: Path, host: str, how: str) -> None:
    _refused(capsys, tmp_path, how, f"{host}:6379", "cannot connect to", 30)


@pytest.mark.parametrize("value", ["x", "0", "-1", "inf", "nan", "1e999", " ", "10s"])
def test_a_bad_timeout(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                       silent_port: int, value: str) -> None:
    monkeypatch.setenv("SIMFL_RAY_TIMEOUT", value)
    _refused(capsys, tmp_path, "--ray", f"127.0.0.1:{silent_port}", "SIMFL_RAY_TIMEOUT", 20)


def test_sigterm_during_the_wait_ends_in_one_line(tmp_path: Path, silent_port: int) -> None:
    """The command waits on a silent port; SIGTERM ends it within seconds with its one line and 143."""
    argv = _case(tmp_path, "--ray", f"127.0.0.1:{silent_port}")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIMFL_RAY_TIMEOUT": "120"}
    child = subprocess.Popen([sys.executable, "-m", "simfl", *argv], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    time.sleep(15)  # imports, validation, the TCP check, then the child's connection attempt
    assert child.poll() is None, child.communicate()
    sent = time.monotonic()
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=30)
    assert time.monotonic() - sent < 10
    assert child.returncode == 143, err
    assert err.strip().splitlines() == [err.strip()] and "SIGTERM" in err, err
