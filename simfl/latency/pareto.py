"""Pareto (heavy-tailed) latencies: rare, very long rounds.

``L = x_m * (1 + Lomax(alpha))`` i.e. ``P(L > x) = (x_m / x)**alpha`` for
``x >= x_m``. The mean ``alpha * x_m / (alpha - 1)`` is finite only for
``alpha > 1`` and the std only for ``alpha > 2``. Without an explicit
``scale``, ``x_m`` is chosen so that the mean equals the pooled RPi mean.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from simfl.errors import InputError
from simfl.fields import PositiveFloat
from simfl.latency.pooled import PooledModel, PooledOptions
from simfl.latency.profiles import PooledStats


class ParetoConfig(PooledOptions):
    """Pareto round latencies with tail index alpha and minimum x_m."""

    model: Literal["pareto"] = Field("pareto", description="Delay model name.")
    shape: PositiveFloat = Field(3.0, description="Tail index alpha (> 1 for a finite mean, > 2 for a finite std).")
    scale: PositiveFloat | None = Field(
        None, description="Minimum latency x_m in seconds; default: the x_m giving the pooled RPi mean (needs shape > 1)."
    )


class Pareto(PooledModel[ParetoConfig]):
    """Round latency ~ Pareto(alpha, x_m)."""

    Config = ParetoConfig

    @classmethod
    def check(cls, config: ParetoConfig, num_clients: int) -> None:
        super().check(config, num_clients)
        if config.scale is None and config.shape <= 1:
            raise InputError("latency.shape", f"must be > 1 to fit the pooled mean (or give latency.scale), got {config.shape:g}")

    def fit(self, pooled: PooledStats) -> None:
        a = self.config.shape
        self.alpha = a
        self.xm = self.config.scale if self.config.scale is not None else pooled.mean * (a - 1) / a

    def base_draw(self, gen: np.random.Generator) -> float:
        return self.xm * (1.0 + float(gen.pareto(self.alpha)))

    def base_draws(self, gen: np.random.Generator, n: int) -> np.ndarray:
        return self.xm * (1.0 + gen.pareto(self.alpha, n))

    def moments(self) -> tuple[float, float]:
        a, xm = self.alpha, self.xm
        mean = a * xm / (a - 1) if a > 1 else math.inf
        std = xm / (a - 1) * math.sqrt(a / (a - 2)) if a > 2 else math.inf
        return mean, std

    def least(self) -> float:
        return self.xm
