"""Checkpoints as an observer of the world: when to hand the whole simulation, as data, to ``save``.

A :class:`Checkpoints` hooks into the :class:`~simfl.sim.world.World` (docs/architecture.md, "The
simulated world"): no handler asks whether checkpoints are on. Timed checkpoints are ``checkpoint``
wake-ups at ``k * every_time``; update-count ones a ``save`` wake-up at the instant the count comes
due. Both have the lowest priority (:mod:`simfl.sim.clock`), so they are taken when every other
wake-up pending lies in the future, and the simulation's data is complete.
"""

from __future__ import annotations

from simfl.sim.clock import Wake
from simfl.sim.world import Checkpointing, Observer, World


class Checkpoints(Observer):
    """Saves on the time grid and/or every N updates, as :class:`~simfl.sim.world.Checkpointing` says."""

    world: World

    def __init__(self, checkpointing: Checkpointing) -> None:
        self.checkpointing = checkpointing
        self.hears = frozenset({"started", "resumed"} | ({"counted"} if checkpointing.every_updates is not None else set()))

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

    def resumed(self) -> None:
        """Timed checkpoints go on (a run resumed with them, from a checkpoint saved without, starts the grid)."""
        every, st = self.checkpointing.every_time, self.world.state
        if every is not None and all(w.kind != "checkpoint" for w in self.world.clock.pending().values()):
            self.world.wake("checkpoint", max(st.checkpoint_index * every, st.now))

    def counted(self) -> None:
        """An update-count checkpoint at the end of this instant when one is due."""
        every, st = self.checkpointing.every_updates, self.world.state
        assert every is not None
        if st.updates < st.next_checkpoint_update:
            return
        while st.next_checkpoint_update <= st.updates:
            st.next_checkpoint_update += every
        self.world.wake("save", self.world.clock.now)

    def _timed(self, wake: Wake) -> None:
        """Save at k * interval, after everything else at that instant (the next one already pending)."""
        every, st = self.checkpointing.every_time, self.world.state
        assert every is not None
        st.checkpoint_index += 1
        self.world.wake("checkpoint", st.checkpoint_index * every)
        self.checkpointing.save(self.world.save())

    def _save(self, wake: Wake) -> None:
        if not self.world.clock.stopping:
            self.checkpointing.save(self.world.save())
