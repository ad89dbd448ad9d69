"""A run's pulse: how far it is, told every few wall seconds from inside the run.

The engine's ``progress`` callback hears a run at its metric rows, which may lie minutes of wall time
apart (a large model, a sparse evaluation grid). A :class:`Pulse` observes the world
(:class:`~simfl.sim.world.Observer`) at its start and then at each collected reply and metric row, and
once ``every`` wall seconds have passed since it last beat, calls ``beat`` with the state (its ``now``
set to the clock's). It reads the wall clock and nothing else: it never changes what the run does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from simfl.sim.state import ClientState, SimState
from simfl.sim.world import Observer, World

PULSE_SECONDS = 2.0
"""Wall seconds between two beats of a run under way (a progress report from within the run)."""


class Pulse(Observer):
    """Calls ``beat(state)`` when the run starts (or resumes) and then at most every ``every`` wall seconds."""

    hears = frozenset({"started", "resumed", "collected", "recorded"})
    world: World

    def __init__(self, beat: Callable[[SimState], None], every: float = PULSE_SECONDS) -> None:
        self.beat = beat
        self.every = every
        self.wall = time.monotonic
        """The wall clock (seconds)."""
        self._due = 0.0

    def attach(self, world: World) -> None:
        self.world = world

    def started(self) -> None:
        self._beat()

    def resumed(self) -> None:
        self._beat()

    def collected(self, client: ClientState, staleness: int, update: int, weights: object) -> None:
        if self.wall() >= self._due:
            self._beat()

    def recorded(self, now: float) -> None:
        if self.wall() >= self._due:
            self._beat()

    def _beat(self) -> None:
        state = self.world.state
        state.now = self.world.clock.now
        self.beat(state)
        self._due = self.wall() + self.every
