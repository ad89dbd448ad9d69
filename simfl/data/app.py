"""``data: {dataset: flower_app}``: the ClientApp loads its own data, so simfl holds only a count per client.

The dataset is ``clients x samples`` rows of one zero feature and label 0, split evenly by the iid partition,
so that the federation's sample counts (what workload-scaled latencies and ``by_data`` selection read) are
``samples`` each, and the rest of simfl sees a dataset like any other. Nothing trains on these rows: a
ClientApp (``client.flower_app``) trains on its own, and the scenario check refuses simfl's own training here.
"""

from __future__ import annotations

import torch

from simfl.data.base import Dataset
from simfl.data.configs import FlowerAppDataConfig


class FlowerAppData:
    """Loader of the placeholder rows."""

    Config = FlowerAppDataConfig

    @staticmethod
    def load(config: FlowerAppDataConfig) -> Dataset:
        rows = int(config.partition.clients or 0) * config.samples
        empty = torch.zeros(0, 1)
        return Dataset("flower_app", torch.zeros(rows, 1), torch.zeros(rows, dtype=torch.int64), empty,
                       torch.zeros(0, dtype=torch.int64), num_classes=1)
