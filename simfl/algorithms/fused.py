"""OrthoFL's arrival as one fused CPU kernel: the calibrated client model and the new global in one sweep.

The same arithmetic as :meth:`simfl.algorithms.calibration.Calibration.calibrated`
followed by :func:`simfl.algorithms.ops.mix`, per element:

- ``u = float32(weights - start)`` and ``s = float32(shift_to - shift_from)``;
- per segment, ``<s, u>`` and ``<u, u>`` accumulated in float64, and
  ``coef = <s, u> / <u, u>`` (0 where ``<u, u>`` is 0 or the segment is a
  local batch-norm segment, whose shift is then 0);
- ``calibrated = weights + float32(s - coef * u)`` (the subtraction in float64);
- ``mixed = lerp(mix_from, weights, weight)`` in float32.

Eager PyTorch needs about a dozen passes over memory for this (two
subtractions, two float64 casts, two products, two reductions, the expansion
of the coefficients, the subtraction, the add and the lerp), each reading or
writing whole vectors. Here each segment is read twice, the second time
straight after the first so that all but the largest layers come back from
cache, and each output is written once. The reductions may be vectorised
(their float64 sums reassociated); the result is deterministic on a given
machine but can differ from the eager path in the last bits of the float64
dot products. Used for contiguous float32 CPU tensors; other devices and
dtypes take the eager path.
"""

from __future__ import annotations

import numpy as np
import torch

from simfl import jit


@jit.njit(cache=True, fastmath={"reassoc"}, nogil=True)
def _dots(
    x: np.ndarray, x0: np.ndarray, g: np.ndarray, a: np.ndarray, lo: int, hi: int
) -> tuple[float, float]:  # pragma: no cover - compiled
    """``(<s, u>, <u, u>)`` over ``[lo, hi)`` in float64, for ``u = x - x0`` and ``s = g - a`` in float32."""
    xs, x0s, gs, as_ = x[lo:hi], x0[lo:hi], g[lo:hi], a[lo:hi]
    su = 0.0
    uu = 0.0
    for i in range(xs.size):
        u = np.float64(xs[i] - x0s[i])
        s = np.float64(gs[i] - as_[i])
        su += s * u
        uu += u * u
    return su, uu


@jit.njit(cache=True, nogil=True)
def _calibrate(
    x: np.ndarray, x0: np.ndarray, g: np.ndarray, a: np.ndarray, coef: float, lo: int, hi: int, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``out = x + float32(s - coef * u)`` over ``[lo, hi)``."""
    xs, x0s, gs, as_, o = x[lo:hi], x0[lo:hi], g[lo:hi], a[lo:hi], out[lo:hi]
    for i in range(xs.size):
        u = np.float64(xs[i] - x0s[i])
        s = np.float64(gs[i] - as_[i])
        o[i] = xs[i] + np.float32(s - coef * u)


@jit.njit(cache=True, nogil=True)
def _mix(w: np.ndarray, x: np.ndarray, weight: np.float32, lo: int, hi: int, out: np.ndarray) -> None:  # pragma: no cover
    """``out = lerp(w, x, weight)`` over ``[lo, hi)``, with ``torch.lerp``'s two-branch formula (both ends exact)."""
    ws, xs, o = w[lo:hi], x[lo:hi], out[lo:hi]
    if abs(weight) < 0.5:
        for i in range(ws.size):
            o[i] = ws[i] + weight * (xs[i] - ws[i])
    else:
        one_minus = np.float32(1.0) - weight
        for i in range(ws.size):
            o[i] = xs[i] - (xs[i] - ws[i]) * one_minus


@jit.njit(cache=True, nogil=True)
def _arrival(
    x: np.ndarray, x0: np.ndarray, g: np.ndarray, a: np.ndarray, w: np.ndarray, weight: float,
    offsets: np.ndarray, local: np.ndarray, calibrated: np.ndarray, mixed: np.ndarray, mix: bool,
) -> None:  # pragma: no cover - compiled
    """Both outputs, segment by segment (see the module docstring)."""
    wt = np.float32(weight)
    for k in range(offsets.size - 1):
        lo, hi = offsets[k], offsets[k + 1]
        coef = 0.0
        if not local[k]:
            su, uu = _dots(x, x0, g, a, lo, hi)
            if uu > 0.0:
                coef = su / uu
        if local[k]:
            calibrated[lo:hi] = x[lo:hi]
        else:
            _calibrate(x, x0, g, a, coef, lo, hi, calibrated)
        if mix:
            _mix(w, x, wt, lo, hi, mixed)


def _array(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


def usable(*tensors: torch.Tensor) -> bool:
    """Whether the fused kernel applies: contiguous float32 CPU tensors of one size."""
    size = tensors[0].numel()
    return all(
        t.device.type == "cpu" and t.dtype == torch.float32 and t.is_contiguous() and t.numel() == size
        and not t.requires_grad
        for t in tensors
    )


def calibrate_and_mix(
    weights: torch.Tensor, start: torch.Tensor, shift_to: torch.Tensor, shift_from: torch.Tensor,
    offsets: np.ndarray, local: np.ndarray, mix_from: torch.Tensor | None = None, weight: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The calibrated client model and, with ``mix_from``, ``lerp(mix_from, weights, weight)`` (new tensors).

    ``offsets`` holds the segment boundaries (``n_segments + 1`` int64, from 0
    to the size); ``local`` one bool per segment, true where the shift is
    not applied (local batch norm).
    """
    calibrated = torch.empty_like(weights)
    mixed = torch.empty_like(weights) if mix_from is not None else calibrated
    w = mix_from if mix_from is not None else weights
    _arrival(
        _array(weights), _array(start), _array(shift_to), _array(shift_from), _array(w), float(weight),
        offsets, local, _array(calibrated), _array(mixed), mix_from is not None,
    )
    return calibrated, (mixed if mix_from is not None else None)
