"""MOON against hand-computed cases (every number worked out below): the model-contrastive term of the trainer's batch
seam (:class:`simfl.train.hooks.Contrastive`), the representations it reads (:mod:`simfl.models.representation`) and
the server's rounds (:mod:`simfl.algorithms.moon`)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import nn

from simfl.algorithms.base import Arrival
from simfl.algorithms.configs import MOONConfig
from simfl.algorithms.moon import MOON, PREVIOUS
from simfl.errors import InputError
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.models.flat import Layout
from simfl.models.representation import Representation, output_layer
from simfl.schema.scenario import validate
from simfl.sim.state import SimState
from simfl.train import hooks
from simfl.train.local import Job, LocalTrainer, TrainConfig
from simfl.train.message import NO_MESSAGE, Message
from tests.algorithms.algo_helpers import arrival, close, linear_layout, make_setup, vec
from tests.conftest import tiny_scenario


def two_layers() -> nn.Module:
    """Linear(1, 2) then Linear(2, 2), no biases: flat ``[W1_0, W1_1 | W2_00, W2_01, W2_10, W2_11]``; on the input
    ``[1]`` the representation (the output layer's input) is ``z = W1``."""
    return nn.Sequential(nn.Linear(1, 2, bias=False), nn.Linear(2, 2, bias=False))


def test_one_step_through_the_trainer_by_hand() -> None:
    """One sample ``x = [1]`` of class 0, lr 1, mu 1, tau .5; the round starts (the global model) at W1 = [1, 0],
    W2 = 0; the client's previous model has W1 = [0, 1].

    z = [1, 0], z_glob = [1, 0], z_prev = [0, 1]: sim(z, z_glob) = 1, sim(z, z_prev) = 0; logits / tau = [2, 0].
    l_con = -log(e^2 / (e^2 + 1)) = log(1 + e^-2) = .126928011; softmax [.880797078, .119202922].
    dl/dsim_glob = (.880797078 - 1) / .5 = -.238405844; dl/dsim_prev = .119202922 / .5 = .238405844.
    dsim(z, a)/dz = a / (|z| |a|) - sim z / |z|^2: for z_glob [1, 0] - 1 [1, 0] = 0; for z_prev [0, 1] - 0 = [0, 1].
    So dl_con/dz = [0, .238405844], and dz/dW1 = x = 1.
    CE: logits W2 z = [0, 0], p = [.5, .5], dCE/dlogits = [-.5, .5]; dCE/dW2 = outer([-.5, .5], z) = [[-.5, 0],
    [.5, 0]]; dCE/dz = W2^T [-.5, .5] = 0.
    Step: W1 = [1, 0] - [0, .238405844] = [1, -.238405844]; W2 = -[[-.5, 0], [.5, 0]] = [[.5, 0], [-.5, 0]].
    The reported loss is the cross-entropy alone, log 2 = .693147181. Without the term W1 would not move.
    """
    model = two_layers()
    layout = Layout.of(model)
    trainer = LocalTrainer(model, layout, [(torch.tensor([[1.0]]), torch.tensor([0]))],
                           TrainConfig(epochs=1, batch_size=1, lr=1.0), seed=0)
    start = vec(1, 0, 0, 0, 0, 0)
    value = {"mu": 1.0, "tau": 0.5, "negative": PREVIOUS}
    reply = trainer.run(Job(0, 1, start, Message({"contrastive": value}, {PREVIOUS: vec(0, 1, 7, -3, 2, 5)})))
    close(reply.weights, [1, -0.238405844, 0.5, 0, -0.5, 0])
    assert reply.metrics["steps"] == 1 and reply.metrics["loss"] == pytest.approx(math.log(2))
    plain = trainer.run(Job(0, 1, start, NO_MESSAGE))
    close(plain.weights, [1, 0, 0.5, 0, -0.5, 0])
    assert not model._forward_pre_hooks and not model[1]._forward_pre_hooks  # the seam leaves nothing hooked


def test_the_term_on_a_batch_of_two_by_hand() -> None:
    """The hook's arithmetic alone, with stand-in frozen models, mu 5, tau .5.

    sample 1: z = [3, 4], z_glob = [4, 3], z_prev = [3, 4]: sims 24/25 = .96 and 1; logits/tau [1.92, 2]:
      l = -log(e^1.92 / (e^1.92 + e^2)) = log(1 + e^.08) = log(2.083287068) = .733946967
    sample 2: z = [1, 0], z_glob = [1, 0], z_prev = [0, 1]: sims 1, 0: l = log(1 + e^-2) = .126928011
    term = 5 (.733946967 + .126928011) / 2 = 5 * .430437489 = 2.152187446
    """
    z = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    stand_ins = {0.0: torch.tensor([[4.0, 3.0], [1.0, 0.0]]), 1.0: torch.tensor([[3.0, 4.0], [0.0, 1.0]])}
    layout = linear_layout()
    message = Message({}, {"prev": torch.ones(layout.size)})
    rnd = hooks.Round([], layout, torch.zeros(layout.size), message, 0.1,
                      frozen=lambda flat: (lambda inputs, key=float(flat[0]): stand_ins[key]))
    hook = hooks.Contrastive(rnd, {"mu": 5.0, "tau": 0.5, "negative": "prev"})
    batch = hooks.Batch(torch.zeros(2, 1), torch.zeros(2, dtype=torch.long), torch.zeros(2, 2), z)
    term = hook.batch_loss(batch)
    assert term is not None and float(term) == pytest.approx(2.152187446, abs=1e-6)


def test_a_round_without_a_batch_hook_gives_no_frozen_models() -> None:
    rnd = hooks.Round([], linear_layout(), torch.zeros(3), NO_MESSAGE, 0.1)
    with pytest.raises(ValueError, match="no frozen models"):
        rnd.features_at(torch.zeros(3))


def test_the_representation_is_the_output_layers_input_and_changes_no_output() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = torch.randn(5, 3)
    outputs, features = Representation(model).forward(x)
    assert torch.equal(outputs, model(x))  # the model's own outputs, to the bit
    assert torch.equal(features, torch.relu(model[0](x)))
    assert output_layer(model) is model[2] and not model[2]._forward_pre_hooks

    class Named(nn.Module):  # a model naming its own output layer
        def __init__(self) -> None:
            super().__init__()
            self.head, self.output_layer = nn.Linear(2, 2), nn.Identity()

    named = Named()
    assert output_layer(named) is named.output_layer
    with pytest.raises(InputError, match="no nn.Linear output layer"):
        output_layer(nn.Sequential(nn.Flatten(), nn.ReLU()))


def test_a_frozen_model_runs_in_evaluation_mode_at_its_own_weights_by_hand() -> None:
    """Linear(1, 2, no bias) + BatchNorm1d(2) + Linear(2, 2): flat [W1 (2) | bn weight (2), bias (2) | W2 (4) |
    running_mean (2), running_var (2)]. Frozen at W1 = [2, 4], bn weight 1, bias 0, running mean [1, 1], var [4, 4]:
    on x = [3] the output layer's input is ((6, 12) - 1) / sqrt(4 + 1e-5) = [2.4999969, 5.4999931]. The model being
    trained keeps its weights, its statistics and its training mode."""
    model = nn.Sequential(nn.Linear(1, 2, bias=False), nn.BatchNorm1d(2), nn.Linear(2, 2))
    layout = Layout.of(model)
    assert layout.names == ["0.weight", "1.weight", "1.bias", "2.weight", "2.bias", "1.running_mean", "1.running_var"]
    model.train()
    before = layout.flatten(model)
    flat = vec(2, 4, 1, 1, 0, 0, 9, 9, 9, 9, 9, 9, 1, 1, 4, 4)
    features = Representation(model).frozen(layout, flat)(torch.tensor([[3.0]]))
    close(features[0], [5 / math.sqrt(4 + 1e-5), 11 / math.sqrt(4 + 1e-5)])
    assert model.training and all(m.training for m in model.modules())
    assert torch.equal(layout.flatten(model), before)


def test_the_server_averages_as_fedavg_and_keeps_each_clients_model() -> None:
    alg = MOON(MOONConfig(clients_per_round=2), make_setup(linear_layout(), [0, 0, 0], 3, sizes=(1, 3, 2)))
    assert alg.message(0, 0) is NO_MESSAGE  # no previous model yet: the cross-entropy alone
    w = alg.round_weights()
    # sizes 1 and 3: (1 [4, 0, 0] + 3 [0, 4, 8]) / 4 = [1, 3, 6]
    alg.aggregate([arrival(0, vec(4, 0, 0), w, 1, 1, n=1), arrival(1, vec(0, 4, 8), w, 1, 2, n=3)])
    close(alg.global_weights(), [1, 3, 6])
    sent = alg.message(1, 1)
    assert sent.hooks == {"contrastive": {"mu": 1.0, "tau": 0.5, "negative": PREVIOUS}}
    close(sent.arrays[PREVIOUS], [0, 4, 8])
    assert alg.message(2, 0) is NO_MESSAGE  # client 2 has not delivered
    # round 2, client 1 alone: w = [2, 2, 2]; its previous model is replaced, client 0's kept
    alg.aggregate([arrival(1, vec(2, 2, 2), alg.round_weights(), 1, 3, n=3)])
    close(alg.global_weights(), [2, 2, 2])
    close(alg.message(1, 2).arrays[PREVIOUS], [2, 2, 2])
    close(alg.message(0, 1).arrays[PREVIOUS], [4, 0, 0])
    off = MOON(MOONConfig(clients_per_round=1, mu=0.0), make_setup(linear_layout(), [0, 0, 0], 1))
    off.aggregate([arrival(0, vec(1, 1, 1), off.round_weights(), 1, 1)])
    assert off.message(0, 1) is NO_MESSAGE  # mu 0: FedAvg


def test_moon_states_its_costs_and_its_defaults() -> None:
    config = MOONConfig()
    assert config.synchronous and config.vectors_kept() == 1 and config.round_clients(20) == 10  # the previous models
    assert config.arrival_work(10) == config.arrival_passes == 4.0
    assert (config.mu, config.tau) == (1.0, 0.5)
    for bad in ({"tau": 0.0}, {"mu": -1.0}):
        with pytest.raises(ValueError):
            MOONConfig(**bad)  # type: ignore[arg-type]


def _run(algorithm: dict[str, Any], **changes: Any) -> SimState:
    raw = tiny_scenario(algorithms=[algorithm], train={"epochs": 2, "batch_size": 16, "lr": 0.1}, **changes)
    scn = validate(raw)
    return run_one(scn, federation(scn, load_dataset(scn), 0), 0, verify=True).state


def test_moon_trains_apart_from_fedavg_and_is_fedavg_at_mu_zero() -> None:
    """Trained end to end under --verify on 3 clients, 2 a round: mu 0 is FedAvg's run to the bit; mu 1 its first
    round too (no previous models yet), then apart."""
    fedavg = _run({"name": "fedavg", "clients_per_round": 2})
    off = _run({"name": "moon", "clients_per_round": 2, "mu": 0.0})
    on = _run({"name": "moon", "clients_per_round": 2, "mu": 1.0})
    assert [m.row() for m in off.metrics] == [m.row() for m in fedavg.metrics] and off.events == fedavg.events
    assert on.updates == fedavg.updates > 2
    assert [m.row() for m in on.metrics] != [m.row() for m in fedavg.metrics]


def test_moon_keeps_the_invariants_on_unequal_shards_failures_and_a_departure() -> None:
    state = _run({"name": "moon", "clients_per_round": 2, "mu": 5.0},
                 data={"dataset": "synthetic", "train_size": 120, "test_size": 60, "features": 8, "classes": 3,
                       "partition": {"kind": "dirichlet", "clients": 3, "alpha": 0.5, "sizes": "draw"}},
                 availability={"p": 0.2, "departures": [{"client": 0, "leave": 5.0, "rejoin": 9.0}]})
    assert state.updates > 0 and state.now == 8.0 and len({round(m.loss, 6) for m in state.metrics}) > 1


def test_arrival_weights_are_the_clients_previous_models_after_a_resume() -> None:
    alg = MOON(MOONConfig(clients_per_round=2), make_setup(linear_layout(), [0, 0, 0], 2))
    w = alg.round_weights()
    alg.aggregate([Arrival(0, vec(1, 2, 3), w, 1, 1, 1), Arrival(1, vec(3, 2, 1), w, 1, 2, 1)])
    again = MOON(MOONConfig(clients_per_round=2), make_setup(linear_layout(), [0, 0, 0], 2))
    again.load_state(alg.state())
    close(again.global_weights(), [2, 2, 2])
    close(again.message(1, 1).arrays[PREVIOUS], [3, 2, 1])
