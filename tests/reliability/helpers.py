"""Scenarios shared by the reliability tests."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from simfl.cli import main
from simfl.launch.checkpoint import Session
from tests.conftest import tiny_scenario


class Saves(list[bytes]):
    """A ``Checkpointing.save``: keeps each checkpoint as the bytes ``torch.save`` makes of it."""

    def __call__(self, data: dict[str, Any]) -> None:
        buffer = io.BytesIO()
        torch.save(data, buffer)
        self.append(buffer.getvalue())

    def loaded(self) -> list[dict[str, Any]]:
        """Each checkpoint read back as a resumed run reads it."""
        return [torch.load(io.BytesIO(blob), weights_only=True) for blob in self]


def faulty_scenario(**changes: Any) -> dict[str, Any]:
    """Tiny scenario with exponential latencies, random failures and a departure: stream states matter."""
    raw = tiny_scenario(
        latency={"model": "exponential", "mean": 1.5},
        availability={"p": 0.2, "rejoin_delay": 0.3,
                      "departures": [{"client": 1, "leave": 5.0, "rejoin": 9.0}]},
        budget={"time": 30.0},
        eval={"every": 1.0},
        algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "fedbuff", "buffer": 2},
                    {"name": "fedavg", "clients_per_round": 2}],
        rounds={"deadline": 2.0, "over_select": 0.5},
    )
    raw.update(changes)
    return raw


def interrupted_run(folder: Path, raw: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """A scenario file in ``folder`` (``raw``, default a tiny two-algorithm one) and its unfinished
    ``out.partial``: one run finished, the next checkpointed mid-way, then stopped as by Ctrl-C (exit 130)."""
    if raw is None:
        raw = tiny_scenario(algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "fedbuff", "buffer": 2}],
                            latency={"model": "exponential", "mean": 1.5}, budget={"time": 12.0})
    scn = folder / "s.yaml"
    scn.write_text(yaml.safe_dump(raw))
    original = Session.save_run

    def save_then_stop(self: Session, algorithm: str, seed: int, blob: bytes, now: float, updates: int) -> None:
        original(self, algorithm, seed, blob, now, updates)
        if self.finished:
            raise KeyboardInterrupt

    mp = pytest.MonkeyPatch()
    mp.setattr(Session, "save_run", save_then_stop)
    try:
        assert main(["run", str(scn), "--out", str(folder / "out"), "--quiet", "--checkpoint-every", "3"]) == 130
    finally:
        mp.undo()
    return scn, folder / "out.partial"
