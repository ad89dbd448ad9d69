"""Helpers of the hostile-input suite: call the CLI in-process, bounded in time, and check the one-line rule."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from simfl.cli import main

CASE_SECONDS = 30
"""Wall-clock bound of one case: a case still running then is a hang."""

COUNTS: Counter[tuple[str, str]] = Counter()
"""(class, outcome) -> cases, written to $SIMFL_FUZZ_COUNTS (JSON) at the end of the session when set."""


FUZZ_SCALE = float(os.environ.get("SIMFL_FUZZ_SCALE", "0.5"))
"""Share of each class's cases run: ``make test`` runs the first half of every fixed set (the suite stays within
its time); ``SIMFL_FUZZ_SCALE=1`` runs the whole sets the hostile-input issues were measured with."""


def fuzz(n: int) -> Any:
    """Hypothesis settings of a class: ``n`` derandomized examples (a fixed set, the same on every run), scaled by
    :data:`FUZZ_SCALE` (at least 5)."""
    return settings(max_examples=max(5, round(n * FUZZ_SCALE)), deadline=None,
                    suppress_health_check=list(HealthCheck), derandomize=True, database=None)


class Hang(Exception):
    """A case ran past :data:`CASE_SECONDS`."""


@contextlib.contextmanager
def bounded(seconds: float = CASE_SECONDS) -> Iterator[None]:
    """Raise :class:`Hang` in this (main) thread when the block runs longer than ``seconds``."""

    def alarm(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def cli(capsys: pytest.CaptureFixture[str], argv: list[str], kind: str, expect: int | None = None) -> tuple[int, str]:
    """Run ``simfl argv`` in-process: exit 0 or 2, never a traceback or a crash, one line for an error.

    ``expect`` pins the exit code (2 for a case that is a user mistake by construction).
    Returns the exit code and stderr; counts the case under ``kind``.
    """
    try:
        with bounded():
            code = main([str(a) for a in argv])
    except Hang:
        COUNTS[(kind, "hang")] += 1
        raise
    err = capsys.readouterr().err.strip()
    outcome = "exit0" if code == 0 else "exit2" if code == 2 else f"exit{code}"
    COUNTS[(kind, outcome)] += 1
    assert "Traceback" not in err and "this is a bug in simfl" not in err, err
    assert code in (0, 2), (code, err)
    if expect is not None:
        assert code == expect, (code, err)
    if code == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("simfl: "), err
    return code, err


def write_counts() -> None:
    """Write :data:`COUNTS` where ``$SIMFL_FUZZ_COUNTS`` says (one JSON file per test process)."""
    target = os.environ.get("SIMFL_FUZZ_COUNTS")
    if not target or not COUNTS:
        return
    path = Path(target) / f"counts-{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({f"{k}|{o}": n for (k, o), n in COUNTS.items()}))
