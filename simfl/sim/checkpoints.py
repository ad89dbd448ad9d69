"""Checkpoints as an observer of the world: when to hand the whole simulation, as data, to ``save``.

A :class:`Checkpoints` hooks into the :class:`~simfl.sim.world.World` (docs/architecture.md, "The
simulated world"): no handler asks whether checkpoints are on. Timed checkpoints are ``checkpoint``
wake-ups at ``k * every_time``; update-count ones a ``save`` wake-up at the instant the count comes
due. Both have the lowest priority (:mod:`simfl.sim.clock`), so they are taken when every other
wake-up pending lies in the future, and the simulation's data is complete.

Wall-clock checkpoints (``every_wall``) map the wall clock onto those same points. The wall clock is
read only where the run already stops by (each collected reply, each metric row), never to decide
anything the rules do: once ``every_wall`` seconds have passed since the last checkpoint, the next such
point queues a ``save`` wake-up at its own virtual instant, taken, as an update-count one, after
everything else due then. Which instant that is depends on the wall clock; what is saved there does
not (the world's whole state at an instant where nothing else is due), and a ``save`` wake-up changes
no rule: it takes the next creation order, which shifts the orders of later wake-ups by one and keeps
their relative order, so the events, metrics and every result file are the same whether and
wherever such checkpoints were taken (``tests/reliability/test_default_checkpoints.py``). The wait
after a checkpoint is at least :data:`WALL_SHARE`'s inverse times what it cost, so wall-clock
checkpoints never take more than about that share of a run's wall time, however large its state.
"""

from __future__ import annotations

import time

from simfl.sim.clock import Wake
from simfl.sim.pulse import OnTheWallClock
from simfl.sim.world import Checkpointing, World

WALL_SHARE = 0.05
"""The most of a run's wall time that wall-clock checkpoints take: after one that cost c seconds, the next waits
at least c / WALL_SHARE seconds (and at least the interval asked for)."""


class Checkpoints(OnTheWallClock):
    """Saves on the time grid, every N updates and/or every W wall seconds, as
    :class:`~simfl.sim.world.Checkpointing` says."""

    world: World

    def __init__(self, checkpointing: Checkpointing) -> None:
        self.checkpointing = checkpointing
        self.wall = time.monotonic
        """The wall clock the wall-clock schedule reads (seconds)."""
        points = {"started", "resumed"}
        if checkpointing.every_updates is not None:
            points.add("counted")
        if checkpointing.every_wall is not None:
            points |= {"collected", "recorded"}
        self.hears = frozenset(points)
        self._asked = False
        """A ``save`` wake-up is queued at this instant (one checkpoint per instant)."""

    def attach(self, world: World) -> None:
        self.world = world
        if self.checkpointing.every_time is not None:
            world.handle("checkpoint", self._timed)
        world.handle("save", self._save)

    def started(self) -> None:
        ck, st = self.checkpointing, self.world.state
        if ck.every_updates is not None:
            st.next_checkpoint_update = ck.every_updates
        if ck.every_time is not None:
            self.world.wake("checkpoint", st.checkpoint_index * ck.every_time)
        self._wait(0.0)

    def resumed(self) -> None:
        """Timed checkpoints go on (a run resumed with them, from a checkpoint saved without, starts the grid)."""
        every, st = self.checkpointing.every_time, self.world.state
        if every is not None and all(w.kind != "checkpoint" for w in self.world.clock.pending().values()):
            self.world.wake("checkpoint", max(st.checkpoint_index * every, st.now))
        self._wait(0.0)

    def counted(self) -> None:
        """An update-count checkpoint at the end of this instant when one is due."""
        every, st = self.checkpointing.every_updates, self.world.state
        assert every is not None
        if st.updates < st.next_checkpoint_update:
            return
        while st.next_checkpoint_update <= st.updates:
            st.next_checkpoint_update += every
        self._ask()

    def come(self) -> None:
        """The wall-clock interval has passed: a checkpoint at the end of this instant."""
        self._ask()

    def _ask(self) -> None:
        """A checkpoint at the end of this instant (once, however many schedules ask for it)."""
        if not self._asked:
            self._asked = True
            self.world.wake("save", self.world.clock.now)

    def _wait(self, cost: float) -> None:
        """The next wall-clock checkpoint: the interval from now, or more after a costly checkpoint."""
        every = self.checkpointing.every_wall
        if every is not None:
            self.due = self.wall() + max(every, cost / WALL_SHARE)

    def _timed(self, wake: Wake) -> None:
        """Save at k * interval, after everything else at that instant (the next one already pending)."""
        every, st = self.checkpointing.every_time, self.world.state
        assert every is not None
        st.checkpoint_index += 1
        self.world.wake("checkpoint", st.checkpoint_index * every)
        self._saved()

    def _save(self, wake: Wake) -> None:
        self._asked = False
        if not self.world.clock.stopping:
            self._saved()

    def _saved(self) -> None:
        """Hand the whole simulation to ``save``; the wall-clock schedule starts again after it."""
        wall = self.wall
        start = wall()
        self.checkpointing.save(self.world.save())
        self._wait(wall() - start)
