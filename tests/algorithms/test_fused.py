"""The fused CPU arrival kernel against the eager PyTorch path it replaces, on a real model layout."""

from __future__ import annotations

import pytest
import torch

from simfl.algorithms import fused, ops
from simfl.algorithms.calibration import Calibration
from simfl.models import MODELS, Layout


def _mobilenet_layout() -> Layout:
    builder = MODELS["mobilenetv2"]
    return Layout.of(builder.build(builder.Config(), (3, 32, 32), 10))


@pytest.mark.parametrize("bn", ["local", "project"])
@pytest.mark.parametrize("weight", [0.3, 0.5, 0.9])
def test_fused_matches_eager(bn: str, weight: float) -> None:
    layout = _mobilenet_layout()
    gen = torch.Generator().manual_seed(1)
    x, x0, g, a = (torch.randn(layout.size, generator=gen) for _ in range(4))
    zero = next(s for s in layout.segments[5:] if not s.bn)  # a layer the client did not change: its shift must pass unprojected
    x0[zero.offset : zero.stop] = x[zero.offset : zero.stop]
    calibration = Calibration(layout, bn, "tensor")  # type: ignore[arg-type]
    assert calibration._fused is not None and fused.usable(x, x0, g, a)

    calibrated, mixed = calibration.calibrated_and_mixed(x, x0, g, a, g, weight)
    eager = calibration.calibrated(x, x0, g, a)
    # same float64 arithmetic; only the order of the dot products' sums may differ
    torch.testing.assert_close(calibrated, eager, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(mixed, ops.mix(g, x, weight), rtol=0, atol=1e-6)
    shift = (g - a)[zero.offset : zero.stop]
    torch.testing.assert_close(calibrated[zero.offset : zero.stop], x[zero.offset : zero.stop] + shift)
    for s in layout.segments:
        if s.bn and bn == "local":  # local batch norm: the client keeps its own values exactly
            assert torch.equal(calibrated[s.offset : s.stop], x[s.offset : s.stop])
        elif not s.bn and s is not zero:  # the shift added is orthogonal to the update, per layer
            added = (calibrated - x)[s.offset : s.stop].double()
            update = (x - x0)[s.offset : s.stop].double()
            assert abs(float(added @ update)) <= 1e-5 * float(added.norm() * update.norm()) + 1e-6


def test_other_inputs_take_the_eager_path() -> None:
    layout = _mobilenet_layout()
    x = torch.zeros(layout.size)
    assert not fused.usable(x, x.double())
    assert not fused.usable(x, torch.zeros(2 * layout.size)[::2])
    assert Calibration(layout, "local", "model")._fused is None  # element mask over one segment
    calibrated, mixed = Calibration(layout, "local", "model").calibrated_and_mixed(x, x, x + 1, x, x, 0.5)
    assert torch.equal(mixed, x) and calibrated.shape == x.shape
