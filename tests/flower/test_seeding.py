"""User code seeded per call: the global generators around a ClientApp's calls, set from the run's streams."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("flwr")

import simfl  # noqa: E402
from simfl import rng  # noqa: E402
from tests.flower.test_flower import scenario  # noqa: E402


def test_global_generators_are_set_from_the_stream_and_put_back() -> None:
    """Within: Python's, NumPy's and torch's global generators give the draws of the stream's seeds (hand-derived
    from the stream below), the same for the same names and others for other names; after: each generator goes on
    exactly as if nothing had drawn."""
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    expected_after = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    draw = rng.stream(7, "clientapp", 3, 0)
    seeds = int(draw.integers(2**63)), int(draw.integers(2**32)), int(draw.integers(2**63))
    with rng.global_generators(7, "clientapp", 3, 0):
        inside = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    assert inside == (random.Random(seeds[0]).random(), float(np.random.RandomState(seeds[1]).rand()),
                      float(torch.rand(1, generator=torch.Generator().manual_seed(seeds[2]))))
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == expected_after
    with rng.global_generators(7, "clientapp", 3, 0):
        again = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    with rng.global_generators(7, "clientapp", 3, 1):
        other = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    assert again == inside and all(a != b for a, b in zip(other, inside, strict=True))


def test_a_client_app_drawing_from_the_global_generators_gives_the_same_files(tmp_path: Path) -> None:
    """A ClientApp that shuffles through an unseeded DataLoader, draws dropout and NumPy noise, under simfl's FedAvg:
    the same files run twice and with its calls on two worker processes; another seed, other numbers."""
    raw = scenario([{"name": "fedavg", "clients_per_round": 6}], client={"flower_app": "tests.flower.apps:loader_app"},
                   budget={"time": 60})
    for out, seeds, executor in (("a", [0, 1], {"kind": "inline"}), ("b", [0], {"kind": "inline"}),
                                 ("c", [0], {"kind": "process", "workers": 2})):
        simfl.run({**raw, "seeds": seeds, "executor": executor}, out=tmp_path / out, allow_imports=True, workers=1,
                  quiet=True)
    for name in ("metrics.csv", "events.csv"):
        files = [(tmp_path / out / "fedavg" / "seed0" / name).read_bytes() for out in "abc"]
        assert files[0] == files[1] == files[2], name
    losses = [pd.read_csv(tmp_path / "a" / "fedavg" / f"seed{k}" / "metrics.csv")["loss"] for k in (0, 1)]
    assert not losses[0].equals(losses[1])


def test_a_client_app_leaving_a_thread_running_is_said_once(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """What an app's own thread does after its call is not seeded per call: said once, on stderr."""
    from tests.flower.test_flower import RUN_CONFIG

    raw = scenario([{"name": "fedavg", "clients_per_round": 6}], budget={"time": 40},
                   client={"flower_app": "tests.flower.apps:lingering_app", "run_config": RUN_CONFIG})
    simfl.run(raw, out=tmp_path / "o", allow_imports=True, workers=1, quiet=True)
    said = [line for line in capfd.readouterr().err.splitlines() if "left the thread" in line]
    assert len(said) == 1 and said[0].startswith("simfl: client.flower_app (client ")  # the first call collected
    assert said[0].endswith(": the ClientApp tests.flower.apps:lingering_app left the thread 'left-behind' running "
                            "after its call; what it draws or does there is not seeded per call, so the same seed may "
                            "give other numbers")
