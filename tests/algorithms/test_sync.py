"""FedAvg, FedProx and FedAdam against hand-computed two-client rounds."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from simfl.algorithms.fedadam import FedAdam, FedAdamConfig
from simfl.algorithms.fedavg import FedAvg, FedAvgConfig
from simfl.algorithms.fedprox import FedProx, FedProxConfig
from tests.algorithms.algo_helpers import arrival, bn_layout, close, linear_layout, make_setup, vec


@pytest.mark.parametrize("make", [lambda s: FedAvg(FedAvgConfig(clients_per_round=2), s),
                                  lambda s: FedProx(FedProxConfig(clients_per_round=2, mu=0.1), s)])
def test_sample_weighted_rounds(make) -> None:  # type: ignore[no-untyped-def]
    alg = make(make_setup(linear_layout(), [0, 0, 0], 2, sizes=(1, 3)))
    assert alg.clients_per_round == 2
    w = alg.round_weights()
    # round 1: (1*[2,0,1] + 3*[0,4,-2]) / 4 = [.5, 3, -1.25]
    alg.aggregate([arrival(0, vec(2, 0, 1), w, 1, 1, n=1), arrival(1, vec(0, 4, -2), w, 1, 1, n=3)])
    close(alg.global_weights(), [0.5, 3, -1.25])
    w = alg.round_weights()
    assert w is alg.global_weights()
    # round 2: (1*[1,1,1] + 3*[1,-1,3]) / 4 = [1, -.5, 2.5]
    alg.aggregate([arrival(0, vec(1, 1, 1), w, 1, 2, n=1), arrival(1, vec(1, -1, 3), w, 1, 2, n=3)])
    close(alg.global_weights(), [1, -0.5, 2.5])


def test_local_options() -> None:
    setup = make_setup(linear_layout(), [0, 0, 0], 2)
    assert FedProx(FedProxConfig(mu=0.25), setup).local_options() == {"prox_mu": 0.25}
    assert FedProx(FedProxConfig(mu=0.0), setup).local_options() == {}
    assert FedAvg(FedAvgConfig(), setup).local_options() == {}


def test_fedadam_two_rounds_with_bn_buffers() -> None:
    # layout [w0, w1, b, bn.weight, bn.bias | running_mean, running_var]; lr .1, b1 .5, b2 .75, tau .5
    cfg = FedAdamConfig(clients_per_round=2, lr=0.1, beta1=0.5, beta2=0.75, tau=0.5)
    alg = FedAdam(cfg, make_setup(bn_layout(), [0, 0, 0, 1, 0, 0, 1], 2))
    w = alg.round_weights()
    # round 1: mean delta D = mean([2,0,1,1,0,1,3], [0,4,-3,3,2,3,1]) - W0 = [1,2,-1,1,1, 2,1]
    #   m = .5*D = [.5,1,-.5,.5,.5];  v = .75*.25 + .25*D^2 = [.4375,1.1875,.4375,.4375,.4375]
    #   params: W + .1*m/(sqrt(v)+.5) = [.043050087, .062903972, -.043050087, 1.043050087, .043050087]
    #   buffers: W + D = [2, 2] (the clients' mean running statistics)
    alg.aggregate([arrival(0, vec(2, 0, 1, 1, 0, 1, 3), w, 1, 1), arrival(1, vec(0, 4, -3, 3, 2, 3, 1), w, 1, 1)])
    close(alg.global_weights(), [0.043050087, 0.062903972, -0.043050087, 1.043050087, 0.043050087, 2, 2])
    # round 2: D = [1,-1,0,2,0, 1,0];  m = .5*m + .5*D = [.75,0,-.25,1.25,.25]
    #   v = .75*v + .25*D^2 = [.578125,1.140625,.328125,1.328125,.328125]
    #   params = [.102557588, .062903972, -.066353115, 1.118695659, .066353115]; buffers [3, 2]
    w = alg.round_weights()
    alg.aggregate([arrival(0, w + vec(2, -2, 0, 4, 0, 2, -1), w, 1, 2), arrival(1, w + vec(0, 0, 0, 0, 0, 0, 1), w, 1, 2)])
    torch.testing.assert_close(
        alg.global_weights(),
        vec(0.102557588, 0.062903972, -0.066353115, 1.118695659, 0.066353115, 3, 2),
        rtol=0,
        atol=2e-6,
    )


@pytest.mark.parametrize(
    ("config", "bad"),
    [
        (FedAvgConfig, {"clients_per_round": 0}),
        (FedProxConfig, {"mu": -0.1}),
        (FedAdamConfig, {"beta1": 1.0}),
        (FedAdamConfig, {"tau": 0.0}),
        (FedAdamConfig, {"lr": -1.0}),
    ],
)
def test_config_rejects_bad_values(config: type, bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        config(**bad)
