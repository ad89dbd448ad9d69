"""Delay models: one small class each; ``LATENCY_MODELS`` maps a scenario's ``latency.model`` to it.

Trace-based models (``rpi_gaussian``, ``replay``, ``lognormal``, ``halfnormal``,
``uniform``, ``pareto``) read the Raspberry Pi statistics shipped in
``simfl/latency/data`` (see :mod:`simfl.latency.profiles`); fleet models
(``fleet_csv``, ``fedscale``) read per-device traces of any size (:mod:`simfl.latency.fleet`).
"""

from __future__ import annotations

from simfl.latency.base import LatencyModel, Workload
from simfl.latency.constant import Constant
from simfl.latency.exponential import Exponential
from simfl.latency.fedscale import FedScale
from simfl.latency.fleet_csv import FleetCsv
from simfl.latency.halfnormal import Halfnormal
from simfl.latency.lognormal import Lognormal
from simfl.latency.pareto import Pareto
from simfl.latency.replay import Replay
from simfl.latency.rpi_gaussian import RpiGaussian
from simfl.latency.uniform import Uniform

LATENCY_MODELS: dict[str, type[LatencyModel]] = {  # type: ignore[type-arg]
    "constant": Constant,
    "exponential": Exponential,
    "rpi_gaussian": RpiGaussian,
    "lognormal": Lognormal,
    "halfnormal": Halfnormal,
    "uniform": Uniform,
    "pareto": Pareto,
    "replay": Replay,
    "fleet_csv": FleetCsv,
    "fedscale": FedScale,
}

__all__ = ["LATENCY_MODELS", "LatencyModel", "Workload"]
