"""What a model costs: exchanged bytes and training FLOPs per sample (for latency scaling and reports)."""

from __future__ import annotations

import torch
from torch import nn

from simfl.models.flat import Layout


def exchanged_bytes(layout: Layout) -> int:
    """Bytes of the exchanged state as float32."""
    return 4 * layout.size


def training_flops_per_sample(model: nn.Module, sample: torch.Tensor) -> int:
    """FLOPs to train on one sample: forward plus backward, as PyTorch's FlopCounterMode counts them.

    Every operator with a FLOP formula counts (matrix products, convolutions,
    attention), at 2 FLOPs per multiply-add; the backward pass computes only the
    gradients training needs (none for the input, none for frozen weights).
    Counted in eval mode on a batch of one; the model's parameters, their
    gradients and its buffers are left as they were.
    """
    from torch.utils.flop_counter import FlopCounterMode  # about 0.1 s to import: only where FLOPs are counted

    params = [p for p in model.parameters() if p.requires_grad]
    grads = [p.grad for p in params]
    was_training = model.training
    model.eval()
    try:
        with FlopCounterMode(display=False) as counter:
            out = model(sample.unsqueeze(0))
            logits = out if isinstance(out, torch.Tensor) else out.logits
            if params:
                logits.float().sum().backward()
        return int(counter.get_total_flops())
    finally:
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        model.train(was_training)
