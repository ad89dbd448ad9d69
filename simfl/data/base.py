"""The in-memory dataset every loader returns, and each client's share of its training data.

:class:`~simfl.data.configs.DataConfigBase`, the fields every ``data:`` section shares, lives in
:mod:`simfl.data.configs` (no torch) and is importable from here as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from simfl.data.configs import DataConfigBase
from simfl.data.partition import Parts


@dataclass
class Dataset:
    """A whole dataset as tensors: features ``x`` (float or token ids) and int64 labels ``y``."""

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    groups_train: np.ndarray | None = None
    """Per training sample group id (e.g. the HAR subject), for ``by_subject`` partitions."""

    def scored_on(self, rows: np.ndarray) -> Dataset:
        """This dataset with the training rows ``rows`` (a validation set) in place of its test set; the
        training tensors are shared, not copied, and the test set is not kept."""
        index = torch.from_numpy(rows)
        return replace(self, x_test=self.x_train[index], y_test=self.y_train[index])

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one sample (without the batch dimension)."""
        return tuple(self.x_train.shape[1:])


class Shards(Sequence[tuple[torch.Tensor, torch.Tensor]]):
    """Each client's ``(x, y)``: its partition's rows of the training data, gathered when asked for.

    Holding a pair of tensors per client before the first arrival costs seconds and memory at
    10^6 clients, and a run without training never reads them; a trainer gathers a client's rows
    per job instead, a copy the size of that client's data, small beside training on it.
    ``share_memory_`` moves the whole training data into shared memory once, so that processes
    given this object map the same pages.
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor, parts: Parts) -> None:
        self.x = x
        self.y = y
        self.parts = parts
        """Per client, the sorted row indices of its data (:func:`simfl.data.partition.split`)."""

    def __len__(self) -> int:
        return len(self.parts)

    def __getitem__(self, client: int) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        rows = torch.from_numpy(self.parts[client])
        return self.x[rows], self.y[rows]

    def sizes(self) -> tuple[int, ...]:
        """Samples per client."""
        return self.parts.sizes()

    def share_memory_(self) -> Shards:
        """Move the training data into shared memory (in place); ``self``."""
        self.x.share_memory_()
        self.y.share_memory_()
        return self


__all__ = ["DataConfigBase", "Dataset", "Shards"]
