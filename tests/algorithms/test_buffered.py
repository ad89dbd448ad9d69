"""FedBuff and CA2FL against hand-computed cases (K = 2, three clients)."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from simfl.algorithms.ca2fl import CA2FL, CA2FLConfig
from simfl.algorithms.fedbuff import FedBuff, FedBuffConfig
from tests.algorithms.algo_helpers import arrival, bn_layout, close, linear_layout, make_setup, vec

R = 1 / math.sqrt(2)


def test_fedbuff_three_clients() -> None:
    alg = FedBuff(FedBuffConfig(buffer=2, server_lr=2.0), make_setup(linear_layout(), [0, 0, 0], 3))
    w0 = alg.initial_weights(0)
    assert alg.initial_weights(1) is w0 and alg.initial_weights(2) is w0  # all dispatched at version 0
    # t=1 client 0: delta [2,0,1], v=0 -> weight 1; buffer 1/2, global unchanged, re-sent W0 (version 0)
    sent0, weight = alg.on_arrival(arrival(0, vec(2, 0, 1), w0, 1, 1))
    assert weight == 1.0
    assert sent0 is w0
    # t=2 client 1: delta [0,2,-1], weight 1; buffer full: W = 0 + 2/2*[2,2,0] = [2,2,0], version 1
    sent1, weight = alg.on_arrival(arrival(1, vec(0, 2, -1), w0, 2, 2))
    assert weight == 1.0
    close(sent1, [2, 2, 0])
    # t=3 client 2 (sent version 0; one version since, s=3): delta [4,0,0], weight 1/sqrt(1+1)
    sent2, weight = alg.on_arrival(arrival(2, vec(4, 0, 0), w0, 3, 3))
    assert weight == pytest.approx(R)
    close(sent2, [2, 2, 0])
    # t=4 client 0 (re-sent W0 at version 0, s=3): delta [0,0,2], weight 1/sqrt(2)
    #   flush: W = [2,2,0] + 2/2*(R*[4,0,0] + R*[0,0,2]) = [2+4R, 2, 2R], version 2
    sent0, weight = alg.on_arrival(arrival(0, vec(0, 0, 2), sent0, 3, 4))
    assert weight == pytest.approx(R)
    close(sent0, [2 + 4 * R, 2, 2 * R])
    # t=5 client 1 (sent version 1, now 2 -> v=1, s=3): delta [1,1,1]; buffer 1/2, global unchanged
    _, weight = alg.on_arrival(arrival(1, sent1 + vec(1, 1, 1), sent1, 3, 5))
    assert weight == pytest.approx(R)
    close(alg.global_weights(), [2 + 4 * R, 2, 2 * R])


def test_ca2fl_three_clients() -> None:
    alg = CA2FL(CA2FLConfig(buffer=2), make_setup(linear_layout(), [0, 0, 0], 3))
    w0 = alg.initial_weights(0)
    # t=1 client 0: delta [2,0,1]; acc = [2,0,1] - h0(0) = [2,0,1]; h0 = [2,0,1]
    sent0, mix = alg.on_arrival(arrival(0, vec(2, 0, 1), w0, 1, 1))
    assert mix is None
    close(sent0, [0, 0, 0])
    # t=2 client 1: delta [0,2,-1]; acc = [2,2,0]; h1 = [0,2,-1]
    #   flush: W = 0 + (h_bar 0 + acc/2) = [1,1,0]; then h_bar = (h0+h1+h2)/3 = [2/3, 2/3, 0]
    sent1, _ = alg.on_arrival(arrival(1, vec(0, 2, -1), w0, 2, 2))
    close(sent1, [1, 1, 0])
    # t=3 client 0 again (started at W0, s=2): delta [1,0,0]; acc = [1,0,0] - h0 = [-1,0,-1]; h0 = [1,0,0]
    sent0, _ = alg.on_arrival(arrival(0, vec(1, 0, 0), sent0, 2, 3))
    close(sent0, [1, 1, 0])
    # t=4 client 2 (first arrival, s=4): delta [0,0,3]; acc = [-1,0,2]; h2 = [0,0,3]
    #   flush with the old h_bar: W = [1,1,0] + [2/3,2/3,0] + [-.5,0,1] = [7/6, 5/3, 1]
    #   then h_bar = ([1,0,0] + [0,2,-1] + [0,0,3]) / 3 = [1/3, 2/3, 2/3]
    sent2, _ = alg.on_arrival(arrival(2, vec(0, 0, 3), w0, 4, 4))
    close(sent2, [7 / 6, 5 / 3, 1])
    # t=5 client 1 (sent [1,1,0], s=3): delta [0,1,0]; acc = [0,1,0] - [0,2,-1] = [0,-1,1]; h1 = [0,1,0]
    alg.on_arrival(arrival(1, sent1 + vec(0, 1, 0), sent1, 3, 5))
    # t=6 client 0 (sent [1,1,0], s=3): delta 0; acc = [0,-1,1] - [1,0,0] = [-1,-1,1]; h0 = 0
    #   flush: W = [7/6,5/3,1] + [1/3,2/3,2/3] + [-.5,-.5,.5] = [1, 11/6, 13/6]
    sent0, _ = alg.on_arrival(arrival(0, sent0.clone(), sent0, 3, 6))
    close(sent0, [1, 11 / 6, 13 / 6])
    close(alg.state()["cache_mean"], [0, 1 / 3, 1])  # ([0,0,0] + [0,1,0] + [0,0,3]) / 3


@pytest.mark.parametrize("config", [FedBuffConfig, CA2FLConfig])
@pytest.mark.parametrize("bad", [{"buffer": 0}, {"server_lr": 0.0}, {"buffer": 2.5}])
def test_config_rejects_bad_values(config: type, bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        config(**bad)


@pytest.mark.parametrize(
    ("calibrate_with", "after_round_1", "after_round_2"),
    [
        # Algorithm 2 of Wang et al. (ICLR 2024): Delta_t += delta - h_t^i, h_t^i the cache as the round began
        ("round_start", [2 / 3, 1 / 3, 1], [5 / 3, 1, 2]),
        # the running cache: a repeated client is corrected by its own first delta of the round
        ("latest", [0, 1 / 3, 1], [0, 4 / 3, 2]),
    ],
)
def test_ca2fl_repeated_arrival_in_one_buffer(
    calibrate_with: str, after_round_1: list[float], after_round_2: list[float]
) -> None:
    """M = 3, N = 3 clients, client 0 arrives twice in each buffer round."""
    alg = CA2FL(CA2FLConfig(buffer=3, calibrate_with=calibrate_with), make_setup(linear_layout(), [0, 0, 0], 3))  # type: ignore[arg-type]
    w0 = alg.initial_weights(0)
    # round 1, every cache 0, h_1 = 0
    # t=1 client 0, delta a = [2,0,0]: Delta = a - 0
    alg.on_arrival(arrival(0, vec(2, 0, 0), w0, 1, 1))
    # t=2 client 0 again, delta b = [0,1,0]: round_start Delta += b - h_1^0 (= 0) -> [2,1,0];
    #   latest Delta += b - a -> [0,1,0]; the cache becomes b either way
    alg.on_arrival(arrival(0, vec(0, 1, 0), w0, 1, 2))
    # t=3 client 1, delta c = [0,0,3]: Delta [2,1,3] (latest [0,1,3]); flush W = 0 + 0 + Delta / 3
    #   then h_2 = (b + c + 0) / 3 = [0, 1/3, 1]
    sent, _ = alg.on_arrival(arrival(1, vec(0, 0, 3), w0, 3, 3))
    close(sent, after_round_1)
    close(alg.state()["cache_mean"], [0, 1 / 3, 1])
    w1 = sent.clone()
    # round 2: client 0's cache at the round's start is b
    # t=4 client 0, delta d = [3,0,0]: Delta = d - b = [3,-1,0] in both readings; cache d
    alg.on_arrival(arrival(0, w1 + vec(3, 0, 0), w1, 1, 4))
    # t=5 client 0 again, delta e = 0: round_start Delta += 0 - b -> [3,-2,0]; latest Delta += 0 - d -> [0,-1,0]
    alg.on_arrival(arrival(0, w1.clone(), w1, 1, 5))
    # t=6 client 2, delta f = [0,3,0]: Delta [3,1,0] (latest [0,2,0]); flush W = w1 + h_2 + Delta / 3
    #   round_start: [2/3,1/3,1] + [0,1/3,1] + [1,1/3,0] = [5/3,1,2]; latest: [0,1/3,1] + [0,1/3,1] + [0,2/3,0]
    sent, _ = alg.on_arrival(arrival(2, w1 + vec(0, 3, 0), w1, 4, 6))
    close(sent, after_round_2)
    # h_3 = (e + c + f) / 3 = [0, 1, 1]
    close(alg.state()["cache_mean"], [0, 1, 1])


# Batch-norm running statistics (simfl/algorithms/bn_stats.py), on bn_layout():
# [w0, w1, b | bn.weight, bn.bias | running_mean, running_var], W0 = [0, 0, 0, 1, 0, 0, 1]. Clients 0 and 1 fill the
# first buffer from W0; client 2 and client 0 again (both sent W0, one version old) fill the second.
BN_W0 = [0, 0, 0, 1, 0, 0, 1]
BN_ARRIVALS = [(0, [1, 0, 0, 1, 0, 0.5, 0.2]), (1, [0, 1, 0, 1, 0, -0.5, 0.4]),
               (2, [0, 0, 1, 1, 0, 0.2, 0.1]), (0, [0, 0, 0, 1, 0, 0.4, 0.1])]


def _bn_run(alg: FedBuff | CA2FL) -> list[torch.Tensor]:
    w0 = alg.initial_weights(0)
    return [alg.on_arrival(arrival(c, vec(*w), w0, 1, t + 1))[0].clone() for t, (c, w) in enumerate(BN_ARRIVALS)]


@pytest.mark.parametrize("reading", ["step", "mean"])
def test_fedbuff_batch_norm_statistics(reading: str) -> None:
    # first flush, every weight 1: W = W0 + mean delta = [.5, .5, 0, 1, 0, 0, .3], the arrivals' mean statistics too
    # second flush, weights 1/sqrt(2): W = W1 + R/2 * ([0,0,1,0,0,.2,-.9] + [0,0,0,0,0,.4,-.9])
    #   step: running_mean 0 + .3R, running_var .3 - .9R = -0.336 (below zero); mean: (.2 + .4)/2, (.1 + .1)/2
    alg = FedBuff(FedBuffConfig(buffer=2, bn_stats=reading), make_setup(bn_layout(), BN_W0, 3))
    sent = _bn_run(alg)
    close(sent[1], [0.5, 0.5, 0, 1, 0, 0, 0.3])
    stats = [0.3 * R, 0.3 - 0.9 * R] if reading == "step" else [0.3, 0.1]
    close(sent[3], [0.5, 0.5, 0.5 * R, 1, 0, *stats])
    assert "stats" not in alg.state() if reading == "step" else torch.equal(alg.state()["stats"], vec(0, 0))


@pytest.mark.parametrize("reading", ["step", "mean"])
def test_ca2fl_batch_norm_statistics(reading: str) -> None:
    # first flush: W1 = W0 + (d0 + d1)/2 = [.5, .5, 0, 1, 0, 0, .3] (the arrivals' mean statistics too);
    #   h = (d0 + d1)/3 = [1/3, 1/3, 0, 0, 0, 0, -1.4/3]
    # second flush: acc = d2 + (d0' - d0) = [-1, 0, 1, 0, 0, .1, -1]; W = W1 + h + acc/2
    #   = [1/3, 5/6, .5, 1, 0, .05, .3 - 1.4/3 - .5 = -2/3] (step: a running variance below zero);
    #   mean: running_mean (.2 + .4)/2 = .3, running_var (.1 + .1)/2 = .1
    alg = CA2FL(CA2FLConfig(buffer=2, bn_stats=reading), make_setup(bn_layout(), BN_W0, 3))
    sent = _bn_run(alg)
    close(sent[1], [0.5, 0.5, 0, 1, 0, 0, 0.3])
    stats = [0.05, 0.3 - 1.4 / 3 - 0.5] if reading == "step" else [0.3, 0.1]
    close(sent[3], [1 / 3, 5 / 6, 0.5, 1, 0, *stats])


@pytest.mark.parametrize("rule", [FedBuff, CA2FL])
def test_a_stopped_buffer_keeps_the_statistics_it_summed(rule: type[FedBuff] | type[CA2FL]) -> None:
    # a checkpoint mid-buffer (after client 2's arrival) and a fresh rule loaded from it flush as the first one
    config = rule.Config(buffer=2, bn_stats="mean")
    alg = rule(config, make_setup(bn_layout(), BN_W0, 3))  # type: ignore[arg-type]
    whole = _bn_run(alg)
    alg = rule(config, make_setup(bn_layout(), BN_W0, 3))  # type: ignore[arg-type]
    w0 = alg.initial_weights(0)
    for t, (c, w) in enumerate(BN_ARRIVALS[:3]):
        alg.on_arrival(arrival(c, vec(*w), w0, 1, t + 1))
    again = rule(config, make_setup(bn_layout(), BN_W0, 3))  # type: ignore[arg-type]
    again.load_state(alg.state())
    c, w = BN_ARRIVALS[3]
    assert torch.equal(again.on_arrival(arrival(c, vec(*w), w0, 1, 4))[0], whole[3])
