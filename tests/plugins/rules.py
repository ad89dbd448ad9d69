"""Components written outside simfl, as a user's own module would hold them (named by import path in tests)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field
from torch import nn

from simfl.algorithms import Arrival, AsyncAlgorithm, Setup
from simfl.algorithms.base import AlgorithmConfig, SingleModel
from simfl.algorithms.fedprox import FedProx
from simfl.data import DataConfigBase, Dataset
from simfl.data.configs import DataFacts
from simfl.fields import PositiveFloat, PositiveInt, Section, UnitOpen
from simfl.latency import LatencyModel, Workload
from simfl.latency.base import RoundTimes
from simfl.train.hooks import Penalty, proximal


class FedFooConfig(AlgorithmConfig):
    """Moves the global model a fixed fraction eta of the way to each arriving client's weights."""

    eta: UnitOpen = Field(0.5, description="Mixing weight of each arrival.")


class FedFoo(SingleModel, AsyncAlgorithm[FedFooConfig]):
    """w <- (1 - eta) w + eta w_client on every arrival (its state, the one model w, kept by simfl's mixin)."""

    Config = FedFooConfig

    def __init__(self, config: FedFooConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()

    def initial_weights(self, client: int) -> torch.Tensor:
        return self.w

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        self.w = torch.lerp(self.w, arrival.weights, self.config.eta)
        return self.w, self.config.eta


class StepsConfig(Section):
    """Client m's rounds last base * (m + 1) seconds."""

    model: Literal["steps"] = Field("steps", description="Delay model name.")
    base: PositiveFloat = Field(1.0, description="Round latency of client 0.")


class Steps(LatencyModel[StepsConfig]):
    """Deterministic latencies growing with the client index."""

    Config = StepsConfig

    def draw(self, client: int, gen: np.random.Generator) -> float:
        return self.config.base * (client + 1)


class StatedSteps(Steps):
    """The same latencies, stated for the estimate: client m's every round lasts base * (m + 1)."""

    @classmethod
    def round_times(cls, config: StepsConfig, num_clients: int, seed: int, workload: Workload) -> RoundTimes:
        seconds = [config.base * (m + 1) for m in range(num_clients)]
        return RoundTimes.of(seconds, 0.0, seconds)


class CheapSteps(Steps):
    """The same latencies, stated with their draw's cost: 2 us on the reference machine."""

    @classmethod
    def round_times(cls, config: StepsConfig, num_clients: int, seed: int, workload: Workload) -> RoundTimes:
        seconds = [config.base * (m + 1) for m in range(num_clients)]
        return RoundTimes.of(seconds, 0.0, seconds, draw=2e-6)


class LineConfig(DataConfigBase):
    """Two classes split by the sign of the first feature."""

    dataset: Literal["line"] = Field("line", description="Dataset name.")
    size: PositiveInt = Field(90, description="Training samples (and half as many test samples).")


class Line:
    """Loader of the two-class line data."""

    Config = LineConfig

    @staticmethod
    def load(config: LineConfig) -> Dataset:
        gen = torch.Generator().manual_seed(7)
        x = torch.randn(config.size + config.size // 2, 4, generator=gen)
        y = (x[:, 0] > 0).long()
        n = config.size
        return Dataset("line", x[:n], y[:n], x[n:], y[n:], num_classes=2)


class SizedLineConfig(LineConfig):
    """The line data's config, stating its shape and sizes ahead so that the estimate can use them."""

    def facts(self) -> DataFacts:
        return DataFacts((4,), 2, self.size, self.size // 2)


class SizedLine(Line):
    """The line data, its config stating its shape."""

    Config = SizedLineConfig  # type: ignore[assignment]


class TinyConfig(Section):
    """One linear layer."""

    name: Literal["tiny"] = Field("tiny", description="Model name.")


class Tiny:
    """Builder of a linear classifier over flattened inputs."""

    Config = TinyConfig

    @staticmethod
    def build(config: TinyConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        return nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(input_shape)), num_classes))


class NotAComponent:
    """A class that is none of simfl's components."""


not_a_class = 42


def pull_back(params: list[nn.Parameter], mu: Any) -> Penalty:
    """A user's own local-training hook (here FedProx's proximal term, to compare with the built-in one)."""
    return proximal(params, mu)


class ProxByPath(FedProx):
    """FedProx asking for its proximal term through a hook named by import path, as a plugin would."""

    def local_options(self) -> dict[str, Any]:
        return {"tests.plugins.rules:pull_back": self.config.mu}
