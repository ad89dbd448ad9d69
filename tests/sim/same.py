"""Whole-state equality of two runs: every field of ``SimState.to_data()``, types included (0 and 0.0 differ)."""

from __future__ import annotations

import math
from typing import Any

import torch

from simfl.sim.state import SimState


def difference(a: Any, b: Any, where: str = "state") -> str | None:
    """Where ``a`` and ``b`` first differ (None: equal), tensors by value and dtype, NaN equal to NaN."""
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} {a!r} != {type(b).__name__} {b!r}"
    if isinstance(a, torch.Tensor):
        same = a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a.isnan(), b.isnan()))
        same = same and bool(torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0)))
        return None if same else f"{where}: tensors differ"
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{where}: keys {list(a)} != {list(b)}"
        return next((d for k in a if (d := difference(a[k], b[k], f"{where}.{k}")) is not None), None)
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return f"{where}: length {len(a)} != {len(b)}"
        return next((d for i, (x, y) in enumerate(zip(a, b, strict=True))
                     if (d := difference(x, y, f"{where}[{i}]")) is not None), None)
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return None
    return None if a == b else f"{where}: {a!r} != {b!r}"


def same_data(a: Any, b: Any) -> bool:
    return difference(a, b) is None


def assert_same_state(a: SimState, b: SimState) -> None:
    """Every events row, metric, client field, counter and pending wake-up of the two final states."""
    d = difference(a.to_data(), b.to_data())
    assert d is None, d
