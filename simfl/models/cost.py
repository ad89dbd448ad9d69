"""What a model costs: exchanged bytes, training FLOPs per sample (for latency scaling and reports) and the bytes
per sample its activations hold (for the memory estimate)."""

from __future__ import annotations

from typing import Any

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


ACTIVATION_BATCHES = (32, 64)
"""The two batch sizes whose difference gives the bytes per sample (a batch of one trips batch norm in training)."""


def activation_bytes_per_sample(model: nn.Module, shape: tuple[int, ...]) -> tuple[int, int]:
    """Bytes per sample of the tensors the model's own operations hold at once, at their peak: (training, a forward
    and backward pass; evaluation, a forward pass without gradients).

    Counted, not timed: every tensor an operator returns is followed until it is freed, on the device the model is
    on (PyTorch's meta device computes no values, so a large model is counted in a fraction of a second), and the
    most alive at once on a batch of 4, less that on a batch of 2, halved, is the part that grows with the batch
    (the gradients and the loss do not). What a kernel allocates inside itself is not seen. The model's parameters,
    their gradients and its training mode are left as they were.
    """
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Peak(TorchDispatchMode):
        """The most bytes of operator results alive at once while active."""

        def __init__(self) -> None:
            super().__init__()
            self.alive: dict[int, tuple[StorageWeakRef, int]] = {}
            self.now = 0
            self.peak = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    storage = t.untyped_storage()
                    ref = StorageWeakRef(storage)
                    if ref.cdata not in self.alive:  # a view of a result already counted adds nothing
                        self.alive[ref.cdata] = (ref, storage.nbytes())
                        self.now += storage.nbytes()
            self.peak = max(self.peak, self.now)
            for key in [k for k, (ref, _) in self.alive.items() if ref.expired()]:
                self.now -= self.alive.pop(key)[1]
            return out

    device = next(iter(model.parameters())).device
    params = [p for p in model.parameters() if p.requires_grad]
    grads = [p.grad for p in params]
    was_training = model.training

    def peak(batch: int, train: bool) -> int:
        x = torch.zeros((batch, *shape), device=device)
        model.train(train)
        with Peak() as counter, torch.set_grad_enabled(train):
            out = model(x)
            logits = out if isinstance(out, torch.Tensor) else out.logits
            if train and params:
                logits.float().sum().backward()
            del out, logits
        for p in params:
            p.grad = None
        return counter.peak

    try:
        small, large = ACTIVATION_BATCHES
        training, evaluation = (max(0, (peak(large, train) - peak(small, train)) // (large - small))
                                for train in (True, False))
        return training, evaluation
    finally:
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        model.train(was_training)
