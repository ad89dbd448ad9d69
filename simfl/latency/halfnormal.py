"""Half-normal latencies fitted to the pooled RPi round latencies (paper, appendix on delay distributions).

A half-normal ``|N(0, s)|`` has one parameter and a fixed coefficient of
variation ``sqrt(pi/2 - 1) ~ 0.755``; the measured rounds have ~1.72, so it
cannot match both ``mu_R`` and ``sigma_R`` (a shifted one would need a negative
location). ``fit`` says which the draws keep:

``mean`` (default)
    ``s = mu_R * sqrt(pi/2)``: same mean as the measurements, so the same
    throughput; std ``0.755 * mu_R``.
``std``
    ``s = sigma_R / sqrt(1 - 2/pi)``: same std; mean ``0.798 * s``.
``folded``
    ``|N(mu_R, sigma_R)|``, the folded normal with the measured mean and std as
    its inner parameters.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from simfl import rng
from simfl.fields import PositiveFloat
from simfl.latency.normals import first_normals
from simfl.latency.pooled import PooledModel, PooledOptions
from simfl.latency.profiles import PooledStats


class HalfnormalConfig(PooledOptions):
    """Half-normal round latencies (default: same mean as the pooled RPi rounds)."""

    model: Literal["halfnormal"] = Field("halfnormal", description="Delay model name.")
    fit: Literal["mean", "std", "folded"] = Field(
        "mean", description="Keep the measured mean (mean), the measured std (std), or fold N(mu_R, sigma_R) (folded)."
    )
    mean: PositiveFloat | None = Field(None, description="mu_R in seconds; default: pooled measurements.")
    std: PositiveFloat | None = Field(None, description="sigma_R in seconds; default: pooled measurements.")


class Halfnormal(PooledModel[HalfnormalConfig]):
    """Round latency ~ |N(loc, scale)| with loc = 0 (mean, std fits) or mu_R (folded)."""

    Config = HalfnormalConfig

    def fit(self, pooled: PooledStats) -> None:
        mu = self.config.mean if self.config.mean is not None else pooled.mean
        sd = self.config.std if self.config.std is not None else pooled.std
        if self.config.fit == "mean":
            self.loc, self.scale_ = 0.0, mu * math.sqrt(math.pi / 2)
        elif self.config.fit == "std":
            self.loc, self.scale_ = 0.0, sd / math.sqrt(1 - 2 / math.pi)
        else:
            self.loc, self.scale_ = mu, sd

    def base_draw(self, gen: np.random.Generator) -> float:
        return abs(float(gen.normal(self.loc, self.scale_)))

    def base_draws(self, gen: np.random.Generator, n: int) -> np.ndarray:
        return np.abs(gen.normal(self.loc, self.scale_, n))

    def first_draws(self, streams: rng.Streams, n: int) -> tuple[np.ndarray, np.ndarray]:
        z, lanes = first_normals(streams, n)
        return np.abs(self.loc + self.scale_ * z), lanes  # normal(loc, scale): loc + scale * z

    def moments(self) -> tuple[float, float]:
        m, s = self.loc, self.scale_
        mean = s * math.sqrt(2 / math.pi) * math.exp(-(m**2) / (2 * s**2)) + m * (1 - math.erfc(m / (s * math.sqrt(2))))
        return mean, math.sqrt(m**2 + s**2 - mean**2)
