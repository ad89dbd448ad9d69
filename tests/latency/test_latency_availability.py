"""Client availability: failure draws, departures schedule, bad configs; and the delay figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from simfl.errors import InputError
from simfl.latency.availability import Availability, AvailabilityConfig
from simfl.latency.plots import show


def test_failure_rate_and_one_draw_per_round() -> None:
    av = Availability(AvailabilityConfig(p=0.3, rejoin_delay=12.0), num_clients=2, seed=5)
    outcomes = np.array([av.fails(1) for _ in range(100_000)])
    assert outcomes.mean() == pytest.approx(0.3, abs=0.005)
    assert av.rejoin_delay == 12.0
    never = Availability(AvailabilityConfig(p=0.0), num_clients=2, seed=5)
    always = Availability(AvailabilityConfig(p=1.0), num_clients=2, seed=5)
    assert not any(never.fails(0) for _ in range(50)) and all(always.fails(0) for _ in range(50))
    assert never.state() == always.state()  # the stream advanced by one draw per round either way


def test_same_seed_same_failures_and_state_round_trip() -> None:
    cfg = AvailabilityConfig(p=0.5)
    a, b = Availability(cfg, 3, 1), Availability(cfg, 3, 1)
    assert [a.fails(2) for _ in range(40)] == [b.fails(2) for _ in range(40)]
    c = Availability(cfg, 3, 1)
    c.load_state(a.state())
    assert [a.fails(0) for _ in range(40)] == [c.fails(0) for _ in range(40)]


def test_departures_schedule() -> None:
    cfg = AvailabilityConfig(
        departures=[
            {"client": 1, "leave": 100.0, "rejoin": 250.0},
            {"client": 1, "leave": 250.0, "rejoin": 300.0},
            {"client": 2, "leave": 0.0, "rejoin": 50.0},
            {"client": 0, "leave": 400.0},
        ]
    )
    av = Availability(cfg, 3, 0)
    assert av.present(1, 99.9) and not av.present(1, 100.0) and not av.present(1, 260.0) and av.present(1, 300.0)
    assert av.back_at(1, 120.0) == 300.0 and av.back_at(1, 50.0) == 50.0
    assert not av.present(2, 0.0) and av.back_at(2, 0.0) == 50.0
    assert av.back_at(0, 500.0) is None and av.next_leave(0, 10.0) == 400.0 and av.next_leave(0, 400.0) is None
    assert av.schedule(1) == [(100.0, 250.0), (250.0, 300.0)]


def test_bad_availability_configs() -> None:
    with pytest.raises(InputError, match=r"availability.departures\[0\].client: must be in \[0, 2\], got 3"):
        Availability(AvailabilityConfig(departures=[{"client": 3, "leave": 1.0}]), 3, 0)
    with pytest.raises(InputError, match=r"^availability.departures\[0\]: client 0 is away from 1 for good here and "
                       r"from 5 to 9 by availability.departures\[1\]: one client's absences must not overlap$"):
        Availability(
            AvailabilityConfig(departures=[{"client": 0, "leave": 1.0}, {"client": 0, "leave": 5.0, "rejoin": 9.0}]), 3, 0
        )
    with pytest.raises(ValidationError, match="rejoin must be after leave"):
        AvailabilityConfig(departures=[{"client": 0, "leave": 5.0, "rejoin": 5.0}])
    with pytest.raises(ValidationError, match=r"must be in \[0, 1\], got 1.5"):
        AvailabilityConfig(p=1.5)


def test_show_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "fig" / "delays.png"
    show(out, clients=3, rounds=40, seed=1)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000
