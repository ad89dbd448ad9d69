"""The same floating-point results on every x86-64 CPU: which kernels torch may use, pinned per process.

The same run gives different numbers on different CPUs when the kernels that compute it
depend on the CPU: torch's vectorized ATen kernels follow the widest vector unit
(``ATEN_CPU_CAPABILITY``: default, avx2, avx512; reductions then add in another order),
MKL's BLAS picks its code path by CPU (its Conditional Numerical Reproducibility switch,
``MKL_CBWR``), and oneDNN and NNPACK choose convolution kernels by instruction set and cache
sizes. simfl pins them in every process that computes (the launching one, local workers,
executor workers, Ray tasks and actors), under ``SIMFL_NUMERICS``:

- ``portable`` (default): ATen's default kernels, MKL's ``COMPATIBLE`` path, oneDNN and NNPACK
  off (convolutions through ATen's own im2col and MKL). Identical results on every x86-64 CPU
  for the same torch build and thread count (simfl fixes the thread count per run).
- ``native``: what the machine would choose; faster (``benchmarks/numerics.py``), but numbers
  may then differ between CPU models.

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
from typing import Literal

ENV = "SIMFL_NUMERICS"
FILE = "numerics.json"
"""Each run folder's record of what its run computed with (:func:`record`)."""
Mode = Literal["portable", "native"]
MODES: tuple[Mode, ...] = ("portable", "native")
PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
"""The environment of the ``portable`` mode, read by torch and MKL at their first computation."""


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
        os.environ.update(PORTABLE_ENV)


def _switches() -> tuple[bool, bool]:
    """Whether oneDNN and NNPACK are on in this process (the switches torch reads at call time)."""
    import torch

    return bool(torch.backends.mkldnn.enabled), bool(torch._C._get_nnpack_enabled())


def _set_switches(onednn: bool, nnpack: bool) -> None:
    import torch

    torch.backends.mkldnn.enabled = onednn  # type: ignore[assignment]  # a module property
    torch.backends.nnpack.set_flags(nnpack)


def apply() -> None:
    """Set the switches torch reads at call time (oneDNN, NNPACK) for this process's mode."""
    pin_environment()
    native = mode() == "native"
    _set_switches(native, native)


@contextmanager
def applied() -> Iterator[None]:
    """:func:`apply` for a block (one unit run in the caller's process), the caller's switches restored after."""
    before = _switches()
    apply()
    try:
        yield
    finally:
        _set_switches(*before)


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
