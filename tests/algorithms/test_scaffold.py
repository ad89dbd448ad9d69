"""SCAFFOLD against a hand-computed round: 2 clients, 1 round, 2 local steps each, through the real trainer.

Model: ``Linear(1, 2, bias=False)``, weights ``[w0, w1]`` (one per class), cross-entropy, so a
sample ``(x, y)`` has gradient ``(p - onehot(y)) * x`` with ``p = softmax(w * x)``. SGD with
lr 0.5, batch 1, 2 epochs over one sample: K = 2 steps. State before the round (loaded as a
checkpoint would be): ``c = [.1, -.1]``, ``c_0 = [.2, 0]``, ``c_1 = [0, 0]``, ``x = [0, 0]``.

Each step descends ``g - c_i + c = g - s`` with ``s = c_i - c``.

Client 0, sample (1, class 0), ``s = [.1, .1]``:
  step 1: p = [.5, .5], g = [-.5, .5], g - s = [-.6, .4], y = [.3, -.2]
  step 2: p0 = sigmoid(.5) = .62245933, g = [-.37754067, .37754067], g - s = [-.47754067, .27754067],
          y = [.53877033, -.33877033]
  c_0+ = s + (x - y) / (K lr) = [.1 - .53877033, .1 + .33877033] = [-.43877033, .43877033]
Client 1, sample (2, class 1), ``s = [-.1, .1]``:
  step 1: p = [.5, .5], g = [.5, -.5] * 2 = [1, -1], g - s = [1.1, -1.1], y = [-.55, .55]
  step 2: z = [-1.1, 1.1], p0 = sigmoid(-2.2) = .09975049, g = [.19950098, -.19950098],
          g - s = [.29950098, -.29950098], y = [-.69975049, .69975049]
  c_1+ = [-.1 + .69975049, .1 - .69975049] = [.59975049, -.59975049]
Server (uniform means, |S| = N = 2, server_lr 1):
  x = 0 + mean(y_i - 0) = [-.08049008, .18049008]
  c = c + 2/2 * mean(c_i+ - c_i) = [.1 + (-.63877033 + .59975049) / 2, -.1 + (.43877033 - .59975049) / 2]
    = [.08049008, -.18049008]
"""

from __future__ import annotations

import torch
from torch import nn

from simfl.algorithms.base import Arrival
from simfl.algorithms.scaffold import Scaffold, ScaffoldConfig
from simfl.models.flat import Layout
from simfl.train.local import Job, LocalTrainer, TrainConfig
from tests.algorithms.algo_helpers import close, make_setup, vec


def _round(weighting: str = "uniform") -> tuple[Scaffold, list[Arrival]]:
    model = nn.Linear(1, 2, bias=False)
    layout = Layout.of(model)
    alg = Scaffold(ScaffoldConfig(clients_per_round=2, weighting=weighting),  # type: ignore[arg-type]
                   make_setup(layout, [0, 0], 2, sizes=(1, 3)))
    alg.load_state({"x": vec(0, 0), "c": vec(0.1, -0.1), "c_local": {"length": 2, "rows": {0: vec(0.2, 0.0)}}})
    shards = [(torch.tensor([[1.0]]), torch.tensor([0])), (torch.tensor([[2.0]]), torch.tensor([1]))]
    trainer = LocalTrainer(model, layout, shards, TrainConfig(epochs=2, batch_size=1, lr=0.5), seed=0)
    start = alg.round_weights()
    arrivals = []
    for client in (0, 1):
        reply = trainer.run(Job(client, 0, start, alg.message(client, 0)))
        arrivals.append(Arrival(client, reply.weights, start, 1, client + 1, (1, 3)[client], reply.arrays,
                                reply.metrics))
    return alg, arrivals


def test_two_clients_one_round_two_steps_by_hand() -> None:
    alg, arrivals = _round()
    close(arrivals[0].weights, [0.53877033, -0.33877033])
    close(arrivals[0].arrays["c_i"], [-0.43877033, 0.43877033])
    close(arrivals[1].weights, [-0.69975049, 0.69975049])
    close(arrivals[1].arrays["c_i"], [0.59975049, -0.59975049])
    assert arrivals[0].metrics["steps"] == arrivals[1].metrics["steps"] == 2
    alg.aggregate(arrivals)
    close(alg.global_weights(), [-0.08049008, 0.18049008])
    close(alg.c, [0.08049008, -0.18049008])
    close(alg._c_i(0), [-0.43877033, 0.43877033])
    close(alg._c_i(1), [0.59975049, -0.59975049])


def test_sample_weighting_and_a_client_that_did_not_report() -> None:
    alg, arrivals = _round("samples")
    alg.aggregate(arrivals[1:])  # only client 1 (3 samples) reached the server
    # x = y_1; c = c + 1/2 (c_1+ - c_1); c_0 unchanged
    close(alg.global_weights(), [-0.69975049, 0.69975049])
    close(alg.c, [0.1 + 0.59975049 / 2, -0.1 - 0.59975049 / 2])
    close(alg._c_i(0), [0.2, 0.0])


def test_message_sends_copies_and_plain_sgd_without_correction() -> None:
    """With every variate 0 the correction is 0: the trained weights are plain SGD's."""
    model = nn.Linear(1, 2, bias=False)
    layout = Layout.of(model)
    alg = Scaffold(ScaffoldConfig(clients_per_round=1), make_setup(layout, [0, 0], 1))
    message = alg.message(0, 0)
    assert message.arrays["c"] is not alg.c and alg.c_local.get(0) is None
    trainer = LocalTrainer(model, layout, [(torch.tensor([[1.0]]), torch.tensor([0]))],
                           TrainConfig(epochs=2, batch_size=1, lr=0.5), seed=0)
    start = alg.round_weights()
    corrected = trainer.run(Job(0, 0, start, message)).weights
    plain = trainer.run(Job(0, 0, start)).weights
    assert torch.equal(corrected, plain)
