"""Dataset loaders (one module each) and client partitions.

``DATASETS`` maps a scenario's ``data.dataset`` to its loader class; each
loader carries its ``Config`` and a ``load(config) -> Dataset``.
"""

from __future__ import annotations

from typing import Any, Protocol

from simfl.data.base import DataConfigBase, Dataset
from simfl.data.cifar import Cifar10, Cifar100
from simfl.data.digits import Digits
from simfl.data.har import Hapt, Har
from simfl.data.hf import Hf
from simfl.data.mnist import Mnist
from simfl.data.newsgroups import Newsgroups
from simfl.data.synthetic import Synthetic


class Loader(Protocol):
    """What every dataset loader provides."""

    @property
    def Config(self) -> type[DataConfigBase]: ...  # noqa: N802 - the class attribute every loader defines

    def load(self, config: Any) -> Dataset: ...


DATASETS: dict[str, Loader] = {
    "digits": Digits,
    "synthetic": Synthetic,
    "mnist": Mnist,
    "cifar10": Cifar10,
    "cifar100": Cifar100,
    "newsgroups": Newsgroups,
    "har": Har,
    "hapt": Hapt,
    "hf": Hf,
}

__all__ = ["DATASETS", "DataConfigBase", "Dataset", "Loader"]
