"""Pisces against cases worked out by hand: its pace, both aggregations, its utilities and selection order, and a
served run whose dispatches and aggregation times follow from the rules (every number in the comments)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from pydantic import ValidationError

from simfl.algorithms.base import Arrival
from simfl.algorithms.pisces import Pisces, PiscesConfig, data_quality
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.models.flat import Layout
from simfl.schema import scenario as scenario_mod
from simfl.train.configs import TrainConfig
from simfl.train.local import Job, LocalTrainer
from tests.algorithms.algo_helpers import close, linear_layout, make_setup, vec


def arrive(client: int, weights: torch.Tensor, start: torch.Tensor, update: int, n: int, time: float,
           latency: float, loss_sq: float | None = None) -> Arrival:
    """An Arrival as the engine builds it, with its time, latency and (when given) the reply's ``loss_sq``."""
    metrics = {} if loss_sq is None else {"steps": 1.0, "loss": 0.0, "loss_sq": loss_sq}
    return Arrival(client, weights, start, 1, update, n, {}, metrics, time, latency)


def test_discounted_buffer_at_the_pace() -> None:
    """beta = 1, b = 2, min_buffer 1; clients of 2, 1, 1 samples; W0 = 0."""
    alg = Pisces(PiscesConfig(beta=1.0, b=2.0), make_setup(linear_layout(), [0, 0, 0], 3, (2, 1, 1)))
    w0 = alg.initial_weights(0)
    # t=2 client 0 (latency 2, version 0: staleness 0, sbar0 = 0), loss_sq 4: q0 = 2 * sqrt(4) = 4; slowest 2
    #   acc = 2 * (1 + 0)^-1 * [2,0,0] = [4,0,0], samples 2; 2 - 0 > 2 / 2: aggregate W1 = [4,0,0] / 2 = [2,0,0]
    w1, weight = alg.on_arrival(arrive(0, vec(2, 0, 0), w0, 1, 2, 2.0, 2.0, loss_sq=4.0))
    assert weight is None
    close(w1, [2, 0, 0])
    assert alg.versions.version == 1 and alg.last == 2.0
    # t=3 client 1 (latency 3, sent W0 at version 0, now 1: staleness 1, sbar1 = 1), loss_sq 1: q1 = 1; slowest 3
    #   acc = 1 * (1 + 1)^-1 * [0,3,0] = [0,1.5,0], samples 1; 3 - 2 = 1 > 3 / 2? no: W1 stays
    sent, _ = alg.on_arrival(arrive(1, vec(0, 3, 0), w0, 2, 1, 3.0, 3.0, loss_sq=1.0))
    close(sent, [2, 0, 0])
    # t=4 client 2 (latency 4, staleness 1, sbar2 = 1), no loss_sq (nothing trained): q2 = |D| = 1; slowest 4
    #   acc += 1 * 1/2 * [0,0,4] -> [0,1.5,2], samples 2; 4 - 2 = 2 > 4 / 2 = 2? no (strictly): held
    sent, _ = alg.on_arrival(arrive(2, vec(0, 0, 4), w0, 3, 1, 4.0, 4.0))
    close(sent, [2, 0, 0])
    assert alg.count == 2 and alg.slowest == 4.0
    # t=5 client 0 (latency 3, sent W1 at version 1: staleness 0, sbar0 = (0 + 0) / 2 = 0), loss_sq 1: q0 = 2
    #   acc += 2 * 1 * [0,0,-2] -> [0,1.5,-2], samples 4; slowest stays 4; 5 - 2 = 3 > 2: aggregate
    #   W2 = W1 + [0,1.5,-2] / 4 = [2, .375, -.5]; version 2 at t = 5
    w2, _ = alg.on_arrival(arrive(0, w1 + vec(0, 0, -2), w1, 4, 2, 5.0, 3.0, loss_sq=1.0))
    close(w2, [2, 0.375, -0.5])
    assert alg.versions.version == 2 and alg.last == 5.0 and alg.count == 0 and alg.samples == 0
    # utilities: u0 = 2 / (1 + 0) = 2; u1 = 1 / (1 + 1) = .5; u2 = 1 / 2 = .5; client 3 never seen
    assert (alg.utility(0), alg.utility(1), alg.utility(2)) == (2.0, 0.5, 0.5)
    # unseen first, then by falling utility, the tie u1 = u2 by index
    assert alg.select([0, 1, 2, 3], 3, 5.0) == [3, 0, 1]
    assert alg.select([1, 2], 1, 5.0) == [1]
    assert alg.select([0, 1, 2], 3, 5.0) == [0, 1, 2]
    # the slowest client gets faster: client 2's latency 1 -> the largest profile is client 0's or 1's 3
    alg.on_arrival(arrive(2, w2, w2, 5, 1, 6.0, 1.0))
    assert alg.slowest == 3.0


def test_mean_of_models_with_a_minimum_buffer() -> None:
    """AFL-Lib's reading: aggregation mean, min_buffer 2, b = 1; W0 = 0."""
    alg = Pisces(PiscesConfig(aggregation="mean", min_buffer=2, b=1.0), make_setup(linear_layout(), [0, 0, 0], 2))
    w0 = alg.initial_weights(0)
    # t=1 client 0 (latency 1): 1 - 0 > 1 / 1, but the buffer holds 1 < 2: held
    sent, _ = alg.on_arrival(arrive(0, vec(1, 0, 0), w0, 1, 1, 1.0, 1.0))
    close(sent, [0, 0, 0])
    # t=3 client 1 (latency 3): 2 buffered, 3 - 0 > 3 / 1? no: held
    sent, _ = alg.on_arrival(arrive(1, vec(0, 3, 0), w0, 2, 1, 3.0, 3.0))
    close(sent, [0, 0, 0])
    # t=4 client 0 (latency 3): 3 buffered, 4 > 3: W1 = ([1,0,0] + [0,3,0] + [0,0,3]) / 3 = [1/3, 1, 1]
    sent, _ = alg.on_arrival(arrive(0, vec(0, 0, 3), w0, 3, 1, 4.0, 3.0))
    close(sent, [1 / 3, 1, 1])
    assert alg.versions.version == 1 and alg.last == 4.0


def test_data_quality_is_oorts_statistical_utility() -> None:
    assert data_quality(50, {"loss_sq": 0.25}) == 25.0  # 50 * sqrt(.25)
    assert data_quality(50, {}) == 50.0  # nothing trained: |D| alone
    assert data_quality(50, {"loss_sq": float("nan")}) == 50.0


def test_the_trainer_replies_each_samples_loss_squared() -> None:
    """A Linear(2, 2) at zero weights scores both classes alike: every sample's loss is ln 2, so loss_sq = (ln 2)^2;
    with weights [[1, 0], [0, 0]] and no bias, sample x = (1, 0) of class 0 has logits (1, 0), loss ln(1 + e^-1),
    sample x = (2, 0) of class 1 logits (2, 0), loss ln(1 + e^2); one batch of both, one epoch."""
    model = torch.nn.Linear(2, 2)
    layout = Layout.of(model)
    x, y = torch.tensor([[1.0, 0.0], [2.0, 0.0]]), torch.tensor([0, 1])
    trainer = LocalTrainer(model, layout, [(x, y)], TrainConfig(epochs=1, batch_size=2, lr=0.1), seed=0)
    zero = trainer.run(Job(0, 0, torch.zeros(layout.size)))
    assert zero.metrics["loss_sq"] == pytest.approx(math.log(2) ** 2)
    start = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # weight rows (1, 0), (0, 0); biases 0
    reply = trainer.run(Job(0, 0, start))
    first, second = math.log(1 + math.exp(-1)), math.log(1 + math.exp(2))
    assert reply.metrics["loss_sq"] == pytest.approx((first**2 + second**2) / 2)
    assert reply.metrics["loss"] == pytest.approx((first + second) / 2)  # the mean loss, as before


def test_state_round_trip_mid_buffer() -> None:
    alg = Pisces(PiscesConfig(beta=1.0, b=2.0), make_setup(linear_layout(), [0, 0, 0], 3, (2, 1, 1)))
    w0 = alg.initial_weights(0)
    alg.on_arrival(arrive(0, vec(2, 0, 0), w0, 1, 2, 2.0, 2.0, loss_sq=4.0))
    alg.on_arrival(arrive(1, vec(0, 3, 0), w0, 2, 1, 3.0, 3.0, loss_sq=1.0))  # held in the buffer
    copy = Pisces(PiscesConfig(beta=1.0, b=2.0), make_setup(linear_layout(), [0, 0, 0], 3, (2, 1, 1)))
    copy.load_state(alg.state())
    for a in (alg, copy):
        out, _ = a.on_arrival(arrive(2, vec(0, 0, 4), w0, 3, 1, 5.0, 4.0))  # 5 - 2 > 4 / 2: aggregate
    close(copy.global_weights(), alg.global_weights().tolist())
    assert copy.select([0, 1, 2], 3, 5.0) == alg.select([0, 1, 2], 3, 5.0) and copy.slowest == alg.slowest == 4.0


@pytest.mark.parametrize("bad", [{"b": 0.0}, {"beta": -1.0}, {"min_buffer": 0}, {"window": 0},
                                 {"aggregation": "sum"}])
def test_config_rejects_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        PiscesConfig(**bad)  # type: ignore[arg-type]


def served(extra: dict[str, Any]) -> dict[str, Any]:
    """4 clients of equal size, constant latencies 1, 2, 3, 4 s, pure latency (q_i = |D_i| for all)."""
    return {
        "name": "pisces", "seeds": [0],
        "data": {"dataset": "synthetic", "train_size": 48, "test_size": 8, "features": 4, "classes": 2,
                 "partition": {"kind": "iid", "clients": 4}},
        "model": {"name": "mlp", "hidden": [3]},
        "latency": {"model": "constant", "seconds": [1.0, 2.0, 3.0, 4.0]},
        "budget": {"updates": 7}, "eval": {"every": 100.0},
        "algorithms": [{"name": "pisces", "beta": 1.0, "b": 2.0}], "executor": {"kind": "none"}, **extra,
    }


def test_a_served_run_selects_by_utility_and_aggregates_at_the_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Concurrency 2; every client holds 12 samples, so u_i = 12 / (1 + sbar_i).

    t=0: nobody seen: clients 0, 1 (index order)
    t=1: 0 arrives (staleness 0; slowest 1): 1 - 0 > 1/2, aggregate (version 1, t_last 1); unseen 2 goes out
    t=2: 1 arrives (sent version 0: staleness 1, sbar1 = 1; slowest 2): 2 - 1 > 2/2? no; unseen 3 goes out
    t=4: 2 arrives (sent version 1: staleness 0; slowest 3): 4 - 1 > 3/2, aggregate (version 2, t_last 4);
         u0 = 12, u1 = 6, u2 = 12: 0 (the tie with 2 by index), back at t=5
    t=5: 0 arrives (staleness 0): 5 - 4 > 3/2? no; u0 = 12 highest again: 0 goes out, back at 6
    t=6: 3 arrives first (its round end was created at t=2, 0's at 5): staleness 2 - 1 = 1, slowest 4,
         6 - 4 > 4/2? no; the free slot: u1 = 6, u2 = 12, u3 = 6 (0 is still queued): 2, back at 9;
         then 0 (staleness 0): 6 - 4 > 2? no; u0 = 12: 0 goes out again, back at 7
    t=7: 0 arrives (staleness 0): 7 - 4 > 2: aggregate (version 3, t_last 7); the seventh update ends the run
    """
    seen: list[tuple[float, int, bool]] = []
    original = Pisces.on_arrival

    def spy(self: Pisces, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        before = self.versions.version
        out = original(self, arrival)
        seen.append((arrival.time, arrival.client, self.versions.version > before))
        return out

    monkeypatch.setattr(Pisces, "on_arrival", spy)
    scn = scenario_mod.validate(served({"server": {"concurrency": 2}}))
    fed = federation(scn, load_dataset(scn), 0)
    for engine in ("heap", "simpy"):
        seen.clear()
        state = run_one(scn, fed, 0, engine=engine, verify=True).state
        arrivals = [(e.time, e.client, e.dispatch_time) for e in state.events if e.event == "arrival"]
        assert arrivals == [(1.0, 0, 0.0), (2.0, 1, 0.0), (4.0, 2, 1.0), (5.0, 0, 4.0), (6.0, 3, 2.0), (6.0, 0, 5.0),
                            (7.0, 0, 6.0)]
        assert [t for t, _, aggregated in seen if aggregated] == [1.0, 4.0, 7.0]
        assert state.selections == 0  # the selection stream is never drawn
        assert any(c.index == 2 and c.phase == "round" and c.dispatch_time == 6.0 for c in state.clients)


def test_without_concurrency_pisces_is_its_pace_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client always in flight (latencies 1, 2, 3, 4 s), b = 2: select is never called.

    Arrivals at one instant are taken in the order their rounds were dispatched (client index at time 0).
    t=1: 0 (slowest 1): 1 - 0 > 1/2, aggregate (t_last 1);
    t=2: 1 (slowest 2): 2 - 1 > 2/2? no; then 0: no;
    t=3: 2 (slowest 3): 3 - 1 > 3/2: aggregate (t_last 3); then 0: 3 - 3 > 3/2? no;
    t=4: 3 (slowest 4): 4 - 3 > 4/2? no; then 1, the seventh update: no. Two aggregations, at 1 and 3.
    """
    def never(self: Pisces, candidates: list[int], count: int, now: float) -> list[int]:
        raise AssertionError("select called without server.concurrency")

    seen: list[int] = []
    original = Pisces._aggregate

    def spy(self: Pisces) -> None:
        original(self)
        seen.append(self.versions.version)

    monkeypatch.setattr(Pisces, "select", never)
    monkeypatch.setattr(Pisces, "_aggregate", spy)
    scn = scenario_mod.validate(served({}))
    fed = federation(scn, load_dataset(scn), 0)
    state = run_one(scn, fed, 0, verify=True).state
    arrivals = [(e.time, e.client) for e in state.events if e.event == "arrival"]
    assert arrivals == [(1.0, 0), (2.0, 1), (2.0, 0), (3.0, 2), (3.0, 0), (4.0, 3), (4.0, 1)]
    assert seen == [1, 2]


def test_the_seam_hands_over_only_present_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """Client 2 leaves at 0.5 s while idle and returns at 10 s: at t=1 (0 back) the candidates are 0 and 3 only, and
    the unseen 3 goes out; 2 is a candidate again from its return on."""
    asked: list[tuple[float, list[int]]] = []
    original = Pisces.select

    def spy(self: Pisces, candidates: list[int], count: int, now: float) -> list[int]:
        asked.append((now, list(candidates)))
        return original(self, candidates, count, now)

    monkeypatch.setattr(Pisces, "select", spy)
    raw = served({"server": {"concurrency": 2},
                  "availability": {"departures": [{"client": 2, "leave": 0.5, "rejoin": 10.0}]}})
    raw["budget"] = {"time": 12.0}
    scn = scenario_mod.validate(raw)
    state = run_one(scn, federation(scn, load_dataset(scn), 0), 0, verify=True).state
    assert asked[0] == (0.0, [0, 1, 2, 3]) and asked[1] == (1.0, [0, 3])
    assert all(2 not in candidates for now, candidates in asked if 0.5 <= now < 10.0)
    assert any(2 in candidates for now, candidates in asked if now >= 10.0)
    assert [(e.time, e.client) for e in state.events if e.event == "arrival"][:2] == [(1.0, 0), (2.0, 1)]


def test_a_select_that_returns_other_clients_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Pisces, "select", lambda self, candidates, count, now: [candidates[0]] * count)
    scn = scenario_mod.validate(served({"server": {"concurrency": 2}}))
    with pytest.raises(ValueError, match="must return 2 distinct clients of the 4 idle, present ones"):
        run_one(scn, federation(scn, load_dataset(scn), 0), 0)
