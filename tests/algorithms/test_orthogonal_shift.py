"""Properties of ``orthogonal_shift`` (hypothesis) and of the flat ops behind it."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from simfl.algorithms import ops
from simfl.algorithms.calibration import orthogonal_shift

VALUES = st.floats(-1e3, 1e3, width=32, allow_nan=False, allow_infinity=False)
SHAPES = st.lists(st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple), min_size=1, max_size=4)


@st.composite
def layer_pairs(draw: st.DrawFn, zero_update_layers: bool = True) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """A shift and an update with the same random layer shapes; some update layers may be all zero."""
    shift: dict[str, torch.Tensor] = {}
    update: dict[str, torch.Tensor] = {}
    for i, shape in enumerate(draw(SHAPES)):
        n = int(torch.Size(shape).numel())
        shift[f"l{i}"] = torch.tensor(draw(st.lists(VALUES, min_size=n, max_size=n)), dtype=torch.float32).view(shape)
        if zero_update_layers and draw(st.booleans()):
            update[f"l{i}"] = torch.zeros(shape)
        else:
            update[f"l{i}"] = torch.tensor(draw(st.lists(VALUES, min_size=n, max_size=n)), dtype=torch.float32).view(shape)
    return shift, update


def _dot(x: torch.Tensor, y: torch.Tensor) -> float:
    return float((x.double() * y.double()).sum())


@settings(max_examples=150, deadline=None)
@given(layer_pairs())
def test_result_is_orthogonal_per_layer(pair: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]) -> None:
    shift, update = pair
    out = orthogonal_shift(shift, update)
    assert list(out) == list(shift)
    for k in shift:
        assert out[k].shape == shift[k].shape
        assert torch.isfinite(out[k]).all()
        scale = shift[k].double().norm() * update[k].double().norm()
        assert abs(_dot(out[k], update[k])) <= 1e-5 * float(scale) + 1e-30


@settings(max_examples=100, deadline=None)
@given(layer_pairs())
def test_zero_update_leaves_shift_unchanged(pair: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]) -> None:
    shift, update = pair
    out = orthogonal_shift(shift, update)
    for k in shift:
        if not update[k].any():
            assert torch.equal(out[k], shift[k])
    zero = {k: torch.zeros_like(v) for k, v in update.items()}
    assert all(torch.equal(a, b) for a, b in zip(orthogonal_shift(shift, zero).values(), shift.values(), strict=True))


@settings(max_examples=100, deadline=None)
@given(layer_pairs(zero_update_layers=False), st.data())
def test_already_orthogonal_shift_is_unchanged(
    pair: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]], data: st.DataObject
) -> None:
    # disjoint supports make <shift, update> exactly 0 in every layer
    shift, update = pair
    masked_shift, masked_update = {}, {}
    for k, s in shift.items():
        mask = torch.tensor(data.draw(st.lists(st.booleans(), min_size=s.numel(), max_size=s.numel()))).view(s.shape)
        masked_shift[k] = torch.where(mask, s, 0.0)
        masked_update[k] = torch.where(mask, 0.0, update[k])
    out = orthogonal_shift(masked_shift, masked_update)
    for k in shift:
        assert torch.equal(out[k], masked_shift[k])


@settings(max_examples=150, deadline=None)
@given(layer_pairs(), st.data())
def test_closest_orthogonal_vector(
    pair: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]], data: st.DataObject
) -> None:
    # any other w orthogonal to the update (made from a random z) is at least as far from the shift
    shift, update = pair
    out = orthogonal_shift(shift, update)
    for k, s in shift.items():
        z = torch.tensor(data.draw(st.lists(VALUES, min_size=s.numel(), max_size=s.numel())), dtype=torch.float64)
        u = update[k].double().reshape(-1)
        w = z - (z @ u) / (u @ u) * u if u.any() else z
        best = (s.double().reshape(-1) - out[k].double().reshape(-1)).norm()
        other = (s.double().reshape(-1) - w).norm()
        assert best <= other * (1 + 1e-6) + 1e-6 * s.double().norm()


def test_hand_computed_layers() -> None:
    shift = {"a": torch.tensor([[1.0, 1.0]]), "b": torch.tensor([3.0, 4.0]), "c": torch.tensor([5.0])}
    update = {"a": torch.tensor([[1.0, 0.0]]), "b": torch.tensor([0.0, 0.0]), "c": torch.tensor([-2.0])}
    out = orthogonal_shift(shift, update)
    assert torch.equal(out["a"], torch.tensor([[0.0, 1.0]]))  # x-component removed
    assert torch.equal(out["b"], torch.tensor([3.0, 4.0]))  # zero update: unchanged
    assert torch.equal(out["c"], torch.tensor([0.0]))  # a scalar along a nonzero scalar: nothing left


def test_mismatched_layers_fail_loudly() -> None:
    with pytest.raises(ValueError, match="layer names differ"):
        orthogonal_shift({"a": torch.zeros(2)}, {"b": torch.zeros(2)})
    with pytest.raises(ValueError, match="shape"):
        orthogonal_shift({"a": torch.zeros(2)}, {"a": torch.zeros(3)})


def test_subnormal_update_is_finite_and_exact() -> None:
    out = ops.orthogonal_component(torch.tensor([1.0, 1.0]), torch.tensor([1e-45, 0.0]), torch.tensor([2]))
    assert torch.equal(out, torch.tensor([0.0, 1.0]))


def test_project_out_spans_all_directions() -> None:
    v = torch.tensor([1.0, 2.0, 3.0, 7.0, 7.0])
    dirs = [torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0]), torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0]),
            torch.tensor([2.0, 2.0, 0.0, 0.0, 0.0])]  # dependent third direction is skipped
    out = ops.project_out(v, dirs, torch.tensor([3, 2]))
    # segment 1: span{[1,0,0],[1,1,0]} -> [0,0,3]; segment 2: only [1,0] -> [0,7]
    assert torch.equal(out, torch.tensor([0.0, 0.0, 3.0, 0.0, 7.0]))
