"""The asynchronous rules of the recent literature against cases worked out by hand (tiny vectors, every number in
the comments): FADAS, AsyncFedED, delay-adaptive asynchronous SGD, FedStaleWeight."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from simfl.algorithms.asyncfeded import AsyncFedED, AsyncFedEDConfig, relative_staleness
from simfl.algorithms.delay_adaptive import DelayAdaptive, DelayAdaptiveConfig, delay_step
from simfl.algorithms.fadas import FADAS, FADASConfig, delay_adapted
from simfl.algorithms.fedstaleweight import FedStaleWeight, FedStaleWeightConfig, StalenessAverages
from tests.algorithms.algo_helpers import arrival, close, linear_layout, make_setup, vec


@pytest.mark.parametrize(
    ("threshold", "step", "eta2", "expected"),
    [
        # plain FADAS: eta_2 = eta = 2; W2 = W1 + 2 * [0, 1/3, 1/3]
        (None, "inverse", 2.0, [1, 2, 2 / 3]),
        # tau_max = 1 > tau_c = 0: the paper's min(eta, 1/tau_max) = min(2, 1) = 1; W2 = W1 + [0, 1/3, 1/3]
        (0, "inverse", 1.0, [1, 5 / 3, 1 / 3]),
        # AFL-Lib's eta / tau_max = 2 / 1 = 2: the same as plain FADAS at tau_max = 1
        (0, "scaled", 2.0, [1, 2, 2 / 3]),
        # tau_c = 1: tau_max = 1 is not above it, eta stays 2
        (1, "inverse", 2.0, [1, 2, 2 / 3]),
    ],
)
def test_fadas_two_buffers(threshold: int | None, step: str, eta2: float, expected: list[float]) -> None:
    """M = 2, eta = 2, beta1 = 0.5, beta2 = 0.75, eps = 1, W0 = 0, three clients."""
    config = FADASConfig(buffer=2, server_lr=2.0, beta1=0.5, beta2=0.75, eps=1.0, delay_threshold=threshold,
                         delay_step=step)  # type: ignore[arg-type]
    alg = FADAS(config, make_setup(linear_layout(), [0, 0, 0], 3))
    w0 = alg.initial_weights(0)
    # t=1 client 0 (version 0, delay 0): delta [1,2,0]; the buffer holds 1, W unchanged, no step
    sent0, weight = alg.on_arrival(arrival(0, vec(1, 2, 0), w0, 1, 1))
    assert weight is None
    close(sent0, [0, 0, 0])
    # t=2 client 1 (version 0, delay 0): delta [3,6,0]; flush, tau_max = 0 (never above tau_c): eta_1 = 2
    #   Delta = [2,4,0]; m = .5 * [2,4,0] = [1,2,0]; v = .25 * [4,16,0] = [1,4,0]; vhat = [1,4,0]
    #   W1 = 0 + 2 * [1,2,0] / ([1,2,0] + 1) = 2 * [1/2, 2/3, 0] = [1, 4/3, 0]; version 1
    sent1, weight = alg.on_arrival(arrival(1, vec(3, 6, 0), w0, 2, 2))
    assert weight == 2.0
    close(sent1, [1, 4 / 3, 0])
    # t=3 client 2 (dispatched version 0, now 1: delay 1): delta [0,0,2]; the buffer holds 1
    alg.on_arrival(arrival(2, vec(0, 0, 2), w0, 3, 3))
    # t=4 client 0 (re-sent W0 at version 0 at t=1: delay 1): delta [-2,0,0]; flush, tau_max = 1
    #   Delta = ([0,0,2] + [-2,0,0]) / 2 = [-1,0,1]
    #   m = .5 * [1,2,0] + .5 * [-1,0,1] = [0, 1, .5]; v = .75 * [1,4,0] + .25 * [1,0,1] = [1, 3, .25]
    #   vhat = max([1,4,0], [1,3,.25]) = [1, 4, .25] (the AMSGrad maximum keeps 4, not v's 3)
    #   m / (sqrt(vhat) + 1) = [0/2, 1/3, .5/1.5] = [0, 1/3, 1/3]; W2 = [1, 4/3, 0] + eta_2 * [0, 1/3, 1/3]
    sent0, weight = alg.on_arrival(arrival(0, vec(-2, 0, 0), sent0, 3, 4))
    assert weight == eta2
    close(sent0, expected)
    close(alg.state()["vhat"], [1, 4, 0.25])
    assert alg.state()["version"] == 2 and alg.state()["dispatched"] == [2, 1, 1]


def test_fadas_delay_step_at_larger_delays() -> None:
    # eta = 2, tau_c = 0: at tau_max = 2 the paper's min(2, 1/2) = .5, AFL-Lib's 2/2 = 1; plain FADAS 2
    assert delay_adapted(2.0, 0, 2, "inverse") == 0.5
    assert delay_adapted(2.0, 0, 2, "scaled") == 1.0
    assert delay_adapted(2.0, None, 2, "inverse") == 2.0
    # eta = .01: the paper's cap acts only once tau_max > 1/eta = 100; the scaled rate at every delay above tau_c
    assert delay_adapted(0.01, 1, 50, "inverse") == 0.01 and delay_adapted(0.01, 1, 200, "inverse") == 1 / 200
    assert delay_adapted(0.01, 1, 50, "scaled") == pytest.approx(0.01 / 50)


def test_fadas_late_joiner_counts_its_delay_from_its_join() -> None:
    alg = FADAS(FADASConfig(buffer=2), make_setup(linear_layout(), [0, 0, 0], 3))
    w0 = alg.initial_weights(0)
    alg.on_arrival(arrival(0, vec(1, 0, 0), w0, 1, 1))
    alg.on_arrival(arrival(1, vec(0, 1, 0), w0, 2, 2))  # the first flush: version 1
    start = alg.on_join(2)  # client 2 joins now: dispatched version 1, not the time-0 version 0
    alg.on_arrival(arrival(2, start + vec(0, 0, 1), start, 1, 3))
    assert alg.state()["count"] == 1 and alg.state()["max_delay"] == 0  # delay 1 - 1, not 1 - 0


@pytest.mark.parametrize("bad", [{"buffer": 0}, {"server_lr": 0.0}, {"beta1": 1.0}, {"eps": 0.0},
                                 {"delay_threshold": -1}, {"delay_step": "half"}])
def test_fadas_config_rejects_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        FADASConfig(**bad)  # type: ignore[arg-type]


def test_asyncfeded_three_arrivals() -> None:
    """lam = .5, eps = .5 (a fresh update's step lam / eps = 1), W0 = 0, two clients."""
    alg = AsyncFedED(AsyncFedEDConfig(lam=0.5, eps=0.5), make_setup(linear_layout(), [0, 0, 0], 2))
    w0 = alg.initial_weights(0)
    # t=1 client 0 from W0: Delta = [3,4,0] (norm 5); W - W_start = 0: gamma = 0, eta = .5 / .5 = 1
    #   W1 = [3,4,0]
    sent0, eta = alg.on_arrival(arrival(0, vec(3, 4, 0), w0, 1, 1))
    assert eta == 1.0
    close(sent0, [3, 4, 0])
    # t=2 client 1 from W0: Delta = [0,0,2.5]; ||W1 - W0|| = 5, gamma = 5 / 2.5 = 2, eta = .5 / 2.5 = .2
    #   W2 = [3, 4, .5]
    sent1, eta = alg.on_arrival(arrival(1, vec(0, 0, 2.5), w0, 2, 2))
    assert eta == pytest.approx(0.2)
    close(sent1, [3, 4, 0.5])
    # t=3 client 0 from W1: Delta = [.3,.4,0] (norm .5); ||W2 - W1|| = .5, gamma = 1, eta = .5 / 1.5 = 1/3
    #   W3 = [3 + .1, 4 + .4/3, .5]
    sent0, eta = alg.on_arrival(arrival(0, sent0 + vec(0.3, 0.4, 0), sent0, 2, 3))
    assert eta == pytest.approx(1 / 3)
    close(sent0, [3.1, 4 + 0.4 / 3, 0.5])
    # t=4 client 1 from W2 sends it back untrained: ||Delta|| = 0 while W moved: gamma infinite, eta = 0
    _, eta = alg.on_arrival(arrival(1, sent1.clone(), sent1, 2, 4))
    assert eta == 0.0
    close(alg.global_weights(), [3.1, 4 + 0.4 / 3, 0.5])


def test_asyncfeded_relative_staleness_edges() -> None:
    zero = torch.zeros(3)
    assert relative_staleness(zero, zero) == 0.0  # nothing moved, nothing trained: a fresh (empty) update
    assert relative_staleness(vec(1, 0, 0), zero) == math.inf
    assert relative_staleness(vec(0, 3, 4), vec(0, 0, 10)) == 0.5


@pytest.mark.parametrize("bad", [{"lam": 0.0}, {"eps": 0.0}, {"eps": -1.0}])
def test_asyncfeded_config_rejects_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        AsyncFedEDConfig(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "steps", "final"),
    [
        # Mishchenko et al., M = 2: eta min(1, 2 / tau) = 1, 1, 1, 1, 2/3 for tau = 0, 1, 2, 1, 3
        ({"workers": 2}, [1, 1, 1, 1, 2 / 3], [1 + 2, 2, 0]),
        # Koloskova et al., tau_C = 1, c = .5: 1 up to tau = 1, then min(1, .5 / tau) = .25 (tau 2), 1/6 (tau 3)
        ({"form": "koloskova", "delay_threshold": 1, "delay_scale": 0.5}, [1, 1, 0.25, 1, 1 / 6], [1.5, 2, -2.25]),
        # Koloskova et al., tau_C = 1, c = eta tau_C = 1 (null): min(1, 1 / tau) = .5 (tau 2), 1/3 (tau 3)
        ({"form": "koloskova", "delay_threshold": 1}, [1, 1, 0.5, 1, 1 / 3], [2, 2, -1.5]),
    ],
)
def test_delay_adaptive_five_arrivals(options: dict[str, object], steps: list[float], final: list[float]) -> None:
    """eta = 1, W0 = 0, three clients; tau = s - 1 (server updates between dispatch and arrival)."""
    alg = DelayAdaptive(DelayAdaptiveConfig(**options), make_setup(linear_layout(), [0, 0, 0], 3))  # type: ignore[arg-type]
    w0 = alg.initial_weights(0)
    got = []
    # t=1 client 0 from W0, s=1 (tau 0): delta [1,0,0];  W1 = step * [1,0,0] (step 1 in every form)
    w1, step = alg.on_arrival(arrival(0, vec(1, 0, 0), w0, 1, 1))
    got.append(step)
    w1 = w1.clone()
    # t=2 client 1 from W0, s=2 (tau 1): delta [0,2,0]; W2 = [1,2,0] (step 1 in every form)
    w2, step = alg.on_arrival(arrival(1, vec(0, 2, 0), w0, 2, 2))
    got.append(step)
    w2 = w2.clone()
    close(w2, [1, 2, 0])
    # t=3 client 2 from W0, s=3 (tau 2): delta [0,0,3]; W3 = [1, 2, 3 step]
    _, step = alg.on_arrival(arrival(2, vec(0, 0, 3), w0, 3, 3))
    got.append(step)
    close(alg.global_weights(), [1, 2, 3 * steps[2]])
    # t=4 client 1 from W2, s=2 (tau 1): delta [0,0,-3], step 1; W4 = [1, 2, 3 step_3 - 3]
    _, step = alg.on_arrival(arrival(1, w2 + vec(0, 0, -3), w2, 2, 4))
    got.append(step)
    # t=5 client 0 from W1, s=4 (tau 3): delta [3,0,0]; W5 = [1 + 3 step, 2, 3 step_3 - 3]
    #   Mishchenko: [1 + 2, 2, 3 - 3]; Koloskova c = .5: [1 + .5, 2, .75 - 3]; c = 1: [1 + 1, 2, 1.5 - 3]
    sent, step = alg.on_arrival(arrival(0, w1 + vec(3, 0, 0), w1, 4, 5))
    got.append(step)
    assert got == pytest.approx(steps)
    close(sent, final)


def test_delay_adaptive_defaults_take_the_number_of_clients() -> None:
    # workers and tau_C null: the number of clients (10); eta = .5
    mishchenko, koloskova = DelayAdaptiveConfig(server_lr=0.5), DelayAdaptiveConfig(server_lr=0.5, form="koloskova")
    assert delay_step(mishchenko, 10, 10) == 0.5 and delay_step(mishchenko, 20, 10) == 0.25  # .5 * 10 / 20
    assert delay_step(koloskova, 10, 10) == 0.5 and delay_step(koloskova, 20, 10) == 0.25  # min(.5, .5 * 10 / 20)


@pytest.mark.parametrize("bad", [{"server_lr": 0.0}, {"workers": 0}, {"delay_threshold": -1}, {"delay_scale": 0.0},
                                 {"form": "both"}])
def test_delay_adaptive_config_rejects_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        DelayAdaptiveConfig(**bad)  # type: ignore[arg-type]


def test_fedstaleweight_three_buffers() -> None:
    """K = 2, server_lr = 1, offset 0, every update averaged; W0 = 0, three clients."""
    alg = FedStaleWeight(FedStaleWeightConfig(buffer=2), make_setup(linear_layout(), [0, 0, 0], 3))
    w0 = alg.initial_weights(0)
    # t=1 client 0 (version 0, staleness 0): delta [2,0,0]; averages c0 = 0
    sent0, weight = alg.on_arrival(arrival(0, vec(2, 0, 0), w0, 1, 1))
    assert weight is None
    # t=2 client 1 (staleness 0): delta [0,2,0]; c1 = 0. Flush: the weights sum to 0, no step: W1 = W0 (version 1)
    sent1, _ = alg.on_arrival(arrival(1, vec(0, 2, 0), w0, 2, 2))
    close(sent1, [0, 0, 0])
    assert alg.state()["version"] == 1
    # t=3 client 2 (dispatched version 0, now 1: staleness 1): delta [0,0,4]; c2 = 1
    alg.on_arrival(arrival(2, vec(0, 0, 4), w0, 3, 3))
    # t=4 client 0 (re-sent W0 at version 0: staleness 1): delta [2,0,0]; c0 = (0 + 1) / 2 = .5
    #   flush: total 1 + .5 = 1.5, weights c2 2/3, c0 1/3: W2 = 2/3 [0,0,4] + 1/3 [2,0,0] = [2/3, 0, 8/3]
    sent0, _ = alg.on_arrival(arrival(0, vec(2, 0, 0), sent0, 3, 4))
    close(sent0, [2 / 3, 0, 8 / 3])
    w2 = sent0.clone()
    # t=5 client 1 (sent W1 at version 1, now 2: staleness 1): delta [0,3,0]; c1 = (0 + 1) / 2 = .5
    sent1, _ = alg.on_arrival(arrival(1, sent1 + vec(0, 3, 0), sent1, 3, 5))
    close(sent1, [2 / 3, 0, 8 / 3])  # the buffer holds 1: W2 re-sent
    # t=6 client 1 again (sent W2 at version 2: staleness 0): delta [0,0,-3]; c1 = (0 + 1 + 0) / 3 = 1/3
    #   flush: both entries are client 1's, each weighted (1/3) / (2/3) = 1/2 with its average as the buffer ends
    #   W3 = W2 + 1/2 ([0,3,0] + [0,0,-3]) = [2/3, 1.5, 8/3 - 1.5]
    sent1, _ = alg.on_arrival(arrival(1, w2 + vec(0, 0, -3), w2, 1, 6))
    close(sent1, [2 / 3, 1.5, 8 / 3 - 1.5])
    assert alg.state()["averages"] == {0: [1, 2], 1: [1, 3], 2: [1, 1]}  # [sum, count] per client


def test_fedstaleweight_offset_gives_fresh_updates_weight() -> None:
    # offset 1: the first buffer's fresh updates count 1 each: weights 1/2, W1 = ([2,0,0] + [0,2,0]) / 2
    alg = FedStaleWeight(FedStaleWeightConfig(buffer=2, offset=1), make_setup(linear_layout(), [0, 0, 0], 2))
    w0 = alg.initial_weights(0)
    alg.on_arrival(arrival(0, vec(2, 0, 0), w0, 1, 1))
    sent, _ = alg.on_arrival(arrival(1, vec(0, 2, 0), w0, 2, 2))
    close(sent, [1, 1, 0])


def test_fedstaleweight_window_averages_the_latest() -> None:
    every, latest = StalenessAverages(None), StalenessAverages(2)
    for tau in (0, 1, 0, 4):
        every.add(7, tau)
        latest.add(7, tau)
    assert every.mean(7) == 5 / 4  # (0 + 1 + 0 + 4) / 4
    assert latest.mean(7) == 2.0  # the latest two: (0 + 4) / 2
    assert latest.state() == {7: [0, 4]}


@pytest.mark.parametrize("bad", [{"buffer": 0}, {"server_lr": 0.0}, {"window": 0}, {"offset": -1}])
def test_fedstaleweight_config_rejects_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        FedStaleWeightConfig(**bad)  # type: ignore[arg-type]
