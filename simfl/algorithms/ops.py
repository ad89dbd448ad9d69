"""Pure maths over flat parameter vectors, shared by the algorithm modules.

Every function takes and returns tensors and touches no other state, so
each is checked alone against hand-computed cases. Per-layer quantities are
computed with one ``segment_reduce`` pass over the whole flat vector (the
``lengths`` argument is :attr:`simfl.models.flat.Layout.lengths`, or a
single-element tensor holding the vector's size for one whole-model
"layer"), never with a Python loop over layers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

mix: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor] = torch.lerp
"""``mix(global_w, client_w, weight)``: the moving average ``(1 - weight) * global_w + weight * client_w`` (a new
tensor). It is torch's ``lerp`` itself, not a function around it: an arrival's path."""


def segment_dot(x: torch.Tensor, y: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Per-segment inner products ``<x[l], y[l]>``, accumulated in float64.

    float64 accumulation keeps long layers (millions of elements) accurate
    enough for the projections to be orthogonal to float32 precision.
    """
    prod = x.double() * y.double()
    return torch.segment_reduce(prod, "sum", lengths=lengths, unsafe=True)


def expand(per_segment: torch.Tensor, lengths: torch.Tensor, size: int) -> torch.Tensor:
    """Repeat one value per segment over the segment's elements (a flat vector of ``size``)."""
    return torch.repeat_interleave(per_segment, lengths, output_size=size)


class Workspace:
    """Scratch vectors reused by :func:`orthogonal_component` for one segment layout.

    A fresh multi-megabyte tensor costs a page fault per 4 KiB page every
    time it is allocated, which made each of the projection's passes several
    times slower than the memory traffic itself. Reusing these buffers runs
    exactly the same operations in the same order, so results are identical.
    """

    def __init__(self, lengths: torch.Tensor, size: int, device: torch.device | str = "cpu") -> None:
        self.lengths = lengths.to(device)
        self.size = size
        self.segment_of = torch.repeat_interleave(
            torch.arange(len(lengths), device=device), self.lengths, output_size=size
        )
        """The segment index of every element (``expand`` as a gather)."""
        self.s64 = torch.empty(size, dtype=torch.float64, device=device)
        self.u64 = torch.empty(size, dtype=torch.float64, device=device)
        self.tmp = torch.empty(size, dtype=torch.float64, device=device)
        self.shift = torch.empty(size, dtype=torch.float32, device=device)
        self.update = torch.empty(size, dtype=torch.float32, device=device)


def orthogonal_component(
    shift: torch.Tensor, update: torch.Tensor, lengths: torch.Tensor, work: Workspace | None = None
) -> torch.Tensor:
    """Per segment, the component of ``shift`` orthogonal to ``update``.

    ``shift[l] - (<shift[l], update[l]> / <update[l], update[l]>) * update[l]``;
    a segment where ``update`` is all zero keeps ``shift`` unchanged. The
    subtraction is done in float64 and rounded once to ``shift``'s dtype, so
    tiny (even subnormal) updates give finite, correct results. Returns a
    new tensor, or with ``work`` (float32 inputs of the workspace's size and
    segments) ``work.shift``, overwritten by the workspace's next use.
    """
    if work is not None and shift.dtype == torch.float32 and shift.numel() == work.size:
        return _orthogonal_component_into(shift, update, work)
    s64, u64 = shift.double(), update.double()
    su = torch.segment_reduce(s64 * u64, "sum", lengths=lengths, unsafe=True)
    uu = torch.segment_reduce(u64 * u64, "sum", lengths=lengths, unsafe=True)
    nonzero = uu > 0
    coef = torch.where(nonzero, su / torch.where(nonzero, uu, torch.ones_like(uu)), torch.zeros_like(su))
    return (s64 - expand(coef, lengths, shift.numel()) * u64).to(shift.dtype)


def _orthogonal_component_into(shift: torch.Tensor, update: torch.Tensor, work: Workspace) -> torch.Tensor:
    """:func:`orthogonal_component` with the same operations, in order, written into ``work``'s buffers."""
    s64, u64, tmp = work.s64, work.u64, work.tmp
    s64.copy_(shift)
    u64.copy_(update)
    su = torch.segment_reduce(torch.mul(s64, u64, out=tmp), "sum", lengths=work.lengths, unsafe=True)
    uu = torch.segment_reduce(torch.mul(u64, u64, out=tmp), "sum", lengths=work.lengths, unsafe=True)
    nonzero = uu > 0
    coef = torch.where(nonzero, su / torch.where(nonzero, uu, torch.ones_like(uu)), torch.zeros_like(su))
    torch.index_select(coef, 0, work.segment_of, out=tmp)
    tmp.mul_(u64)
    torch.sub(s64, tmp, out=tmp)
    return work.shift.copy_(tmp)


def project_out(
    vector: torch.Tensor, directions: Sequence[torch.Tensor], lengths: torch.Tensor
) -> torch.Tensor:
    """Per segment, the component of ``vector`` orthogonal to every one of ``directions``.

    The directions are first made mutually orthogonal per segment (modified
    Gram-Schmidt: each has its parallel components along the earlier ones
    removed), then their parallel components are removed from ``vector`` one
    after the other, so the result is orthogonal to the span of all of them.
    A direction that is zero (or dependent on earlier ones) in a segment is
    skipped there. The loop runs over directions, never over layers.
    """
    basis: list[torch.Tensor] = []
    for d in directions:
        v = d.double()
        for q in basis:
            v = orthogonal_component(v, q, lengths)
        # drop numerically dependent leftovers per segment (relative to the direction's own size)
        dd = segment_dot(d, d, lengths)
        vv = segment_dot(v, v, lengths)
        keep = vv > 1e-24 * dd
        v = v * expand(keep.double(), lengths, v.numel())
        basis.append(v)
    out = vector.double()
    for q in basis:
        out = orthogonal_component(out, q, lengths)
    return out.to(vector.dtype)


def weighted_mean(tensors: Sequence[torch.Tensor], weights: Sequence[float]) -> torch.Tensor:
    """``sum_i w_i x_i / sum_i w_i`` (a new tensor); the weights need not be normalised."""
    if not tensors:
        raise ValueError("weighted_mean needs at least one tensor")
    total = float(sum(weights))
    if total <= 0:
        raise ValueError(f"weights must sum to a positive number, got {total}")
    out = torch.zeros_like(tensors[0])
    for x, w in zip(tensors, weights, strict=True):
        out.add_(x, alpha=w / total)
    return out


def mean(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The plain mean of ``tensors`` (a new tensor), summed one at a time to need no stacked copy."""
    return weighted_mean(tensors, [1.0] * len(tensors))


def adam_moments(
    m: torch.Tensor, v: torch.Tensor, delta: torch.Tensor, beta1: float, beta2: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """New first and second moments ``beta1 m + (1-beta1) delta``, ``beta2 v + (1-beta2) delta^2``."""
    return torch.lerp(delta, m, beta1), torch.lerp(delta * delta, v, beta2)


def adam_step(
    w: torch.Tensor, m: torch.Tensor, v: torch.Tensor, lr: float, tau: float
) -> torch.Tensor:
    """``w + lr * m / (sqrt(v) + tau)`` (FedAdam's server step, no bias correction)."""
    return w + lr * m / (v.sqrt() + tau)
