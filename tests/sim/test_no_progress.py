"""No run without an end: a run with only an update budget whose client rounds stop giving updates is stopped, on
both clocks, at a point computed here by hand, and says why; a time-budget run still goes on to its time."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import torch

from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod
from simfl.sim.engine import Checkpointing
from simfl.sim.state import SimState
from simfl.sim.verify import RunStopped
from simfl.sim.world import DRY_MOST, DRY_ROUNDS
from tests.conftest import tiny_scenario
from tests.sim.same import assert_same_state
from tests.sim.test_clocks import random_scenario


def stopped(raw: dict[str, Any], engine: str, **options: Any) -> RunStopped:
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), scn.seeds[0])
    with pytest.raises(RunStopped) as caught:
        run_one(scn, fed, 0, engine=engine, **options)
    return caught.value


def pure(**changes: Any) -> dict[str, Any]:
    return tiny_scenario(executor={"kind": "none"}, eval={"every": 1e6}, **changes)


def deadline_run(**changes: Any) -> dict[str, Any]:
    """Two clients in every round, a 1 s deadline: client 0 (0.5 s) leaves for good at 0.1 s, during the first round;
    client 1 takes 2 s. Nothing before the run can tell: client 0 makes the deadline while it is there."""
    return pure(latency={"model": "constant", "seconds": [0.5, 2.0]}, budget={"updates": 5},
                data={"dataset": "synthetic", "train_size": 40, "test_size": 10, "features": 4, "classes": 2,
                      "partition": {"kind": "iid", "clients": 2}},
                algorithms=[{"name": "fedavg", "clients_per_round": 2}], rounds={"deadline": 1.0},
                availability={"departures": [{"client": 0, "leave": 0.1}]}, **changes)


@pytest.mark.parametrize("engine", ["heap", "simpy"])
def test_rounds_closed_by_a_deadline_below_every_latency_left_stop_after_1000_per_client(engine: str) -> None:
    """Client 0's round is cut short at 0.1 s; from then on a round opens at 2(k-1) with client 1 alone, closes empty
    at 2k-1, and client 1 comes in late at 2k: the 1,999th late update, the 2,000th fruitless round (1,000 per
    client), is at 3,998 s."""
    stop = stopped(deadline_run(), engine)
    st = stop.state
    assert stop.cause == "no progress" and (stop.algorithm, stop.seed) == ("fedavg", 0)
    assert st.now == 3998.0 and st.updates == 0 and st.rounds == 1999 and st.dry == 2 * DRY_ROUNDS
    assert [e.event for e in st.events] == ["leave"] + ["late"] * 1999
    assert [(e.time, e.client) for e in st.events[-2:]] == [(3996.0, 1), (3998.0, 1)]
    assert st.metrics[-1].virtual_time == 3998.0  # the final row, as at any end
    assert stop.message.startswith("no update in the last 2000 client rounds in a row (1999 late for their round's "
                                   "close, 1 cut short by a departure): the update budget of 5 cannot be reached "
                                   "(stopped at 3998 s after 0 updates")


@pytest.mark.parametrize("engine", ["heap", "simpy"])
def test_async_rounds_longer_than_every_presence_window_stop_after_1000_per_client(engine: str, tmp_path: Path) -> None:
    """Three devices present from 0 to 1 s every 2 s, each round 20 s: a round starts at 2k and is cut short at 2k+1,
    the client returns at 2k+2 and starts again; the 1,000th departure of each client is at 1,999 s."""
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("client,seconds_per_sample,bandwidth,windows,period\n" + "".join(
        f"{m},0.5,1e12,0-1,2\n" for m in range(3)))
    raw = pure(latency={"model": "fleet_csv", "path": str(fleet), "horizon": 2100.0}, budget={"updates": 10})
    st = stopped(raw, engine).state
    assert st.updates == 0 and st.now == 1999.0 and st.dry == 3 * DRY_ROUNDS
    assert [e.event for e in st.events[:6]] == ["leave"] * 3 + ["join"] * 3
    assert [e.time for e in st.events if e.event == "leave"][-3:] == [1999.0] * 3


def test_progress_now_and_then_restarts_the_count() -> None:
    """Updates among the failed rounds: no stop (at p = 0.9 a streak of 3,000 failures has probability 1e-137)."""
    raw = pure(availability={"p": 0.9}, budget={"updates": 60}, latency={"model": "exponential", "mean": 1.0})
    scn = scenario_mod.validate(raw)
    st = run_one(scn, federation(scn, load_dataset(scn), 0), 0).state
    assert st.updates == 60 and st.stopped and max(streaks(st)) < 200


def streaks(st: SimState) -> list[int]:
    runs, n = [0], 0
    for e in st.events:
        n = 0 if e.event == "arrival" else n + (e.event in ("failure", "leave", "late"))
        runs.append(n)
    return runs


def test_a_time_budget_run_goes_on_to_its_time() -> None:
    raw = pure(availability={"p": 1.0}, budget={"time": 5000.0, "updates": 10},
               latency={"model": "constant", "seconds": [1.0, 2.5, 4.0]})
    scn = scenario_mod.validate(raw)
    st = run_one(scn, federation(scn, load_dataset(scn), 0), 0).state
    assert st.now == 5000.0 and st.updates == 0 and st.dry == len(st.events) == 5000 + 2000 + 1250


def test_a_large_population_stops_after_the_most_in_all() -> None:
    assert DRY_MOST < DRY_ROUNDS * 1000  # from 100 clients on, DRY_MOST fruitless rounds in all


def test_a_run_resumed_from_a_checkpoint_stops_where_it_would_have() -> None:
    """The count of fruitless rounds is part of the state: a resumed run stops at the same point, in the same state."""
    raw = deadline_run()
    blobs: list[bytes] = []

    def save(data: dict[str, Any]) -> None:
        if data["state"]["dry"] >= 1500 and not blobs:
            buf = io.BytesIO()
            torch.save(data, buf)
            blobs.append(buf.getvalue())

    full = stopped(raw, "heap", checkpointing=Checkpointing(save, every_time=100.0)).state
    assert len(blobs) == 1 and full.now == 3998.0
    resumed = stopped(raw, "heap", checkpointing=Checkpointing(lambda d: None, every_time=100.0),
                      resume=torch.load(io.BytesIO(blobs[0]), weights_only=True)).state
    assert_same_state(resumed, full)


def test_clock_case_331_ends_the_same_on_both_clocks(tmp_path: Path) -> None:
    """The generated clock case that ran for ever: fleet latencies above the 0.99 s deadline once the clients'
    windows close, failures; stopped after 4,000 fruitless rounds, in the same state on both clocks."""
    raw = random_scenario(331, tmp_path, {"name": "fedadam", "clients_per_round": 1})  # its algorithm when found
    heap, simpy = (stopped(raw, engine) for engine in ("heap", "simpy"))
    assert heap.message == simpy.message and "in the last 4000 client rounds in a row" in heap.message
    assert_same_state(heap.state, simpy.state)
