"""What each built-in delay model states of its round times (``round_times``) is what it draws: hand-computed
cases, and every model's stated means, spreads and shortest rounds against its own draws."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simfl.latency import LATENCY_MODELS, Workload
from simfl.latency.base import STATED_ROWS, RoundTimes
from simfl.latency.rpi_gaussian import positive_normal

WORK = Workload(model_bytes=200_000, flops=1_500_000, samples=(600,) * 12, epochs=5)


def stated(config: dict[str, Any], clients: int = 12, seed: int = 3, work: Workload = WORK) -> RoundTimes:
    cls = LATENCY_MODELS[config["model"]]
    times = cls.round_times(cls.Config.model_validate(config), clients, seed, work)
    assert times is not None and times.clients == pytest.approx(clients)
    return times


def test_constant_and_exponential_by_hand() -> None:
    times = stated({"model": "constant", "seconds": [2.0, 1.0, 2.0]}, clients=3)
    assert times.mean.tolist() == [1.0, 2.0] and times.weight.tolist() == [1.0, 2.0] and times.std.tolist() == [0, 0]
    assert times.low.tolist() == [1.0, 2.0]
    times = stated({"model": "exponential", "mean": 10.0, "floor": 5.0})
    assert (times.mean.tolist(), times.std.tolist(), times.low.tolist(), times.weight.tolist()) == (
        [15.0], [10.0], [5.0], [12.0])


def test_pooled_models_by_hand() -> None:
    """Uniform on [2, 8]: mean 5, spread 6 / sqrt(12), never below 2; Pareto(3, 4): mean 6, never below 4."""
    times = stated({"model": "uniform", "low": 2.0, "high": 8.0})
    assert times.mean[0] == 5.0 and times.std[0] == pytest.approx(6 / math.sqrt(12)) and times.low[0] == 2.0
    times = stated({"model": "pareto", "shape": 3.0, "scale": 4.0})
    assert times.mean[0] == pytest.approx(6.0) and times.std[0] == pytest.approx(2 * math.sqrt(3)) and times.low[0] == 4
    times = stated({"model": "lognormal", "mean": 3.0, "std": 2.0, "mode": "per_client", "jitter": 0.0})
    assert (times.low == times.mean).all() and (times.std == 0).all() and len(times.mean) == 12


def test_a_positive_normal_by_hand() -> None:
    """N(1, 1) made positive: draws <= 0 become 1 (mean 1 + phi(1) - ... = 1 + phi(1)), or are drawn again (the
    truncated normal: 1 + phi(1) / Phi(1))."""
    phi, cdf = math.exp(-0.5) / math.sqrt(2 * math.pi), 0.5 * math.erfc(-1 / math.sqrt(2))
    assert positive_normal(1.0, 1.0, "mean")[0] == pytest.approx(1 + phi)
    assert positive_normal(1.0, 1.0, "resample")[0] == pytest.approx(1 + phi / cdf)
    assert positive_normal(3.0, 0.0, "mean") == (3.0, 0.0)
    draws = np.random.default_rng(0).normal(1.0, 1.0, 400_000)
    assert positive_normal(1.0, 1.0, "mean")[1] == pytest.approx(np.where(draws > 0, draws, 1.0).std(), rel=0.01)
    assert positive_normal(1.0, 1.0, "resample")[1] == pytest.approx(draws[draws > 0].std(), rel=0.01)


CONFIGS = [
    {"model": "constant", "seconds": [float(m + 1) for m in range(12)]},
    {"model": "exponential", "mean": 10.0, "floor": 5.0},
    *({"model": m, "mode": mode} for m in ("lognormal", "halfnormal", "uniform", "pareto")
      for mode in ("per_round", "per_client")),
    {"model": "lognormal", "scaling": {"compute": "workload", "comm": "workload"}},
    {"model": "rpi_gaussian"},
    {"model": "rpi_gaussian", "profiles": "all", "nonpositive": "resample"},
    {"model": "replay"},
    {"model": "replay", "profiles": "all", "random_offset": True, "scaling": {"compute": 2.0}},
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(str(v) for v in c.values() if isinstance(v, str)))
def test_stated_round_times_are_what_the_model_draws(config: dict[str, Any]) -> None:
    """Per client: its stated mean against the mean of 400 of its draws, and no draw below its stated shortest round
    (the pooled models' per-client speeds and the devices are the seed's own)."""
    cls = LATENCY_MODELS[config["model"]]
    parsed = cls.Config.model_validate(config)
    model = cls(parsed, 12, 3, WORK)
    drawn = np.array([[model.sample(m) for _ in range(400)] for m in range(12)])
    times = cls.round_times(parsed, 12, 3, WORK)
    assert times is not None
    rate = float((times.weight / times.mean).sum())  # what the estimate counts: each client's own rate
    assert rate == pytest.approx(float((1 / drawn.mean(axis=1)).sum()), rel=0.06)
    mean = float((times.weight * times.mean).sum() / times.weight.sum())
    assert mean == pytest.approx(float(drawn.mean()), rel=0.06)
    assert float(times.low.min()) <= float(drawn.min())


def test_a_large_population_is_stated_by_its_first_clients() -> None:
    """Per-client speeds of 10^5 clients: the first STATED_ROWS clients' speeds, each standing for the rest."""
    times = stated({"model": "lognormal", "mode": "per_client"}, clients=100_000,
                   work=Workload(200_000, 1_500_000, (600,) * 100_000, 5))
    assert len(times.mean) == STATED_ROWS and times.weight[0] == pytest.approx(100_000 / STATED_ROWS)
    small = stated({"model": "lognormal", "mode": "per_client"}, clients=STATED_ROWS,
                   work=Workload(200_000, 1_500_000, (600,) * STATED_ROWS, 5))
    assert times.mean.tolist() == small.mean.tolist()  # client m's speed does not depend on the population


def test_a_fleet_states_its_devices_and_windows(tmp_path: Path) -> None:
    """Two devices, five clients (clients 0, 2, 4 play device 0): 20 samples x 1 epoch x 0.5 s + 2 x 200,000 bytes
    / 10^5 B/s = 14 s, and 20 x 0.1 + 4 = 6 s present from 100 to 200 only."""
    path = tmp_path / "fleet.csv"
    path.write_text("client,seconds_per_sample,bandwidth,windows\na,0.5,100000,\nb,0.1,100000,100-200\n")
    cls = LATENCY_MODELS["fleet_csv"]
    work = Workload(200_000, 1_500_000, (20,) * 5, 1)
    times = cls.round_times(cls.Config.model_validate({"model": "fleet_csv", "path": str(path)}), 5, 0, work)
    assert times is not None
    assert times.mean.tolist() == pytest.approx([14.0, 6.0]) and times.weight.tolist() == [3, 2]
    assert times.low.tolist() == times.mean.tolist() and times.absences == ((), ((0.0, 100.0), (200.0, None)))
