"""FedAC against hand-computed buffers (every number worked out below), per reading of the server's direction.

Layout ``linear`` (tests/algorithms/algo_helpers.py): Linear(2, 1), three trainable entries, no buffers. Every case:
K = 2, eta_g = 1, beta1 = beta2 = .5, eps = 1e-8, r_min = .1, three clients, W^0 = 0.
"""

from __future__ import annotations

import io
import math
from typing import Any

import pytest
import torch
from torch import nn

from simfl.algorithms.base import Arrival
from simfl.algorithms.configs import FedACConfig
from simfl.algorithms.fedac import FedAC, cosine
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.models.flat import Layout
from simfl.schema.scenario import validate
from simfl.train.local import Job, LocalTrainer, TrainConfig
from simfl.train.message import NO_MESSAGE
from tests.algorithms.algo_helpers import arrival, close, linear_layout, make_setup, vec
from tests.conftest import tiny_scenario

W1 = 0.75 / math.sqrt(0.5)
"""1.060660172: the first flush's step per moved entry (below)."""


def fedac(**options: Any) -> FedAC:
    config = FedACConfig(buffer=2, server_lr=1.0, beta1=0.5, beta2=0.5, **options)
    return FedAC(config, make_setup(linear_layout(), [0, 0, 0], 3))


def replied(client: int, weights: torch.Tensor, start: torch.Tensor, update: int, c_i: list[float]) -> Arrival:
    """An arrival whose client replies its new variate ``c_i+`` (SCAFFOLD's hook)."""
    a = arrival(client, weights, start, 1, update)
    a.arrays = {"c_i": vec(*c_i)}
    return a


def first_buffer(alg: FedAC) -> torch.Tensor:
    """Clients 0 and 1 from W^0, Delta [2, 0, 0] and [0, 2, 0], replying c_i+ [1, 0, 0] and [0, -1, 0].

    The global model has not moved since their dispatch (and no step was taken): D = 0 in both readings, cos 0,
    r = r_min = .1 each, p = [.5, .5].
    Delta = [1, 1, 0]; m = .5 Delta = [.5, .5, 0]; v = .5 Delta^2 = [.5, .5, 0]; mhat = .5 m + .5 Delta = [.75, .75, 0]
    W^1 = .75 / sqrt(.5) = [1.060660172, 1.060660172, 0] (0 / (0 + eps) = 0 in the third entry)
    c = 0 + .5 [1, 0, 0] + .5 [0, -1, 0] = [.5, -.5, 0]
    """
    w0 = alg.global_weights()
    sent, step = alg.on_arrival(replied(0, vec(2, 0, 0), w0, 1, [1, 0, 0]))
    assert step is None and torch.equal(sent, w0)  # the buffer is not full
    sent, step = alg.on_arrival(replied(1, vec(0, 2, 0), w0, 2, [0, -1, 0]))
    assert step == 1.0
    close(sent, [W1, W1, 0])
    close(alg.c, [0.5, -0.5, 0])
    return sent


def test_fedac_since_dispatch_two_buffers() -> None:
    alg = fedac()
    w1 = first_buffer(alg)
    # buffer 2: client 2, dispatched at W^0 (stale), Delta [1, 0, 1], c_i+ [0, 0, 2] (its c_i was 0): D = W^1 - W^0
    #   cos(D, Delta) = 1.060660 / (|D| 1.5 * |Delta| 1.414214) = .5: r = .5
    # client 0, dispatched at W^1 (fresh), Delta [0, 3, 0], c_i+ [2, 0, 0] (its c_i [1, 0, 0]): D = 0, r = r_min = .1
    # sum r = .6; Delta = (.5 [1, 0, 1] + .1 [0, 3, 0]) / .6 = [.833333, .5, .833333]
    # m = .5 [.5, .5, 0] + .5 Delta = [.666667, .5, .416667]
    # v = .5 [.5, .5, 0] + .5 [.694444, .25, .694444] = [.597222, .375, .347222]
    # mhat = .5 m + .5 Delta = [.75, .5, .625]; / sqrt(v) = / [.772802, .612372, .589256] = [.970495, .816497, 1.060660]
    # W^2 = W^1 + that = [2.031155, 1.877157, 1.060660]
    # c = [.5, -.5, 0] + (.5 [0, 0, 2] + .1 ([2, 0, 0] - [1, 0, 0])) / .6 = [.5 + .166667, -.5, 1.666667]
    alg.on_arrival(replied(2, vec(1, 0, 1), vec(0, 0, 0), 3, [0, 0, 2]))
    sent, step = alg.on_arrival(replied(0, w1 + vec(0, 3, 0), w1, 4, [2, 0, 0]))
    close(sent, [2.031155103, 1.877156724, 1.060660154])
    close(alg.c, [0.666666667, -0.5, 1.666666667])
    close(alg.variates.get(0), [2, 0, 0])  # type: ignore[arg-type]
    close(alg.variates.get(2), [0, 0, 2])  # type: ignore[arg-type]
    message = alg.message(1, 1)
    assert message.hooks == {"control_variate": None}
    close(message.arrays["c"], [0.666666667, -0.5, 1.666666667])
    close(message.arrays["c_i"], [0, -1, 0])


def test_fedac_last_step_weighs_a_fresh_update_by_the_latest_global_step() -> None:
    alg = fedac(direction="last_step")
    w1 = first_buffer(alg)  # no global step before it: D = 0, the same buffer as since_dispatch
    # buffer 2, both compared with the latest step D = W^1 - W^0 = [1.060660, 1.060660, 0]:
    #   client 2: cos .5 (as above): r = .5;  client 0: cos([1, 1, 0], [0, 3, 0]) = 1/sqrt 2 = .707107: r = .707107
    # sum r = 1.207107; Delta = [.5, 2.121320, .5] / 1.207107 = [.414214, 1.757359, .414214]
    # m = [.25, .25, 0] + .5 Delta = [.457107, 1.128680, .207107]
    # v = [.25, .25, 0] + .5 Delta^2 = [.25 + .085786, .25 + 1.544156, .085786] = [.335786, 1.794156, .085786]
    # mhat = .5 m + .5 Delta = [.435660, 1.443019, .310660]; / sqrt(v) = / [.579471, 1.339461, .292893]
    #   = [.751824, 1.077314, 1.060660]: W^2 = [1.812484, 2.137974, 1.060660]
    # c = [.5, -.5, 0] + (.5 [0, 0, 2] + .707107 [1, 0, 0]) / 1.207107 = [.5 + .585786, -.5, .828427]
    alg.on_arrival(replied(2, vec(1, 0, 1), vec(0, 0, 0), 3, [0, 0, 2]))
    sent, _ = alg.on_arrival(replied(0, w1 + vec(0, 3, 0), w1, 4, [2, 0, 0]))
    close(sent, [1.812484313, 2.137973666, 1.060660136])
    close(alg.c, [1.085786438, -0.5, 0.828427125])


def test_fedac_without_correction_sends_nothing_and_keeps_no_variates() -> None:
    alg = fedac(correction=False)
    assert alg.message(0, 0) is NO_MESSAGE
    w0 = alg.global_weights()
    alg.on_arrival(replied(0, vec(2, 0, 0), w0, 1, [1, 0, 0]))
    sent, _ = alg.on_arrival(replied(1, vec(0, 2, 0), w0, 2, [0, -1, 0]))
    close(sent, [W1, W1, 0])  # the same server step as with the correction
    close(alg.c, [0, 0, 0])
    assert alg.variates.rows() == []


def test_a_reply_without_a_variate_moves_none() -> None:
    """Pure-latency mode: no c_i comes back; the update still weighs in the step, c stays 0."""
    alg = fedac()
    w0 = alg.global_weights()
    alg.on_arrival(arrival(0, vec(2, 0, 0), w0, 1, 1))
    sent, _ = alg.on_arrival(arrival(1, vec(0, 2, 0), w0, 1, 2))
    close(sent, [W1, W1, 0])
    close(alg.c, [0, 0, 0])
    assert alg.variates.rows() == [] and torch.equal(alg.message(0, 1).arrays["c_i"], torch.zeros(3))


def test_a_clients_corrected_step_through_the_trainer_by_hand() -> None:
    """Linear(1, 2, no bias) from [0, 0], one sample (1, class 0), lr .5, one step; the server's c = [.2, -.2], the
    client's c_i = 0 (its first round). grad CE = softmax(0) - [1, 0] = [-.5, .5]; corrected g - c_i + c = [-.3, .3];
    y = -.5 [-.3, .3] = [.15, -.15]; c_i+ = c_i - c + (x - y) / (1 * .5) = [-.2, .2] + [-.3, .3] = [-.5, .5]."""
    model = nn.Linear(1, 2, bias=False)
    layout = Layout.of(model)
    alg = FedAC(FedACConfig(buffer=2), make_setup(layout, [0, 0], 1))
    alg.c = vec(0.2, -0.2)
    trainer = LocalTrainer(model, layout, [(torch.tensor([[1.0]]), torch.tensor([0]))],
                           TrainConfig(epochs=1, batch_size=1, lr=0.5), seed=0)
    reply = trainer.run(Job(0, 0, alg.global_weights(), alg.message(0, 0)))
    close(reply.weights, [0.15, -0.15])
    close(reply.arrays["c_i"], [-0.5, 0.5])
    alg.on_arrival(Arrival(0, reply.weights, vec(0, 0), 1, 1, 1, reply.arrays, reply.metrics))
    close(alg.variates.get(0), [-0.5, 0.5])  # type: ignore[arg-type]


def test_a_checkpoint_mid_buffer_continues_identically() -> None:
    """State after one buffer and one arrival of the next (variates, sums, the latest step), through torch's file
    format: the resumed rule and the original take the same next arrival to the same bits."""
    alg = fedac(direction="last_step")
    w1 = first_buffer(alg)
    alg.on_arrival(replied(2, vec(1, 0, 1), vec(0, 0, 0), 3, [0, 0, 2]))
    buf = io.BytesIO()
    torch.save(alg.state(), buf)
    again = fedac(direction="last_step")
    again.load_state(torch.load(io.BytesIO(buf.getvalue()), weights_only=True))
    nxt = replied(0, w1 + vec(0, 3, 0), w1, 4, [2, 0, 0])
    assert torch.equal(alg.on_arrival(nxt)[0], again.on_arrival(nxt)[0])
    assert torch.equal(alg.c, again.c) and torch.equal(alg.message(2, 1).arrays["c_i"], again.message(2, 1).arrays["c_i"])


def test_cosine_of_a_zero_vector_is_zero() -> None:
    assert cosine(vec(0, 0), vec(1, 2)) == 0.0 and cosine(vec(3, 4), vec(4, 3)) == pytest.approx(0.96)


def test_fedac_states_its_costs_and_defaults() -> None:
    config = FedACConfig()
    assert not config.synchronous and config.round_clients(20) is None and config.vectors_kept() == 1  # c_i
    assert config.arrival_work(10) == config.arrival_passes == 12.0
    assert (config.buffer, config.server_lr, config.beta1, config.beta2, config.min_weight) == (5, 0.001, 0.6, 0.9, 0.1)
    for bad in ({"min_weight": 0.0}, {"beta1": 1.0}, {"buffer": 0}, {"direction": "server"}):
        with pytest.raises(ValueError):
            FedACConfig(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("algorithm", [
    {"name": "fedac", "buffer": 2, "server_lr": 0.01},
    {"name": "fedac", "buffer": 3, "server_lr": 0.01, "direction": "last_step", "correction": False},
])
def test_fedac_trained_runs_keep_the_invariants(algorithm: dict[str, Any]) -> None:
    """Trained end to end under --verify, on unequal shards, failures and a departure: the model moves."""
    raw = tiny_scenario(algorithms=[algorithm], availability={"p": 0.2, "departures": [
        {"client": 0, "leave": 5.0, "rejoin": 9.0}]})
    raw["data"] = {**raw["data"], "partition": {"kind": "dirichlet", "clients": 3, "alpha": 0.5, "sizes": "draw"}}
    scn = validate(raw)
    state = run_one(scn, federation(scn, load_dataset(scn), 0), 0, verify=True).state
    assert state.updates > 0 and state.now == 8.0
    assert len({round(m.loss, 6) for m in state.metrics}) > 1
