"""A heap-based event loop for pure-latency runs, equal event for event to the SimPy engine.

In pure-latency mode (``executor: {kind: none}``) training and evaluation
cost next to nothing, so the SimPy engine's events per arrival (the round's
end and the zero-time hand-off steps to the server) dominate the run. This
loop keeps one heap entry per in-flight client instead and reproduces
:class:`simfl.sim.engine.Simulation` exactly, tie order included
(:mod:`simfl.sim.clock`): at one instant, arrivals (or a synchronous round's
end) are processed first, in dispatch order, then the evaluation, then the
time budget. It shares the evaluation grid, the metric rows and the end of a
run (:mod:`simfl.sim.evaluation`) and round sampling
(:func:`simfl.sim.schedulers.sample_round`) with the world, and uses the same
counters, streams and executor calls in the same order, so the state, event
trace and metrics are identical (``tests/perf/test_fast_loop.py`` checks this
on random scenarios). Why it is kept beside the engine: benchmarks/README.md.

It covers runs without availability (failures, departures), server time, round
rules, recording, per-update evaluation, verification or checkpoints, and serves
a population (``server:``, :mod:`simfl.sim.selection`) for asynchronous algorithms;
:func:`simfl.launch.experiment.fast_unsupported` lists what a run uses beyond that, and
asking for this loop then is refused in one line (docs/architecture.md).
"""

from __future__ import annotations

import gc
import heapq
import math
from collections.abc import Callable
from typing import Any

import torch

from simfl.algorithms.base import Algorithm, Arrival, AsyncAlgorithm, SyncAlgorithm
from simfl.latency.availability import Availability
from simfl.latency.base import LatencyModel
from simfl.sim.evaluation import Recorder, next_grid_time
from simfl.sim.schedulers import release as release_client
from simfl.sim.schedulers import sample_round, sampled_start
from simfl.sim.selection import Concurrency, Draws, Pool
from simfl.sim.state import ClientState, Event, SimState
from simfl.sim.world import Budget, Progress
from simfl.train.evaluate import Scores
from simfl.train.executor import Executor, NullExecutor
from simfl.train.local import Job


def supports(availability: Availability | None, server_time: float) -> bool:
    """Whether :class:`FastSimulation` can run a run with these settings."""
    return availability is None and server_time == 0


class FastSimulation:
    """Drop-in replacement for :class:`~simfl.sim.engine.Simulation` on runs :func:`supports` accepts."""

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
        concurrency: Concurrency | None = None,
    ) -> None:
        if budget.time is None and budget.updates is None:
            raise ValueError("a run needs a time or an update budget")
        if not supports(availability, server_time):
            raise ValueError("the fast loop runs only without availability and with zero server time")
        self.algorithm = algorithm
        self.latency = latency
        self.executor = executor
        self.budget = budget
        self.eval_every = eval_every
        self.seed = seed
        if concurrency is not None and not isinstance(algorithm, AsyncAlgorithm):
            raise ValueError("the fast loop serves a population (server.concurrency) only for asynchronous algorithms")
        self.concurrency = concurrency
        self.state = SimState([ClientState(m, n) for m, n in enumerate(client_sizes)])
        self.pool: Pool | None = None
        """Cross-device serving: the selectable clients, all of them at the start (built here, with the rest of
        the setup: its first use in a process also loads its compiled walks)."""
        if concurrency is not None:
            self.pool = Pool.of(concurrency.selection, list(client_sizes))
            self.pool.add_all(list(range(len(client_sizes))))
        self.now: float = 0  # an int, as SimPy's clock starts: dispatch times at 0 print as "0" in events.csv
        self.recorder = Recorder(evaluate, progress)

    def run(self) -> SimState:
        """Run until the budget is spent; returns the final state (events and metrics included).

        In pure-latency mode the cyclic garbage collector is paused for the
        loop: the loop makes no reference cycles, and with hundreds of
        thousands of live event rows its full collections took a fifth of
        the run. Reference counting still frees everything as usual.
        """
        pause_gc = isinstance(self.executor, NullExecutor) and gc.isenabled()
        if pause_gc:
            gc.disable()
        try:
            if isinstance(self.algorithm, AsyncAlgorithm):
                self._run_async(self.algorithm)
            elif isinstance(self.algorithm, SyncAlgorithm):
                self._run_sync(self.algorithm)
            else:  # pragma: no cover - the registry only holds the two kinds
                raise TypeError(f"unknown algorithm kind {type(self.algorithm).__name__}")
        finally:
            if pause_gc:
                gc.enable()
        st = self.state
        self.recorder.finish(st, self.algorithm.global_weights(), self.now)
        for c in st.clients:
            if c.handle is not None:
                self.executor.discard(c.handle)
                c.handle = c.message = None
        return st

    # -- the two loops ---------------------------------------------------------

    def _run_async(self, algorithm: AsyncAlgorithm[Any]) -> None:
        st = self.state
        clients = st.clients
        heap: list[tuple[float, int, int]] = []
        release: Callable[[ClientState, torch.Tensor], None] | None = None
        if self.concurrency is not None:
            release, send_next = self._serving(algorithm, self.concurrency, heap)
        else:
            for c in clients:
                heapq.heappush(heap, self._dispatch(c, algorithm.initial_weights(c.index)))

            def send_next(client: ClientState, new: torch.Tensor) -> None:
                heapq.heappush(heap, self._dispatch(client, new))

        limit = math.inf if self.budget.time is None else self.budget.time
        updates_limit = self.budget.updates
        executor, events, on_arrival = self.executor, st.events, algorithm.on_arrival
        eval_i, eval_at = 0, 0.0
        while True:
            arrival_at = heap[0][0] if heap else math.inf
            if arrival_at <= eval_at and arrival_at <= limit:
                _, _, index = heapq.heappop(heap)
                self.now = arrival_at
                client = clients[index]
                st.updates += 1
                handle, start = client.handle, client.start
                assert handle is not None and start is not None
                reply = executor.collect(handle)
                client.handle = client.message = None
                arrival = Arrival(index, reply.weights, start, st.updates - client.tau, st.updates, client.num_samples,
                                  reply.arrays, reply.metrics)
                new, weight = on_arrival(arrival)
                client.tau = arrival.update
                events.append(Event(arrival_at, arrival.update, index, arrival.staleness, client.latency,
                                    client.dispatch_time, weight))
                if release is not None:
                    release(client, new)
                if updates_limit is not None and st.updates >= updates_limit:
                    return
                send_next(client, new)
            elif eval_at <= limit:
                eval_i, eval_at = self._evaluation_step(eval_i, eval_at)
            else:
                self.now = limit
                return

    def _serving(self, algorithm: AsyncAlgorithm[Any], concurrency: Concurrency, heap: list[tuple[float, int, int]]
                 ) -> tuple[Callable[[ClientState, torch.Tensor], None], Callable[[ClientState, torch.Tensor], None]]:
        """Cross-device serving (:class:`simfl.sim.schedulers.AsyncServer` with a concurrency limit): dispatch C
        drawn clients now; returns what follows an aggregation (the client keeps its model) and what follows
        it unless the budget is spent (the client is selectable again, and one more is drawn and dispatched:
        one call to the pool, which nothing reads in between). No absences here, so every draw is kept."""
        st = self.state
        clients = st.clients
        pool = self.pool
        assert pool is not None
        draws = Draws(self.seed).following(st.selections)  # each draw is kept: st.selections counts them
        swap, dispatch, push = pool.swap, self._dispatch, heapq.heappush

        def release(client: ClientState, new: torch.Tensor) -> None:
            release_client(algorithm, client, new)

        def send_next(client: ClientState, new: torch.Tensor) -> None:
            drawn = clients[swap(client.index, next(draws))]
            st.selections += 1
            push(heap, dispatch(drawn, sampled_start(algorithm, drawn, st.updates)))

        for _ in range(min(concurrency.limit, len(clients))):
            drawn = clients[pool.take(next(draws))]
            st.selections += 1
            push(heap, dispatch(drawn, sampled_start(algorithm, drawn, st.updates)))
        return release, send_next

    def _run_sync(self, algorithm: SyncAlgorithm[Any]) -> None:
        st = self.state
        k = algorithm.clients_per_round
        limit = math.inf if self.budget.time is None else self.budget.time
        eval_i, eval_at = 0, 0.0
        chosen_clients = self._start_round(algorithm, k)
        end = max(c.arrival_time for c in chosen_clients)
        while True:
            if end <= eval_at and end <= limit:
                self.now = end
                delivered = sorted(chosen_clients, key=lambda c: (c.arrival_time, c.seq))
                arrivals = []
                for c in delivered:
                    st.updates += 1
                    assert c.handle is not None and c.start is not None
                    reply = self.executor.collect(c.handle)
                    c.handle = c.message = None
                    arrival = Arrival(c.index, reply.weights, c.start, 1, st.updates, c.num_samples, reply.arrays,
                                      reply.metrics)
                    c.tau = arrival.update
                    st.events.append(Event(c.arrival_time, arrival.update, c.index, 1, c.latency,
                                           c.dispatch_time, None))
                    arrivals.append(arrival)
                algorithm.aggregate(arrivals)
                st.rounds += 1
                if self.budget.updates is not None and st.updates >= self.budget.updates:
                    return
                chosen_clients = self._start_round(algorithm, k)
                end = max(c.arrival_time for c in chosen_clients)
            elif eval_at <= limit:
                eval_i, eval_at = self._evaluation_step(eval_i, eval_at)
            else:
                self.now = limit
                return

    # -- pieces ------------------------------------------------------------------

    def _start_round(self, algorithm: SyncAlgorithm[Any], k: int) -> list[ClientState]:
        """Sample the round's clients from stream (seed, "sampling", round) and dispatch them now."""
        weights = algorithm.round_weights()
        clients = sample_round(self.seed, self.state.rounds, self.state.clients, k)
        for c in clients:
            self._dispatch(c, weights)
        return clients

    def _dispatch(self, client: ClientState, weights: torch.Tensor) -> tuple[float, int, int]:
        """Start a round of ``client`` now; returns its heap entry (arrival time, dispatch order, client)."""
        st, now, index, rounds = self.state, self.now, client.index, client.rounds
        latency = self.latency.sample(index)
        message = self.algorithm.message(index, rounds)
        client.start, client.dispatch_time, client.latency, client.fails, client.message = weights, now, latency, False, message
        client.handle = self.executor.submit(Job(index, rounds, weights, message), due=now + latency)
        client.rounds = rounds + 1
        client.seq = seq = st.seq
        st.seq = seq + 1
        return (now + latency, seq, index)

    def _evaluation_step(self, i: int, at: float) -> tuple[int, float]:
        """Evaluate at grid point ``i`` (reached at ``at``); the next point, stepped as the world's handler does."""
        self.now = at
        self.recorder.record(self.state, self.algorithm.global_weights(), i * self.eval_every, at)
        return i + 1, next_grid_time(at, i + 1, self.eval_every)
