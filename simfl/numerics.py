"""The same floating-point results on every x86-64 CPU: which kernels torch may use, pinned per process.

The same run gives different numbers on different CPUs when the kernels that compute it
depend on the CPU: torch's vectorized ATen kernels follow the widest vector unit
(``ATEN_CPU_CAPABILITY``: default, avx2, avx512; reductions then add in another order),
MKL's BLAS picks its code path by CPU (its Conditional Numerical Reproducibility switch,
``MKL_CBWR``), and oneDNN and NNPACK choose convolution kernels by instruction set and cache
sizes. simfl pins them in every process that computes (the launching one, local workers,
executor workers, Ray tasks and actors), under ``SIMFL_NUMERICS``:

- ``portable`` (default): ATen's default kernels, MKL's ``COMPATIBLE`` path, oneDNN and NNPACK
  off (convolutions through ATen's own im2col and MKL, in the contiguous layout: channels-last
  helps only oneDNN, :func:`simfl.train.local.channels_last_helps`). Identical results on every
  x86-64 CPU for the same torch build and thread count (simfl fixes the thread count per run).
- ``native``: what the machine would choose; faster (``benchmarks/numerics.py``), but numbers
  may then differ between CPU models.

No faster pin keeps that promise (``benchmarks/README.md``, "numerics_breakdown", measured): ATen's
kernels at ``avx2`` would match only among CPUs with AVX2 (torch falls back to ``default`` below it);
MKL's other CNR branches (``MKL_CBWR=AVX2[,STRICT]``) hold only on Intel CPUs, others fall back to
MKL's automatic choice; oneDNN's ``ONEDNN_MAX_CPU_ISA`` pins its instruction set but not its blocking,
which follows the cache sizes; NNPACK needs AVX2 on x86-64 and sizes its tiles by cache size too.
One of ATen's default kernels is far slower than it need be: ReLU's backward
(``aten::threshold_backward``), a selection, about 15x its AVX2 time. The portable mode replaces it in
the process by the same selection through a mask product (:func:`_threshold_backward`: the same bits,
about 4x faster at ``default``).

The environment variables must be set before torch first computes in a process:
``import simfl`` sets them (:func:`pin_environment`), worker processes inherit them, and
:func:`apply` (:func:`applied` for one unit in the caller's process) sets the switches torch reads at
call time. A process in which torch had already
computed before simfl was imported keeps the capability it chose; :func:`record`, written into
each run's folder as ``numerics.json``, says what a run actually ran with.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

ENV = "SIMFL_NUMERICS"
FILE = "numerics.json"
"""Each run folder's record of what its run computed with (:func:`record`)."""
Mode = Literal["portable", "native"]
MODES: tuple[Mode, ...] = ("portable", "native")
PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
"""The environment of the ``portable`` mode, read by torch and MKL at their first computation."""
_before_pin: dict[str, str | None] = {}
"""Each variable of :data:`PORTABLE_ENV` as this process had it before :func:`pin_environment` first set it."""


def mode() -> Mode:
    """The mode ``SIMFL_NUMERICS`` asks for (``portable`` when unset; an unknown value is refused by :func:`check`)."""
    value = os.environ.get(ENV, "portable").strip().lower() or "portable"
    return "native" if value == "native" else "portable"


def check() -> None:
    """Refuse an unknown ``SIMFL_NUMERICS`` in one line (a user mistake)."""
    value = os.environ.get(ENV, "").strip().lower()
    if value and value not in MODES:
        from simfl.errors import InputError

        raise InputError(ENV, f"must be one of {', '.join(MODES)}, got {os.environ[ENV]!r}")


def pin_environment() -> None:
    """Set the portable mode's environment (overriding any other value) unless ``native`` is asked for."""
    if mode() == "portable":
        for name in PORTABLE_ENV:
            _before_pin.setdefault(name, os.environ.get(name))
        os.environ.update(PORTABLE_ENV)


def unpinned_environment() -> dict[str, str]:
    """This process's environment with the portable mode's variables as they were before simfl set them: for a
    process that is not simfl's (another engine timed beside it), which must compute as it would on its own."""
    env = dict(os.environ)
    for name, value in _before_pin.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


_INTS = {"torch.float32": "int32", "torch.float64": "int64", "torch.float16": "int16", "torch.bfloat16": "int16"}
"""The integer type of each float type's width: a float's bits times 1 or 0 are its bits or +0.0's."""
_fast_kernels: object | None = None
"""The ``torch.library.Library`` holding the portable mode's kernels while they are registered (else None)."""


def _threshold_backward(grad: torch.Tensor, self: torch.Tensor, threshold: float) -> torch.Tensor:
    """``aten::threshold_backward`` for CPU tensors, bit for bit: ``grad`` where ``self > threshold`` (NaN too), else +0.

    ATen's own kernel at the ``default`` capability emulates its vector blend element by element; a float
    tensor's bits times a 0/1 mask, as integers, select the same values (NaN and -0.0 included) at
    about 4x the speed there.
    """
    import torch

    keep = torch.le(self, threshold).logical_not_()
    ints = _INTS.get(str(grad.dtype))
    if ints is None or grad.dtype != self.dtype:
        dtype = torch.result_type(grad, self)
        return torch.where(keep, grad.to(dtype), torch.zeros((), dtype=dtype))
    return (grad.view(getattr(torch, ints)) * keep).view(grad.dtype)


def _register_fast_kernels(on: bool) -> None:
    """Register (``on``) or withdraw the portable mode's CPU kernels (:func:`_threshold_backward`) in this process."""
    global _fast_kernels
    if on and _fast_kernels is None:
        import warnings

        import torch

        library = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Overriding a previously registered kernel": on purpose
            library.impl("threshold_backward", _threshold_backward, "CPU")
        _fast_kernels = library
    elif not on and _fast_kernels is not None:
        _fast_kernels._destroy()  # type: ignore[attr-defined]  # ATen's own kernel is back
        _fast_kernels = None


def _switches() -> tuple[bool, bool]:
    """Whether oneDNN and NNPACK are on in this process (the switches torch reads at call time)."""
    import torch

    return bool(torch.backends.mkldnn.enabled), bool(torch._C._get_nnpack_enabled())


def _set_switches(onednn: bool, nnpack: bool) -> None:
    import torch

    torch.backends.mkldnn.enabled = onednn  # type: ignore[assignment]  # a module property
    torch.backends.nnpack.set_flags(nnpack)


def apply() -> None:
    """Set the switches torch reads at call time (oneDNN, NNPACK) and the portable mode's kernels for this process's mode."""
    pin_environment()
    native = mode() == "native"
    _set_switches(native, native)
    _register_fast_kernels(not native)


@contextmanager
def applied() -> Iterator[None]:
    """:func:`apply` for a block (one unit run in the caller's process), the caller's switches and kernels restored after."""
    before, fast = _switches(), _fast_kernels is not None
    apply()
    try:
        yield
    finally:
        _set_switches(*before)
        _register_fast_kernels(fast)


def record() -> bytes:
    """What this process computes with, as the run folder's ``numerics.json`` (same bytes wherever pinned)."""
    import torch

    onednn, nnpack = _switches()
    data = {
        "mode": mode(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl_cbwr": os.environ.get("MKL_CBWR", ""),
        "onednn": onednn,
        "nnpack": nnpack,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    return (json.dumps(data, indent=1) + "\n").encode()
