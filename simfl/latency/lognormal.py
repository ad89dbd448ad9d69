"""Lognormal latencies fitted to the pooled RPi round latencies (paper, appendix on delay distributions).

With ``mu_R``, ``sigma_R`` the arithmetic mean and std of the measured round
latencies: ``sigma = sqrt(ln(sigma_R**2 / mu_R**2 + 1))`` and
``mu = ln(mu_R) - sigma**2 / 2``, so the draws have mean ``mu_R`` and std ``sigma_R``.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from simfl import rng
from simfl.fields import PositiveFloat
from simfl.latency.normals import first_normals, lognormals
from simfl.latency.pooled import PooledModel, PooledOptions
from simfl.latency.profiles import PooledStats


class LognormalConfig(PooledOptions):
    """Lognormal round latencies with a given arithmetic mean and std (default: pooled RPi)."""

    model: Literal["lognormal"] = Field("lognormal", description="Delay model name.")
    mean: PositiveFloat | None = Field(None, description="Arithmetic mean mu_R in seconds; default: pooled measurements.")
    std: PositiveFloat | None = Field(None, description="Arithmetic std sigma_R in seconds; default: pooled measurements.")

    @model_validator(mode="after")
    def _finite_parameters(self) -> LognormalConfig:
        if self.mean is not None and self.std is not None:
            try:
                mu, sigma = lognormal_params(self.mean, self.std)
                finite = math.isfinite(mu) and math.isfinite(sigma) and math.isfinite(math.exp(mu + sigma**2 / 2))
            except (OverflowError, ValueError, ZeroDivisionError):
                finite = False
            if not finite:
                raise ValueError(f"mean {self.mean:g} and std {self.std:g} give no finite lognormal parameters; "
                                 "keep std / mean below about 1e150")
        return self


def lognormal_params(mean: float, std: float) -> tuple[float, float]:
    """(mu, sigma) of the log of a lognormal with arithmetic ``mean`` and ``std``."""
    sigma = math.sqrt(math.log(std**2 / mean**2 + 1.0))
    return math.log(mean) - sigma**2 / 2.0, sigma


class Lognormal(PooledModel[LognormalConfig]):
    """Round latency ~ exp(N(mu, sigma)) with mu, sigma from the arithmetic mean and std."""

    Config = LognormalConfig

    def fit(self, pooled: PooledStats) -> None:
        self.mean = self.config.mean if self.config.mean is not None else pooled.mean
        self.std = self.config.std if self.config.std is not None else pooled.std
        self.mu, self.sigma = lognormal_params(self.mean, self.std)

    def base_draw(self, gen: np.random.Generator) -> float:
        return float(gen.lognormal(self.mu, self.sigma))

    def base_draws(self, gen: np.random.Generator, n: int) -> np.ndarray:
        return gen.lognormal(self.mu, self.sigma, n)

    def first_draws(self, streams: rng.Streams, n: int) -> tuple[np.ndarray, np.ndarray]:
        z, lanes = first_normals(streams, n)
        return lognormals(z, self.mu, self.sigma), lanes

    def moments(self) -> tuple[float, float]:
        m = math.exp(self.mu + self.sigma**2 / 2)
        return m, m * math.sqrt(math.expm1(self.sigma**2))
