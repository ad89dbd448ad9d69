"""simfl: a discrete-event simulator for asynchronous federated learning.

Virtual time is simulated with SimPy (only in :mod:`simfl.sim`); training is
real PyTorch. Scenarios are YAML files validated by :mod:`simfl.schema.scenario` and
run with the ``simfl`` command, or from Python with :func:`simfl.run`, :func:`simfl.sweep` and
:func:`simfl.tune` (:mod:`simfl.launch.api`). See docs/architecture.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simfl import numerics

numerics.pin_environment()  # before torch first computes in this process (simfl.numerics)

if TYPE_CHECKING:
    from simfl.launch.api import Results, Tuned, run, sweep, tune

__version__ = "0.1.0"
__all__ = ["Results", "Tuned", "__version__", "run", "sweep", "tune"]


def __getattr__(name: str) -> Any:
    """``run``, ``sweep``, ``tune``, ``Results`` and ``Tuned`` load :mod:`simfl.launch.api` (torch, pandas) on first use, so
    that importing ``simfl`` (and ``simfl --help``) stays quick."""
    if name in ("Results", "Tuned", "run", "sweep", "tune"):
        from simfl.launch import api

        return getattr(api, name)
    raise AttributeError(f"module 'simfl' has no attribute {name!r}")
