"""Model builders (one module per family); ``MODELS`` maps a scenario's ``model.name`` to a builder.

Each builder carries its ``Config`` and ``build(config, input_shape, num_classes) -> nn.Module``. The
built-ins' configs live in :mod:`simfl.models.configs`, which needs no torch; ``MODELS`` (the builders)
and ``Layout``/``Segment`` (:mod:`simfl.models.flat`) import torch, so they are loaded when first read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from simfl.fields import Section
from simfl.models.configs import BUILTINS
from simfl.registry import implementations

if TYPE_CHECKING:
    from torch import nn

    from simfl.models.flat import Layout, Segment


class Builder(Protocol):
    """What every model builder provides."""

    @property
    def Config(self) -> type[Section]: ...  # noqa: N802 - the class attribute every builder defines

    def build(self, config: Any, input_shape: tuple[int, ...], num_classes: int) -> nn.Module: ...


if TYPE_CHECKING:
    MODELS: dict[str, Builder]


def __getattr__(name: str) -> Any:
    """``MODELS``, ``Layout`` or ``Segment``, imported on first access (with torch) and kept in the module."""
    value: Any
    if name == "MODELS":
        value = implementations(BUILTINS)
    elif name == "Layout":
        from simfl.models.flat import Layout as value
    elif name == "Segment":
        from simfl.models.flat import Segment as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = ["MODELS", "Builder", "Layout", "Segment"]
