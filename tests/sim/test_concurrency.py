"""Cross-device serving (scenario ``server:``): a population, at most C clients in flight, checked exactly.

Hand-worked trace: 5 clients with constant latencies 1.0, 2.5, 4.0, 1.5, 3.0 s, FedAsync,
concurrency 2, uniform selection, seed 0. Draw k is u_k, the k-th float of the stream
(0, "selection", 0): 0.9543, 0.2995, 0.0139, 0.2871, 0.9538, 0.7866, 0.5906, 0.0253,
0.3179, 0.7311, 0.8778, 0.5988. The drawn client is the floor(u * n)-th of the n idle
clients in index order (an arriving client is idle again once aggregated, so it may be
drawn at once). FedAsync downloads the current model at dispatch: tau = t then.

  time  what                                   idle before the draw  draw        sampled
  0     start                                  0 1 2 3 4             u0 -> 4     4 (tau 0, due 3.0)
  0     start                                  0 1 2 3               u1 -> 1     1 (tau 0, due 2.5)
  2.5   t=1 client 1, s = 1 - 0 = 1            0 1 2 3               u2 -> 0     0 (tau 1, due 3.5)
  3.0   t=2 client 4, s = 2 - 0 = 2            1 2 3 4               u3 -> 1     2 (tau 2, due 7.0)
  3.5   t=3 client 0, s = 3 - 1 = 2            0 1 3 4               u4 -> 3     4 (tau 3, due 6.5)
  6.5   t=4 client 4, s = 4 - 3 = 1            0 1 3 4               u5 -> 3     4 (tau 4, due 9.5)
  7.0   t=5 client 2, s = 5 - 2 = 3            0 1 2 3               u6 -> 2     2 (tau 5, due 11.0)
  9.5   t=6 client 4, s = 6 - 4 = 2            0 1 3 4               u7 -> 0     0 (tau 6, due 10.5)
  10.5  t=7 client 0, s = 7 - 6 = 1            0 1 3 4               u8 -> 1     1 (tau 7, due 13.0)
  11.0  t=8 client 2, s = 8 - 5 = 3            0 2 3 4               u9 -> 2     3 (tau 8, due 12.5)
  12.5  t=9 client 3, s = 9 - 8 = 1            0 2 3 4               u10 -> 3    4 (tau 9, due 15.5)
  13.0  t=10 client 1, s = 10 - 7 = 3          0 1 2 3               u11 -> 2    2 (tau 10, due 17.0)

The time budget (13.0) ends the run after the arrival at 13.0 and its draw.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from simfl import rng
from simfl.algorithms.base import Setup
from simfl.algorithms.orthofl import OrthoFL, OrthoFLConfig
from simfl.errors import InputError
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod
from simfl.sim.selection import BLOCK, Draws, Pool
from simfl.sim.state import SimState
from tests.conftest import tiny_scenario

LATENCIES = [1.0, 2.5, 4.0, 1.5, 3.0]

#          t,  time, client, staleness, dispatch_time
EXPECTED = [
    (1, 2.5, 1, 1, 0.0),
    (2, 3.0, 4, 2, 0.0),
    (3, 3.5, 0, 2, 2.5),
    (4, 6.5, 4, 1, 3.5),
    (5, 7.0, 2, 3, 3.0),
    (6, 9.5, 4, 2, 6.5),
    (7, 10.5, 0, 1, 9.5),
    (8, 11.0, 2, 3, 7.0),
    (9, 12.5, 3, 1, 11.0),
    (10, 13.0, 1, 3, 10.5),
]
SAMPLED = [4, 1, 0, 2, 4, 4, 2, 0, 1, 3, 4, 2]


def five(**changes: Any) -> dict[str, Any]:
    raw = tiny_scenario(
        data={"dataset": "synthetic", "train_size": 200, "test_size": 60, "features": 8, "classes": 3,
              "partition": {"kind": "iid", "clients": 5}},
        latency={"model": "constant", "seconds": LATENCIES},
        budget={"time": 13.0},
        server={"concurrency": 2},
    )
    raw.update(changes)
    return raw


def run(raw: dict[str, Any], index: int = 0, **options: Any) -> SimState:
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), scn.seeds[0])
    return run_one(scn, fed, index, **options).state


def test_the_stream_is_the_one_the_trace_was_worked_with() -> None:
    draws = Draws(0)
    assert [round(draws(k), 4) for k in range(12)] == [
        0.9543, 0.2995, 0.0139, 0.2871, 0.9538, 0.7866, 0.5906, 0.0253, 0.3179, 0.7311, 0.8778, 0.5988]


def test_hand_worked_trace_of_five_clients_at_concurrency_two() -> None:
    state = run(five(), verify=True)
    got = [(e.update, e.time, e.client, e.staleness, e.dispatch_time) for e in state.events]
    assert got == EXPECTED
    assert state.selections == len(SAMPLED)
    # every dispatch, in order: the rounds each client started and the last one still in flight
    assert [c.rounds for c in state.clients] == [SAMPLED.count(m) for m in range(5)]
    in_flight = sorted((c.dispatch_time, c.index) for c in state.clients if c.phase == "round")
    assert in_flight == [(12.5, 4), (13.0, 2)]
    for e in state.events:
        assert e.latency == LATENCIES[e.client]
        assert e.weight == pytest.approx(0.6 * e.staleness**-0.5)


def test_never_more_than_c_in_flight_and_every_arrival_frees_one_slot() -> None:
    """Replaying the trace's dispatches and arrivals: exactly C in flight after each instant."""
    state = run(five(budget={"updates": 40}, latency={"model": "exponential", "mean": 2.0}), verify=True)
    spans = sorted((e.dispatch_time, e.time) for e in state.events)
    for _, end in spans:
        assert sum(1 for s, t in spans if s <= end < t) <= 2


def test_concurrency_of_every_client_is_todays_server_event_for_event() -> None:
    """C = N: each arrival's client is the only idle one, so it is drawn back at once; without ties
    (latencies with no common multiple in the budget) the trace is the one without a server section."""
    latency = {"model": "constant", "seconds": [1.0, 2.3, 4.1, 1.7, 3.3]}
    for algorithm in ({"name": "fedasync", "alpha": 0.6}, {"name": "orthofl"}, {"name": "fedbuff", "buffer": 2},
                      {"name": "ca2fl", "buffer": 2}):
        raw = five(latency=latency, budget={"time": 10.0}, algorithms=[algorithm])
        served = run({**raw, "server": {"concurrency": 5}})
        del raw["server"]
        plain = run(raw)
        assert served.events == plain.events, algorithm["name"]
        assert [m.row() for m in served.metrics] == [m.row() for m in plain.metrics], algorithm["name"]


def test_orthofl_keeps_its_calibrated_model_and_counts_staleness_from_its_last_arrival() -> None:
    """A client back after others' updates trains from the model it was sent at its arrival, and its
    staleness counts from there (the paper's tau: the last time the server heard from it)."""
    state = run(five(algorithms=[{"name": "orthofl"}]))
    got = [(e.update, e.client, e.staleness) for e in state.events]
    # same dispatches as FedAsync's trace; client 4's second arrival (t=4) counts from t=2 (its arrival),
    # client 0's (t=7) from t=3, client 2's (t=8) from t=5, client 1's (t=10) from t=1
    assert got == [(1, 1, 1), (2, 4, 2), (3, 0, 2), (4, 4, 2), (5, 2, 3), (6, 4, 2), (7, 0, 4), (8, 2, 3),
                   (9, 3, 1), (10, 1, 9)]


@pytest.mark.parametrize("shift_source", ["global", "chain"])
def test_orthofl_returning_server_counts_staleness_from_dispatch_as_fedasync(shift_source: str) -> None:
    """``returning: server``: a client sampled again gets what a joiner gets now, so its staleness counts
    from its dispatch: the FedAsync trace exactly, and the weights it trains from are the server's now."""
    raw = five(algorithms=[{"name": "orthofl", "shift_source": shift_source, "returning": "server"}])
    state = run(raw)
    assert [(e.update, e.client, e.staleness) for e in state.events] == [(u, c, s) for u, _, c, s, _ in EXPECTED]
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), 0)
    alg = OrthoFL(OrthoFLConfig(shift_source=shift_source, returning="server"),  # type: ignore[arg-type]
                  Setup(fed.layout, fed.init.clone(), 5, tuple(fed.client_sizes), 0))
    assert not alg.keeps_client_models and OrthoFL(OrthoFLConfig(), alg.setup).keeps_client_models


def test_by_data_draws_in_proportion_to_client_sizes() -> None:
    pool = Pool([1, 3, 6])
    for m in range(3):
        pool.add(m)
    hits = [pool.draw(u) for u in np.linspace(0.0, 0.999, 1000)]
    assert [hits.count(m) for m in range(3)] == [100, 300, 600]


@pytest.mark.parametrize("weights", [[1] * 7, [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]])
def test_pool_draws_as_the_cumulative_intervals_say(weights: list[int]) -> None:
    rs = np.random.default_rng(1)
    pool = Pool(weights)
    members = {int(m) for m in rs.choice(len(weights), size=len(weights) // 2, replace=False)}
    pool.add_all(sorted(members))
    for _ in range(300):
        m = int(rs.integers(len(weights)))
        if m in members:
            pool.remove(m)
            members.discard(m)
        else:
            pool.add(m)
            members.add(m)
        if not members:
            continue
        u = float(rs.random())
        order = sorted(members)
        edges = list(itertools.accumulate(weights[i] for i in order))
        target = int(u * edges[-1])
        assert pool.draw(u) == order[next(i for i, e in enumerate(edges) if e > target)]
        assert pool.count == len(members) and pool.selectable() == order


def test_draw_k_depends_on_k_alone_across_stream_blocks() -> None:
    """Stepping through the blocks in order and jumping straight to a draw (as a resumed run does) agree,
    and draw k is float k % BLOCK of block k // BLOCK."""
    stepped = Draws(3)
    sequence = [stepped(k) for k in range(BLOCK + 2)]
    jumped = Draws(3)
    assert [jumped(k) for k in (BLOCK + 1, BLOCK - 1, 0, BLOCK)] == [sequence[k] for k in (BLOCK + 1, BLOCK - 1, 0, BLOCK)]
    assert sequence[BLOCK + 1] == float(rng.stream(3, "selection", 1).random(BLOCK)[1])
    assert sequence[BLOCK - 1] == float(rng.stream(3, "selection", 0).random(BLOCK)[BLOCK - 1])


def test_synchronous_rounds_draw_their_clients_from_the_pool() -> None:
    state = run(five(algorithms=[{"name": "fedavg", "clients_per_round": 2}], budget={"time": 20.0}), verify=True)
    rounds: dict[int, list[int]] = {}
    for e in state.events:
        assert e.update is not None
        rounds.setdefault((e.update - 1) // 2, []).append(e.client)
    assert all(len(members) == 2 for members in rounds.values())
    assert state.selections == 2 * state.rounds + 2  # the round open at the end drew its two as well


def test_absent_clients_are_not_drawn_and_join_the_pool_on_return() -> None:
    """Client 4 (drawn first without absences) is away until 5.0: the first draws skip it."""
    state = run(five(availability={"departures": [{"client": 4, "leave": 0.0, "rejoin": 5.0}]}), verify=True)
    early = [e for e in state.events if e.dispatch_time is not None and e.dispatch_time < 5.0]
    assert early and all(e.client != 4 for e in early)
    assert any(e.client == 4 and e.event == "arrival" for e in state.events)


def test_scenario_checks_of_the_server_section() -> None:
    with pytest.raises(InputError, match="server.concurrency"):
        run(five(server={"concurrency": 6}))
    with pytest.raises(InputError, match="server.concurrency"):
        run(five(server={"concurrency": 2}, algorithms=[{"name": "fedavg", "clients_per_round": 3}]))
    with pytest.raises(InputError, match="selection"):
        scenario_mod.validate(five(server={"concurrency": 2, "selection": "fastest"}))
