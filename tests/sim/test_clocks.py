"""One set of rules on two clocks: random scenarios give the same events and whole final state on both.

The rules of a run (dispatch, arrival, rounds, serving, failures, departures, windows, deadlines,
over-selection, server time, rounds in phases over shared links) live once, in :mod:`simfl.sim.world` and
:mod:`simfl.sim.schedulers`;
:mod:`simfl.sim.clock` has two clocks with the same (time, priority, creation order) keys. Each
generated scenario runs on both and every field of the final ``SimState.to_data()`` (events, metrics,
clients, counters, pending wake-ups), the algorithm's own tables and its state must be equal.
Times are drawn as arbitrary decimals, so that exact float times are exercised too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simfl import rng
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod
from tests.sim.same import assert_same_state, difference

CASES = 240

ASYNC: list[dict[str, Any]] = [
    {"name": "orthofl"}, {"name": "orthofl", "shift_source": "global"}, {"name": "orthofl", "returning": "server"},
    {"name": "fedasync", "alpha": 0.5}, {"name": "fedbuff", "buffer": 2}, {"name": "ca2fl", "buffer": 3},
    {"name": "orthofl_no_calib"}, {"name": "orthofl_no_ma"}, {"name": "orthofl_pairwise"},
    {"name": "fadas", "buffer": 2, "delay_threshold": 0, "delay_step": "scaled"}, {"name": "fadas", "buffer": 3},
    {"name": "fadas", "buffer": 2, "delay_threshold": 1, "bn_stats": "mean"}, {"name": "asyncfeded"},
    {"name": "delay_adaptive", "workers": 2},
    {"name": "delay_adaptive", "form": "koloskova", "delay_threshold": 1, "delay_scale": 0.5},
    {"name": "delay_adaptive", "form": "koloskova"},
    {"name": "fedstaleweight", "buffer": 2}, {"name": "fedstaleweight", "buffer": 3, "window": 2, "offset": 1},
    {"name": "fedac", "buffer": 2}, {"name": "fedac", "buffer": 3, "direction": "last_step", "correction": False},
    {"name": "pisces"}, {"name": "pisces", "aggregation": "mean", "min_buffer": 2, "b": 5.0, "window": 2},
    {"name": "port", "buffer": 1, "omega": 1},
    {"name": "port", "buffer": 2, "omega": 2, "aggregation": "models", "similarity": "constant"},
]
SYNC: list[dict[str, Any]] = [
    {"name": "fedavg", "clients_per_round": 2}, {"name": "fedprox", "clients_per_round": 2, "mu": 0.1},
    {"name": "fedadam", "clients_per_round": 1}, {"name": "scaffold", "clients_per_round": 2},
    {"name": "flower", "strategy": "FedAvg", "options": {"fraction_train": 0.5}},
    {"name": "flower", "strategy": "FedProx", "options": {"fraction_train": 0.7, "proximal_mu": 0.1}},
    {"name": "flower", "strategy": "flwr.server.strategy:FedAvg", "options": {"fraction_fit": 0.6}},
    {"name": "fednova", "clients_per_round": 2}, {"name": "feddyn", "clients_per_round": 2, "alpha": 0.1},
    {"name": "mifa"}, {"name": "mifa", "clients_per_round": 2, "start": "zero", "weighting": "samples"},
    {"name": "moon", "clients_per_round": 2},
]


def decimal(gen: np.random.Generator, low: float, high: float) -> float:
    """A time with 1 to 4 decimals (such floats are not sums of each other: no time may be reached by adding)."""
    return round(float(gen.uniform(low, high)), int(gen.integers(1, 5)))


def fleet_file(gen: np.random.Generator, clients: int, folder: Path, case: int) -> str:
    """A fleet trace whose devices have decimal presence windows (some repeating daily, some always present)."""
    rows = ["client,seconds_per_sample,bandwidth,windows,period"]
    for m in range(clients):
        windows, period = "", ""
        if gen.random() < 0.6:
            start = decimal(gen, 0.0, 6.0)
            windows = f"{start}-{round(start + decimal(gen, 1.0, 8.0), 3)}"
            period = f"{decimal(gen, 15.0, 25.0)}" if gen.random() < 0.5 else ""
        rows.append(f"{m},{round(float(gen.uniform(0.005, 0.05)), 4)},{int(gen.integers(2_000, 40_000))},{windows},{period}")
    path = folder / f"fleet{case}.csv"
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def random_scenario(case: int, folder: Path, algorithm: dict[str, Any] | None = None) -> dict[str, Any]:
    """A small scenario mixing every feature a run can have; the algorithm cycles through all built-in ones (or is
    ``algorithm``: a case kept for its features whatever the lists' lengths)."""
    gen = rng.stream(case, "clock-differential")
    clients = int(gen.integers(2, 7))
    algorithms = ASYNC + SYNC
    algorithm = dict(algorithms[case % len(algorithms)] if algorithm is None else algorithm)
    sync = algorithm in SYNC
    if "clients_per_round" in algorithm:
        algorithm["clients_per_round"] = min(algorithm["clients_per_round"], clients)
    raw: dict[str, Any] = {
        "name": f"clocks{case}", "seeds": [case],
        "data": {"dataset": "synthetic", "train_size": 12 * clients, "test_size": 10, "features": 4, "classes": 2,
                 "partition": {"kind": "iid", "clients": clients}},
        "model": {"name": "mlp", "hidden": [3]},
        "budget": {}, "eval": {"every": decimal(gen, 0.5, 3.0), "after_each_update": bool(gen.random() < 0.15)},
        "algorithms": [algorithm], "executor": {"kind": "none"},
    }
    kind = gen.random()
    if kind < 0.45:  # ties: many rounds end at one instant
        raw["latency"] = {"model": "constant", "seconds": [float(s) for s in gen.choice([0.5, 1.0, 1.5], size=clients)]}
    elif kind < 0.7:
        raw["latency"] = {"model": "uniform", "low": 0.2, "high": 3.0}
    elif kind < 0.85:
        raw["latency"] = {"model": "lognormal", "mean": 1.5, "std": 0.8}
    else:
        raw["latency"] = {"model": "fleet_csv", "path": fleet_file(gen, clients, folder, case),
                          "horizon": 60.0}
    if gen.random() < 0.8 or algorithm["name"] == "flower":  # a strategy may wait for nodes that never come
        raw["budget"]["time"] = decimal(gen, 4.0, 14.0)
    if "time" not in raw["budget"] or gen.random() < 0.3:
        raw["budget"]["updates"] = int(gen.integers(3, 40))
    fleet = raw["latency"]["model"] == "fleet_csv"  # its windows are the absences: no departures beside them
    if gen.random() < 0.45:
        departures = []
        for m in gen.choice(clients, size=int(gen.integers(1, clients + 1)), replace=False):
            leave = decimal(gen, 0.0, 8.0)
            departures.append({"client": int(m), "leave": leave,
                               "rejoin": None if gen.random() < 0.2 else round(leave + decimal(gen, 0.1, 6.0), 4)})
        raw["availability"] = {"p": float(gen.choice([0.0, 0.2, 0.4])), "rejoin_delay": decimal(gen, 0.0, 2.0),
                               "departures": [] if fleet else departures}
    if gen.random() < 0.3:
        raw["server_time"] = decimal(gen, 0.01, 0.8)
    if sync and gen.random() < 0.5:
        raw["rounds"] = {"deadline": decimal(gen, 0.5, 3.0) if gen.random() < 0.7 else None,
                         "over_select": 0.0 if algorithm["name"] == "flower" else float(gen.choice([0.0, 0.5, 1.0]))}
    if gen.random() < 0.4 and not algorithm["name"] == "flower":
        low = algorithm.get("clients_per_round", 1)
        raw["server"] = {"concurrency": int(gen.integers(low, clients + 1)),
                         "selection": "uniform" if gen.random() < 0.5 else "by_data"}
    if gen.random() < 0.25:  # drawn last: the features above are each case's as before
        raw["stragglers"] = {"share": float(gen.choice([0.2, 0.5])), "slowdown": decimal(gen, 1.5, 6.0)}
    if gen.random() < 0.3:  # after the stragglers, for the same reason: rounds in phases over shared links
        raw["network"] = network_section(gen, fleet)
        raw["budget"].setdefault("time", decimal(gen, 4.0, 14.0))  # transfers may make every round late
    return raw


def network_section(gen: np.random.Generator, fleet: bool) -> dict[str, Any]:
    """Phases over the server's links (the model moves 92 bytes): client links constant, drawn or the fleet's;
    shared ingress and egress; sometimes a connection limit."""
    def link() -> dict[str, Any]:
        kind = gen.random()
        if fleet and kind < 0.4:
            return {"bandwidth": "fleet"}
        return {"bandwidth": decimal(gen, 40.0, 400.0) if kind < 0.7 else
                {"mean": decimal(gen, 50.0, 300.0), "std": decimal(gen, 0.0, 100.0)}}

    server: dict[str, Any] = {"ingress": decimal(gen, 60.0, 600.0), "egress": decimal(gen, 60.0, 600.0)}
    if gen.random() < 0.4:
        server["connections"] = int(gen.integers(1, 4))
    network: dict[str, Any] = {"server": server}
    for name in ("download", "upload"):
        if gen.random() < 0.7:
            network[name] = link()
    return network


def run_both(raw: dict[str, Any]) -> None:
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), scn.seeds[0])
    heap = run_one(scn, fed, 0, engine="heap")
    simpy = run_one(scn, fed, 0, engine="simpy")
    assert_same_state(heap.state, simpy.state)
    d = difference(heap.tables, simpy.tables, "tables")
    assert d is None, d


@pytest.mark.parametrize("block", range(CASES // 20))
def test_random_scenarios_are_equal_on_both_clocks(block: int, tmp_path: Path) -> None:
    """20 scenarios per test (CASES in all): every built-in algorithm and Flower strategies, sync and async,
    serving with both selections, failures, departures and windows, deadlines, over-selection, server time."""
    features: set[str] = set()
    for case in range(block * 20, block * 20 + 20):
        raw = random_scenario(case, tmp_path)
        features |= {k for k in ("availability", "server_time", "rounds", "server", "stragglers", "network") if k in raw}
        try:
            run_both(raw)
        except AssertionError as exc:
            raise AssertionError(f"case {case}: {exc}") from None
    assert len(features) >= 3  # each block mixes the features


def test_the_generator_covers_every_feature(tmp_path: Path) -> None:
    raws = [random_scenario(case, tmp_path) for case in range(CASES)]
    names = {r["algorithms"][0]["name"] for r in raws}
    assert names >= {"orthofl", "fedasync", "fedbuff", "ca2fl", "fedavg", "fedprox", "fedadam", "scaffold", "flower"}
    assert any("server" in r and r["algorithms"][0]["name"] in ("fedavg", "scaffold") for r in raws)
    assert {r["server"]["selection"] for r in raws if "server" in r} == {"uniform", "by_data"}
    assert any(r.get("rounds", {}).get("deadline") for r in raws)
    assert any(r.get("rounds", {}).get("over_select") for r in raws)
    assert any(r["latency"]["model"] == "fleet_csv" for r in raws)
    assert any(a.get("p") for a in (r.get("availability", {}) for r in raws))
    assert any("stragglers" in r for r in raws)
    networks = [r["network"] for r in raws if "network" in r]
    assert any("connections" in n["server"] for n in networks)
    assert any(n.get("download", {}).get("bandwidth") == "fleet" for n in networks)
    assert any(isinstance(n.get("upload", {}).get("bandwidth"), dict) for n in networks)
    assert any("network" in r and r.get("availability", {}).get("departures") for r in raws)


@settings(max_examples=40, deadline=None)
@given(leave=st.floats(0.0, 1e6, allow_nan=False, allow_infinity=False),
       away=st.floats(1e-9, 1e6, allow_nan=False, allow_infinity=False),
       latency=st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False))
def test_any_departure_and_rejoin_time_is_reached_exactly(leave: float, away: float, latency: float) -> None:
    """Arbitrary finite floats: the departure and the return fire at exactly the given times, on both clocks."""
    rejoin = leave + away
    if not rejoin > leave:
        return
    raw = {
        "name": "times", "seeds": [0],
        "data": {"dataset": "synthetic", "train_size": 20, "test_size": 4, "features": 2, "classes": 2,
                 "partition": {"kind": "iid", "clients": 2}},
        "model": {"name": "mlp", "hidden": [2]},
        "latency": {"model": "constant", "seconds": [latency, latency]},
        "budget": {"updates": 30},
        "eval": {"every": 1e9},
        "algorithms": [{"name": "fedasync", "alpha": 0.5}], "executor": {"kind": "none"},
        "availability": {"departures": [{"client": 0, "leave": leave, "rejoin": rejoin}]},
    }
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), 0)
    states = [run_one(scn, fed, 0, engine=engine).state for engine in ("heap", "simpy")]
    assert_same_state(*states)
    for e in states[0].events:
        if e.event == "leave":
            assert e.time == leave
        if e.event == "join":
            assert e.time == rejoin
