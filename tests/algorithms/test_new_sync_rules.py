"""FedNova against hand-computed rounds (every number worked out below).

Layouts (tests/algorithms/algo_helpers.py): ``linear`` is Linear(2, 1), a 3-vector of parameters; ``bn`` is
Linear(2, 1) + BatchNorm1d(1), ``[w0, w1, b, bn.weight, bn.bias | running_mean, running_var]`` (the last two are
buffers).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from simfl.algorithms.base import Arrival
from simfl.algorithms.configs import FedNovaConfig
from simfl.algorithms.fedavg import FedAvg, FedAvgConfig
from simfl.algorithms.fednova import FedNova
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema.scenario import validate
from tests.algorithms.algo_helpers import arrival, bn_layout, close, make_setup, vec
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
