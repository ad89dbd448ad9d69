"""Aggregation algorithms: one module each, their maths in :mod:`simfl.algorithms.ops`.

``ALGORITHMS`` maps the name used in a scenario's ``algorithms:`` list to the
class; each class carries its validated ``Config`` (whose ``name`` field is the
discriminator).
"""

from __future__ import annotations

from simfl.algorithms.base import (
    Algorithm,
    Arrival,
    AsyncAlgorithm,
    Setup,
    SyncAlgorithm,
)
from simfl.algorithms.ca2fl import CA2FL
from simfl.algorithms.fedadam import FedAdam
from simfl.algorithms.fedasync import FedAsync
from simfl.algorithms.fedavg import FedAvg
from simfl.algorithms.fedbuff import FedBuff
from simfl.algorithms.fedprox import FedProx
from simfl.algorithms.flower import FlowerStrategy
from simfl.algorithms.orthofl import OrthoFL
from simfl.algorithms.orthofl_ablations import OrthoFLNoCalib, OrthoFLNoMA, OrthoFLPairwise
from simfl.algorithms.scaffold import Scaffold

ALGORITHMS: dict[str, type[Algorithm]] = {  # type: ignore[type-arg]
    "orthofl": OrthoFL,
    "orthofl_no_calib": OrthoFLNoCalib,
    "orthofl_no_ma": OrthoFLNoMA,
    "orthofl_pairwise": OrthoFLPairwise,
    "fedasync": FedAsync,
    "fedbuff": FedBuff,
    "ca2fl": CA2FL,
    "fedavg": FedAvg,
    "fedprox": FedProx,
    "fedadam": FedAdam,
    "scaffold": Scaffold,
    "flower": FlowerStrategy,
}

__all__ = ["ALGORITHMS", "Algorithm", "Arrival", "AsyncAlgorithm", "Setup", "SyncAlgorithm"]
