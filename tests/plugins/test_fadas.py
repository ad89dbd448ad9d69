"""The example plugin's FADAS server update checked against a case worked out by hand."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

from simfl.algorithms import Arrival, Setup
from simfl.models.flat import Layout

PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "plugin"


@pytest.fixture
def fadas() -> Iterator[type]:
    sys.path.insert(0, str(PLUGIN))
    try:
        from simfl_fadas import FADAS

        yield FADAS
    finally:
        sys.path.remove(str(PLUGIN))


def _arrival(client: int, start: list[float], weights: list[float], update: int) -> Arrival:
    return Arrival(client, torch.tensor(weights), torch.tensor(start), staleness=1, update=update, num_samples=1)


def test_fadas_by_hand(fadas: type) -> None:
    """Three clients, w0 = [0, 0], M = 2, eta = 2, beta1 = 0.5, beta2 = 0.75, eps = 1, tau_c = 0.

    Arrival 1: client 0 (dispatched w0, version 0) sends [1, 2]: Delta = [1, 2], delay 0; the buffer holds 1.
    Arrival 2: client 1 (w0, version 0) sends [3, 6]: Delta = [3, 6], delay 0; the buffer is full:
        mean Delta = [2, 4]; m1 = 0.5 * [2, 4] = [1, 2]; v1 = 0.25 * [4, 16] = [1, 4]; vhat1 = [1, 4];
        tau_max = 0 <= tau_c, so eta_1 = 2; w1 = 2 * [1, 2] / ([1, 2] + 1) = [1, 4/3]; version 1.
    Arrival 3: client 2 (w0, version 0) sends [-4, 0]: Delta = [-4, 0], delay 1 - 0 = 1.
    Arrival 4: client 0 (re-dispatched w0 at version 0 after arrival 1) sends [0, 0]: Delta = [0, 0], delay 1; full:
        mean Delta = [-2, 0]; m2 = 0.5 * [1, 2] + 0.5 * [-2, 0] = [-0.5, 1];
        v2 = 0.75 * [1, 4] + 0.25 * [4, 0] = [1.75, 3]; vhat2 = max([1, 4], [1.75, 3]) = [1.75, 4] (AMSGrad keeps 4);
        tau_max = 1 > tau_c = 0, so eta_2 = min(2, 1/1) = 1;
        w2 = [1, 4/3] + 1 * [-0.5 / (sqrt(1.75) + 1), 1 / (2 + 1)] = [1 - 0.2152504, 5/3] = [0.7847496, 1.6666667].
    (Without the max the second entry would be 4/3 + 1/(sqrt(3) + 1) = 1.699; without the delay rule,
    eta_2 = 2 gives [0.5695, 2.0]; with eps inside the root, w1 would be 2 * [1/sqrt(2), 2/sqrt(5)].)
    Each client is re-dispatched with the version current after its arrival: client 0 with 2, client 1
    with 1, client 2 with 1 (it arrived before the second flush).
    """
    config = fadas.Config(buffer=2, server_lr=2.0, beta1=0.5, beta2=0.75, eps=1.0, delay_threshold=0)
    w0 = torch.zeros(2)
    algo = fadas(config, Setup(Layout.of(nn.Linear(1, 2, bias=False)), w0, 3, (1, 1, 1), 0))
    zero = [0.0, 0.0]
    w, step = algo.on_arrival(_arrival(0, zero, [1.0, 2.0], 1))
    assert torch.equal(w, w0) and step is None and algo.count == 1
    w, step = algo.on_arrival(_arrival(1, zero, [3.0, 6.0], 2))
    assert step == 2.0 and algo.version == 1
    torch.testing.assert_close(w, torch.tensor([1.0, 4 / 3]))
    torch.testing.assert_close(algo.vhat, torch.tensor([1.0, 4.0]))
    w, step = algo.on_arrival(_arrival(2, zero, [-4.0, 0.0], 3))
    assert step is None and algo.max_delay == 1
    w, step = algo.on_arrival(_arrival(0, zero, [0.0, 0.0], 4))
    assert step == 1.0 and algo.version == 2
    torch.testing.assert_close(algo.m, torch.tensor([-0.5, 1.0]))
    torch.testing.assert_close(algo.vhat, torch.tensor([1.75, 4.0]))
    torch.testing.assert_close(w, torch.tensor([1 - 0.5 / (math.sqrt(1.75) + 1), 5 / 3]))
    torch.testing.assert_close(w, torch.tensor([0.7847496, 1.6666667]))
    assert w.dtype == torch.float32 and algo.dispatched == [2, 1, 1]


def test_fadas_state_round_trips(fadas: type) -> None:
    config = fadas.Config(buffer=2)
    setup = Setup(Layout.of(nn.Linear(2, 1)), torch.zeros(3), 2, (1, 1), 0)
    algo = fadas(config, setup)
    algo.on_arrival(_arrival(0, [0.0] * 3, [1.0, 2.0, 3.0], 1))
    copy = fadas(config, setup)
    copy.load_state(algo.state())
    a = algo.on_arrival(_arrival(1, [0.0] * 3, [0.5, 0.5, 0.5], 2))[0]
    b = copy.on_arrival(_arrival(1, [0.0] * 3, [0.5, 0.5, 0.5], 2))[0]
    assert torch.equal(a, b)
