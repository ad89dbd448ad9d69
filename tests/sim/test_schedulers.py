"""The schedulers on both clocks: the same rules, so the same events and whole state; wake-ups as plain data."""

from __future__ import annotations

from typing import Any

import pytest

from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod
from simfl.sim.clock import PRIORITY
from simfl.sim.state import SimState
from simfl.sim.world import Checkpointing
from tests.conftest import tiny_scenario
from tests.sim.same import assert_same_state, same_data

NULL = {"kind": "none"}


@pytest.mark.parametrize("changes", [
    {"availability": {"p": 0.5}},
    {"server_time": 0.5},
    {"eval": {"every": 2.0, "after_each_update": True}},
    {"algorithms": [{"name": "fedavg", "clients_per_round": 2}], "rounds": {"deadline": 3.0}},
])
def test_the_heap_clock_runs_what_the_heap_loop_refused_with_the_same_state(changes: dict[str, Any]) -> None:
    """One set of rules: the heap clock runs every feature, with the events and state of SimPy's clock."""
    scn = scenario_mod.validate(tiny_scenario(executor=NULL, **changes))
    fed = federation(scn, load_dataset(scn), 0)
    heap = run_one(scn, fed, 0, engine="heap").state
    simpy = run_one(scn, fed, 0, engine="simpy").state
    assert_same_state(heap, simpy)


def test_verification_checkpoints_and_observers_run_on_the_heap_clock() -> None:
    scn = scenario_mod.validate(tiny_scenario(executor=NULL))
    fed = federation(scn, load_dataset(scn), 0)
    saved: dict[str, list[dict[str, Any]]] = {"heap": [], "simpy": []}
    seen: dict[str, list[int]] = {"heap": [], "simpy": []}
    states = {
        engine: run_one(scn, fed, 0, verify=True, engine=engine, on_update=lambda s, e=engine: seen[e].append(s.updates),
                        checkpointing=Checkpointing(saved[engine].append, every_updates=2)).state
        for engine in ("heap", "simpy")
    }
    assert_same_state(states["heap"], states["simpy"])
    assert seen["heap"] == seen["simpy"] == list(range(1, states["heap"].updates + 1))
    assert len(saved["heap"]) == len(saved["simpy"]) > 2
    for a, b in zip(saved["heap"], saved["simpy"], strict=True):
        assert same_data(a["state"], b["state"])


def test_auto_engine_runs_availability_failures_on_the_heap_clock() -> None:
    """The drift once seen: pure latency with failures must still fail rounds."""
    scn = scenario_mod.validate(tiny_scenario(executor=NULL, availability={"p": 0.5}))
    fed = federation(scn, load_dataset(scn), 0)
    auto = run_one(scn, fed, 0).state
    simpy = run_one(scn, fed, 0, engine="simpy").state
    assert_same_state(auto, simpy)
    assert any(e.event != "arrival" for e in auto.events)


@pytest.mark.parametrize("algorithm", [{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}])
def test_a_checkpoint_holds_the_pending_wake_ups_as_plain_rows(algorithm: dict[str, Any]) -> None:
    """Pending wake-ups are data: [kind, order, time, index] rows in creation order, none in the past."""
    scn = scenario_mod.validate(tiny_scenario(algorithms=[algorithm], rounds={"deadline": 3.0}))
    fed = federation(scn, load_dataset(scn), 0)
    saved: list[dict[str, Any]] = []
    run_one(scn, fed, 0, checkpointing=Checkpointing(saved.append, every_time=1.5))
    assert saved
    for data in saved:
        state = data["state"]
        rows = state["pending"]
        assert [r[1] for r in rows] == sorted(r[1] for r in rows)
        assert all(r[0] in PRIORITY and r[2] >= state["now"] for r in rows)
        kinds = {r[0] for r in rows}
        assert {"eval", "stop", "checkpoint"} <= kinds and kinds & {"deliver", "leave"}
        restored = SimState.from_data(state)
        assert [(w.kind, w.order, w.time, w.target) for w in sorted(restored.pending.values(), key=lambda w: w.order)] \
            == [tuple(r) for r in rows]
