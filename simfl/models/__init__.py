"""Model builders (one module per family); ``MODELS`` maps a scenario's ``model.name`` to a builder.

Each builder carries its ``Config`` and ``build(config, input_shape, num_classes) -> nn.Module``. The
built-ins' configs live in :mod:`simfl.models.configs`, which needs no torch; ``MODELS`` (the builders)
and ``Layout``/``Segment`` (:mod:`simfl.models.flat`) import torch, so they are loaded when first read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from simfl.fields import Section
from simfl.models.configs import BUILTINS
from simfl.registry import lazy

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


__getattr__ = lazy(globals(), "MODELS", BUILTINS, {"Layout": "simfl.models.flat:Layout", "Segment": "simfl.models.flat:Segment"})
"""``MODELS`` and the torch-bound names, imported on first access and kept in the module."""


__all__ = ["MODELS", "Builder", "Layout", "Segment"]
