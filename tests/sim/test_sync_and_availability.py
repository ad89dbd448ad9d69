"""Synchronous rounds and client availability, on the 3-client constant-latency scenario (1.0, 2.5, 4.0 s)."""

from __future__ import annotations

import pytest

from simfl.launch.experiment import Engine, federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod
from simfl.sim.state import SimState
from tests.conftest import tiny_scenario

ENGINES: list[Engine] = ["simpy", "heap"]
"""Both clocks run every rule, availability included."""


def run(raw: dict, engine: Engine = "auto") -> SimState:
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), scn.seeds[0])
    return run_one(scn, fed, 0, engine=engine).state


@pytest.mark.parametrize("engine", ENGINES)
def test_sync_round_lasts_as_long_as_its_slowest_client(engine: Engine) -> None:
    # K = 3: every round sends the same weights to all; rounds end at 4.0 and 8.0.
    state = run(tiny_scenario(algorithms=[{"name": "fedavg", "clients_per_round": 3}]), engine)
    got = [(e.update, e.time, e.client, e.dispatch_time) for e in state.events]
    assert got == [
        (1, 1.0, 0, 0.0), (2, 2.5, 1, 0.0), (3, 4.0, 2, 0.0),
        (4, 5.0, 0, 4.0), (5, 6.5, 1, 4.0), (6, 8.0, 2, 4.0),
    ]
    assert all(e.staleness == 1 for e in state.events)
    # The global model changes only when a round completes (at 4.0 and 8.0).
    assert [(m.virtual_time, m.updates) for m in state.metrics] == [(0.0, 0), (2.0, 0), (4.0, 3), (6.0, 3), (8.0, 6)]
    assert state.rounds == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_sync_sampling_is_shared_by_sync_algorithms(engine: Engine) -> None:
    a = run(tiny_scenario(algorithms=[{"name": "fedavg", "clients_per_round": 2}], budget={"time": 40.0}), engine)
    b = run(tiny_scenario(algorithms=[{"name": "fedprox", "clients_per_round": 2, "mu": 0.1}],
                          budget={"time": 40.0}), engine)
    assert [e.client for e in a.events] == [e.client for e in b.events]
    assert len({e.client for e in a.events}) == 3  # over 10+ rounds every client is sampled


def test_departure_loses_the_round_in_flight_and_rejoins() -> None:
    # Client 1 arrives at 2.5, is re-dispatched, leaves at 3.0 (round lost), returns at 6.0 and
    # restarts from the same weights; its next arrival (8.5) is past the budget.
    raw = tiny_scenario(availability={"departures": [{"client": 1, "leave": 3.0, "rejoin": 6.0}]})
    state = run(raw)
    arrivals = [(e.update, e.time, e.client, e.staleness) for e in state.events if e.event == "arrival"]
    assert arrivals == [
        (1, 1.0, 0, 1), (2, 2.0, 0, 1), (3, 2.5, 1, 3), (4, 3.0, 0, 2), (5, 4.0, 2, 5), (6, 4.0, 0, 2),
        (7, 5.0, 0, 1), (8, 6.0, 0, 1), (9, 7.0, 0, 1), (10, 8.0, 2, 5), (11, 8.0, 0, 2),
    ]
    others = [(e.event, e.time, e.client, e.dispatch_time) for e in state.events if e.event != "arrival"]
    assert others == [("leave", 3.0, 1, 2.5), ("join", 6.0, 1, None)]
    assert state.clients[1].dispatch_time == 6.0 and state.clients[1].rounds == 3


def test_late_joiner_starts_at_its_return() -> None:
    raw = tiny_scenario(availability={"departures": [{"client": 2, "leave": 0.0, "rejoin": 3.0}]})
    state = run(raw)
    c2 = [(e.event, e.time) for e in state.events if e.client == 2]
    assert c2 == [("join", 3.0), ("arrival", 7.0)]


def test_failed_rounds_cost_their_latency_and_deliver_nothing() -> None:
    raw = tiny_scenario(availability={"p": 1.0, "rejoin_delay": 0.5})
    state = run(raw)
    assert state.updates == 0 and all(e.event == "failure" for e in state.events)
    assert [e.time for e in state.events if e.client == 0] == [1.0, 2.5, 4.0, 5.5, 7.0]
    assert [e.dispatch_time for e in state.events if e.client == 0] == [0.0, 1.5, 3.0, 4.5, 6.0]


def test_sync_round_with_failed_clients_still_completes() -> None:
    raw = tiny_scenario(algorithms=[{"name": "fedavg", "clients_per_round": 3}], availability={"p": 1.0})
    state = run(raw)
    assert state.updates == 0 and state.rounds == 2
    assert sorted(e.time for e in state.events) == [1.0, 2.5, 4.0, 5.0, 6.5, 8.0]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("leave", [1.5, 4.0])
def test_a_client_that_leaves_between_rounds_is_not_selected_until_it_returns(engine: Engine, leave: float) -> None:
    # K = 3. Client 0 delivers at 1.0 and is idle when it leaves (1.5), or leaves exactly as round 2 opens (4.0,
    # leave inclusive): round 2 (4.0) goes to clients 1 and 2 only; client 0 joins at 6.0 and waits for round 3.
    raw = tiny_scenario(algorithms=[{"name": "fedavg", "clients_per_round": 3}],
                        availability={"departures": [{"client": 0, "leave": leave, "rejoin": 6.0}]})
    state = run(raw, engine)
    assert [(e.event, e.time, e.client, e.dispatch_time) for e in state.events] == [
        ("arrival", 1.0, 0, 0.0), ("arrival", 2.5, 1, 0.0), ("arrival", 4.0, 2, 0.0), ("join", 6.0, 0, None),
        ("arrival", 6.5, 1, 4.0), ("arrival", 8.0, 2, 4.0),
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_client_that_leaves_while_the_server_holds_it_restarts_at_its_return(engine: Engine) -> None:
    # server_time 1.0: client 0 delivers at 1.0 and the server holds it until 2.0; it left at 1.5, so it is not
    # sent out at 2.0 but at its return (3.0), from the weights of update 1; its next update is taken at 5.0
    # (delivered at 4.0, while the server is busy with client 2's update until 5.0).
    raw = tiny_scenario(server_time=1.0, availability={"departures": [{"client": 0, "leave": 1.5, "rejoin": 3.0}]})
    state = run(raw, engine)
    assert [(e.event, e.time, e.client, e.dispatch_time) for e in state.events] == [
        ("arrival", 1.0, 0, 0.0), ("arrival", 2.5, 1, 0.0), ("join", 3.0, 0, None), ("arrival", 4.0, 2, 0.0),
        ("arrival", 5.0, 0, 3.0), ("arrival", 6.0, 1, 3.5), ("arrival", 7.0, 0, 6.0),
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_return_at_an_arrivals_instant_is_handled_before_the_server_takes_it(engine: Engine) -> None:
    # The tie order of docs/architecture.md: wake-ups due at an instant are handled before the server takes an
    # arrival of that instant, a step later. At 1.0 client 0's round ends, then client 1 leaves during its first
    # round (its wake-ups created at 0.0 in dispatch order), then update 1 is taken. Client 1 returns at 4.0 (a
    # wake-up created at 1.0): client 2's round ends (created at 0.0), client 1 returns and restarts, client 0's
    # round ends (created at 3.0) and is queued, then the server takes client 2's arrival and client 0's.
    raw = tiny_scenario(availability={"departures": [{"client": 1, "leave": 1.0, "rejoin": 4.0}]})
    state = run(raw, engine)
    rows = [(e.event, e.time, e.client, e.update, e.dispatch_time) for e in state.events if e.time <= 6.5]
    assert rows == [
        ("leave", 1.0, 1, None, 0.0), ("arrival", 1.0, 0, 1, 0.0), ("arrival", 2.0, 0, 2, 1.0),
        ("arrival", 3.0, 0, 3, 2.0), ("join", 4.0, 1, None, None), ("arrival", 4.0, 2, 4, 0.0),
        ("arrival", 4.0, 0, 5, 3.0), ("arrival", 5.0, 0, 6, 4.0), ("arrival", 6.0, 0, 7, 5.0),
        ("arrival", 6.5, 1, 8, 4.0),
    ]
