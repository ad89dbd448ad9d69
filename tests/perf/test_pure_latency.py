"""Pure-latency mode: no training, NaN accuracy, deterministic (both clocks are compared in tests/sim/test_clocks.py)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from simfl import rng
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod
from tests.conftest import tiny_scenario
from tests.sim.same import assert_same_state

ALGORITHMS: list[dict[str, Any]] = [
    {"name": "orthofl"}, {"name": "fedasync", "alpha": 0.5}, {"name": "fedbuff", "buffer": 2},
    {"name": "ca2fl", "buffer": 3}, {"name": "fedavg", "clients_per_round": 2}, {"name": "fedadam", "clients_per_round": 1},
    {"name": "scaffold", "clients_per_round": 2},
]


def random_scenario(case: int) -> dict[str, Any]:
    """A small random scenario; latencies on a coarse grid so that many arrivals tie."""
    gen = rng.stream(case, "perf-test-scenario")
    clients = int(gen.integers(2, 7))
    if gen.random() < 0.6:
        latency: dict[str, Any] = {"model": "constant",
                                   "seconds": [float(s) for s in gen.choice([0.5, 1.0, 1.5, 2.0], size=clients)]}
    else:
        latency = {"model": "uniform", "low": 0.2, "high": 3.0}
    budget: dict[str, Any] = {}
    if gen.random() < 0.8:
        budget["time"] = float(gen.choice([3.0, 6.0, 7.5, 10.0]))
    if "time" not in budget or gen.random() < 0.4:
        budget["updates"] = int(gen.integers(3, 40))
    return tiny_scenario(
        seeds=[case],
        data={"dataset": "synthetic", "train_size": 60, "test_size": 10, "features": 4, "classes": 2,
              "partition": {"kind": "iid", "clients": clients}},
        model={"name": "mlp", "hidden": [4]},
        latency=latency,
        budget=budget,
        eval={"every": float(gen.choice([0.5, 1.0, 1.5, 2.5]))},
        algorithms=ALGORITHMS,
        executor={"kind": "none"},
    )


def test_pure_latency_mode_trains_nothing_and_records_no_accuracy(tmp_path) -> None:  # type: ignore[no-untyped-def]
    scn = scenario_mod.validate(tiny_scenario(executor={"kind": "none"}, algorithms=[{"name": "orthofl"}]))
    fed = federation(scn, load_dataset(scn), 0)
    state = run_one(scn, fed, 0).state
    assert [(e.update, e.time, e.client) for e in state.events][:5] == [
        (1, 1.0, 0), (2, 2.0, 0), (3, 2.5, 1), (4, 3.0, 0), (5, 4.0, 2)
    ]
    assert all(math.isnan(m.accuracy) and math.isnan(m.loss) for m in state.metrics)
    assert [m.virtual_time for m in state.metrics] == [0.0, 2.0, 4.0, 6.0, 8.0]
    # the algorithm's state moved: the global model is no longer the initial one
    assert not torch.equal(state.clients[0].start, fed.init)


def test_pure_latency_results_are_deterministic() -> None:
    scn = scenario_mod.validate(random_scenario(3))
    fed = federation(scn, load_dataset(scn), 3)
    a, b = run_one(scn, fed, 0).state, run_one(scn, fed, 0).state
    assert_same_state(a, b)  # the whole state, not a list of fields
    assert np.isfinite([float(c.start.sum()) for c in a.clients if c.start is not None]).all()
