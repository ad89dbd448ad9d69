"""FedNova, FedDyn and MIFA against hand-computed rounds (every number worked out below), per reading.

Layouts (tests/algorithms/algo_helpers.py): ``linear`` is Linear(2, 1), a 3-vector of parameters; ``bn`` is
Linear(2, 1) + BatchNorm1d(1), ``[w0, w1, b, bn.weight, bn.bias | running_mean, running_var]`` (the last two are
buffers).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from simfl.algorithms.base import Arrival
from simfl.algorithms.configs import FedDynConfig, FedNovaConfig, MIFAConfig
from simfl.algorithms.fedavg import FedAvg, FedAvgConfig
from simfl.algorithms.feddyn import LINEAR, FedDyn
from simfl.algorithms.fednova import FedNova
from simfl.algorithms.mifa import MIFA
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.models.flat import Layout
from simfl.schema.scenario import validate
from simfl.train.local import Job, LocalTrainer, TrainConfig
from tests.algorithms.algo_helpers import arrival, bn_layout, close, linear_layout, make_setup, vec
from tests.conftest import tiny_scenario


def trained(client: int, weights: torch.Tensor, start: torch.Tensor, n: int, steps: int | None = None) -> Arrival:
    """An arrival whose reply says it took ``steps`` optimizer steps (None: says nothing, as pure-latency mode)."""
    a = arrival(client, weights, start, 1, 1, n=n)
    if steps is not None:
        a.metrics = {"steps": float(steps), "loss": 0.0}
    return a


# -- FedNova ------------------------------------------------------------------------------------------------------


def test_fednova_normalises_unequal_steps_by_hand() -> None:
    alg = FedNova(FedNovaConfig(clients_per_round=2), make_setup(bn_layout(), [0, 0, 0, 1, 0, 0, 1], 2, sizes=(1, 3)))
    x = alg.round_weights()
    # round 1: p = [1/4, 3/4]; tau = [1, 3]; tau_eff = (1*1 + 3*3) / 4 = 2.5
    #   params: d_0 = (y_0 - x) / 1 = [2, 0, 1, 0, 0];  d_1 = (y_1 - x) / 3 = [0, 3, -3, 3, 3] / 3 = [0, 1, -1, 1, 1]
    #   x + tau_eff (1/4 d_0 + 3/4 d_1) = 2.5 * [.5, .75, -.5, .75, .75] + [0, 0, 0, 1, 0]
    #     = [1.25, 1.875, -1.25, 2.875, 1.875]
    #   buffers: the sample-weighted mean, 1/4 [4, 2] + 3/4 [0, 2] = [1, 2]
    #   (FedAvg would give 1/4 y_0 + 3/4 y_1 = [.5, 2.25, -2, 3.25, 2.25, 1, 2]: client 1's three steps weigh 3x)
    alg.aggregate([trained(0, vec(2, 0, 1, 1, 0, 4, 2), x, 1, steps=1), trained(1, vec(0, 3, -3, 4, 3, 0, 2), x, 3, steps=3)])
    close(alg.global_weights(), [1.25, 1.875, -1.25, 2.875, 1.875, 1, 2])
    x = alg.round_weights()
    # round 2: tau = [2, 1]; tau_eff = (1*2 + 3*1) / 4 = 1.25
    #   d_0 = [1, -1, 2, 0, 0] / 2 = [.5, -.5, 1, 0, 0];  d_1 = [.5, .5, 0, 0, 0]
    #   1/4 d_0 + 3/4 d_1 = [.5, .25, .25, 0, 0];  x + 1.25 * that = x + [.625, .3125, .3125, 0, 0]
    #     = [1.875, 2.1875, -.9375, 2.875, 1.875]
    #   buffers: y_0's [1 + 1, 2 + 1] = [2, 3], y_1's [1 - 1, 2 + 1] = [0, 3]: 1/4 [2, 3] + 3/4 [0, 3] = [.5, 3]
    alg.aggregate([trained(0, x + vec(1, -1, 2, 0, 0, 1, 1), x, 1, steps=2),
                   trained(1, x + vec(0.5, 0.5, 0, 0, 0, -1, 1), x, 3, steps=1)])
    close(alg.global_weights(), [1.875, 2.1875, -0.9375, 2.875, 1.875, 0.5, 3])


@pytest.mark.parametrize("steps", [(4, 4), (None, None)])
def test_fednova_with_equal_steps_is_fedavg_to_the_bit(steps: tuple[int | None, int | None]) -> None:
    """tau_eff / tau_i = 1 exactly, and lerp at 1 is the client's weights: FedAvg's sample-weighted mean, bit for bit
    (also for replies without a step count, each counted as one step)."""
    gen = torch.Generator().manual_seed(3)
    setup = make_setup(bn_layout(), torch.randn(7, generator=gen).tolist(), 3, sizes=(5, 2, 9))
    nova, avg = FedNova(FedNovaConfig(clients_per_round=3), setup), FedAvg(FedAvgConfig(clients_per_round=3), setup)
    for _ in range(3):
        x = nova.round_weights()
        assert torch.equal(x, avg.round_weights())
        ys = [x + 0.3 * torch.randn(7, generator=gen) for _ in range(3)]
        nova.aggregate([trained(c, ys[c], x, (5, 2, 9)[c], steps=steps[c % 2]) for c in range(3)])
        avg.aggregate([trained(c, ys[c], x, (5, 2, 9)[c], steps=steps[c % 2]) for c in range(3)])
        assert torch.equal(nova.global_weights(), avg.global_weights())


def _tiny(algorithm: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return tiny_scenario(algorithms=[algorithm], train={"epochs": 1, "batch_size": 8, "lr": 0.1},
                         budget={"time": 12.0}, **changes)


def test_fednova_runs_as_fedavg_on_equal_shards_and_apart_on_unequal_ones() -> None:
    """End to end, trained, under --verify: equal shards (iid, 40 samples each, 5 steps each) give FedAvg's run to the
    bit; Dirichlet-drawn sizes give unequal steps and another run."""
    def run(name: str, partition: dict[str, Any]) -> Any:
        raw = _tiny({"name": name, "clients_per_round": 3})
        raw["data"] = {**raw["data"], "partition": partition}
        scn = validate(raw)
        return run_one(scn, federation(scn, load_dataset(scn), 0), 0, verify=True).state

    equal = {"kind": "iid", "clients": 3}
    drawn = {"kind": "dirichlet", "clients": 3, "alpha": 0.5, "sizes": "draw"}
    nova, avg = run("fednova", equal), run("fedavg", equal)
    assert nova.updates == avg.updates > 0 and [m.row() for m in nova.metrics] == [m.row() for m in avg.metrics]
    nova, avg = run("fednova", drawn), run("fedavg", drawn)
    assert [m.loss for m in nova.metrics] != [m.loss for m in avg.metrics]


def test_fednova_states_fedavgs_costs() -> None:
    config = FedNovaConfig(clients_per_round=4)
    assert config.synchronous and config.vectors_kept() == 0 and config.round_clients(10) == 4
    assert config.arrival_work(10) == FedAvgConfig().arrival_work(10) == 3.0  # no steps without training: FedAvg


# -- FedDyn -------------------------------------------------------------------------------------------------------


def test_feddyn_two_rounds_by_hand() -> None:
    # alpha .5, m = 3 devices, theta^0 = 0; every entry is a parameter (h and g_k cover them all)
    alg = FedDyn(FedDynConfig(clients_per_round=2, alpha=0.5), make_setup(linear_layout(), [0, 0, 0], 3))
    assert alg.message(2, 0).hooks == {"prox_mu": 0.5} and not alg.message(2, 0).arrays  # g_2 = 0: no linear term
    t0 = alg.round_weights()
    # round 1: devices 0, 1 send theta_0 = [1, 0, 2], theta_1 = [3, -2, 0]
    #   g_0 = 0 - .5 [1, 0, 2] = [-.5, 0, -1];  g_1 = -.5 [3, -2, 0] = [-1.5, 1, 0]
    #   h = 0 - (.5 / 3) ([1, 0, 2] + [3, -2, 0]) = -(1/6) [4, -2, 2] = [-2/3, 1/3, -1/3]
    #   theta^1 = mean [2, -1, 1] - h / .5 = [2, -1, 1] - [-4/3, 2/3, -2/3] = [10/3, -5/3, 5/3]
    alg.aggregate([arrival(0, vec(1, 0, 2), t0, 1, 1), arrival(1, vec(3, -2, 0), t0, 1, 2)])
    close(alg.gradient(0), [-0.5, 0, -1])
    close(alg.gradient(1), [-1.5, 1, 0])
    close(alg.h, [-2 / 3, 1 / 3, -1 / 3])
    close(alg.global_weights(), [10 / 3, -5 / 3, 5 / 3])
    sent = alg.message(0, 1)  # the linear term's v = -g_0 = [.5, 0, 1], the quadratic's alpha
    assert sent.hooks == {"prox_mu": 0.5, "linear_term": LINEAR}
    close(sent.arrays[LINEAR], [0.5, 0, 1])
    t1 = alg.round_weights()
    # round 2: devices 0, 2 move by [1, 1, 0] and [-1, 0, 3] from theta^1:
    #   theta_0 = [13/3, -2/3, 5/3], theta_2 = [7/3, -5/3, 14/3]
    #   g_0 = [-.5, 0, -1] - .5 [1, 1, 0] = [-1, -.5, -1];  g_2 = -.5 [-1, 0, 3] = [.5, 0, -1.5];  g_1 kept
    #   h = [-2/3, 1/3, -1/3] - (1/6) [0, 1, 3] = [-2/3, 1/6, -5/6]
    #   mean = ([13/3, -2/3, 5/3] + [7/3, -5/3, 14/3]) / 2 = [10/3, -7/6, 19/6]
    #   theta^2 = mean - h / .5 = [10/3 + 4/3, -7/6 - 1/3, 19/6 + 5/3] = [14/3, -3/2, 29/6]
    alg.aggregate([arrival(0, t1 + vec(1, 1, 0), t1, 1, 3), arrival(2, t1 + vec(-1, 0, 3), t1, 1, 4)])
    close(alg.gradient(0), [-1, -0.5, -1])
    close(alg.gradient(1), [-1.5, 1, 0])
    close(alg.gradient(2), [0.5, 0, -1.5])
    close(alg.h, [-2 / 3, 1 / 6, -5 / 6])
    close(alg.global_weights(), [14 / 3, -1.5, 29 / 6])
    close(alg.round_weights(), [14 / 3, -1.5, 29 / 6])


def test_feddyn_active_mean_and_alpha_by_samples() -> None:
    # alpha_scaling: samples, sizes (1, 2, 3): mean 2, alpha_k = .5 * 2 / n_k = [1, .5, 1/3]; h keeps alpha = .5
    cfg = FedDynConfig(clients_per_round=2, alpha=0.5, alpha_scaling="samples", evaluated="active_mean")
    alg = FedDyn(cfg, make_setup(linear_layout(), [0, 0, 0], 3, sizes=(1, 2, 3)))
    assert [alg.message(k, 0).hooks["prox_mu"] for k in range(3)] == pytest.approx([1.0, 0.5, 1 / 3])
    t0 = alg.round_weights()
    # round 1 as above: g_0 = -1 [1, 0, 2] = [-1, 0, -2];  g_1 = -.5 [3, -2, 0] = [-1.5, 1, 0]
    #   h and theta^1 as with one alpha (h = [-2/3, 1/3, -1/3], theta^1 = [10/3, -5/3, 5/3]);
    #   scored: the mean of the round's device models, [2, -1, 1]
    alg.aggregate([arrival(0, vec(1, 0, 2), t0, 1, 1, n=1), arrival(1, vec(3, -2, 0), t0, 1, 2, n=2)])
    close(alg.gradient(0), [-1, 0, -2])
    close(alg.gradient(1), [-1.5, 1, 0])
    close(alg.round_weights(), [10 / 3, -5 / 3, 5 / 3])
    close(alg.global_weights(), [2, -1, 1])


def test_feddyn_batch_norm_statistics_take_the_plain_mean() -> None:
    # bn layout, alpha 1, m = 2: both devices move every entry by their delta from theta^0 = [0, 0, 0, 1, 0, 0, 1]
    alg = FedDyn(FedDynConfig(clients_per_round=2, alpha=1.0), make_setup(bn_layout(), [0, 0, 0, 1, 0, 0, 1], 2))
    t0 = alg.round_weights()
    # parameters: drift = [2, 0, 0, 2, 0] + [0, 2, 0, 0, 2] = [2, 2, 0, 2, 2]; h = -(1/2) drift = [-1, -1, 0, -1, -1]
    #   mean = [1, 1, 0, 2, 1]; theta^1 = mean - h = [2, 2, 0, 3, 2]
    # buffers: no h, no g: the plain mean of [2, 3] and [0, 1], [1, 2]
    alg.aggregate([arrival(0, t0 + vec(2, 0, 0, 2, 0, 2, 2), t0, 1, 1), arrival(1, t0 + vec(0, 2, 0, 0, 2, 0, 0), t0, 1, 2)])
    close(alg.global_weights(), [2, 2, 0, 3, 2, 1, 2])
    close(alg.gradient(0), [-2, 0, 0, -2, 0, 0, 0])


def test_feddyn_device_step_through_the_trainer_by_hand() -> None:
    """One device, one round of 2 SGD steps through the real trainer and hooks, then the server.

    Model Linear(1, 2, bias=False), weights [w0, w1], cross-entropy on the sample (1, class 0): its gradient is
    ``p - [1, 0]`` with ``p = softmax(w)``. lr .5, alpha .5, g_0 = [-.2, .4] (so v = -g_0 = [.2, -.4]), theta = 0.
    Each step descends ``grad CE + v + alpha (theta - 0)``:
      step 1: p = [.5, .5], grad CE = [-.5, .5], + v = [-.3, .1], + 0: theta = -.5 [-.3, .1] = [.15, -.05]
      step 2: p0 = sigmoid(.2) = .549833997, grad CE = [-.450166003, .450166003], + v = [-.250166003, .050166003],
              + .5 [.15, -.05] = [-.175166003, .025166003]: theta_0 = [.2375830015, -.0625830015]
    Server: g_0 = [-.2, .4] - .5 theta_0 = [-.318791501, .431291501]; m = 1: h = -.5 theta_0,
    theta^1 = theta_0 - h / .5 = 2 theta_0 = [.475166003, -.125166003].
    """
    model = nn.Linear(1, 2, bias=False)
    layout = Layout.of(model)
    alg = FedDyn(FedDynConfig(clients_per_round=1, alpha=0.5), make_setup(layout, [0, 0], 1))
    alg.load_state({"theta": vec(0, 0), "mean": vec(0, 0), "h": vec(0, 0),
                    "grads": {"length": 2, "rows": {0: vec(-0.2, 0.4)}}})
    trainer = LocalTrainer(model, layout, [(torch.tensor([[1.0]]), torch.tensor([0]))],
                           TrainConfig(epochs=2, batch_size=1, lr=0.5), seed=0)
    start = alg.round_weights()
    reply = trainer.run(Job(0, 0, start, alg.message(0, 0)))
    close(reply.weights, [0.2375830015, -0.0625830015])
    assert reply.metrics["steps"] == 2 and not reply.arrays
    alg.aggregate([Arrival(0, reply.weights, start, 1, 1, 1, reply.arrays, reply.metrics)])
    close(alg.gradient(0), [-0.318791501, 0.431291501])
    close(alg.global_weights(), [0.475166003, -0.125166003])


def trained_run_keeps_the_invariants(algorithm: dict[str, Any]) -> None:
    """Trained end to end under --verify, on unequal shards, failures and a departure: the model moves."""
    raw = _tiny(algorithm, availability={"p": 0.2, "departures": [{"client": 0, "leave": 5.0, "rejoin": 9.0}]})
    raw["data"] = {**raw["data"], "partition": {"kind": "dirichlet", "clients": 3, "alpha": 0.5, "sizes": "draw"}}
    scn = validate(raw)
    state = run_one(scn, federation(scn, load_dataset(scn), 0), 0, verify=True).state
    assert state.updates > 0 and state.now == 12.0
    assert len({round(m.loss, 6) for m in state.metrics}) > 1


def test_feddyn_states_its_costs() -> None:
    config = FedDynConfig()
    assert config.synchronous and config.vectors_kept() == 1 and config.round_clients(20) == 10  # g_k per client
    assert config.arrival_work(10) == config.arrival_passes == 8.0


@pytest.mark.parametrize("algorithm", [
    {"name": "feddyn", "clients_per_round": 2, "alpha": 0.1},
    {"name": "feddyn", "clients_per_round": 2, "alpha_scaling": "samples", "evaluated": "active_mean"},
])
def test_feddyn_trained_runs_keep_the_invariants(algorithm: dict[str, Any]) -> None:
    trained_run_keeps_the_invariants(algorithm)


# -- MIFA ---------------------------------------------------------------------------------------------------------


def _mifa_rounds(alg: MIFA) -> list[torch.Tensor]:
    """Three rounds on 3 clients: {0, 1}, {1, 2}, {0}, each arrival ``start + Delta``; the model after each."""
    out = []
    for round_deltas in ({0: vec(3, 0, -3), 1: vec(0, 6, 3)}, {1: vec(3, 3, 0), 2: vec(-3, 0, 9)}, {0: vec(0, -3, 3)}):
        w = alg.round_weights()
        alg.aggregate([arrival(c, w + d, w, 1, 1, n=(1, 2, 3)[c]) for c, d in round_deltas.items()])
        out.append(alg.global_weights().clone())
    return out


def test_mifa_waits_for_every_client_then_averages_the_latest_updates() -> None:
    alg = MIFA(MIFAConfig(), make_setup(linear_layout(), [0, 0, 0], 3, sizes=(1, 2, 3)))
    assert alg.clients_per_round == 3 and alg.message(0, 0).hooks == {}  # null: every free, present client
    w1, w2, w3 = _mifa_rounds(alg)
    # round 1: memory {0: [3, 0, -3], 1: [0, 6, 3]}; client 2 not heard from: the model stays at W^(0)
    close(w1, [0, 0, 0])
    # round 2: client 1's update replaced by [3, 3, 0], client 2's [-3, 0, 9] in: the memory is full
    #   w = 0 + ([3, 0, -3] + [3, 3, 0] + [-3, 0, 9]) / 3 = [3, 3, 6] / 3 = [1, 1, 2]
    close(w2, [1, 1, 2])
    # round 3: only client 0, its update now [0, -3, 3]; the others' stand in for clients 1 and 2
    #   w = [1, 1, 2] + ([0, -3, 3] + [3, 3, 0] + [-3, 0, 9]) / 3 = [1, 1, 2] + [0, 0, 4] = [1, 1, 6]
    close(w3, [1, 1, 6])
    close(alg.deltas.get(0), [0, -3, 3])  # type: ignore[arg-type]


def test_mifa_from_zero_and_weighted_by_samples() -> None:
    zero = MIFA(MIFAConfig(start="zero"), make_setup(linear_layout(), [0, 0, 0], 3, sizes=(1, 2, 3)))
    w1, w2, w3 = _mifa_rounds(zero)
    # round 1: client 2 counts a zero update: w = ([3, 0, -3] + [0, 6, 3] + 0) / 3 = [1, 2, 0]
    # round 2: w = [1, 2, 0] + [3, 3, 6] / 3 = [2, 3, 2];  round 3: w = [2, 3, 2] + [0, 0, 12] / 3 = [2, 3, 6]
    close(w1, [1, 2, 0])
    close(w2, [2, 3, 2])
    close(w3, [2, 3, 6])
    by_size = MIFA(MIFAConfig(start="zero", weighting="samples"),
                   make_setup(linear_layout(), [0, 0, 0], 3, sizes=(1, 2, 3)))
    w1, w2, w3 = _mifa_rounds(by_size)
    # weights n_i / 6 = [1/6, 2/6, 3/6] over all three clients
    # round 1: (1 [3, 0, -3] + 2 [0, 6, 3]) / 6 = [3, 12, 3] / 6 = [.5, 2, .5]
    # round 2: (1 [3, 0, -3] + 2 [3, 3, 0] + 3 [-3, 0, 9]) / 6 = [0, 6, 24] / 6 = [0, 1, 4]: w = [.5, 3, 4.5]
    # round 3: (1 [0, -3, 3] + 2 [3, 3, 0] + 3 [-3, 0, 9]) / 6 = [-3, 3, 30] / 6 = [-.5, .5, 5]: w = [0, 3.5, 9.5]
    close(w1, [0.5, 2, 0.5])
    close(w2, [0.5, 3, 4.5])
    close(w3, [0, 3.5, 9.5])


def test_mifa_batch_norm_statistics_take_the_rounds_mean() -> None:
    alg = MIFA(MIFAConfig(start="zero"), make_setup(bn_layout(), [0, 0, 0, 1, 0, 0, 1], 2))
    w0 = alg.round_weights()
    # round 1: parameters w + ([2, 0, 0, 0, 0] + [0, 2, 0, 0, 0]) / 2 = [1, 1, 0, 1, 0];
    #   buffers: the arrivals' own, [1, 2] and [3, .5]: mean [2, 1.25]
    alg.aggregate([arrival(0, w0 + vec(2, 0, 0, 0, 0, 1, 1), w0, 1, 1), arrival(1, w0 + vec(0, 2, 0, 0, 0, 3, -0.5), w0, 1, 2)])
    close(alg.global_weights(), [1, 1, 0, 1, 0, 2, 1.25])
    w1 = alg.round_weights()
    # round 2: client 0 alone, parameters unmoved: w + (0 + [0, 2, 0, 0, 0]) / 2 = [1, 2, 0, 1, 0]; buffers its own
    #   [2 - 1, 1.25 + 1] = [1, 2.25] (client 1's stale statistics are not added)
    alg.aggregate([arrival(0, w1 + vec(0, 0, 0, 0, 0, -1, 1), w1, 1, 3)])
    close(alg.global_weights(), [1, 2, 0, 1, 0, 1, 2.25])


def test_mifa_states_its_costs() -> None:
    config = MIFAConfig()
    assert config.synchronous and config.vectors_kept() == 1  # Delta_i per client
    assert config.round_clients(37) == 37 and MIFAConfig(clients_per_round=5).round_clients(37) == 5
    assert config.arrival_work(10) == config.arrival_passes == 9.0


@pytest.mark.parametrize("algorithm", [
    {"name": "mifa"}, {"name": "mifa", "clients_per_round": 2, "start": "zero", "weighting": "samples"},
])
def test_mifa_trained_runs_keep_the_invariants(algorithm: dict[str, Any]) -> None:
    trained_run_keeps_the_invariants(algorithm)
