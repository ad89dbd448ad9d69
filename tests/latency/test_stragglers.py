"""A share of slow clients over any delay model: hand-computed draws, the seed's choice, the estimate's rows, refusals
and an exact event trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from simfl.errors import InputError
from simfl.latency.base import RoundTimes, Workload
from simfl.latency.constant import Constant, ConstantConfig
from simfl.latency.exponential import Exponential, ExponentialConfig
from simfl.latency.stragglers import Slowed, StragglersConfig, chosen, count, over, round_times
from tests.conftest import tiny_scenario

WORK = Workload(model_bytes=4, flops=1, samples=(10,) * 10, epochs=1)


def slow(**raw: Any) -> StragglersConfig:
    return StragglersConfig.model_validate(raw)


def test_listed_clients_take_slowdown_times_the_models_draw() -> None:
    """Constant 1, 2, 3, 4 s with clients 1 and 3 ten times slower: 1, 20, 3, 40 s every round."""
    base = Constant(ConstantConfig.model_validate({"model": "constant", "seconds": [1, 2, 3, 4]}), 4, 0, WORK)
    lat = Slowed(base, slow(clients=[3, 1], slowdown=10), seed=0)
    assert [[lat.sample(m) for m in range(4)] for _ in range(2)] == [[1.0, 20.0, 3.0, 40.0]] * 2


def test_the_models_own_draws_are_untouched() -> None:
    """The same streams draw the same values: the fast clients' latencies equal the model's alone, bit for bit, the
    slow ones' are exactly k times them, and the state is the model's own."""
    config = ExponentialConfig.model_validate({"model": "exponential", "mean": 10.0, "floor": 1.0})
    plain, base = Exponential(config, 10, 7, WORK), Exponential(config, 10, 7, WORK)
    lat = Slowed(base, slow(share=0.3, slowdown=4), seed=7)
    for _ in range(70):
        for m in range(10):
            got, want = lat.sample(m), plain.sample(m)
            assert got == (want * 4 if m in lat.slow else want)
    assert lat.state() == plain.state()
    assert over(plain, None, 7) is plain


def test_a_share_is_drawn_per_seed_and_a_larger_share_keeps_the_smaller() -> None:
    assert count(slow(share=0.25, slowdown=2), 10) == 3  # floor(2.5 + 1/2): halves round up
    assert count(slow(share=0.0, slowdown=2), 10) == 0 and count(slow(share=1.0, slowdown=2), 10) == 10
    by_seed = [tuple(chosen(slow(share=0.3, slowdown=2), 100, s).tolist()) for s in range(5)]
    assert all(len(c) == 30 for c in by_seed) and len(set(by_seed)) == 5
    assert by_seed[0] == tuple(chosen(slow(share=0.3, slowdown=2), 100, 0).tolist())  # the same seed, the same
    assert set(by_seed[0]) <= set(chosen(slow(share=0.5, slowdown=2), 100, 0).tolist())


@pytest.mark.parametrize(("raw", "needle"), [
    ({"slowdown": 10}, "give share"), ({"share": 0.2, "clients": [1], "slowdown": 10}, "not both"),
    ({"clients": [1, 1], "slowdown": 10}, "lists 1 more than once"), ({"share": 1.5, "slowdown": 10}, "[0, 1]"),
    ({"share": 0.2}, "slowdown"), ({"share": 0.2, "slowdown": 0}, "slowdown"),
])
def test_a_bad_section_is_refused(raw: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValidationError, match=None) as info:
        slow(**raw)
    assert needle in str(info.value)


def test_listed_clients_beyond_the_population_are_refused(write_scenario: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from simfl.cli import main

    path = write_scenario(tiny_scenario(stragglers={"clients": [0, 5], "slowdown": 3}))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["simfl: stragglers.clients: must be client indices below the 3 clients, got 5"]
    with pytest.raises(InputError, match="below the 3 clients"):
        slow(clients=[5], slowdown=3).check(3)


def test_the_estimate_states_the_slow_rows() -> None:
    """One row per client: the listed ones' rows times k exactly. Groups of clients alike: each group splits into
    its slow share and the rest."""
    per_client = RoundTimes.of([1.0, 2.0, 3.0], [0.0, 0.5, 0.0], [1.0, 1.0, 3.0])
    got = round_times(per_client, slow(clients=[1], slowdown=10), 3, 0)
    assert got.mean.tolist() == [1.0, 20.0, 3.0] and got.std.tolist() == [0.0, 5.0, 0.0]
    assert got.low.tolist() == [1.0, 10.0, 3.0]
    grouped = RoundTimes.of([2.0], [1.0], [0.5], weight=[100.0])
    got = round_times(grouped, slow(share=0.2, slowdown=10), 100, 0)
    assert got.mean.tolist() == [2.0, 20.0] and got.weight.tolist() == [80.0, 20.0] and got.low.tolist() == [0.5, 5.0]
    assert round_times(grouped, None, 100, 0) is grouped


def test_the_event_trace_with_a_slow_client(tmp_path: Path) -> None:
    """Constant 1, 2.5 and 4 s, client 0 four times slower (4 s): FedAsync's arrivals by time 8 s are client 1 at
    2.5, 5 and 7.5 s, clients 0 and 2 at 4 and 8 s, in (time, dispatch) order."""
    from simfl.launch.experiment import federation, load_dataset, run_one
    from simfl.schema import scenario as scenario_mod

    raw = tiny_scenario(stragglers={"clients": [0], "slowdown": 4}, executor={"kind": "none"})
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), 0)
    events = run_one(scn, fed, 0).state.events
    assert [(e.time, e.client, e.latency) for e in events] == [
        (2.5, 1, 2.5), (4.0, 0, 4.0), (4.0, 2, 4.0), (5.0, 1, 2.5), (7.5, 1, 2.5), (8.0, 0, 4.0), (8.0, 2, 4.0)]
    plain = run_one(scenario_mod.validate(tiny_scenario(executor={"kind": "none"})), fed, 0).state.events
    assert [(e.time, e.client) for e in plain][:3] == [(1.0, 0), (2.0, 0), (2.5, 1)]
