"""Trainable parameter counts match Table 5 of the paper (within 3%), for the paper's dataset pairing."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from simfl.models import MODELS, Layout
from simfl.models.summary import summarize, summary

PAPER = [  # name, input shape, classes, Table 5 count
    ("lenet5", (1, 28, 28), 10, 44_000),
    ("resnet18_1d", (9, 128), 6, 119_000),
    ("vgg11", (3, 32, 32), 10, 9_200_000),
    ("mobilenetv2", (3, 32, 32), 100, 2_400_000),
]
HAS_TEXT = importlib.util.find_spec("transformers") is not None and importlib.util.find_spec("peft") is not None


@pytest.mark.parametrize(("name", "shape", "classes", "paper"), PAPER)
def test_counts(name: str, shape: tuple[int, ...], classes: int, paper: int) -> None:
    builder = MODELS[name]
    model = builder.build(builder.Config(), shape, classes)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert abs(trainable - paper) / paper < 0.03, trainable
    assert model(torch.zeros(2, *shape)).shape == (2, classes)


def test_lenet5_exact() -> None:
    model = MODELS["lenet5"].build(MODELS["lenet5"].Config(), (1, 28, 28), 10)
    assert sum(p.numel() for p in model.parameters()) == 44_190
    assert all(not isinstance(m, torch.nn.Conv2d) or m.bias is None for m in model.modules())


def test_resnet1d_six_channels() -> None:
    model = MODELS["resnet18_1d"].build(MODELS["resnet18_1d"].Config(), (6, 128), 6)
    assert model(torch.zeros(3, 6, 128)).shape == (3, 6)


@pytest.mark.skipif(not HAS_TEXT, reason="transformers/peft not installed (pip install simfl[text])")
def test_distilbert_lora_config_only() -> None:
    """DistilBERT + LoRA(r=8, q/v) + head, from DistilBertConfig defaults (random init, nothing downloaded)."""
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    from simfl.models.text import TextConfig, wrap

    model = wrap(DistilBertForSequenceClassification(DistilBertConfig(num_labels=20)), TextConfig())
    s = summarize(model, "text", (16,), 20)
    assert abs(s.trainable - 753_000) / 753_000 < 0.03, s.trainable
    assert s.trainable == Layout.of(model).size == s.exchanged  # only LoRA + head are exchanged
    assert s.total > 60_000_000
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert all("lora_" in n or "classifier" in n for n in names)


def test_summary_rows() -> None:
    names = ["lenet5", "resnet18_1d"]
    rows = summary(names)
    assert [r.name for r in rows] == names
    assert rows[0].trainable == rows[0].total == 44_190 and rows[0].bytes == 4 * 44_190
    assert rows[1].exchanged > rows[1].trainable  # batch-norm running statistics travel too


def test_lenet5_training_flops_is_the_scaling_reference() -> None:
    """FlopCounterMode's forward+backward count of LeNet-5 is the delay models' reference workload.

    The hand-written rule it replaced (6 x forward multiply-adds of Conv/Linear) gave 1,689,840;
    the counter skips the input gradient of the first layer, so the count is 10.2% lower.
    """
    from simfl.latency.scaling import ReferenceWorkload
    from simfl.models.cost import training_flops_per_sample

    model = MODELS["lenet5"].build(MODELS["lenet5"].Config(), (1, 28, 28), 10)
    before = [p.detach().clone() for p in model.parameters()]
    flops = training_flops_per_sample(model, torch.zeros(1, 28, 28))
    assert flops == 1_517_040 == ReferenceWorkload.model_validate({}).flops_per_sample
    assert all(p.grad is None for p in model.parameters()) and model.training
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_flops_count_attention() -> None:
    """The attention products are counted (the old hooks saw only Conv and Linear modules)."""
    from simfl.models.cost import training_flops_per_sample

    class Proj(torch.nn.Module):
        def __init__(self, attend: bool) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(8, 8))
            self.attend = attend

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x @ self.w
            return torch.softmax(y @ y.transpose(-1, -2), dim=-1) @ y if self.attend else y

    sample = torch.zeros(4, 8)
    assert training_flops_per_sample(Proj(True), sample) > training_flops_per_sample(Proj(False), sample) > 0


def test_activations_are_counted_by_hand() -> None:
    """Linear(10, 20), ReLU, Linear(20, 3) in float32, per sample. Evaluation: the first layer's 20 outputs are
    alive while ReLU writes its 20: 160 bytes (then 20 + 3). Training: the forward's first output is dropped once
    ReLU has read it (ReLU saves its own output for the backward pass); at the backward's peak ReLU's saved output
    (80), the logits (12), the gradient flowing into ReLU's output (80) and out of it (80): 252 bytes. The
    gradients of the weights do not grow with the batch and are not counted; the model is left as it was, on the
    CPU and on the meta device alike."""
    from simfl.models.cost import activation_bytes_per_sample

    for device in ("cpu", "meta"):
        with torch.device(device):
            model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 3)).eval()
        assert activation_bytes_per_sample(model, (10,)) == (252, 160)
        assert all(p.grad is None for p in model.parameters()) and not model.training


def test_activations_grow_with_the_layers_widths() -> None:
    """A wider hidden layer holds proportionally more: a sample's activations are per-sample sizes, not a guess."""
    from simfl.models.cost import activation_bytes_per_sample

    def mlp(hidden: int) -> torch.nn.Module:
        with torch.device("meta"):
            return torch.nn.Sequential(torch.nn.Linear(10, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 3))

    assert activation_bytes_per_sample(mlp(40), (10,)) == (3 * 4 * 40 + 12, 2 * 4 * 40)
