"""OrthoFL's calibration: the global shift made orthogonal to a client's update, layer by layer.

``perp_l(dW, dWm) = dW - (<dW, dWm> / <dWm, dWm>) dWm`` for each layer ``l``
(``shared/paper/orthofl.tex``, section 3); a layer whose client update is zero passes
unprojected (never NaN). :class:`Calibration` applies it to flat vectors under a
batch-norm policy and a granularity:

- ``bn: local`` (default, as the released code): batch-norm weights, biases and
  running statistics are excluded from the projection and the client keeps its
  own values (no shift is added to them); the global moving average still mixes
  them like any weight. ``bn: project``: they are ordinary layers.
- ``granularity: tensor`` (default) projects each exchanged tensor separately;
  ``model`` treats the whole vector (less batch-norm entries under ``bn: local``)
  as one layer.

On CPU the calibration and the moving-average mix run as one fused pass
(:mod:`simfl.algorithms.fused`); elsewhere as eager tensor operations (:mod:`simfl.algorithms.ops`).
"""

from __future__ import annotations

import numpy as np
import torch

from simfl.algorithms import fused, ops
from simfl.algorithms.configs import BnPolicy, Granularity
from simfl.models.flat import Layout


def orthogonal_shift(
    global_shift: dict[str, torch.Tensor], client_update: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Per layer, the component of ``global_shift`` orthogonal to ``client_update``.

    Parameters
    ----------
    global_shift
        ``dW`` per layer name.
    client_update
        ``dWm`` per layer name; the same names and shapes as ``global_shift``.

    Returns
    -------
    dict[str, torch.Tensor]
        New tensors ``dW[l] - (<dW[l], dWm[l]> / <dWm[l], dWm[l]>) dWm[l]``; a layer whose
        update is zero keeps ``dW[l]``. Finite for finite inputs.
    """
    names = list(global_shift)
    if set(names) != set(client_update):
        raise ValueError(
            f"layer names differ: shift has {sorted(names)}, update has {sorted(client_update)}"
        )
    for n in names:
        if global_shift[n].shape != client_update[n].shape:
            raise ValueError(
                f"layer {n!r}: shift shape {tuple(global_shift[n].shape)} "
                f"!= update shape {tuple(client_update[n].shape)}"
            )
    if not names:
        return {}
    sizes = [global_shift[n].numel() for n in names]
    first = global_shift[names[0]]
    flat_shift = torch.cat([global_shift[n].reshape(-1) for n in names])
    flat_update = torch.cat([client_update[n].reshape(-1).to(flat_shift.dtype) for n in names])
    lengths = torch.tensor(sizes, dtype=torch.int64, device=first.device)
    out = ops.orthogonal_component(flat_shift, flat_update, lengths)
    return {n: part.view(global_shift[n].shape) for n, part in zip(names, out.split(sizes), strict=True)}


class Calibration:
    """OrthoFL's projection over flat vectors under a batch-norm policy and a granularity."""

    def __init__(self, layout: Layout, bn: BnPolicy, granularity: Granularity) -> None:
        bn_mask = layout.mask("bn")
        self.size = layout.size
        self.keep: torch.Tensor | None = ~bn_mask if bn == "local" and bool(bn_mask.any()) else None
        self._lengths = layout.lengths if granularity == "tensor" else torch.tensor([layout.size])
        self._on_device: dict[torch.device, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self._work: dict[torch.device, tuple[ops.Workspace, torch.Tensor | None]] = {}
        self._fused: tuple[np.ndarray, np.ndarray] | None = None
        """Segment offsets and per-segment local flags for :mod:`fused`, where the local mask is per segment."""
        if granularity == "tensor":
            offsets = np.concatenate([[0], np.cumsum(layout.lengths.numpy())]).astype(np.int64)
            local = np.array([s.bn and bn == "local" for s in layout.segments], dtype=np.bool_)
            self._fused = (offsets, local)
        elif self.keep is None:
            self._fused = (np.array([0, layout.size], dtype=np.int64), np.zeros(1, dtype=np.bool_))

    def _workspace(self, device: torch.device) -> tuple[ops.Workspace, torch.Tensor | None]:
        """Scratch buffers and the local batch-norm mask on ``device`` (built once)."""
        if device not in self._work:
            local = None if self.keep is None else ~self.keep.to(device)
            self._work[device] = (ops.Workspace(self._lengths, self.size, device), local)
        return self._work[device]

    def calibrated(
        self, weights: torch.Tensor, start: torch.Tensor, shift_to: torch.Tensor, shift_from: torch.Tensor
    ) -> torch.Tensor:
        """``weights + shift(shift_to - shift_from, weights - start)`` as a new tensor.

        The same operations as composing :meth:`shift` by hand, with the
        intermediate vectors kept in reused buffers (the hot path of OrthoFL).
        """
        work, local = self._workspace(weights.device)
        update = torch.sub(weights, start, out=work.update)
        shift = torch.sub(shift_to, shift_from, out=work.shift)
        if local is not None:
            shift.masked_fill_(local, 0.0)
            update.masked_fill_(local, 0.0)
        return weights + ops.orthogonal_component(shift, update, work.lengths, work)

    def calibrated_and_mixed(
        self, weights: torch.Tensor, start: torch.Tensor, shift_to: torch.Tensor, shift_from: torch.Tensor,
        mix_from: torch.Tensor, weight: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`calibrated` and ``ops.mix(mix_from, weights, weight)``: one fused pass on CPU, eager elsewhere."""
        if self._fused is not None and fused.usable(weights, start, shift_to, shift_from, mix_from):
            calibrated, mixed = fused.calibrate_and_mix(
                weights, start, shift_to, shift_from, *self._fused, mix_from=mix_from, weight=weight
            )
            assert mixed is not None
            return calibrated, mixed
        return self.calibrated(weights, start, shift_to, shift_from), ops.mix(mix_from, weights, weight)

    def _for(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Segment lengths and keep-mask on ``device`` (moved once, then cached)."""
        if device not in self._on_device:
            keep = None if self.keep is None else self.keep.to(device)
            self._on_device[device] = (self._lengths.to(device), keep)
        return self._on_device[device]

    def shift(self, shift: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        """The part of ``shift`` the client receives: orthogonal to ``update`` per layer, 0 on local BN."""
        lengths, keep = self._for(shift.device)
        if keep is not None:
            shift = torch.where(keep, shift, 0.0)
            update = torch.where(keep, update, 0.0)
        return ops.orthogonal_component(shift, update, lengths)

    def update(self, update: torch.Tensor, others: list[torch.Tensor]) -> torch.Tensor:
        """``update`` orthogonal to the span of ``others`` per layer; untouched on local BN."""
        lengths, keep = self._for(update.device)
        if keep is None:
            return ops.project_out(update, others, lengths)
        masked = ops.project_out(
            torch.where(keep, update, 0.0), [torch.where(keep, o, 0.0) for o in others], lengths
        )
        return torch.where(keep, masked, update)

    def local_from(self, x: torch.Tensor, own: torch.Tensor) -> torch.Tensor:
        """``x`` with local batch-norm entries taken from ``own`` (``x`` itself under ``bn: project``)."""
        _, keep = self._for(x.device)
        return x if keep is None else torch.where(keep, x, own)

    def mask_local(self, shift: torch.Tensor) -> torch.Tensor:
        """``shift`` with local batch-norm entries set to 0 (unchanged under ``bn: project``)."""
        _, keep = self._for(shift.device)
        return shift if keep is None else torch.where(keep, shift, 0.0)
