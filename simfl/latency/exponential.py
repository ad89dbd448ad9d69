"""Exponential latencies: memoryless round times with a given mean (plus an optional floor)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from simfl.fields import NonNegFloat, PositiveFloat, Section
from simfl.latency.base import LatencyModel, RoundTimes, Workload


class ExponentialConfig(Section):
    """Round latency = floor + Exp(mean)."""

    model: Literal["exponential"] = Field("exponential", description="Delay model name.")
    mean: PositiveFloat = Field(description="Mean of the exponential part, in seconds.")
    floor: NonNegFloat = Field(0.0, description="Fixed minimum added to every draw, in seconds.")


class Exponential(LatencyModel[ExponentialConfig]):
    """Each round draws ``floor + Exp(mean)`` (a zero draw is nudged to the smallest positive float)."""

    Config = ExponentialConfig

    @classmethod
    def round_times(cls, config: ExponentialConfig, num_clients: int, seed: int, workload: Workload) -> RoundTimes:
        """Every client alike: mean ``floor + mean``, spread ``mean``, never below ``floor``."""
        return RoundTimes.of(config.floor + config.mean, config.mean, config.floor, num_clients)

    def draws(self, client: int, gen: np.random.Generator, n: int) -> list[float]:
        return np.maximum(self.config.floor + gen.exponential(self.config.mean, n), np.finfo(float).tiny).tolist()

    def draw(self, client: int, gen: np.random.Generator) -> float:
        value = self.config.floor + gen.exponential(self.config.mean)
        return max(value, np.finfo(float).tiny)
