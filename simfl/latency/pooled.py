"""Shared machinery of the delay models fitted to the pooled RPi round latencies.

Every such model has a base distribution ``D`` (lognormal, half-normal,
uniform, Pareto), fitted to ``pooled.json`` unless the scenario gives its own
parameters, and two modes:

``per_round``
    every round of every client is a fresh draw from ``D`` (the paper's reading).
``per_client``
    client m draws its own speed ``s_m ~ D`` once, from the stream
    ``(seed, "latency-speed", m)``; its rounds then jitter around that speed:
    ``L = s_m * J`` with ``J = exp(sigma_j * Z - sigma_j**2 / 2)``, ``Z ~ N(0, 1)``
    and ``sigma_j = sqrt(ln(1 + jitter**2))``, so that ``E[L] = s_m`` and the
    client's round-to-round coefficient of variation is exactly ``jitter``
    (``jitter: 0`` gives a fixed speed; one draw per round either way).

Scaling multiplies each latency by ``(c * C + k * M) / (C + M)``, where ``C``
and ``M`` are the pooled compute and communication means: the pooled split
of the measured time between the two parts.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Literal, TypeVar

import numpy as np
from pydantic import Field

from simfl import rng
from simfl.fields import NonNegFloat
from simfl.latency.base import STATED_ROWS, LatencyModel, RoundTimes, Workload, grouped
from simfl.latency.normals import exps, first_normals
from simfl.latency.profiles import PooledStats, load_pooled
from simfl.latency.scaling import Scaled, TraceOptions, check_workload, factors

TINY = float(np.finfo(float).tiny)
FEW = 16
"""Blocks of at most this many draws are finished on Python floats: NumPy's cost per call outweighs its
speed per value there (a large population draws a few values per client, see :attr:`LatencyModel.ahead_n`)."""


class PooledOptions(TraceOptions):
    """Mode and jitter shared by the pooled-statistics models."""

    mode: Literal["per_round", "per_client"] = Field(
        "per_round", description="per_round: fresh draw each round; per_client: one speed per client, rounds jitter."
    )
    jitter: NonNegFloat = Field(
        0.1, description="per_client mode: coefficient of variation of a client's rounds around its speed."
    )


C = TypeVar("C", bound=PooledOptions)


class PooledModel(Scaled, LatencyModel[C]):
    """A delay model drawing from one fitted distribution, per round or per client."""

    def __init__(self, config: C, num_clients: int, seed: int, workload: Workload) -> None:
        super().__init__(config, num_clients, seed, workload)
        self.check(config, num_clients)
        check_workload(config.scaling, workload, num_clients)
        pooled = load_pooled(config.traces)
        self.fit(pooled)
        total = pooled.compute_mean + pooled.comm_mean
        scale: float | np.ndarray
        if config.scaling.compute == "workload":
            comp, comm = factors(config.scaling, workload, num_clients)
            self.scale = [(comp[m] * pooled.compute_mean + comm[m] * pooled.comm_mean) / total for m in range(num_clients)]
            scale = np.array(self.scale, dtype=np.float64)[:, None]
        else:  # every client's factors are the same: one value (the same float each client's would be)
            comp, comm = factors(config.scaling, workload, 1)
            scale = (comp[0] * pooled.compute_mean + comm[0] * pooled.comm_mean) / total
            self.scale = [scale] * num_clients
        self.sigma_j = math.sqrt(math.log1p(config.jitter**2))
        self.speeds: list[float] = []
        # draws (or draw) on all clients' first values at once: the same elementwise IEEE operations; each
        # generator is then built only when its client needs a second block (or its first could not be derived)
        if config.mode == "per_client":
            self.speeds = self._speeds(rng.Streams(seed, "latency-speed", count=num_clients))
            z, lanes = first_normals(self.rngs, self.ahead_n)
            s = self.sigma_j
            jitter = exps(s * z - 0.5 * s * s)  # draw's exp(s * Z - 0.5 * s * s), Python's order: (0.5 * s) * s
            self.use_firsts(np.maximum(scale * (np.array(self.speeds, dtype=np.float64)[:, None] * jitter), TINY), lanes)
        else:
            derived = self.first_draws(self.rngs, self.ahead_n)
            if derived is not None:
                x, base_lanes = derived
                self.use_firsts(np.maximum(scale * x, TINY), base_lanes)

    def _speeds(self, streams: rng.Streams) -> list[float]:
        """Each client's speed, :meth:`base_draw` on its stream: derived from the streams' first values where the
        model can (:meth:`first_draws`), else (and on a lane it could not derive) drawn from the generator."""
        derived = self.first_draws(streams, 1)
        if derived is None:
            return [self.base_draw(gen) for gen in streams]
        x, lanes = derived
        speeds: list[float] = x[:, 0].tolist()
        if lanes is not None:
            for m in np.flatnonzero(~lanes).tolist():
                speeds[m] = self.base_draw(streams[m])
        return speeds

    @classmethod
    def check(cls, config: C, num_clients: int) -> None:
        load_pooled(config.traces)

    @abstractmethod
    def fit(self, pooled: PooledStats) -> None:
        """Set the distribution's parameters from the config, falling back on ``pooled``."""

    @abstractmethod
    def base_draw(self, gen: np.random.Generator) -> float:
        """One draw of the unscaled base distribution."""

    def base_draws(self, gen: np.random.Generator, n: int) -> np.ndarray | None:
        """``n`` draws of :meth:`base_draw` in one call, or None where no exact vectorised form exists."""
        return None

    def first_draws(self, streams: rng.Streams, n: int) -> tuple[np.ndarray, np.ndarray | None] | None:
        """Every stream's first ``n`` base draws, shape (len(streams), n), as :meth:`base_draws` (or ``n`` calls of
        :meth:`base_draw`) would give them before any draw, with the lanes (a boolean mask; None: all) where they
        are; None where the model cannot derive them without the generators (see :meth:`rng.Streams.first`)."""
        return None

    @abstractmethod
    def moments(self) -> tuple[float, float]:
        """Mean and standard deviation the fitted base distribution implies (inf if undefined)."""

    def least(self) -> float:
        """The smallest value the fitted base distribution can take (0: none above zero)."""
        return 0.0

    @classmethod
    def round_times(cls, config: C, num_clients: int, seed: int, workload: Workload) -> RoundTimes:
        """``per_round``: every client alike (one row per distinct scale), the fitted moments and lower bound
        times the client's scale. ``per_client``: the speeds each client draws under ``seed`` (the first
        :data:`~simfl.latency.base.STATED_ROWS` clients standing for a larger population), spread by ``jitter``
        around them; a jittered round has no lower bound but zero."""
        cls.check(config, num_clients)
        check_workload(config.scaling, workload, num_clients)
        pooled = load_pooled(config.traces)
        fitted = cls.__new__(cls)  # the fit alone: no stream is built, no latency drawn
        fitted.config = config
        fitted.fit(pooled)
        comp, comm = factors(config.scaling, workload, num_clients)
        scale = ((np.asarray(comp) * pooled.compute_mean + np.asarray(comm) * pooled.comm_mean)
                 / (pooled.compute_mean + pooled.comm_mean))
        if config.mode == "per_round":
            mean, std = fitted.moments()
            rows, counts = grouped(scale)
            return RoundTimes.of(mean * rows[:, 0], std * rows[:, 0], fitted.least() * rows[:, 0], counts)
        n = min(num_clients, STATED_ROWS)
        speeds = scale[:n] * np.asarray(fitted._speeds(rng.Streams(seed, "latency-speed", count=n)))
        low = speeds if config.jitter == 0 else 0.0
        return RoundTimes.of(np.maximum(speeds, TINY), config.jitter * speeds, low, num_clients / n)

    def draws(self, client: int, gen: np.random.Generator, n: int) -> list[float]:
        x = self.base_draws(gen, n) if self.config.mode == "per_round" else None
        if x is None:
            return super().draws(client, gen, n)
        if n <= FEW:  # the same IEEE product and maximum per value as the NumPy line below
            s = self.scale[client]
            return [max(s * v, TINY) for v in x.tolist()]
        return np.maximum(self.scale[client] * x, TINY).tolist()

    def draw(self, client: int, gen: np.random.Generator) -> float:
        if self.config.mode == "per_round":
            x = self.base_draw(gen)
        else:
            s = self.sigma_j
            x = self.speeds[client] * math.exp(s * gen.standard_normal() - 0.5 * s * s)
        return max(self.scale[client] * x, TINY)
