"""The in-memory dataset every loader returns, and the fields every ``data:`` section shares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from pydantic import Field

from simfl.data.partition import PartitionConfig
from simfl.fields import Section


class DataConfigBase(Section):
    """Fields common to every dataset's ``data:`` section (each loader adds ``dataset`` and its own)."""

    root: Path | None = Field(
        None,
        description="Folder holding the dataset files (relative to the scenario file); default: $SIMFL_DATA if set, "
        "else ~/.cache/simfl.",
    )
    download: bool = Field(
        False,
        description="Download missing files from the dataset's official source, checksums checked (never done "
        "otherwise; `simfl data fetch NAME` does the same).",
    )
    partition: PartitionConfig = Field(description="How the training set is split over clients.")


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

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one sample (without the batch dimension)."""
        return tuple(self.x_train.shape[1:])
