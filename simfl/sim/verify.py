"""Run-time invariant checks of ``simfl run --verify``.

A :class:`Verifier` observes the world (:class:`~simfl.sim.world.Observer`): it
hears every dispatch, delivery, collected reply, aggregation and metric row. The first broken invariant raises
:class:`InvariantError`, whose message names the client and the update, so a
diverging or corrupted run stops at once instead of filling results with NaN; the
engine hands it on as :class:`RunStopped`, which carries the state so far.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from simfl.sim.population import Population
from simfl.sim.state import ClientState, SimState
from simfl.sim.world import Observer, World


class InvariantError(Exception):
    """A simulation invariant broke; ``message`` says which, where and when."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RunStopped(InvariantError):
    """A run stopped before its end: the message, the state so far, which run (once known) and the ``cause``: a
    broken invariant (``--verify``) or a run that cannot make progress (``no progress``,
    :meth:`~simfl.sim.world.World.note`)."""

    def __init__(self, message: str, state: SimState, algorithm: str = "?", seed: int = -1,
                 cause: str = "--verify") -> None:
        super().__init__(message)
        self.state = state
        self.algorithm = algorithm
        self.seed = seed
        self.cause = cause


class Verifier(Observer):
    """Checks time order, arrival times, staleness, concurrency, recalled rounds' epoch boundaries and finiteness of
    weights."""

    hears = frozenset({"resumed", "dispatching", "delivering", "recalled", "collected", "merged", "recorded"})
    world: World

    def __init__(self, population: Population, present: Callable[[int, float], bool] | None = None,
                 phased: bool = False) -> None:
        self.population = population
        self.phased = phased
        """Rounds run in phases: a round ends when its upload does (or its compute, failed), not at a drawn time."""
        """The population served: how many clients may be in flight."""
        self.present = present
        """Whether a client is there at a time (the scenario's availability; None: always)."""
        self.last_time = 0.0

    def attach(self, world: World) -> None:
        self.world = world

    def resumed(self) -> None:
        self.last_time = self.world.state.now

    def recorded(self, now: float) -> None:
        self.time(now)

    def time(self, now: float) -> None:
        """Virtual time never goes back."""
        if now < self.last_time:
            raise InvariantError(f"virtual time went back from {self.last_time!r} to {now!r}")
        self.last_time = now

    def dispatching(self, client: ClientState, now: float, in_flight: int) -> None:
        """A client is not dispatched twice, nor while it is away, and no more clients are in flight than the
        population allows (every client, or C)."""
        self.time(now)
        if client.phase == "round":
            raise InvariantError(f"client {client.index} dispatched at {now!r} while its round {client.rounds - 1} "
                                 "is still in flight")
        if self.present is not None and not self.present(client.index, now):
            raise InvariantError(f"client {client.index} dispatched at {now!r} while it is away")
        if self.population.room(in_flight) < 1:
            raise InvariantError(f"{in_flight + 1} clients in flight at {now!r}, more than {self.population.bound}")

    def delivering(self, client: ClientState, now: float) -> None:
        """A round ends exactly at its dispatch time plus its latency (in phases: not before its dispatch)."""
        self.time(now)
        if self.phased:
            if now < client.dispatch_time:
                raise InvariantError(f"client {client.index} round {client.rounds - 1}: ended at {now!r}, before its "
                                     f"dispatch at {client.dispatch_time!r}")
            return
        expected = client.dispatch_time + client.latency
        if now != expected:
            raise InvariantError(
                f"client {client.index} round {client.rounds - 1}: ended at {now!r}, but dispatch time "
                f"{client.dispatch_time!r} + latency {client.latency!r} = {expected!r}"
            )

    def recalled(self, client: ClientState, now: float, epochs: int, draw: float, compute: float) -> None:
        """A recalled round is in flight and cut at an epoch boundary before its last: ``1 <= k < E`` epochs, its
        compute ``draw * k / E`` (:func:`simfl.sim.recall.boundary`), and (without phases) its new end not before
        now."""
        total = self.world.epochs
        where = f"client {client.index} round {client.rounds - 1} recalled at {now!r}"
        if client.phase != "round" or total is None or not 1 <= epochs < total or client.epochs != epochs:
            raise InvariantError(f"{where}: cut to {epochs} of {total} epochs while {client.phase}")
        if compute != draw * epochs / total:
            raise InvariantError(f"{where}: its compute {compute!r} is not {epochs}/{total} of its draw {draw!r}")
        if not self.phased and client.dispatch_time + client.latency < now:
            raise InvariantError(f"{where}: its new end {client.dispatch_time + client.latency!r} is in the past")

    def collected(self, client: ClientState, staleness: int, update: int, weights: torch.Tensor) -> None:
        """Staleness is at least 1 and the trained weights are finite."""
        if staleness < 1:
            raise InvariantError(f"client {client.index}, update {update}: staleness {staleness} < 1")
        if not bool(torch.isfinite(weights).all()):
            raise InvariantError(f"client {client.index}, update {update}: trained weights contain NaN or Inf "
                                 "(training diverged; try a smaller train.lr)")

    def merged(self, weights: torch.Tensor, update: int, client: int | None, now: float) -> None:
        """Virtual time never goes back, and the global model stays finite after every aggregation."""
        self.time(now)
        if not bool(torch.isfinite(weights).all()):
            who = f" (client {client})" if client is not None else ""
            raise InvariantError(f"update {update}{who}: global weights contain NaN or Inf after aggregation")
