"""A tiny training scenario with every tracker pointed into the test's folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simfl.cli import main
from tests.conftest import tiny_scenario


def tracked_scenario(tmp_path: Path, **tracking: Any) -> dict[str, Any]:
    """Two algorithms (async and sync) with real training, so accuracy and loss are numbers."""
    return tiny_scenario(
        budget={"time": 10.0},
        algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}],
        tracking=tracking,
    )


@pytest.fixture
def run_tracked(write_scenario, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run a scenario through ``simfl run`` into tmp_path/out; return the folder."""

    def run(raw: dict[str, Any]) -> Path:
        out = tmp_path / "out"
        assert main(["run", str(write_scenario(raw)), "--out", str(out), "--quiet"]) == 0
        return out

    return run


def metrics_of(out: Path, algorithm: str, seed: int = 0) -> pd.DataFrame:
    return pd.read_csv(out / algorithm / f"seed{seed}" / "metrics.csv")


def events_of(out: Path, algorithm: str, seed: int = 0) -> pd.DataFrame:
    return pd.read_csv(out / algorithm / f"seed{seed}" / "events.csv")
