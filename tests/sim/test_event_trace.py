"""The engine's event trace on 3 clients with constant latencies 1.0, 2.5 and 4.0 s, checked exactly.

Hand-worked trace (async, every client dispatched at time 0 in index order):
client 0 arrives at 1, 2, 3, ...; client 1 at 2.5, 5, 7.5; client 2 at 4, 8.
Ties at the same instant go to the round dispatched first:
at 4.0 client 2 (dispatched at 0) before client 0 (dispatched at 3);
at 5.0 client 1 (dispatched at 2.5) before client 0 (dispatched at 4);
at 8.0 client 2 (dispatched at 4) before client 0 (dispatched at 7).
Staleness s = t - tau, tau = the update count when the client last talked (0 at start).
"""

from __future__ import annotations

import pytest

from simfl.launch.experiment import Engine, federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod
from tests.conftest import tiny_scenario

ENGINES: list[Engine] = ["simpy", "heap"]

#          t,  time, client, staleness, dispatch_time
EXPECTED = [
    (1, 1.0, 0, 1, 0.0),
    (2, 2.0, 0, 1, 1.0),
    (3, 2.5, 1, 3, 0.0),
    (4, 3.0, 0, 2, 2.0),
    (5, 4.0, 2, 5, 0.0),
    (6, 4.0, 0, 2, 3.0),
    (7, 5.0, 1, 4, 2.5),
    (8, 5.0, 0, 2, 4.0),
    (9, 6.0, 0, 1, 5.0),
    (10, 7.0, 0, 1, 6.0),
    (11, 7.5, 1, 4, 5.0),
    (12, 8.0, 2, 7, 4.0),
    (13, 8.0, 0, 3, 7.0),
]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Engine:
    """Every scheduler that exists runs the golden traces."""
    return request.param  # type: ignore[no-any-return]


def run(raw: dict, engine: Engine = "simpy") -> object:
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), scn.seeds[0])
    return run_one(scn, fed, 0, engine=engine).state


def test_async_trace_times_order_and_staleness(engine: Engine) -> None:
    state = run(tiny_scenario(), engine)
    got = [(e.update, e.time, e.client, e.staleness, e.dispatch_time) for e in state.events]
    assert got == EXPECTED
    latencies = {0: 1.0, 1: 2.5, 2: 4.0}
    for e in state.events:
        assert e.latency == latencies[e.client]
        assert e.time == pytest.approx(e.dispatch_time + e.latency)
        assert e.weight == pytest.approx(0.6 * e.staleness**-0.5)


def test_evaluation_grid_sees_arrivals_at_the_same_instant(engine: Engine) -> None:
    state = run(tiny_scenario(), engine)
    assert [(m.virtual_time, m.updates) for m in state.metrics] == [(0.0, 0), (2.0, 2), (4.0, 6), (6.0, 9), (8.0, 13)]


def test_update_budget_stops_after_exactly_n_updates(engine: Engine) -> None:
    state = run(tiny_scenario(budget={"updates": 6}), engine)
    assert [e.update for e in state.events] == [1, 2, 3, 4, 5, 6]
    assert state.now == 4.0
    # Final evaluation at the stopping instant, after the last update.
    assert (state.metrics[-1].virtual_time, state.metrics[-1].updates) == (4.0, 6)


def test_latency_sequence_is_shared_across_algorithms(engine: Engine) -> None:
    """The k-th latency of client m does not depend on the algorithm (exponential delays)."""
    raw = tiny_scenario(latency={"model": "exponential", "mean": 2.0})
    a = run(raw, engine)
    b = run(tiny_scenario(latency={"model": "exponential", "mean": 2.0},
                          algorithms=[{"name": "fedasync", "alpha": 0.2}]), engine)
    per_client_a = {m: [e.latency for e in a.events if e.client == m] for m in range(3)}
    per_client_b = {m: [e.latency for e in b.events if e.client == m] for m in range(3)}
    for m in range(3):
        n = min(len(per_client_a[m]), len(per_client_b[m]))
        assert n > 0 and per_client_a[m][:n] == per_client_b[m][:n]


def test_evaluation_after_each_update_adds_one_row_per_aggregation() -> None:
    """eval.after_each_update: a row after every update (the released code's protocol) besides the grid (both
    clocks give these rows: tests/sim/test_clocks.py)."""
    state = run(tiny_scenario(eval={"every": 2.0, "after_each_update": True}))
    rows = [(m.virtual_time, m.updates) for m in state.metrics]
    per_update = [(t, u) for u, t, *_ in EXPECTED]
    grid = [(0.0, 0), (2.0, 2), (4.0, 6), (6.0, 9), (8.0, 13)]
    assert sorted(rows) == sorted(per_update + grid)
    # Rows are in time order; an update's row comes before the grid row of the same instant.
    assert rows[:4] == [(0.0, 0), (1.0, 1), (2.0, 2), (2.0, 2)]
    assert [m.virtual_time for m in state.metrics] == sorted(m.virtual_time for m in state.metrics)
