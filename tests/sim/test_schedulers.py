"""The schedulers: the fast loop refuses, in one line, what it does not cover, instead of running it differently."""

from __future__ import annotations

from typing import Any

import pytest

from simfl.errors import InputError
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod
from simfl.sim.clock import PRIORITY
from simfl.sim.state import SimState
from simfl.sim.world import Checkpointing
from tests.conftest import tiny_scenario

NULL = {"kind": "none"}


@pytest.mark.parametrize("changes, feature", [
    ({"availability": {"p": 0.5}}, "availability"),
    ({"server_time": 0.5}, "server_time"),
    ({"eval": {"every": 2.0, "after_each_update": True}}, "eval.after_each_update"),
    ({"algorithms": [{"name": "fedavg", "clients_per_round": 2}], "rounds": {"deadline": 3.0}}, "rounds"),
])
def test_fast_loop_refuses_what_it_cannot_run_in_one_line(changes: dict[str, Any], feature: str) -> None:
    scn = scenario_mod.validate(tiny_scenario(executor=NULL, **changes))
    fed = federation(scn, load_dataset(scn), 0)
    with pytest.raises(InputError) as info:
        run_one(scn, fed, 0, engine="fast")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("engine: the fast loop cannot run this scenario") and feature in message


def test_fast_loop_refuses_verification() -> None:
    scn = scenario_mod.validate(tiny_scenario(executor=NULL))
    fed = federation(scn, load_dataset(scn), 0)
    with pytest.raises(InputError, match="verification"):
        run_one(scn, fed, 0, verify=True, engine="fast")


def test_auto_engine_runs_availability_failures_on_simpy() -> None:
    """The drift once seen: pure latency with failures must still fail rounds (auto picks SimPy)."""
    scn = scenario_mod.validate(tiny_scenario(executor=NULL, availability={"p": 0.5}))
    fed = federation(scn, load_dataset(scn), 0)
    auto = run_one(scn, fed, 0).state
    simpy = run_one(scn, fed, 0, engine="simpy").state
    assert auto.events == simpy.events
    assert any(e.event != "arrival" for e in auto.events)


def test_fast_loop_refuses_checkpoints() -> None:
    scn = scenario_mod.validate(tiny_scenario(executor=NULL))
    fed = federation(scn, load_dataset(scn), 0)
    with pytest.raises(InputError, match="checkpoints"):
        run_one(scn, fed, 0, checkpointing=Checkpointing(lambda data: None, every_updates=2), engine="fast")


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
        assert [(w.kind, w.order, w.time, w.index) for w in sorted(restored.pending.values(), key=lambda w: w.order)] \
            == [tuple(r) for r in rows]
