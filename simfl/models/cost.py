"""What a model costs: exchanged bytes, training FLOPs per sample (for latency scaling and reports) and the bytes
per sample its activations hold (for the memory estimate)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from simfl.models.flat import Layout


def exchanged_bytes(layout: Layout) -> int:
    """Bytes of the exchanged state as float32."""
    return 4 * layout.size


@contextmanager
def left_as_it_was(model: nn.Module) -> Iterator[list[nn.Parameter]]:
    """Count on ``model`` and leave it as it was: the gradients of its trainable parameters (yielded) and its
    training mode are restored after."""
    params = [p for p in model.parameters() if p.requires_grad]
    grads = [p.grad for p in params]
    was_training = model.training
    try:
        yield params
    finally:
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        model.train(was_training)


def logits_of(out: Any) -> torch.Tensor:
    """A model's output as a tensor of logits (a Hugging Face output holds them in ``logits``)."""
    return out if isinstance(out, torch.Tensor) else out.logits


def training_flops_per_sample(model: nn.Module, sample: torch.Tensor) -> int:
    """FLOPs to train on one sample: forward plus backward, as PyTorch's FlopCounterMode counts them.

    Every operator with a FLOP formula counts (matrix products, convolutions,
    attention), at 2 FLOPs per multiply-add; the backward pass computes only the
    gradients training needs (none for the input, none for frozen weights).
    Counted in eval mode on a batch of one; the model's parameters, their
    gradients and its buffers are left as they were.
    """
    from torch.utils.flop_counter import FlopCounterMode  # about 0.1 s to import: only where FLOPs are counted

    with left_as_it_was(model) as params:
        model.eval()
        with FlopCounterMode(display=False) as counter:
            logits = logits_of(model(sample.unsqueeze(0)))
            if params:
                logits.float().sum().backward()
        return int(counter.get_total_flops())


ACTIVATION_BATCHES = (32, 64)
"""The two batch sizes whose difference gives the bytes per sample: large enough that the batch's tensors, not the
weights' gradients, make each pass's peak (at batches of 2 and 4 the two peaks fell at different moments)."""


class _PeakBytes(TorchDispatchMode):
    """The most bytes of operator results alive at once while active: each result's storage is followed (a weak
    reference) until it is freed; a view of a storage already followed adds nothing."""

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
                if ref.cdata not in self.alive:
                    self.alive[ref.cdata] = (ref, storage.nbytes())
                    self.now += storage.nbytes()
        self.peak = max(self.peak, self.now)
        for key in [k for k, (ref, _) in self.alive.items() if ref.expired()]:
            self.now -= self.alive.pop(key)[1]
        return out


def activation_bytes_per_sample(model: nn.Module, shape: tuple[int, ...]) -> tuple[int, int]:
    """Bytes per sample of the tensors the model's own operations hold at once, at their peak: (training, a forward
    and backward pass; evaluation, a forward pass without gradients).

    Counted, not timed: every tensor an operator returns is followed until it is freed (:class:`_PeakBytes`), on
    the device the model is on (PyTorch's meta device computes no values: MobileNetV2 is counted in about 2 s),
    and the most alive at once at the larger of :data:`ACTIVATION_BATCHES`, less that at the smaller, over their
    difference, is the part that grows with the batch (the gradients and the loss do not). What a kernel allocates
    inside itself is not seen. The model's parameters, their gradients and its training mode are left as they were.
    """
    device = next(iter(model.parameters())).device

    def peak(batch: int, train: bool, params: list[nn.Parameter]) -> int:
        x = torch.zeros((batch, *shape), device=device)  # the batch itself: not the model's own operations
        model.train(train)
        with _PeakBytes() as counter, torch.set_grad_enabled(train):
            logits = logits_of(model(x))
            if train and params:
                logits.float().sum().backward()
            del logits
        for p in params:
            p.grad = None
        return counter.peak

    small, large = ACTIVATION_BATCHES
    with left_as_it_was(model) as params:
        training, evaluation = (max(0, (peak(large, train, params) - peak(small, train, params)) // (large - small))
                                for train in (True, False))
    return training, evaluation
