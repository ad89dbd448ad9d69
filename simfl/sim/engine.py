"""One (algorithm, seed) run: builds the world, starts or resumes it, runs it on a clock.

:class:`Simulation` puts the pieces together (docs/architecture.md): the rules
live in :class:`~simfl.sim.world.World`, the server side in a scheduler of
:mod:`simfl.sim.schedulers` chosen once from the algorithm's kind, and when
things happen in :mod:`simfl.sim.clock` (SimPy's clock or the heap clock: the
same rules and order, so the same events and state). State is data: at a checkpoint
instant the whole run is :meth:`Simulation.data` (the
:class:`~simfl.sim.state.SimState` with its pending wake-ups, the algorithm's,
latency model's and failure streams' states and the evaluation cache), and a
Simulation built with ``resume=`` re-schedules the pending wake-ups in their
creation order (so ties resolve identically) and resubmits in-flight training
jobs, whose results depend only on their inputs. A run stopped by its time budget
can also be kept as it stands then (``Checkpointing.at_end``): resumed with a later
``budget.time`` (its stop wake-up moved there), it is the run to that budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from simfl import collector
from simfl.algorithms.base import Algorithm, AsyncAlgorithm
from simfl.errors import InputError
from simfl.latency.availability import Availability
from simfl.latency.base import Latencies
from simfl.sim.checkpoints import Checkpoints
from simfl.sim.clock import ClockKind, Wake
from simfl.sim.phases import Network, Phased
from simfl.sim.population import population_for
from simfl.sim.schedulers import scheduler_for
from simfl.sim.selection import Concurrency
from simfl.sim.state import ClientState, SimState
from simfl.sim.verify import InvariantError, RunStopped, Verifier
from simfl.sim.world import Budget, Checkpointing, Observer, Progress, Watching, World
from simfl.train.evaluate import Scores
from simfl.train.executor import Executor, NullExecutor

__all__ = ["Budget", "Checkpointing", "Concurrency", "Phased", "Progress", "RoundRules", "Simulation"]

_DAMAGE = (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError, AssertionError)


@dataclass(frozen=True)
class RoundRules:
    """Synchronous rounds as deployed systems run them (scenario ``rounds:``); see
    :class:`~simfl.sim.schedulers.SyncRounds`."""

    deadline: float | None = None
    over_select: float = 0.0


class Simulation:
    """One run: ``algorithm`` under ``latency`` with training done by ``executor``; ``observers`` hear the world
    after the verifier and the checkpoints (e.g. a :class:`~simfl.sim.pulse.Pulse`); ``epochs``: ``train.epochs``,
    the epochs of a round, at whose boundaries a rule's recall cuts it (:meth:`~simfl.sim.world.World.recall`;
    None: no round is cut)."""

    def __init__(
        self,
        algorithm: Algorithm[Any],
        latency: Latencies,
        executor: Executor,
        evaluate: Callable[[torch.Tensor], Scores],
        client_sizes: list[int],
        budget: Budget,
        eval_every: float,
        seed: int,
        availability: Availability | None = None,
        server_time: float = 0.0,
        progress: Progress | None = None,
        on_update: Progress | None = None,
        eval_each_update: bool = False,
        rounds: RoundRules | None = None,
        concurrency: Concurrency | None = None,
        verify: bool = False,
        checkpointing: Checkpointing | None = None,
        resume: dict[str, Any] | None = None,
        clock: ClockKind = "simpy",
        observers: Sequence[Observer] = (),
        phased: Phased | None = None,
        epochs: int | None = None,
    ) -> None:
        if budget.time is None and budget.updates is None:
            raise ValueError("a run needs a time or an update budget")
        self.algorithm = algorithm
        self.latency = latency
        self.availability = availability
        self.executor = executor
        self._resumed = resume is not None
        self._at_end = None if checkpointing is None else checkpointing.at_end
        last_eval: tuple[torch.Tensor, Scores] | None = None
        if resume is None:
            with collector.paused():  # a record per client, built at once
                state = SimState([ClientState(m, n) for m, n in enumerate(client_sizes)])
        else:
            try:
                state, last_eval = self._restore(resume, client_sizes, concurrency is not None, budget.time)
            except _DAMAGE as exc:
                raise InputError("checkpoint", f"damaged simulation data ({type(exc).__name__}: "
                                 f"{(str(exc).splitlines() or [''])[0][:120]})") from None
        self.state = state
        self.world = World(
            state, algorithm, latency, executor, evaluate, budget, eval_every, availability,
            Watching(progress, on_update, eval_each_update), self.data, resumed=resume is not None, clock=clock,
            epochs=epochs,
        )
        self.world.recorder.last = last_eval
        if resume is not None and (state.network is None) != (phased is None):
            raise InputError("checkpoint", "its run's rounds and this scenario's differ in phases (network:)")
        if phased is not None:
            self.world.network = Network(self.world, phased, seed)
        rules = rounds or RoundRules()
        population = population_for(self.world, seed, concurrency)
        watchers: list[Observer] = []
        if verify:
            watchers.append(Verifier(population, None if availability is None else availability.present,
                                     phased=phased is not None))
        if checkpointing is not None:
            watchers.append(Checkpoints(checkpointing))
        self.world.attach(scheduler_for(self.world, algorithm, population, server_time, rules.deadline,
                                        rules.over_select), [*watchers, *observers])

    def _restore(self, resume: dict[str, Any], client_sizes: list[int], serving: bool, until: float | None
                 ) -> tuple[SimState, tuple[torch.Tensor, Scores] | None]:
        """Load a checkpoint's simulation data (raises on data that does not fit this simulation). The time budget
        is this run's (``until``): the stop wake-up of a run kept at its end moves there, keeping its creation
        order, as the run never stopped would have it; a checkpoint of the same budget has it there already."""
        state = SimState.from_data(resume["state"])
        if until is not None:
            state.pending = {o: w._replace(time=until) if w.kind == "stop" else w for o, w in state.pending.items()}
        if [c.num_samples for c in state.clients] != list(client_sizes):
            raise ValueError("the checkpoint's clients do not match this federation")
        self.algorithm.load_state(resume["algorithm"])
        if isinstance(self.algorithm, AsyncAlgorithm):
            self.algorithm.load_kept_state(resume.get("kept"))
            if "kept" not in resume and self.algorithm.keeps_client_models and serving:  # saved before the store: idle clients
                for c in state.clients:                                    # held their kept models themselves
                    if c.phase != "round" and c.handle is None and c.start is not None:
                        self.algorithm.keep(c.index, c.start)
                        c.start = None
        self.latency.load_state(resume["latency"])
        if self.availability is not None and resume["availability"] is not None:
            self.availability.load_state(resume["availability"])
        last = resume["last_eval"]
        return state, (None if last is None else (last["weights"], Scores(**last["scores"])))

    def data(self) -> dict[str, Any]:
        """The whole simulation as plain data (at a checkpoint instant: nothing else pending at ``now``)."""
        self._settle()
        last = self.world.recorder.last
        return {
            "state": self.state.to_data(),
            "algorithm": self.algorithm.state(),
            "latency": self.latency.state(),
            "availability": None if self.availability is None else self.availability.state(),
            "last_eval": None if last is None else {"weights": last[0], "scores": dict(vars(last[1]))},
            "kept": self.algorithm.kept_state() if isinstance(self.algorithm, AsyncAlgorithm) else None,
        }

    def run(self) -> SimState:
        """Run until the budget is spent; returns the final state (events and metrics included).

        Raises :class:`~simfl.sim.verify.RunStopped` (with the state so far) when
        ``verify`` is on and an invariant breaks, or when the run cannot make progress
        (:meth:`~simfl.sim.world.World.note`: its final metric row is recorded first).
        """
        world = self.world
        with collector.paused():  # the first rounds of a population, dispatched at once
            if self._resumed:
                try:
                    world.resume()
                except _DAMAGE as exc:
                    raise InputError("checkpoint", f"damaged simulation data ({type(exc).__name__})") from None
            else:
                world.start()
        stop = self._stop_wake() if self._at_end is not None else None
        st = self.state
        # What exists now lives as long as the run: the collector's passes leave it alone; in pure-latency mode
        # the collector is off for the run (simfl/collector.py).
        try:
            with collector.running(pause=isinstance(self.executor, NullExecutor)):
                world.clock.run()
        except InvariantError as exc:
            self._settle()
            self._release()
            raise RunStopped(exc.message, st) from exc
        if self._at_end is not None and stop is not None and stop.order not in world.clock.pending():
            self._at_end(self._kept(stop))  # stopped by its time budget: as it stands, before its last row is settled
        world.recorder.finish(st, self.algorithm.global_weights(), world.clock.now)
        self._settle()
        self._release()
        if world.stalled is not None:
            raise RunStopped(world.stalled, st, cause="no progress")
        return st

    def _stop_wake(self) -> Wake | None:
        """The time budget's pending stop wake-up (None: the run has no time budget)."""
        return next((w for w in self.world.clock.pending().values() if w.kind == "stop"), None)

    def _kept(self, stop: Wake) -> dict[str, Any]:
        """The data of a run its time budget just stopped, the stop wake-up that fired still pending at its time
        (:attr:`~simfl.sim.world.Checkpointing.at_end`): a run resumed from it moves that wake-up to its own budget
        (:meth:`_restore`), so that every later wake-up keeps its creation order."""
        data = self.data()
        rows = [*data["state"]["pending"], (stop.kind, stop.order, stop.time, stop.target)]
        data["state"]["pending"] = sorted(rows, key=lambda row: row[1])
        return data

    def _settle(self) -> None:
        """The state takes what the clock holds while a run goes: the time, the pending wake-ups and their count."""
        clock, st = self.world.clock, self.state
        st.now, st.pending, st.wakes = clock.now, clock.pending(), clock.wakes

    def _release(self) -> None:
        for c in self.state.clients:
            if c.handle is not None:
                self.executor.discard(c.handle)
                c.handle = c.message = None
