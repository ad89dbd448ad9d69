"""Dataset loaders (one module each) and client partitions.

``DATASETS`` maps a scenario's ``data.dataset`` to its loader class; each loader carries its ``Config``
and a ``load(config) -> Dataset``. The built-ins' configs live in :mod:`simfl.data.configs`, which needs
no torch; ``DATASETS`` (the loaders) and ``Dataset`` (:mod:`simfl.data.base`) import torch, so they are
loaded when first read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from simfl.data.configs import BUILTINS, DataConfigBase
from simfl.registry import lazy

if TYPE_CHECKING:
    from simfl.data.base import Dataset


class Loader(Protocol):
    """What every dataset loader provides."""

    @property
    def Config(self) -> type[DataConfigBase]: ...  # noqa: N802 - the class attribute every loader defines

    def load(self, config: Any) -> Dataset: ...


if TYPE_CHECKING:
    DATASETS: dict[str, Loader]


__getattr__ = lazy(globals(), "DATASETS", BUILTINS, {"Dataset": "simfl.data.base:Dataset"})
"""``DATASETS`` and the torch-bound names, imported on first access and kept in the module."""


__all__ = ["DATASETS", "DataConfigBase", "Dataset", "Loader"]
