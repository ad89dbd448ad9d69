"""A run's pulse: how far it is, told every few wall seconds from inside the run.

The engine's ``progress`` callback hears a run at its metric rows, which may lie minutes of wall time
apart (a large model, a sparse evaluation grid). A :class:`Pulse` observes the world
(:class:`~simfl.sim.world.Observer`) at its start and then at each collected reply and metric row, and
once ``every`` wall seconds have passed since it last beat, calls ``beat`` with the state (its ``now``
set to the clock's). It reads the wall clock and nothing else: it never changes what the run does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from simfl.sim.state import ClientState, SimState
from simfl.sim.world import Observer, World

PULSE_SECONDS = 2.0
"""Wall seconds between two beats of a run under way (a progress report from within the run)."""


class OnTheWallClock(Observer):
    """An observer with something to do once the wall clock reaches :attr:`due`: it reads the clock at each
    collected reply and metric row (the points where a run's wall time goes) and then calls :meth:`come`."""

    due = math.inf
    """When (wall clock, seconds) :meth:`come` is next due."""
    wall: Callable[[], float]
    """The wall clock (seconds): ``time.monotonic`` as the subclass's module sees it."""

    def collected(self, client: ClientState, staleness: int, update: int, weights: object) -> None:
        if self.wall() >= self.due:
            self.come()

    def recorded(self, now: float) -> None:
        if self.wall() >= self.due:
            self.come()

    def come(self) -> None:
        """What is due (the subclass's)."""


class Pulse(OnTheWallClock):
    """Calls ``beat(state)`` when the run starts (or resumes) and then at most every ``every`` wall seconds."""

    hears = frozenset({"started", "resumed", "collected", "recorded"})
    world: World

    def __init__(self, beat: Callable[[SimState], None], every: float = PULSE_SECONDS) -> None:
        self.beat = beat
        self.every = every
        self.wall = time.monotonic

    def attach(self, world: World) -> None:
        self.world = world

    def started(self) -> None:
        self.come()

    def resumed(self) -> None:
        self.come()

    def come(self) -> None:
        state = self.world.state
        state.now = self.world.clock.now
        self.beat(state)
        self.due = self.wall() + self.every
