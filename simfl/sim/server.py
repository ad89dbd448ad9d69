"""What the world asks of the server side: the :class:`Scheduler` protocol.

:class:`~simfl.sim.world.World` holds a scheduler and calls it when a client's round ends
or a server wake-up fires; :mod:`simfl.sim.schedulers` holds the two kinds (asynchronous
server, synchronous rounds), which in turn call the world's rules. The protocol sits below
both so that neither imports the other in a circle.
"""

from __future__ import annotations

from typing import Protocol

from simfl.sim.clock import Wake
from simfl.sim.state import ClientState


class Scheduler(Protocol):
    """What the world asks of the server side."""

    def start(self) -> None:
        """Begin a fresh run at time 0."""

    def resume(self) -> None:
        """Continue from the state's data (its pending wake-ups are re-scheduled by the world)."""

    def delivered(self, client: ClientState) -> None:
        """``client``'s round ended with an update."""

    def failed(self, client: ClientState) -> None:
        """``client``'s round ended without an update (a failure)."""

    def lost(self, client: ClientState) -> None:
        """``client`` departed during its round."""

    def returned(self, client: ClientState) -> None:
        """``client`` is back from an absence."""

    def rejoined(self, client: ClientState) -> None:
        """``client``'s wait after a failed round ended (asynchronous servers only)."""

    def wake(self, wake: Wake) -> None:
        """One of the scheduler's own wake-ups (``server``, ``deadline``) fired."""
