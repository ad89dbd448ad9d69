"""Evaluator scores agree with scikit-learn's metrics; the trainer handles batch-norm models."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import balanced_accuracy_score, f1_score
from torch import nn

from simfl.models import MODELS, Layout
from simfl.train.evaluate import Evaluator
from simfl.train.local import Job, LocalTrainer, TrainConfig
from simfl.train.message import Message


class Fixed(nn.Module):
    """Returns stored logits for sample indices passed as input."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = nn.Parameter(logits)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.logits[idx]


def test_metrics_match_sklearn() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(50, 4, generator=gen)
    y = torch.randint(0, 3, (50,), generator=gen)  # class 3 never true, sometimes predicted
    model = Fixed(logits)
    layout = Layout.of(model)
    s = Evaluator(model, layout, torch.arange(50), y, batch_size=7)(layout.flatten(model))
    pred = logits.argmax(1).numpy()
    assert s.accuracy == float((pred == y.numpy()).mean())
    assert np.isclose(s.f1_macro, f1_score(y.numpy(), pred, average="macro"))
    assert np.isclose(s.balanced_accuracy, balanced_accuracy_score(y.numpy(), pred))
    assert np.isclose(s.loss, float(nn.functional.cross_entropy(logits, y)))


def test_trainer_bn_model_with_singleton_batch() -> None:
    builder = MODELS["resnet18_1d"]
    model = builder.build(builder.Config(width=4), (6, 32), 3)
    layout = Layout.of(model)
    gen = torch.Generator().manual_seed(1)
    shards = [(torch.randn(9, 6, 32, generator=gen), torch.randint(0, 3, (9,), generator=gen))]
    trainer = LocalTrainer(model, layout, shards, TrainConfig(epochs=1, batch_size=4, lr=0.1), seed=0)
    start = layout.flatten(model)
    message = Message(hooks={"prox_mu": 0.1})
    out = trainer.run(Job(client=0, round=0, start=start, message=message))
    assert out.weights.shape == start.shape and not torch.equal(out.weights, start)
    assert out.metrics["steps"] == 2  # 9 samples in batches of 4: the trailing batch of one is skipped
    again = trainer.run(Job(client=0, round=0, start=start, message=message))
    assert torch.equal(out.weights, again.weights) and out.metrics == again.metrics
