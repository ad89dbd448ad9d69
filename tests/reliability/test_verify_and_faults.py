"""--verify catches corrupted events and diverging runs; sync rounds end by their deadline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simfl import rng
from simfl.cli import main
from simfl.launch.checkpoint import FAILED_FILE
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod
from simfl.sim.state import SimState
from simfl.sim.verify import InvariantError
from simfl.sim.world import World
from tests.conftest import tiny_scenario


def run(raw: dict, verify: bool = True) -> SimState:
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), scn.seeds[0])
    return run_one(scn, fed, 0, verify=verify).state


def test_verify_passes_a_clean_run() -> None:
    assert run(tiny_scenario()).updates == 13


def test_verify_catches_a_latency_changed_after_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    original = World.dispatch

    def corrupting(self: World, client, weights) -> None:  # type: ignore[no-untyped-def]
        original(self, client, weights)  # the round's end is scheduled
        if client.index == 1 and client.rounds == 2:
            client.latency += 0.25  # the event no longer matches its scheduled arrival

    monkeypatch.setattr(World, "dispatch", corrupting)
    assert run(tiny_scenario(), verify=False).updates == 13  # unnoticed without --verify
    with pytest.raises(InvariantError, match=r"client 1 round 1: ended at 5\.0, but dispatch time 2\.5 \+ latency 2\.75"):
        run(tiny_scenario())


def test_verify_stops_a_diverging_run_and_marks_the_folder(write_scenario, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    raw = tiny_scenario(train={"epochs": 1, "batch_size": 16, "lr": 1e30},
                        algorithms=[{"name": "fedavg", "clients_per_round": 3}, {"name": "fedasync", "alpha": 0.6}])
    out = tmp_path / "out"
    assert main(["run", str(write_scenario(raw)), "--out", str(out), "--quiet", "--verify"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "verify: fedavg seed0: client " in err and "update 1: trained weights contain NaN or Inf" in err
    assert "FAILED" in (out / FAILED_FILE).read_text().upper() and "fedavg seed0" in (out / FAILED_FILE).read_text()
    assert (out / "fedavg" / "seed0" / "metrics.csv").read_text().startswith("virtual_time,")
    assert not (out / "fedasync").exists()  # nothing ran after the failure
    assert not (tmp_path / "out.partial").exists()


def _first_failure_draws(seed: int) -> list[float]:
    return [float(rng.stream(seed, "failure", m).random()) for m in range(3)]


def test_sync_round_with_a_failed_client_completes_by_its_deadline() -> None:
    # Pick p so that only client 2 (latency 400 s) fails its first round.
    seed = next(s for s in range(200) if _first_failure_draws(s)[2] < min(_first_failure_draws(s)[:2]))
    u = _first_failure_draws(seed)
    p = min(u[:2])
    base = tiny_scenario(seeds=[seed], latency={"model": "constant", "seconds": [1.0, 2.5, 400.0]},
                         algorithms=[{"name": "fedavg", "clients_per_round": 3}],
                         availability={"p": p}, budget={"time": 12.0})
    stalled = run(base)
    assert stalled.rounds == 0 and stalled.updates == 0  # without a deadline the round waits 400 s
    state = run({**base, "rounds": {"deadline": 3.0}})
    first = [e for e in state.events if e.dispatch_time == 0.0]
    assert [(e.client, e.update, e.time) for e in first if e.event == "arrival"] == [(0, 1, 1.0), (1, 2, 2.5)]
    assert state.rounds >= 3  # rounds close by 3, 6, 9, ... whatever their clients do
    by_time = {m.virtual_time: m.updates for m in state.metrics}
    assert by_time[2.0] == 0 and by_time[4.0] >= 2  # the first round closed at its 3.0 s deadline
    assert np.all(np.isfinite([m.accuracy for m in state.metrics]))
    # Client 2 is busy until its failure at 400 s and is never selected meanwhile.
    assert all(e.client != 2 for e in state.events)


def test_over_selection_closes_at_k_and_logs_late_updates() -> None:
    raw = tiny_scenario(algorithms=[{"name": "fedavg", "clients_per_round": 2}], rounds={"over_select": 0.5})
    state = run(raw)
    # 3 selected, the round closes once 2 delivered (1.0, 2.5); client 2's update at 4.0 is late.
    assert [(e.event, e.client, e.time) for e in state.events[:3]] == [
        ("arrival", 0, 1.0), ("arrival", 1, 2.5), ("late", 2, 4.0)]
    late = [e for e in state.events if e.event == "late"]
    assert all(e.update is None and e.staleness is None for e in late)


def test_async_clients_that_fail_or_leave_never_stall_the_server() -> None:
    raw = tiny_scenario(latency={"model": "exponential", "mean": 1.0}, budget={"time": 40.0},
                        availability={"p": 0.4, "rejoin_delay": 0.5,
                                      "departures": [{"client": 0, "leave": 2.0, "rejoin": None}]})
    state = run(raw)
    assert {e.event for e in state.events} >= {"failure", "arrival"}
    assert all(e.time <= 2.0 for e in state.events if e.client == 0 and e.event == "arrival")
    assert max(e.time for e in state.events if e.event == "arrival") > 30.0


def test_update_budget_run_ends_when_every_client_left_for_good() -> None:
    raw = tiny_scenario(budget={"updates": 1000},
                        availability={"departures": [{"client": m, "leave": 3.0} for m in range(3)]})
    state = run(raw)
    assert state.stopped and state.now == 3.0
