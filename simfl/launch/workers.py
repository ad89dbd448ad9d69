"""How many runs go side by side: the cores one run keeps busy and the machine's, without loading torch.

Kept apart from :mod:`simfl.launch.runner` and :mod:`simfl.launch.units` (which re-export both
functions) so that `simfl validate` can print its estimate without importing what runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from simfl.errors import InputError

if TYPE_CHECKING:
    from simfl.schema.scenario import Scenario

WORKERS_ENV = "SIMFL_WORKERS"
"""Environment variable: the default of ``--workers`` where it is not given."""


def unit_cpus(scn: Scenario) -> int:
    """Cores one run keeps busy: its threads, times the executor's workers where jobs train in parallel."""
    return scn.executor.cores_busy()


def workers_for(requested: int | None, scenarios: Sequence[Scenario], units: int, ray: bool = False) -> int:
    """How many units run side by side on this machine.

    Each unit keeps :func:`unit_cpus` cores busy (its torch threads, times the
    executor's workers where jobs train in parallel), so by default as many units run as the
    cores hold (at least one, at most ``units``); ``requested`` (``--workers``, else
    ``$SIMFL_WORKERS``) is refused where it would ask for more cores than the machine has.
    With Ray, the cluster places the units; a local Ray instance gets ``workers`` units' cores.
    """
    from simfl.train.configs import cores

    per_unit = max((unit_cpus(s) for s in scenarios), default=1)
    have = cores()
    where = "--workers"
    if requested is None and os.environ.get(WORKERS_ENV, "").strip():
        where, text = WORKERS_ENV, os.environ[WORKERS_ENV].strip()
        requested = int(text) if text.isdigit() else -1
    if requested is None:
        return max(1, min(have // per_unit, units))
    if requested < 1:
        given = os.environ.get(WORKERS_ENV) if where == WORKERS_ENV else requested
        raise InputError(where, f"must be a whole number of at least 1, got {given}")
    if not ray and requested * per_unit > have:
        raise InputError(where, f"{requested} runs side by side would keep {requested * per_unit} cores busy ({per_unit} "
                         f"per run: executor threads x workers) and this machine has {have}; use at most "
                         f"{max(1, have // per_unit)}, or fewer executor threads or workers")
    return requested
