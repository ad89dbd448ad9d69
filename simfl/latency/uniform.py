"""Uniform latencies between the 5th and 95th percentiles of the pooled RPi rounds (paper appendix).

The bounds drop the outliers while covering most of the observed range;
``low``/``high`` override them.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from simfl import rng
from simfl.errors import InputError
from simfl.fields import PositiveFloat
from simfl.latency.pooled import FEW, TINY, PooledModel, PooledOptions
from simfl.latency.profiles import PooledStats, load_pooled


class UniformConfig(PooledOptions):
    """Uniform round latencies on [low, high] (default: pooled p5, p95)."""

    model: Literal["uniform"] = Field("uniform", description="Delay model name.")
    low: PositiveFloat | None = Field(None, description="Lower bound in seconds; default: pooled 5th percentile.")
    high: PositiveFloat | None = Field(None, description="Upper bound in seconds; default: pooled 95th percentile.")

    @model_validator(mode="after")
    def _ordered(self) -> UniformConfig:
        if self.low is not None and self.high is not None and self.low >= self.high:
            raise ValueError(f"low must be below high, got low={self.low:g}, high={self.high:g}")
        return self


class Uniform(PooledModel[UniformConfig]):
    """Round latency ~ U(low, high)."""

    Config = UniformConfig

    @classmethod
    def check(cls, config: UniformConfig, num_clients: int) -> None:
        cls.bounds(config, load_pooled(config.traces))

    @staticmethod
    def bounds(config: UniformConfig, pooled: PooledStats) -> tuple[float, float]:
        """``low`` and ``high``, each from the pooled percentiles where the config leaves it out."""
        low = config.low if config.low is not None else pooled.p5
        high = config.high if config.high is not None else pooled.p95
        if low >= high:
            raise InputError("latency", f"uniform bounds need low < high, got {low:g}, {high:g}")
        return low, high

    def fit(self, pooled: PooledStats) -> None:
        self.low, self.high = self.bounds(self.config, pooled)

    def base_draw(self, gen: np.random.Generator) -> float:
        # The same value as gen.uniform(low, high) (numpy computes low + (high - low) * next_double),
        # at a third of the cost of a scalar uniform() call.
        return self.low + (self.high - self.low) * gen.random()

    def base_draws(self, gen: np.random.Generator, n: int) -> np.ndarray:
        return self.low + (self.high - self.low) * gen.random(n)

    def first_draws(self, streams: rng.Streams, n: int) -> tuple[np.ndarray, None]:
        return self.low + (self.high - self.low) * streams.first(n), None

    def block(self, client: int, n: int) -> list[float]:
        if self.config.mode != "per_round" or n > FEW:
            return super().block(client, n)
        # base_draws and PooledModel.draws on Python floats: per value the same IEEE operations in the
        # same order (span * u, + low, * scale, max with TINY), without NumPy's cost per call on a few values
        low, span, s = self.low, self.high - self.low, self.scale[client]
        return [max(s * (low + span * u), TINY) for u in self.rngs[client].random(n).tolist()]

    def moments(self) -> tuple[float, float]:
        return (self.low + self.high) / 2, (self.high - self.low) / math.sqrt(12)

    def least(self) -> float:
        return self.low
