"""The estimate's counts against a run's, one scenario of each kind the estimate counts.

The estimate states a run's counts (client updates, rounds, late updates, the clients reached) in closed form
(:mod:`simfl.schema.bounds`) from the latency model's statement, or from its own draws where it states none;
these tests hold those statements to what the simulator itself does on the same
scenario in pure-latency mode, where the schedule is the trained run's (training changes no virtual time). The
tolerance, 1.2x, is the grid's measured spread of the counts (0.87-1.12 over 43 cases, benchmarks/README.md): a
change to a scheduling rule in ``simfl/sim`` that the estimate does not follow fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import simfl
from simfl.schema import estimate
from simfl.schema.scenario import validate
from tests.conftest import tiny_scenario
from tests.plugins.rules import Steps

pytestmark = pytest.mark.fast  # a change to a scheduling rule shows here first: in the contributors' loop

TOLERANCE = 1.2
"""The counts' largest ratio either way between the estimate and a run (the grid's spread, rounded up)."""


def population(clients: int) -> dict[str, Any]:
    """A synthetic data section of ``clients`` clients, two rows each."""
    return {"dataset": "synthetic", "train_size": 2 * clients, "test_size": 10, "features": 8, "classes": 3,
            "partition": {"kind": "iid", "clients": clients}}


LOGNORMAL = {"model": "lognormal", "mean": 5.0, "std": 3.0, "mode": "per_client", "jitter": 0.2}
KINDS: dict[str, dict[str, Any]] = {
    "pure_latency": {"data": population(10), "latency": LOGNORMAL, "budget": {"time": 400.0}},
    "async_with_training": {"executor": {"kind": "inline"}, "budget": {"time": 40.0},
                            "latency": {"model": "constant", "seconds": [1.0, 2.5, 4.0]}},
    "served_population": {"data": population(400), "latency": LOGNORMAL, "server": {"concurrency": 20},
                          "budget": {"time": 300.0}},
    "sync_deadline_over_selection": {
        "data": population(30), "latency": LOGNORMAL, "budget": {"time": 600.0},
        "algorithms": [{"name": "fedavg", "clients_per_round": 10}],
        "rounds": {"deadline": 8.0, "over_select": 0.3}},
    "availability_windows": {
        "data": population(20), "latency": LOGNORMAL, "budget": {"time": 2_000.0},
        "availability": {"p": 0.2, "rejoin_delay": 30.0,
                         "departures": [{"client": m, "leave": 100.0 * (m % 5), "rejoin": 100.0 * (m % 5) + 600.0}
                                        for m in range(0, 20, 2)]}},
}
"""One scenario of each kind; FedAsync unless the kind names its rule, pure latency unless it trains."""


def scenario(kind: str) -> dict[str, Any]:
    """The tiny scenario changed into ``kind``, with evaluation only at its start and end."""
    return tiny_scenario(**{"executor": {"kind": "none"}, "eval": {"every": 1e6}, **KINDS[kind]})


def within(stated: float, got: float) -> bool:
    """Whether ``stated`` and ``got`` lie within :data:`TOLERANCE` of each other (both zero counts as equal)."""
    if stated == got:
        return True
    return min(stated, got) > 0 and max(stated, got) / min(stated, got) <= TOLERANCE


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_estimates_counts_are_a_runs(kind: str, tmp_path: Path) -> None:
    """Client updates and (synchronous rounds) late updates and rounds as the estimate states them, against the
    run's summary and events; a served population's clients reached too."""
    raw = scenario(kind)
    est = estimate.estimate(validate(raw), learned=False)
    extent = est.entries[0].extent
    assert extent is not None, est.unstated
    run = simfl.run(raw, tmp_path / "out")
    events = run.events["event"]
    got = int(run.summary["updates"].iloc[0])
    assert got > 0
    assert within(extent.arrivals, got), (kind, extent.arrivals, got)
    if kind == "sync_deadline_over_selection":
        late = int((events == "late").sum())
        assert late > 0 and within(extent.late, late), (extent.late, late)
        rounds = run.events.loc[events == "arrival", "dispatch_time"].nunique()  # a round's clients leave at once
        assert within(extent.rounds, rounds), (extent.rounds, rounds)
    if kind == "served_population":
        reached = run.events.loc[events == "arrival", "client"].nunique()
        assert est.reached is not None and within(min(est.reached, 400), reached), (est.reached, reached)


class Drifting(Steps):
    """A plugin latency model stating nothing, whose rounds vary: client m's rounds are uniform on
    [base (m + 1), 3 base (m + 1)] seconds."""

    def draw(self, client: int, gen: np.random.Generator) -> float:
        return self.config.base * (client + 1) * float(gen.uniform(1.0, 3.0))


@pytest.mark.parametrize(("clients", "base", "time"), [(500, 0.01, 200.0), (3_000, 0.5, 200.0)])
def test_a_plugin_latency_model_stating_nothing_is_counted_from_its_draws(clients: int, base: float, time: float,
                                                                          tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin latency model with no ``round_times`` statement is counted from its own draws (every client's of
    500; 1,000 clients' spread over 3,000, each row standing for its nearest clients), within the same tolerance of
    a run."""
    monkeypatch.setenv("SIMFL_ALLOW_IMPORTS", "1")
    raw = tiny_scenario(executor={"kind": "none"}, eval={"every": 1e6}, data=population(clients),
                        latency={"model": "tests.cli.test_estimate_kinds:Drifting", "base": base},
                        budget={"time": time})
    scenario_ = validate(raw)
    stated = Drifting.drawn_round_times(scenario_.latency, clients, 0, None)  # type: ignore[arg-type]
    assert len(stated.mean) == min(clients, Drifting.DRAWN_CLIENTS) and stated.clients == clients
    assert stated.low.min() >= base and (stated.std > 0).all()
    est = estimate.estimate(scenario_, learned=False)
    extent = est.entries[0].extent
    assert extent is not None and not est.unstated
    got = int(simfl.run(raw, tmp_path / "out").summary["updates"].iloc[0])
    assert within(extent.arrivals, got), (extent.arrivals, got)
