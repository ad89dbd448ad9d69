"""Drawing ahead in blocks of any size gives each client's one-at-a-time sequence, as plain floats."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from simfl.errors import InputError
from simfl.latency import LatencyModel, Workload
from simfl.latency.constant import ConstantConfig
from simfl.latency.pooled import FEW
from tests.latency.test_latency_models import DRAW_AHEAD_SPECS, make

BLOCKS = [1, 4, FEW, FEW + 1, 64]
SCALED = [{"model": "uniform", "low": 0.3, "high": 7.1, "scaling": {"compute": 2.7, "comm": 0.3}},
          {"model": "lognormal", "scaling": {"compute": 1.9, "comm": 0.7}}]


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("spec", [*DRAW_AHEAD_SPECS, *SCALED], ids=lambda s: "-".join(str(v) for v in s.values()))
def test_blocks_of_any_size_give_the_one_at_a_time_sequence(spec: dict[str, Any], block: int) -> None:
    # a large population draws a few values per client (ahead_n), taking the Python-float path of the
    # pooled models; the values must be the k-th draws of each client's stream whatever the block size
    ahead, single = make(spec, clients=3, seed=7), make(spec, clients=3, seed=7)
    ahead.ahead_n = block
    rounds = 2 * block + 5
    expected = [float(single.draw(c, single.rngs[c])) for c in range(3) for _ in range(rounds)]
    got = [ahead.sample(c) for c in range(3) for _ in range(rounds)]
    assert got == expected
    assert all(type(v) is float for v in got)


class Fixed(LatencyModel):  # type: ignore[type-arg]
    """Every block is ``values`` (a test double)."""

    Config = ConstantConfig

    def __init__(self, values: list[float]) -> None:
        super().__init__(ConstantConfig(seconds=[1.0]), 1, 0, Workload(1, 1, (1,), 1))
        self.values = values

    def draws(self, client: int, gen: np.random.Generator, n: int) -> list[float]:
        return list(self.values)

    def draw(self, client: int, gen: np.random.Generator) -> float:
        return self.values[0]


@pytest.mark.parametrize("values", [[1.0, math.nan], [math.nan, 1.0], [2.0, math.inf], [-math.inf, math.inf],
                                    [1.0, 0.0], [-1.0, 3.0]])
def test_a_block_with_a_bad_value_is_refused(values: list[float]) -> None:
    with pytest.raises(InputError, match="drew the latency"):
        Fixed(values).sample(0)


def test_a_block_of_huge_finite_values_is_kept() -> None:
    model = Fixed([1e308, 1.5e308, 1e-300])  # their sum overflows; each value is fine
    assert [model.sample(0) for _ in range(4)] == [1e308, 1.5e308, 1e-300, 1e308]
