"""Constant latencies: client m's every round takes ``seconds[m]`` (exact traces for tests)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from simfl.errors import InputError
from simfl.fields import PositiveFloat, Section
from simfl.latency.base import LatencyModel, RoundTimes, Workload, grouped


class ConstantConfig(Section):
    """One fixed round latency per client."""

    model: Literal["constant"] = Field("constant", description="Delay model name.")
    seconds: list[PositiveFloat] = Field(description="Round latency of each client, one per client, in seconds.")


class Constant(LatencyModel[ConstantConfig]):
    """Every round of client m lasts ``seconds[m]``."""

    Config = ConstantConfig

    @classmethod
    def check(cls, config: ConstantConfig, num_clients: int) -> None:
        if len(config.seconds) != num_clients:
            raise InputError(
                "latency.seconds",
                f"needs one latency per client ({num_clients}), got {len(config.seconds)}",
            )

    @classmethod
    def round_times(cls, config: ConstantConfig, num_clients: int, seed: int, workload: Workload) -> RoundTimes:
        """Client m: every round ``seconds[m]``, read, not drawn (no draw's cost)."""
        cls.check(config, num_clients)
        rows, counts = grouped(np.asarray(config.seconds))
        return RoundTimes.of(rows[:, 0], 0.0, rows[:, 0], counts, draw=0.0)

    def draw(self, client: int, gen: np.random.Generator) -> float:
        return self.config.seconds[client]
