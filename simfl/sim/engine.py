"""The simulated world of one (algorithm, seed) run: clients, server, evaluation, stopping.

Semantics (docs/architecture.md): the server keeps an update counter ``t``;
client m remembers ``tau_m``, the value of t when it last talked to the
server; an arrival's staleness is ``s = t - tau_m >= 1`` (1: nothing else
was processed in between; the authors' released code logs ``s - 1``).
A client's training job is submitted to the executor when the client is
dispatched and collected when its arrival is processed, so jobs may run in
parallel in real time while the virtual clock stays exact. Tie order: see
:mod:`simfl.sim.clock`.

State is data: every process keeps what it waits for in :class:`SimState`
(a client's phase and timer, the server's phase, the evaluation index), so at
a checkpoint instant, when every pending event lies in the future, the whole
world is described by plain data. :meth:`Simulation.data` saves it and a
Simulation built with ``resume=`` restarts each waiting process at the same
point, re-creating the pending timers in their original creation order (so
ties resolve identically) and resubmitting in-flight training jobs, whose
results depend only on their inputs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import simpy
import torch

from simfl import rng
from simfl.algorithms.base import Algorithm, Arrival, AsyncAlgorithm, SyncAlgorithm
from simfl.errors import InputError
from simfl.latency.availability import Availability
from simfl.latency.base import LatencyModel
from simfl.sim.clock import ARRIVAL, CHECKPOINT, EVAL, STOP, At, delay_until
from simfl.sim.state import ClientState, Event, EventKind, Metric, SimState, Timer
from simfl.sim.verify import InvariantError, RunStopped, Verifier
from simfl.train.evaluate import Scores
from simfl.train.executor import Executor
from simfl.train.local import Job


@dataclass(frozen=True)
class Budget:
    """When a run stops: a virtual-time budget and/or a number of processed updates."""

    time: float | None = None
    updates: int | None = None


@dataclass(frozen=True)
class RoundRules:
    """Synchronous rounds as deployed systems run them (scenario ``rounds:``).

    ``over_select``: select ``ceil(K * (1 + over_select))`` free clients; the round
    closes as soon as K of them have delivered. ``deadline``: the round closes at
    the latest ``deadline`` seconds after it opened. It also closes once every
    selected client has delivered, failed or left. Updates that come in after the
    round closed are discarded and logged as ``late``; such a client is busy until
    then and is not selected meanwhile.
    """

    deadline: float | None = None
    over_select: float = 0.0


@dataclass(frozen=True)
class Checkpointing:
    """When to hand the simulation's data to ``save``: every N updates and/or every T virtual seconds."""

    save: Callable[[dict[str, Any]], None]
    every_updates: int | None = None
    every_time: float | None = None


Progress = Callable[[SimState], None]


@dataclass
class _Pending:
    """A process to restart on resume, ordered by the creation order of the timer it waits for."""

    order: int
    start: Callable[[], Any] = field(compare=False)


class Simulation:
    """One run: ``algorithm`` under ``latency`` with training done by ``executor``."""

    def __init__(
        self,
        algorithm: Algorithm[Any],
        latency: LatencyModel[Any],
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
        verify: bool = False,
        checkpointing: Checkpointing | None = None,
        resume: dict[str, Any] | None = None,
    ) -> None:
        if budget.time is None and budget.updates is None:
            raise ValueError("a run needs a time or an update budget")
        self.algorithm = algorithm
        self.latency = latency
        self.executor = executor
        self.evaluate = evaluate
        self.budget = budget
        self.eval_every = eval_every
        self.seed = seed
        self.availability = availability
        self.server_time = server_time
        self.progress = progress
        self.on_update = on_update
        self.eval_each_update = eval_each_update
        """Record a metric after every aggregation as well as on the time grid."""
        """Optional observer called after every aggregation (e.g. to record a layer of the global model)."""
        self.rules = rounds or RoundRules()
        self.verifier = Verifier(len(client_sizes)) if verify else None
        self.checkpointing = checkpointing
        self._last_eval: tuple[torch.Tensor, Scores] | None = None
        if resume is None:
            self.state = SimState([ClientState(m, n) for m, n in enumerate(client_sizes)])
            if checkpointing is not None and checkpointing.every_updates is not None:
                self.state.next_checkpoint_update = checkpointing.every_updates
            self.env = simpy.Environment()
        else:
            try:
                self._restore(resume, client_sizes)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as exc:
                raise InputError("checkpoint", f"damaged simulation data ({type(exc).__name__}: "
                                 f"{(str(exc).splitlines() or [''])[0][:120]})") from None
            if self.verifier is not None:
                self.verifier.last_time = self.state.now
        self._resumed = resume is not None
        self.store: simpy.Store = simpy.Store(self.env)
        self.stop = self.env.event()
        self._round_done: simpy.events.Event = self.env.event()
        self._freed: simpy.events.Event = self.env.event()

    def _restore(self, resume: dict[str, Any], client_sizes: Sequence[int]) -> None:
        """Load a checkpoint's simulation data (raises on data that does not fit this simulation)."""
        self.state = SimState.from_data(resume["state"])
        if [c.num_samples for c in self.state.clients] != list(client_sizes):
            raise ValueError("the checkpoint's clients do not match this federation")
        self.algorithm.load_state(resume["algorithm"])
        self.latency.load_state(resume["latency"])
        if self.availability is not None and resume["availability"] is not None:
            self.availability.load_state(resume["availability"])
        last = resume["last_eval"]
        if last is not None:
            self._last_eval = (last["weights"], Scores(**last["scores"]))
        self.env = simpy.Environment(initial_time=self.state.now)

    # -- state as data -----------------------------------------------------------

    def data(self) -> dict[str, Any]:
        """The whole simulation as plain data (at a checkpoint instant: nothing pending at ``now``)."""
        self.state.now = self.env.now
        self.state.queue = [int(i) for i in self.store.items]
        last = self._last_eval
        return {
            "state": self.state.to_data(),
            "algorithm": self.algorithm.state(),
            "latency": self.latency.state(),
            "availability": None if self.availability is None else self.availability.state(),
            "last_eval": None if last is None else {"weights": last[0], "scores": dict(vars(last[1]))},
        }

    # -- running -------------------------------------------------------------

    def run(self) -> SimState:
        """Run until the budget is spent; returns the final state (events and metrics included).

        Raises :class:`~simfl.sim.verify.RunStopped` (with the state so far) when
        ``verify`` is on and an invariant breaks.
        """
        if self._resumed:
            try:
                self._rebuild()
            except (KeyError, TypeError, ValueError, IndexError, AttributeError, AssertionError) as exc:
                raise InputError("checkpoint", f"damaged simulation data ({type(exc).__name__})") from None
        else:
            self._start()
        try:
            self.env.run(until=self.stop)
        except InvariantError as exc:
            self.state.now = self.env.now
            self._release()
            raise RunStopped(exc.message, self.state) from exc
        self.state.now = self.env.now
        self.state.stopped = True
        if not self.state.metrics or self.state.metrics[-1].virtual_time != self.env.now:
            self._record_metric(self.env.now)
        elif self.progress is not None:
            self.progress(self.state)
        self._release()
        return self.state

    def _release(self) -> None:
        for c in self.state.clients:
            if c.handle is not None:
                self.executor.discard(c.handle)
                c.handle = None

    def _start(self) -> None:
        """A fresh world at time 0."""
        env = self.env
        for c in self.state.clients:
            if self.availability is not None and not self.availability.present(c.index, 0.0):
                self._leave_until_back(c)
        if isinstance(self.algorithm, AsyncAlgorithm):
            for c in self.state.clients:
                if c.active:
                    self.dispatch(c, self.algorithm.initial_weights(c.index))
            env.process(self._server())
        elif isinstance(self.algorithm, SyncAlgorithm):
            self.state.server_phase = "open"
            env.process(self._rounds(select=True))
        else:  # pragma: no cover - the registry only holds the two kinds
            raise TypeError(f"unknown algorithm kind {type(self.algorithm).__name__}")
        env.process(self._evaluation())
        if self.budget.time is not None:
            env.process(self._time_limit())
        if self.checkpointing is not None and self.checkpointing.every_time is not None:
            env.process(self._timed_checkpoints())

    def _rebuild(self) -> None:
        """Restart every waiting process of a checkpointed world, timers in their original creation order."""
        st = self.state
        env = self.env
        sync = isinstance(self.algorithm, SyncAlgorithm)
        for c in sorted(st.clients, key=lambda c: c.seq):
            if c.handle is not None:
                assert c.start is not None
                c.handle = self.executor.submit(Job(c.index, c.rounds - 1, c.start, self.algorithm.local_options()))
        pending: list[_Pending] = []
        untimed: list[Callable[[], Any]] = []
        waits = {"round": self._round_trip, "rejoin": self._rejoin, "absent": self._come_back}
        for c in st.clients:
            if c.phase in waits:
                pending.append(_Pending(c.timer.order, functools.partial(env.process, waits[c.phase](c))))
        if not sync:
            self.store.items.extend(st.queue)
            if st.server_phase == "busy":
                pending.append(_Pending(st.server_timer.order, lambda: env.process(self._server(busy=True))))
            else:
                untimed.append(lambda: env.process(self._server()))
        elif st.server_phase == "server":
            pending.append(_Pending(st.server_timer.order, lambda: env.process(self._rounds(after_aggregation=True))))
        elif st.server_phase == "open" and self.rules.deadline is not None:
            pending.append(_Pending(st.round_timer.order, lambda: env.process(self._rounds())))
        else:
            untimed.append(lambda: env.process(self._rounds()))
        pending.append(_Pending(st.eval_timer.order, lambda: env.process(self._evaluation(resume=True))))
        if self.budget.time is not None:
            pending.append(_Pending(st.stop_timer.order, lambda: env.process(self._time_limit())))
        if self.checkpointing is not None and self.checkpointing.every_time is not None:
            pending.append(_Pending(st.checkpoint_timer.order, lambda: env.process(self._timed_checkpoints(resume=True))))
        for start in untimed:
            start()
        for p in sorted(pending, key=lambda p: p.order):
            p.start()

    def _sleep(self, timer: Timer, wake: float, priority: int = ARRIVAL) -> simpy.events.Event:
        """Wait until the absolute virtual time ``wake``, recording the wait in ``timer``."""
        timer.wake = wake
        timer.order = self.state.timers
        self.state.timers += 1
        return At(self.env, delay_until(self.env.now, wake), priority)

    def _time_limit(self) -> Generator[simpy.events.Event, Any, None]:
        assert self.budget.time is not None
        yield self._sleep(self.state.stop_timer, self.budget.time, STOP)
        if not self.stop.triggered:
            self.stop.succeed()

    def _finish_if_done(self) -> bool:
        limit = self.budget.updates
        if limit is not None and self.state.updates >= limit and not self.stop.triggered:
            self.stop.succeed()
        return self.stop.triggered

    # -- checkpoints -------------------------------------------------------------

    def _timed_checkpoints(self, resume: bool = False) -> Generator[simpy.events.Event, Any, None]:
        """Save at k * interval, after everything else at that instant."""
        assert self.checkpointing is not None and self.checkpointing.every_time is not None
        st = self.state
        while True:
            if resume and st.checkpoint_timer.wake is not None:
                wake = st.checkpoint_timer.wake
            else:
                wake = st.checkpoint_index * self.checkpointing.every_time
            resume = False
            yield self._sleep(st.checkpoint_timer, wake, CHECKPOINT)
            st.checkpoint_index += 1
            self.checkpointing.save(self.data())

    def _count_update(self) -> None:
        """After each processed update: ask for an update-based checkpoint when one is due."""
        ck = self.checkpointing
        st = self.state
        if ck is None or ck.every_updates is None or st.updates < st.next_checkpoint_update:
            return
        while st.next_checkpoint_update <= st.updates:
            st.next_checkpoint_update += ck.every_updates
        self.env.process(self._checkpoint_now())

    def _checkpoint_now(self) -> Generator[simpy.events.Event, Any, None]:
        yield At(self.env, 0.0, CHECKPOINT)
        assert self.checkpointing is not None
        if not self.stop.triggered:
            self.checkpointing.save(self.data())

    # -- clients ---------------------------------------------------------------

    def dispatch(self, client: ClientState, weights: torch.Tensor) -> None:
        """Start a round of ``client`` from ``weights`` now."""
        st = self.state
        if self.verifier is not None:
            self.verifier.dispatch(client, self.env.now, st.in_flight())
        client.start = weights
        client.dispatch_time = self.env.now
        client.latency = self.latency.sample(client.index)
        client.fails = self.availability is not None and self.availability.fails(client.index)
        client.handle = None if client.fails else self.executor.submit(
            Job(client.index, client.rounds, weights, self.algorithm.local_options()), due=client.arrival_time
        )
        client.rounds += 1
        client.seq = st.seq
        client.phase = "round"
        client.outcome = None
        st.seq += 1
        self.env.process(self._round_trip(client))

    def _round_trip(self, client: ClientState) -> Generator[simpy.events.Event, Any, None]:
        """The client's round: wait its latency, then deliver, fail or be lost to a departure."""
        leave = None if self.availability is None else self.availability.next_leave(client.index, client.dispatch_time)
        if leave is not None and leave <= client.arrival_time:
            yield self._sleep(client.timer, leave)
            self._note(client, "leave")
            if client.handle is not None:
                self.executor.discard(client.handle)
                client.handle = None
            client.fails = False
            client.outcome = False
            self._leave_until_back(client)
            self._round_progress(client)
            return
        yield self._sleep(client.timer, client.arrival_time)
        if self.verifier is not None:
            self.verifier.delivery(client, self.env.now)
        if client.fails:
            self._note(client, "failure")
            client.fails = False
            client.outcome = False
            if isinstance(self.algorithm, AsyncAlgorithm):
                assert self.availability is not None
                client.phase = "rejoin"
                self.env.process(self._rejoin(client, self.env.now + self.availability.rejoin_delay))
            else:
                client.phase = "idle"
                self._round_progress(client)
            return
        client.phase = "idle"
        if isinstance(self.algorithm, AsyncAlgorithm):
            yield self.store.put(client.index)
        else:
            client.outcome = True
            self._round_progress(client)

    def _note(self, client: ClientState, kind: EventKind) -> None:
        """Log a failure, departure, late update or return of ``client`` now (no update, no staleness)."""
        timed = kind in ("failure", "leave", "late")
        self.state.events.append(
            Event(self.env.now, None, client.index, None, client.latency if timed else None,
                  client.dispatch_time if timed else None, None, kind)
        )

    def _rejoin(self, client: ClientState, wake: float | None = None) -> Generator[simpy.events.Event, Any, None]:
        """After a failed async round: wait the rejoin delay, then restart from the same weights."""
        assert self.availability is not None
        wake = client.timer.wake if wake is None else wake
        assert wake is not None
        yield self._sleep(client.timer, wake)
        if self.stop.triggered or client.start is None:
            return
        client.phase = "idle"
        if self.availability.present(client.index, self.env.now):
            self.dispatch(client, client.start)
        else:
            self._leave_until_back(client)

    def _leave_until_back(self, client: ClientState) -> None:
        """Mark ``client`` away and start waiting for its return (if it ever comes back)."""
        assert self.availability is not None
        client.active = False
        back = self.availability.back_at(client.index, self.env.now)
        if back is None:
            client.phase = "gone"
            self._check_starved()
            return
        client.phase = "absent"
        client.timer.wake = back
        self.env.process(self._come_back(client))

    def _come_back(self, client: ClientState) -> Generator[simpy.events.Event, Any, None]:
        """A departed client returns when its absence ends; async clients restart at once.

        A returning client restarts from the weights of the round it lost; a client absent
        from time 0 joins now: it gets the algorithm's :meth:`~AsyncAlgorithm.on_join` weights
        and its staleness counts from the current update (``tau`` = updates so far).
        """
        assert client.timer.wake is not None
        yield self._sleep(client.timer, client.timer.wake)
        if self.stop.triggered:
            return
        client.active = True
        client.phase = "idle"
        self._note(client, "join")
        if isinstance(self.algorithm, AsyncAlgorithm):
            if client.start is None:
                client.tau = self.state.updates
                self.dispatch(client, self.algorithm.on_join(client.index))
            else:
                self.dispatch(client, client.start)
        else:
            self._free()

    def _check_starved(self) -> None:
        """Stop an update-budget run when no client can ever deliver again (every one has left for good).

        With a time budget the run goes on to its end, evaluating the unchanged model on the grid.
        """
        if self.budget.time is None and all(c.phase == "gone" for c in self.state.clients) and not self.stop.triggered:
            self.stop.succeed()

    def _arrival(self, client: ClientState, staleness: int) -> Arrival:
        """Count the arrival of ``client`` (t += 1) and collect its trained weights."""
        st = self.state
        st.updates += 1
        assert client.handle is not None and client.start is not None
        weights = self.executor.collect(client.handle)
        client.handle = None
        if self.verifier is not None:
            self.verifier.arrival(client, staleness, st.updates, weights)
        return Arrival(client.index, weights, client.start, staleness, st.updates, client.num_samples)

    def _log(self, client: ClientState, arrival: Arrival, weight: float | None) -> None:
        self.state.events.append(
            Event(self.env.now, arrival.update, client.index, arrival.staleness, client.latency,
                  client.dispatch_time, weight)
        )

    # -- server ----------------------------------------------------------------

    def _server(self, busy: bool = False) -> Generator[simpy.events.Event, Any, None]:
        """Async server: take each arrival, aggregate it, re-dispatch its client at once."""
        assert isinstance(self.algorithm, AsyncAlgorithm)
        st = self.state
        while True:
            if not busy:
                st.server_phase = "wait"
                index = yield self.store.get()
                client = st.clients[index]
                arrival = self._arrival(client, st.updates + 1 - client.tau)
                weights, weight = self.algorithm.on_arrival(arrival)
                if self.verifier is not None:
                    self.verifier.time(self.env.now)
                    self.verifier.global_weights(self.algorithm.global_weights(), arrival.update, client.index)
                client.tau = arrival.update
                self._log(client, arrival, weight)
                self._aggregated()
                if self._finish_if_done():
                    return
                self._count_update()
                if self.server_time <= 0:
                    self.dispatch(client, weights)
                    continue
                st.server_phase = "busy"
                st.server_client = client.index
                st.server_weights = weights
                wake = self.env.now + self.server_time
            else:
                assert st.server_timer.wake is not None
                wake = st.server_timer.wake
            busy = False
            yield self._sleep(st.server_timer, wake)
            assert st.server_client is not None and st.server_weights is not None
            client, weights = st.clients[st.server_client], st.server_weights
            st.server_client, st.server_weights = None, None
            st.server_phase = "wait"
            self.dispatch(client, weights)

    def _free(self) -> None:
        """A client became selectable: wake a round process waiting for one."""
        if not self._freed.triggered:
            self._freed.succeed()

    def _round_progress(self, client: ClientState) -> None:
        """Sync: ``client``'s round ended; close the open round when enough have delivered or all ended.

        A client outside the open round was a straggler of a closed round: its update is
        discarded (logged ``late``) and it becomes selectable again.
        """
        if not isinstance(self.algorithm, SyncAlgorithm):
            return
        st = self.state
        if client.index not in st.round_members or st.server_phase != "open":
            if client.outcome and client.phase == "idle":
                self._note(client, "late")
            client.outcome = None
            self._free()
            return
        members = [st.clients[i] for i in st.round_members]
        delivered = sum(1 for c in members if c.outcome)
        needed = min(self.algorithm.clients_per_round, len(members))
        if (delivered >= needed or all(c.phase != "round" for c in members)) and not self._round_done.triggered:
            self._round_done.succeed()

    def _rounds(self, select: bool = False, after_aggregation: bool = False) -> Generator[simpy.events.Event, Any, None]:
        """Synchronous rounds: select clients, send all the same weights, wait, aggregate the round."""
        assert isinstance(self.algorithm, SyncAlgorithm)
        st = self.state
        k = self.algorithm.clients_per_round
        if after_aggregation:
            assert st.server_timer.wake is not None
            yield self._sleep(st.server_timer, st.server_timer.wake)
            select = True
        elif st.server_phase == "starved":
            yield from self._wait_for_a_client()
            select = True
        while True:
            if select:
                free = [c for c in st.clients if c.active and c.phase == "idle"]
                if not free:
                    yield from self._wait_for_a_client()
                    continue
                st.server_phase = "open"
                weights = self.algorithm.round_weights()
                draw = rng.stream(self.seed, "sampling", st.rounds)
                size = min(math.ceil(k * (1.0 + self.rules.over_select)), len(free))
                chosen = draw.choice(len(free), size=size, replace=False)
                clients = [free[int(i)] for i in sorted(chosen)]
                st.round_members = [c.index for c in clients]
                self._round_done = self.env.event()
                deadline = None if self.rules.deadline is None else self.env.now + self.rules.deadline
                for c in clients:
                    self.dispatch(c, weights)
            else:  # resuming an open round
                self._round_done = self.env.event()
                deadline = st.round_timer.wake if self.rules.deadline is not None else None
            select = True
            if deadline is None:
                yield self._round_done
            else:
                yield self.env.any_of([self._round_done, self._sleep(st.round_timer, deadline)])
            members = [st.clients[i] for i in st.round_members]
            delivered = sorted((c for c in members if c.outcome), key=lambda c: (c.arrival_time, c.seq))
            st.server_phase = "server"
            st.round_members = []
            for c in members:
                if c.phase == "round" and c.handle is not None:  # a straggler: its update will be late
                    self.executor.discard(c.handle)
                    c.handle = None
            arrivals = []
            for c in delivered:
                c.outcome = None
                arrival = self._arrival(c, 1)
                c.tau = arrival.update
                self.state.events.append(
                    Event(c.arrival_time, arrival.update, c.index, 1, c.latency, c.dispatch_time, None)
                )
                arrivals.append(arrival)
            if arrivals:
                self.algorithm.aggregate(arrivals)
                self._aggregated()
                if self.verifier is not None:
                    self.verifier.global_weights(self.algorithm.global_weights(), st.updates, None)
            st.rounds += 1
            if self._finish_if_done():
                return
            if arrivals:
                self._count_update()
            if self.server_time > 0:
                yield self._sleep(st.server_timer, self.env.now + self.server_time)

    def _wait_for_a_client(self) -> Generator[simpy.events.Event, Any, None]:
        """Idle until some client is free again (a return or a straggler's end)."""
        st = self.state
        st.server_phase = "starved"
        if self._freed.triggered:
            self._freed = self.env.event()
        if self.budget.time is None and all(c.phase == "gone" for c in st.clients):
            self._check_starved()
            yield self.stop
            return
        yield self._freed
        self._freed = self.env.event()
        yield self.env.timeout(0)  # let every client freed at this instant take part

    # -- evaluation ------------------------------------------------------------

    def _evaluation(self, resume: bool = False) -> Generator[simpy.events.Event, Any, None]:
        """Evaluate the global model at 0, every, 2*every, ... (after the arrivals at that instant)."""
        st = self.state
        while True:
            if resume and st.eval_timer.wake is not None:
                wake = st.eval_timer.wake
            else:
                wake = self.env.now + max(st.eval_index * self.eval_every - self.env.now, 0.0)
            resume = False
            yield self._sleep(st.eval_timer, wake, EVAL)
            self._record_metric(st.eval_index * self.eval_every)
            st.eval_index += 1

    def _aggregated(self) -> None:
        """After every aggregation: the per-update evaluation (if asked for) and the observer."""
        if self.eval_each_update:
            self._record_metric(self.env.now)
        if self.on_update is not None:
            self.on_update(self.state)

    def _record_metric(self, time: float) -> None:
        self.state.now = self.env.now
        if self.verifier is not None:
            self.verifier.time(self.env.now)
        weights = self.algorithm.global_weights()
        cached = self._last_eval
        if cached is not None and torch.equal(cached[0], weights):
            scores = cached[1]
        else:
            scores = self.evaluate(weights)
            self._last_eval = (weights.clone(), scores)
        extra = {k: float(v) for k, v in vars(scores).items() if k not in ("accuracy", "loss")}
        self.state.metrics.append(Metric(time, self.state.updates, scores.accuracy, scores.loss, extra))
        if self.progress is not None:
            self.progress(self.state)
