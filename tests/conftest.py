"""Shared fixtures: tiny scenarios that run in well under a second."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

SHARED = Path(os.environ.get("SIMFL_SHARED") or Path(__file__).resolve().parents[1].parent / "shared").resolve()
"""The real data and raw logs beside the checkout (``../shared``), or the folder $SIMFL_SHARED names (.ci/run names
an empty one to run the data tests as on a fresh clone). Tests that use it skip, or generate files, where it lacks them."""

# Scenarios without data.root read the data folder $SIMFL_DATA: the shared datasets beside the checkout
# (as .ci/run sets it), never a user's ~/.cache/simfl. Tests that need data they do not find generate it.
# made absolute, since tests start processes in other folders (.ci/run gives a path relative to the checkout).
os.environ["SIMFL_DATA"] = str(Path(os.environ.get("SIMFL_DATA") or SHARED / "datasets").resolve())
# Tests run a scenario's units one after another in the test process (as `--workers 1`) unless they ask for more:
# most check one process's behaviour (monkeypatches, signals), and the suite already uses both cores.
os.environ["SIMFL_WORKERS"] = "1"


FAST = ("sim/", "algorithms/", "test_architecture.py")
"""The folders and files of the rules' tests (the hand-worked traces, the clocks' differential, the algorithms'
hand cases, the layers): ``make test-fast`` (marker ``fast``) runs them, and tests elsewhere that belong to that loop
carry the marker themselves (the estimate's name check)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the rules' tests ``fast`` by where they live (see FAST), so a new test there joins the loop by itself."""
    root = Path(__file__).resolve().parent
    for item in items:
        path = item.path.resolve()
        if path.is_relative_to(root) and path.relative_to(root).as_posix().startswith(FAST):
            item.add_marker(pytest.mark.fast)


@pytest.fixture(autouse=True, scope="session")
def speeds_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The cache of this machine's speeds (``$SIMFL_CACHE``, :mod:`simfl.speeds`) in a folder of the test session,
    never a user's ~/.cache/simfl: what ``simfl run`` measures once serves the session's other runs."""
    folder = tmp_path_factory.mktemp("speeds")
    before = os.environ.get("SIMFL_CACHE")
    os.environ["SIMFL_CACHE"] = str(folder)
    yield folder
    if before is None:
        os.environ.pop("SIMFL_CACHE", None)
    else:
        os.environ["SIMFL_CACHE"] = before


def tiny_scenario(**changes: Any) -> dict[str, Any]:
    """A 3-client synthetic scenario with constant latencies 1.0, 2.5 and 4.0 seconds."""
    raw: dict[str, Any] = {
        "name": "tiny",
        "seeds": [0],
        "data": {"dataset": "synthetic", "train_size": 120, "test_size": 60, "features": 8, "classes": 3,
                 "partition": {"kind": "iid", "clients": 3}},
        "model": {"name": "mlp", "hidden": [8]},
        "train": {"epochs": 1, "batch_size": 16, "lr": 0.1},
        "latency": {"model": "constant", "seconds": [1.0, 2.5, 4.0]},
        "budget": {"time": 8.0},
        "eval": {"every": 2.0},
        "algorithms": [{"name": "fedasync", "alpha": 0.6}],
    }
    raw.update(changes)
    return raw


@pytest.fixture
def write_scenario(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a scenario mapping to a YAML file and return its path."""

    def write(raw: dict[str, Any], name: str = "scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(raw, sort_keys=False))
        return path

    return write
