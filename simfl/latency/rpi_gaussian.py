"""Gaussian latencies per measured Raspberry Pi device: the paper's main delay model (section 4.1).

Each client is given one device profile at random (see
:func:`simfl.latency.profiles.assign_devices`) or explicitly; each round then
draws ``N(round_mean, round_std)`` of that device. A non-positive draw becomes
the device mean (``nonpositive: mean``, as the authors' released code does) or
is drawn again (``nonpositive: resample``, a truncated Gaussian).

With scaling, the draw is multiplied by the device's
``(c * compute_mean + k * comm_mean) / round_mean`` for compute factor ``c``
and communication factor ``k``: the mean becomes the rescaled sum of parts and
the coefficient of variation stays the measured one.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from simfl.fields import NonNegInt
from simfl.latency.base import LatencyModel, RoundTimes, Workload, grouped
from simfl.latency.profiles import (
    check_devices,
    client_devices,
    load_devices,
    profile_set,
)
from simfl.latency.scaling import Scaled, TraceOptions, check_workload, factors


class RpiGaussianConfig(TraceOptions):
    """Per-device Gaussian round latencies from the RPi measurements."""

    model: Literal["rpi_gaussian"] = Field("rpi_gaussian", description="Delay model name.")
    profiles: Literal["paper9", "all"] = Field(
        "paper9",
        description="Device profiles to draw from: paper9 (devices 10,1,2,3,4,5,11,8,13, the released code's) "
        "or all (every device with at least 3 uploads).",
    )
    devices: list[NonNegInt] | None = Field(
        None,
        description="Explicit device per client (one per client) instead of a random draw: with profiles: paper9 "
        "a position 0-8 in that set (e.g. [2, 8, 2, 1, 7, 5, 2, 4, 6, 0]), with profiles: all a device id of "
        "devices.csv.",
    )
    nonpositive: Literal["mean", "resample"] = Field(
        "mean", description="What a draw <= 0 becomes: the device mean (released code) or a fresh draw."
    )


class RpiGaussian(Scaled, LatencyModel[RpiGaussianConfig]):
    """Round latency of client m ~ N(mean, std) of its assigned device, made positive."""

    Config = RpiGaussianConfig

    @classmethod
    def check(cls, config: RpiGaussianConfig, num_clients: int) -> None:
        devices = load_devices(config.traces)
        if config.devices is not None:
            check_devices(config.devices, num_clients, devices, config.profiles)
        else:
            profile_set(config.profiles, devices)

    def __init__(self, config: RpiGaussianConfig, num_clients: int, seed: int, workload: Workload) -> None:
        super().__init__(config, num_clients, seed, workload)
        self.check(config, num_clients)
        check_workload(config.scaling, workload, num_clients)
        stats = load_devices(config.traces)
        self.devices = client_devices(config.devices, config.profiles, stats, num_clients, seed)
        self.profiles = [stats[d] for d in self.devices]
        comp, comm = factors(config.scaling, workload, num_clients)
        self.scale = [
            (comp[m] * p.compute_mean + comm[m] * p.comm_mean) / p.round_mean for m, p in enumerate(self.profiles)
        ]

    @classmethod
    def round_times(cls, config: RpiGaussianConfig, num_clients: int, seed: int, workload: Workload) -> RoundTimes:
        """One row per (device, scale) of the clients under ``seed``: the moments of the device's Gaussian made
        positive as ``nonpositive`` says, times the client's scale. Any positive round is possible (no lower bound
        but zero)."""
        cls.check(config, num_clients)
        check_workload(config.scaling, workload, num_clients)
        stats = load_devices(config.traces)
        devices = client_devices(config.devices, config.profiles, stats, num_clients, seed)
        comp, comm = factors(config.scaling, workload, num_clients)
        rows, counts = grouped(np.column_stack([devices, comp, comm]))
        mean, std = [], []
        for device, c, k in rows.tolist():
            p = stats[int(device)]
            m, sd = positive_normal(p.round_mean, p.round_std, config.nonpositive)
            scale = (c * p.compute_mean + k * p.comm_mean) / p.round_mean
            mean.append(scale * m)
            std.append(scale * sd)
        return RoundTimes.of(mean, std, 0.0, counts)

    def draws(self, client: int, gen: np.random.Generator, n: int) -> list[float]:
        # Resampling a non-positive draw takes the stream's next value, i.e. drops it from the sequence.
        p = self.profiles[client]
        x = gen.normal(p.round_mean, p.round_std, n)
        if self.config.nonpositive == "resample":
            x = x[x > 0]
            if x.size == 0:
                return [self.draw(client, gen)]
        else:
            x = np.where(x <= 0, p.round_mean, x)
        return (self.scale[client] * x).tolist()

    def draw(self, client: int, gen: np.random.Generator) -> float:
        p = self.profiles[client]
        x = gen.normal(p.round_mean, p.round_std)
        if self.config.nonpositive == "resample":
            while x <= 0:
                x = gen.normal(p.round_mean, p.round_std)
        elif x <= 0:
            x = p.round_mean
        return float(self.scale[client] * x)


def positive_normal(mu: float, sigma: float, nonpositive: str) -> tuple[float, float]:
    """Mean and standard deviation of a draw of N(mu, sigma) made positive: a draw <= 0 becomes ``mu``
    (``nonpositive: mean``) or is drawn again (``resample``: the Gaussian truncated to (0, inf))."""
    if sigma <= 0:
        return mu, 0.0
    a = mu / sigma
    pdf = math.exp(-a * a / 2) / math.sqrt(2 * math.pi)
    cdf = 0.5 * math.erfc(-a / math.sqrt(2))  # P(X > 0)
    if nonpositive == "resample":
        ratio = pdf / cdf
        return mu + sigma * ratio, sigma * math.sqrt(max(1 - a * ratio - ratio * ratio, 0.0))
    mean = mu * cdf + sigma * pdf + mu * (1 - cdf)
    square = (mu * mu + sigma * sigma) * cdf + mu * sigma * pdf + mu * mu * (1 - cdf)
    return mean, math.sqrt(max(square - mean * mean, 0.0))
