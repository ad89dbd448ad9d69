"""OrthoFL's buffer-reusing hot path gives bit-identical results to the plain composition."""

from __future__ import annotations

import pytest
import torch

from simfl import rng
from simfl.algorithms import ops
from simfl.algorithms.calibration import Calibration
from simfl.models import MODELS, Layout


@pytest.mark.parametrize("bn", ["local", "project"])
@pytest.mark.parametrize("granularity", ["tensor", "model"])
def test_calibrated_equals_plain_composition(bn: str, granularity: str) -> None:
    builder = MODELS["resnet18_1d"]  # has batch norm
    layout = Layout.of(builder.build(builder.Config(), (9, 64), 6))
    cal = Calibration(layout, bn, granularity)  # type: ignore[arg-type]
    gen = rng.torch_generator(0, "perf-test-calibration")
    for scale in (1.0, 1e-3, 1e-30):
        w, start, a, b = (torch.randn(layout.size, generator=gen) for _ in range(4))
        weights = start + scale * w
        weights[:10] = start[:10]  # a zero-update segment passes the shift through
        fast = cal.calibrated(weights, start, a, b)
        plain = weights + cal.shift(a - b, weights - start)
        assert torch.equal(fast, plain)
        again = cal.calibrated(weights, start, a, b)  # buffers reused: same answer, new tensor
        assert torch.equal(again, fast) and again.data_ptr() != fast.data_ptr()


def test_workspace_result_equals_allocating_path() -> None:
    gen = rng.torch_generator(1, "perf-test-workspace")
    lengths = torch.tensor([3, 1, 5, 7])
    s, u = torch.randn(16, generator=gen), torch.randn(16, generator=gen)
    u[3] = 0.0
    work = ops.Workspace(lengths, 16)
    assert torch.equal(ops.orthogonal_component(s, u, lengths, work), ops.orthogonal_component(s, u, lengths))
