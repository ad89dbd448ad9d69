"""The names of the simulated world's choices that a scenario makes, light to import (no numba, no torch).

The scenario schema validates ``server.selection`` against :data:`Selection` without loading the selection
machinery (:mod:`simfl.sim.selection`, compiled with numba), so that ``simfl validate`` stays quick.
"""

from __future__ import annotations

from typing import Literal

Selection = Literal["uniform", "by_data"]
"""How cross-device serving draws the next client among the idle, present ones: uniformly, or by sample count."""
