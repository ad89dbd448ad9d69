"""Aggregation algorithms: one module each, their options in :mod:`simfl.algorithms.configs`, their maths in
:mod:`simfl.algorithms.ops`.

``ALGORITHMS`` maps the name used in a scenario's ``algorithms:`` list to the class; each class
carries its validated ``Config`` (whose ``name`` field is the discriminator). Importing this package
loads no torch: ``ALGORITHMS`` and the base classes are imported when first read, so that validation,
which needs only the configs, stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simfl.algorithms.configs import BUILTINS
from simfl.registry import lazy

if TYPE_CHECKING:
    from simfl.algorithms.base import Algorithm, Arrival, AsyncAlgorithm, Setup, SyncAlgorithm

    ALGORITHMS: dict[str, type[Algorithm[Any]]]

__getattr__ = lazy(globals(), "ALGORITHMS", BUILTINS,
                   {name: f"simfl.algorithms.base:{name}" for name in ("Algorithm", "Arrival", "AsyncAlgorithm", "Setup",
                                                                      "SyncAlgorithm")})
"""``ALGORITHMS`` and the base classes, imported on first use."""


__all__ = ["ALGORITHMS", "Algorithm", "Arrival", "AsyncAlgorithm", "Setup", "SyncAlgorithm"]
