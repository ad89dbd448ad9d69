"""Drawing ahead in blocks of any size gives each client's one-at-a-time sequence, as plain floats."""

from __future__ import annotations

from typing import Any

import pytest

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
