"""Rounds in phases over shared links (scenario ``network:``), checked against hand-computed traces.

The model of these scenarios exchanges B = 396 bytes (an MLP 8-8-3: 99 float32 parameters). Each client's
download link moves 2B bytes/s, so every download takes 0.5 s while the server's egress is unlimited; the
server's ingress moves B bytes/s, so a lone upload takes 1 s and uploads in progress share it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from simfl.cli import main
from simfl.errors import InputError
from simfl.launch.experiment import Engine, federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod
from simfl.sim.link import PHASE_COLUMNS, Links, NetState
from simfl.sim.state import Event, SimState
from tests.conftest import tiny_scenario

B = 396.0
ENGINES: list[Engine] = ["simpy", "heap"]


def links(egress: float = math.inf, ingress: float = math.inf, connections: int | None = None) -> Links:
    return Links(egress, ingress, connections, NetState())


def test_two_uploads_of_10_mb_over_10_mb_per_s_share_it_and_both_end_at_2_s() -> None:
    """Processor sharing: each gets 5 MB/s, so each 10 MB takes 2 s."""
    net = links(ingress=10e6)
    net.ask(0.0, 0, True, 10e6, math.inf)
    net.ask(0.0, 1, True, 10e6, math.inf)
    assert [t.rate for t in net.state.active] == [5e6, 5e6]
    assert net.next_end() == 2.0
    assert [t.client for t in net.due(2.0)] == [0, 1]
    assert net.next_end() is None


def test_a_third_upload_joining_at_1_s_moves_both_ends() -> None:
    """From 0 to 1 s two share 10 MB/s: each sends 5 MB and has 5 MB left. From 1 s three share it, 10/3 MB/s each:
    the first two need 5 / (10/3) = 1.5 s more and end at 2.5 s, when the third has sent 1.5 x 10/3 = 5 MB of its
    10 MB; alone from then at 10 MB/s, its last 5 MB take 0.5 s: it ends at 3 s."""
    net = links(ingress=10e6)
    net.ask(0.0, 0, True, 10e6, math.inf)
    net.ask(0.0, 1, True, 10e6, math.inf)
    net.ask(1.0, 2, True, 10e6, math.inf)
    assert [t.remaining for t in net.state.active] == [5e6, 5e6, 10e6]
    end = net.next_end()
    assert end == pytest.approx(2.5, abs=1e-12)
    assert [t.client for t in net.due(end)] == [0, 1]
    assert net.state.active[0].remaining == pytest.approx(5e6, rel=1e-12)
    last = net.next_end()
    assert last == pytest.approx(3.0, abs=1e-12)
    assert [t.client for t in net.due(last)] == [2]


def test_a_slow_client_link_keeps_its_speed_and_the_others_share_the_rest() -> None:
    """Max-min fair: 10 MB/s over a client held to 2 MB/s and two unlimited ones: 2, then (10 - 2) / 2 = 4 each."""
    net = links(ingress=10e6)
    net.ask(0.0, 0, True, 10e6, math.inf)
    net.ask(0.0, 1, True, 10e6, 2e6)
    net.ask(0.0, 2, True, 10e6, math.inf)
    assert [t.rate for t in net.state.active] == [4e6, 2e6, 4e6]


def test_a_connection_limit_queues_first_come_first_served() -> None:
    net = links(egress=10e6, connections=1)
    net.ask(0.0, 0, False, 10e6, math.inf)
    net.ask(0.0, 1, False, 10e6, math.inf)
    assert [t.client for t in net.state.waiting] == [1] and net.next_end() == 1.0
    assert [t.client for t in net.due(1.0)] == [0]
    assert net.state.active[0].start == 1.0 and net.next_end() == 2.0


def phased(network: dict[str, Any], seconds: list[float], **changes: Any) -> dict[str, Any]:
    clients = len(seconds)
    raw = tiny_scenario(
        data={"dataset": "synthetic", "train_size": 40 * clients, "test_size": 20, "features": 8, "classes": 3,
              "partition": {"kind": "iid", "clients": clients}},
        latency={"model": "constant", "seconds": seconds}, executor={"kind": "none"}, network=network, **changes)
    return raw


DOWN = {"download": {"bandwidth": 2 * B}, "server": {"ingress": B}}


def run(raw: dict[str, Any], engine: Engine = "heap") -> SimState:
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), scn.seeds[0])
    assert fed.workload.model_bytes == B
    return run_one(scn, fed, 0, engine=engine).state


def rows(state: SimState) -> list[dict[str, Any]]:
    return [dict(zip(state.event_columns(), row, strict=True)) for row in state.event_rows()]


@pytest.mark.parametrize("engine", ENGINES)
def test_two_uploads_at_once_share_the_ingress(engine: Engine) -> None:
    """Both download in 0.5 s and compute 1 s; from 1.5 s their uploads share B bytes/s, B/2 each: both end 2 s
    later, at 3.5 s, and are taken then (client 0's upload began first)."""
    state = run(phased(DOWN, [1.0, 1.0], budget={"updates": 2}), engine)
    assert state.event_columns() == [*Event.columns(), *PHASE_COLUMNS]
    got = [(r["time"], r["client"], r["download_end"], r["compute_end"], r["upload_start"], r["upload_end"])
           for r in rows(state)]
    assert got == [(3.5, 0, 0.5, 1.5, 1.5, 3.5), (3.5, 1, 0.5, 1.5, 1.5, 3.5)]
    assert [e.latency for e in state.events] == [3.5, 3.5]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_third_upload_joining_a_second_later_moves_both_ends(engine: Engine) -> None:
    """Clients 0 and 1 upload from 1.5 s, client 2 (computing 2 s) from 2.5 s. From 1.5 to 2.5 s the two send B/2
    each; from 2.5 s three share B/s, so the two send their last B/2 at B/3 in 1.5 s, ending at 4 s instead of 3.5 s;
    client 2 has then sent B/2, and alone its last B/2 takes 0.5 s: it ends at 4.5 s."""
    state = run(phased(DOWN, [1.0, 1.0, 2.0], budget={"updates": 3}), engine)
    got = [(r["client"], r["upload_start"], r["upload_end"]) for r in rows(state)]
    assert [(c, s) for c, s, _ in got] == [(0, 1.5), (1, 1.5), (2, 2.5)]
    assert [e for _, _, e in got] == pytest.approx([4.0, 4.0, 4.5], abs=1e-12)
    assert [e.time for e in state.events] == [r["upload_end"] for r in rows(state)]


@pytest.mark.parametrize("engine", ENGINES)
def test_an_aggregation_queue_delays_an_arrival_by_the_busy_time(engine: Engine) -> None:
    """Both uploads end at 3.5 s (as above); the server takes client 0's and aggregates for 0.25 s, so client 1's
    update waits in its queue and is taken at 3.75 s: its row says when its upload ended and when it was taken."""
    state = run(phased(DOWN, [1.0, 1.0], budget={"updates": 2}, server_time=0.25), engine)
    got = [(r["time"], r["client"], r["upload_end"]) for r in rows(state)]
    assert got == [(3.5, 0, 3.5), (3.75, 1, 3.5)]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_connection_limit_queues_transfers(engine: Engine) -> None:
    """One connection: client 0 downloads from 0 to 0.5 s, client 1 waits and downloads from 0.5 to 1 s. Client 0
    computes to 1.5 s and uploads alone to 2.5 s; client 1 computes to 2 s, waits for the connection and uploads
    from 2.5 to 3.5 s."""
    network = {**DOWN, "server": {"ingress": B, "connections": 1}}
    state = run(phased(network, [1.0, 1.0], budget={"updates": 2}), engine)
    got = [tuple(r[c] for c in ("client", *PHASE_COLUMNS)) for r in rows(state)]
    assert got == [(0, 0, 0.5, 0.5, 1.5, 1.5, 2.5), (1, 0.5, 1.0, 1.0, 2.0, 2.5, 3.5)]


def test_synchronous_rounds_take_the_upload_ends() -> None:
    """FedAvg over both clients: the round closes when both uploads have ended, at 3.5 s, and the next round's
    downloads begin then."""
    state = run(phased(DOWN, [1.0, 1.0], budget={"updates": 4},
                       algorithms=[{"name": "fedavg", "clients_per_round": 2}]))
    got = [(r["time"], r["dispatch_time"], r["upload_end"]) for r in rows(state)]
    assert got == [(3.5, 0, 3.5), (3.5, 0, 3.5), (7.0, 3.5, 7.0), (7.0, 3.5, 7.0)]


def test_a_departure_during_an_upload_frees_its_share() -> None:
    """Client 1 leaves at 2.5 s, mid-upload: client 0 had B/2 left and sends it alone at B/s, ending at 3 s."""
    raw = phased(DOWN, [1.0, 1.0], budget={"time": 3.2},
                 availability={"departures": [{"client": 1, "leave": 2.5, "rejoin": None}]})
    state = run(raw)
    got = [(r["event"], r["client"], r["time"], r["upload_start"], r["upload_end"]) for r in rows(state)]
    assert got[:2] == [("leave", 1, 2.5, 1.5, None), ("arrival", 0, 3.0, 1.5, 3.0)]


def test_without_the_section_the_files_are_as_before() -> None:
    state = run(tiny_scenario(executor={"kind": "none"}, budget={"updates": 5}))
    assert state.phases is None and state.network is None
    assert state.event_columns() == Event.columns() and state.event_rows() == state.events


def test_bad_sections_are_one_line() -> None:
    with pytest.raises(InputError, match="every upload needs a finite speed"):
        scenario_mod.validate(phased({"download": {"bandwidth": B}}, [1.0]))
    with pytest.raises(InputError, match="bandwidth 'fleet' reads a fleet trace"):
        scn = scenario_mod.validate(phased({"download": {"bandwidth": "fleet"}, "server": {"ingress": B}}, [1.0]))
        scn.check_clients(1)


def test_verification_holds_in_phases() -> None:
    """--verify's invariants (time order, staleness, concurrency) over phases, failures and departures."""
    raw = phased({**DOWN, "server": {"ingress": B, "egress": 3 * B, "connections": 2}}, [1.0, 0.7, 1.3],
                 budget={"time": 30.0}, availability={"p": 0.3, "rejoin_delay": 0.2, "departures": [
                     {"client": 2, "leave": 4.05, "rejoin": 9.5}]})
    scn = scenario_mod.validate(raw)
    fed = federation(scn, load_dataset(scn), 0)
    state = run_one(scn, fed, 0, verify=True).state
    kinds = {e.event for e in state.events}
    assert {"arrival", "failure", "leave", "join"} <= kinds
    assert len(state.phases or []) == len(state.events)


def test_validate_accepts_the_section(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(phased(DOWN, [1.0, 1.0])))
    assert main(["validate", str(path)]) == 0
