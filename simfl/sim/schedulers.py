"""The server side of a run: an asynchronous server or synchronous rounds, chosen once per run.

A scheduler decides what the server does with the rounds the
:class:`~simfl.sim.world.World` delivers: :class:`AsyncServer` aggregates each
arrival as it comes and re-dispatches its client; :class:`SyncRounds` selects
clients, sends them the same weights and aggregates the round when it closes.
:func:`scheduler_for` picks one from the algorithm's kind; nothing else in
:mod:`simfl.sim` asks which kind of algorithm runs.

Hand-offs at one instant take zero-time steps (:meth:`~simfl.sim.clock.Clock.soon`),
which fixes the order against the other wake-ups due at that instant
(docs/architecture.md, "Tie order"): a delivery reaches a waiting async server
two steps after it lands (one when the server is busy and takes the next queued
arrival), a synchronous round closes one step after its deadline or after the
delivery that completes it (two when a deadline is set), and a starved round
selects two steps after a client became free. Everything these steps carry is
transient within one instant; what lasts (queue, phase, round members) is in
:class:`~simfl.sim.state.SimState`.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import torch

from simfl import rng
from simfl.algorithms.base import Algorithm, AsyncAlgorithm, SyncAlgorithm
from simfl.sim.clock import Wake
from simfl.sim.selection import Concurrency, Draws, Pool
from simfl.sim.server import Scheduler
from simfl.sim.state import ClientState, Event
from simfl.sim.world import World


def scheduler_for(world: World, algorithm: Algorithm[Any], seed: int, server_time: float,
                  deadline: float | None, over_select: float, concurrency: Concurrency | None = None) -> Scheduler:
    """The scheduler of ``algorithm``'s kind (``concurrency``: cross-device serving, :mod:`simfl.sim.selection`)."""
    if isinstance(algorithm, AsyncAlgorithm):
        return AsyncServer(world, algorithm, seed, server_time, concurrency)
    if isinstance(algorithm, SyncAlgorithm):
        return SyncRounds(world, algorithm, seed, server_time, deadline, over_select, concurrency)
    raise TypeError(f"unknown algorithm kind {type(algorithm).__name__}")  # pragma: no cover


def sample_round(seed: int, round_index: int, free: list[ClientState], k: int, over_select: float = 0.0
                 ) -> list[ClientState]:
    """The clients of a round: ``ceil(k * (1 + over_select))`` of ``free`` drawn from (seed, "sampling", round)."""
    draw = rng.stream(seed, "sampling", round_index)
    size = min(math.ceil(k * (1.0 + over_select)), len(free))
    chosen = draw.choice(len(free), size=size, replace=False)
    return [free[int(i)] for i in sorted(chosen)]


def sampled_start(algorithm: AsyncAlgorithm[Any], client: ClientState, updates: int) -> torch.Tensor:
    """The weights a sampled client trains from: its kept model (the algorithm keeps client models and it
    has one), else the server's current weights (:meth:`~AsyncAlgorithm.on_join`), its ``tau`` then ``updates``."""
    kept = algorithm.kept(client.index) if algorithm.keeps_client_models else None
    if kept is not None:
        return kept
    client.tau = updates
    return algorithm.on_join(client.index)


def release(algorithm: AsyncAlgorithm[Any], client: ClientState, weights: torch.Tensor | None) -> None:
    """Cross-device serving: ``client`` goes idle; the algorithm keeps ``weights`` as its model if it keeps
    client models (:meth:`~AsyncAlgorithm.keep`), and nothing of the round stays in the client's state."""
    if algorithm.keeps_client_models and weights is not None:
        algorithm.keep(client.index, weights)
    client.start = None


class Sampler:
    """Cross-device serving's draws for one run: the pool of idle, present clients and the selection stream.

    The pool holds every active client that is idle and not waiting for the server
    (:mod:`simfl.sim.selection`); it is rebuilt from the clients' phases on resume. A drawn
    client found absent (its presence window ended while it was idle) leaves until its
    return and the draw is repeated: absence is checked when it matters, at no cost per
    idle client.
    """

    def __init__(self, world: World, seed: int, concurrency: Concurrency) -> None:
        self.world = world
        self.limit = concurrency.limit
        st = world.state
        self.pool = Pool.of(concurrency.selection, [c.num_samples for c in st.clients])
        self.draws = Draws(seed)
        waiting = set(st.queue) | set(st.round_members)
        self.pool.add_all([c.index for c in st.clients if c.active and c.phase == "idle" and c.index not in waiting])

    def draw(self, back: int | None = None) -> ClientState | None:
        """A present client drawn from the pool and taken out of it; None when the pool is empty.

        ``back``: a client made selectable just before the first draw (an arrival's client; in one call).
        """
        w = self.world
        st = w.state
        pool = self.pool
        while back is not None or pool.count:
            u = self.draws(st.selections)
            index = pool.take(u) if back is None else pool.swap(back, u)
            back = None
            st.selections += 1
            client = st.clients[index]
            if not w.away(client):
                return client
        return None


class AsyncServer:
    """Takes each arrival in turn, aggregates it, and re-dispatches its client (after ``server_time``).

    With ``concurrency`` (scenario ``server:``) it serves a population instead, by FedBuff's
    protocol (:mod:`simfl.sim.selection`): at time 0 it samples C clients from the idle,
    present ones; after each aggregation (and ``server_time``), and whenever a round fails or
    is lost to a departure, it samples one more, so that at most C train at once; a client
    back from an absence or from a failure's rejoin delay becomes selectable. A sampled
    client trains from its own kept model if the algorithm has one for it
    (:attr:`~simfl.algorithms.base.AsyncAlgorithm.keeps_client_models`), else from
    :meth:`~simfl.algorithms.base.AsyncAlgorithm.on_join`'s weights, its staleness then
    counted from now.
    """

    def __init__(self, world: World, algorithm: AsyncAlgorithm[Any], seed: int, server_time: float,
                 concurrency: Concurrency | None = None) -> None:
        self.world = world
        self.algorithm = algorithm
        self.server_time = server_time
        self.seed = seed
        self.concurrency = concurrency
        self.sampler: Sampler | None = None
        self.running = 0
        """Cross-device serving: slots in use (rounds under way, deliveries waiting for the server)."""
        self.waiting = False
        """The server is idle, waiting for the next delivery."""

    def start(self) -> None:
        w = self.world
        if self.concurrency is not None:
            self.sampler = Sampler(w, self.seed, self.concurrency)
            self._fill()
        else:
            for c in w.state.clients:
                if c.active:
                    w.dispatch(c, self.algorithm.initial_weights(c.index))
        self._next()

    def resume(self) -> None:
        st = self.world.state
        if self.concurrency is not None:
            self.sampler = Sampler(self.world, self.seed, self.concurrency)
            self.running = st.in_flight() + len(st.queue)
        if st.server_phase == "wait":
            self._next()

    # -- cross-device serving ---------------------------------------------------------

    def _fill(self, back: int | None = None) -> None:
        """Dispatch sampled clients while fewer than C train (the busy server holds one slot); ``back``, the
        client of the arrival just taken, becomes selectable first."""
        sampler = self.sampler
        assert sampler is not None
        st = self.world.state
        while self.running + (st.server_phase == "busy") < sampler.limit:
            client = sampler.draw(back)
            back = None
            if client is None:
                return
            self._send(client)
        if back is not None:
            sampler.pool.add(back)

    def _send(self, client: ClientState) -> None:
        """Start a sampled client's round (:func:`sampled_start`)."""
        self.running += 1
        self.world.dispatch(client, sampled_start(self.algorithm, client, self.world.state.updates))

    def _release(self, client: ClientState, weights: torch.Tensor | None) -> None:
        """A slot is free: ``client`` keeps ``weights`` (dropped unless the algorithm keeps client models)."""
        self.running -= 1
        release(self.algorithm, client, weights)

    # -- arrivals ---------------------------------------------------------------------

    def delivered(self, client: ClientState) -> None:
        self.world.state.queue.append(client.index)
        self.world.clock.soon(self._handed_over)

    def _handed_over(self) -> None:
        """A delivery is queued; a waiting server takes the first queued one a step later."""
        if self.waiting:
            self.waiting = False
            w = self.world
            w.clock.soon(partial(self._take, w.state.queue.pop(0)))

    def _next(self) -> None:
        """Take the next queued arrival (a step later), or wait for one."""
        w = self.world
        st = w.state
        st.server_phase = "wait"
        if st.queue:
            w.clock.soon(partial(self._take, st.queue.pop(0)))
        else:
            self.waiting = True

    def _take(self, index: int) -> None:
        """Aggregate the arrival of client ``index`` and send it back out (now, or after ``server_time``)."""
        w = self.world
        st = w.state
        now = w.clock.now
        client = st.clients[index]
        arrival = w.arrival(client, st.updates + 1 - client.tau)
        weights, weight = self.algorithm.on_arrival(arrival)
        if w.verifier is not None:
            w.verifier.time(now)
            w.verifier.global_weights(self.algorithm.global_weights(), arrival.update, index)
        client.tau = arrival.update
        st.events.append(Event(now, arrival.update, index, arrival.staleness, client.latency, client.dispatch_time,
                               weight))
        if self.sampler is not None:
            self._release(client, weights)
        if w.updated():
            return
        if self.server_time <= 0:
            if self.sampler is not None:
                self._fill(back=index)  # the client is selectable again, and at once drawn from
            elif not w.away(client, weights):
                w.dispatch(client, weights)
            self._next()
            return
        if self.sampler is not None:
            self.sampler.pool.add(index)
        st.server_phase = "busy"
        if self.sampler is None:
            st.server_client = index
            st.server_weights = weights
        w.wake("server", now + self.server_time)

    def wake(self, wake: Wake) -> None:
        """The server's busy time ended: dispatch the client it held (or a sampled one), then take the next arrival."""
        st = self.world.state
        st.server_phase = "wait"
        if self.sampler is not None:
            self._fill()
        else:
            assert st.server_client is not None and st.server_weights is not None
            client, weights = st.clients[st.server_client], st.server_weights
            st.server_client, st.server_weights = None, None
            if not self.world.away(client, weights):
                self.world.dispatch(client, weights)
        self._next()

    # -- failures and absences ------------------------------------------------------------

    def failed(self, client: ClientState) -> None:
        """A failed round: the client restarts from the same weights after the rejoin delay.

        Cross-device serving: its slot goes to a newly sampled client at once, and the failed
        one becomes selectable after the rejoin delay.
        """
        w = self.world
        assert w.availability is not None
        client.phase = "rejoin"
        w.wake("rejoin", w.clock.now + w.availability.rejoin_delay, client.index)
        if self.sampler is not None:
            self._release(client, client.start)
            self._fill()

    def rejoined(self, client: ClientState) -> None:
        """The rejoin delay after a failure ended: restart from the same weights (or become selectable)."""
        w = self.world
        assert w.availability is not None
        if self.sampler is None and client.start is None:
            return
        client.phase = "idle"
        if w.away(client):
            return
        if self.sampler is not None:
            self.sampler.pool.add(client.index)
            self._fill()
        else:
            assert client.start is not None
            w.dispatch(client, client.start)

    def lost(self, client: ClientState) -> None:
        """Nothing to do: the client's return restarts it (cross-device: its slot goes to a sampled client)."""
        if self.sampler is not None:
            self._release(client, client.start)
            self._fill()

    def returned(self, client: ClientState) -> None:
        """A returning client restarts from the weights of its lost round; one absent from time 0 joins now.

        A joining client gets the algorithm's :meth:`~AsyncAlgorithm.on_join` weights and its
        staleness counts from the current update (``tau`` = updates so far). Cross-device
        serving: it becomes selectable, and is sampled at once if a slot is free.
        """
        if self.sampler is not None:
            self.sampler.pool.add(client.index)
            self._fill()
        elif client.start is None:
            client.tau = self.world.state.updates
            self.world.dispatch(client, self.algorithm.on_join(client.index))
        else:
            self.world.dispatch(client, client.start)


class SyncRounds:
    """Rounds: select clients, send all the same weights, close the round, aggregate it, repeat.

    ``over_select``: select ``ceil(K * (1 + over_select))`` free clients; the round
    closes as soon as K of them have delivered. ``deadline``: the round closes at
    the latest ``deadline`` seconds after it opened. It also closes once every
    selected client has delivered, failed or left. Updates that come in after the
    round closed are discarded and logged as ``late``; such a client is busy until
    then and is not selected meanwhile.
    """

    def __init__(self, world: World, algorithm: SyncAlgorithm[Any], seed: int, server_time: float,
                 deadline: float | None, over_select: float, concurrency: Concurrency | None = None) -> None:
        self.world = world
        self.concurrency = concurrency
        self.sampler: Sampler | None = None
        self.freed_clients: list[int] = []
        """Cross-device serving: clients that became idle since the last selection (all, after a resume)."""
        self.algorithm = algorithm
        self.seed = seed
        self.server_time = server_time
        self.deadline = deadline
        self.over_select = over_select
        # Not saved: rebuilt on resume from the phase and the pending deadline, or (the closing steps, the
        # free signal) meaningful only within one instant or until the next wait resets them.
        self.deadline_wake: Wake | None = None
        self.complete = False
        """The open round has all it waits for (its closing step is under way)."""
        self.closing = False
        """The open round closes at the next step (deadline or completion, whichever came first)."""
        self.freed = 0
        """Generation of the "a client became free" signal (a new one after each wait)."""
        self.freed_sent = False
        """That signal was sent in this generation (later frees add nothing)."""
        self.starved = False
        """No client was free at the last selection: the server waits for the signal."""

    def start(self) -> None:
        if self.concurrency is not None:
            self.sampler = Sampler(self.world, self.seed, self.concurrency)
        self._select()

    def resume(self) -> None:
        st = self.world.state
        if self.concurrency is not None:
            self.sampler = Sampler(self.world, self.seed, self.concurrency)
            self.freed_clients = [c.index for c in st.clients]
        if st.server_phase == "starved":
            self._wait_for_a_client()
        elif st.server_phase == "open":
            self.deadline_wake = next((w for w in st.pending.values() if w.kind == "deadline"), None)

    # -- opening -------------------------------------------------------------------

    def _select(self) -> None:
        """Open a round on a sample of the free clients (stream (seed, "sampling", round)), or wait for one."""
        w = self.world
        st = w.state
        if self.sampler is not None:
            clients = self._draw_round()
        else:
            free = [c for c in st.clients if c.active and c.phase == "idle" and not w.away(c)]
            chosen = self.algorithm.choose(st.rounds, [c.index for c in free]) if free else None
            if chosen is not None:
                clients = [st.clients[i] for i in chosen]
            else:
                clients = [] if not free else sample_round(self.seed, st.rounds, free,
                                                           self.algorithm.clients_per_round, self.over_select)
        if not clients:
            self._wait_for_a_client()
            return
        st.server_phase = "open"
        weights = self.algorithm.round_weights()
        st.round_members = [c.index for c in clients]
        self.complete = self.closing = False
        self.deadline_wake = None
        if self.deadline is not None:
            self.deadline_wake = w.wake("deadline", w.clock.now + self.deadline, st.rounds)
        for c in clients:
            w.dispatch(c, weights)

    def _draw_round(self) -> list[ClientState]:
        """Cross-device serving: ``ceil(K * (1 + over_select))`` clients drawn one by one from the pool, at most
        C minus the stragglers still training, in drawing order."""
        assert self.sampler is not None
        st = self.world.state
        for i in self.freed_clients:
            c = st.clients[i]
            if c.active and c.phase == "idle":
                self.sampler.pool.add(i)
        self.freed_clients = []
        room = self.sampler.limit - st.in_flight()
        size = min(math.ceil(self.algorithm.clients_per_round * (1.0 + self.over_select)), room)
        clients: list[ClientState] = []
        while len(clients) < size:
            client = self.sampler.draw()
            if client is None:
                break
            clients.append(client)
        return clients

    def _wait_for_a_client(self) -> None:
        """Idle until some client is free again (a return or a straggler's end).

        When none can be (each client is free or gone for good: none trains, none is away until a return), no
        round can open again: every client has left, or the strategy picked none of those that remain. An
        update-budget run then stops, as when every client has left; a time-budget run goes on to its end.
        """
        w = self.world
        w.state.server_phase = "starved"
        if self.freed_sent:
            self.freed, self.freed_sent = self.freed + 1, False
        if w.budget.time is None and all(c.phase in ("gone", "idle") for c in w.state.clients):
            w.clock.stop()
            return
        self.starved = True

    def free(self) -> None:
        """A client became selectable: a starved server selects two steps later (with every client freed now)."""
        if self.freed_sent:
            return
        self.freed_sent = True
        generation = self.freed
        self.world.clock.soon(lambda: self._freed(generation))

    def _freed(self, generation: int) -> None:
        if generation != self.freed or not self.starved:
            return
        self.starved = False
        self.freed, self.freed_sent = self.freed + 1, False
        self.world.clock.soon(self._select)

    # -- the open round ------------------------------------------------------------

    def delivered(self, client: ClientState) -> None:
        client.outcome = True
        self._became_idle(client)
        self._progress(client)

    def failed(self, client: ClientState) -> None:
        client.phase = "idle"
        self._became_idle(client)
        self._progress(client)

    def lost(self, client: ClientState) -> None:
        self._progress(client)

    def returned(self, client: ClientState) -> None:
        self._became_idle(client)
        self.free()

    def _became_idle(self, client: ClientState) -> None:
        if self.sampler is not None:
            self.freed_clients.append(client.index)

    def rejoined(self, client: ClientState) -> None:  # pragma: no cover - a failed sync round never waits to rejoin
        """Synchronous rounds have no rejoin delay: a failed client is selectable at once."""

    def _progress(self, client: ClientState) -> None:
        """``client``'s round ended; the open round closes when enough have delivered or all ended.

        A client outside the open round was a straggler of a closed round: its update is
        discarded (logged ``late``) and it becomes selectable again.
        """
        st = self.world.state
        if client.index not in st.round_members or st.server_phase != "open":
            if client.outcome and client.phase == "idle":
                self.world.note(client, "late")
            client.outcome = None
            self.free()
            return
        members = [st.clients[i] for i in st.round_members]
        delivered = sum(1 for c in members if c.outcome)
        needed = min(self.algorithm.clients_per_round, len(members))
        if (delivered >= needed or all(c.phase != "round" for c in members)) and not self.complete:
            self.complete = True
            rounds = st.rounds
            self.world.clock.soon(lambda: self._completed(rounds))

    def _completed(self, rounds: int) -> None:
        if rounds != self.world.state.rounds:
            return
        if self.deadline is None:
            self._close()
        else:
            self._close_soon()

    def _close_soon(self) -> None:
        if not self.closing:
            self.closing = True
            self.world.clock.soon(self._close)

    def wake(self, wake: Wake) -> None:
        """The deadline of the open round passed, or the server's time after an aggregation ended."""
        if wake.kind == "deadline":
            self._close_soon()
        else:
            self._select()

    def _close(self) -> None:
        """Close the open round: aggregate the delivered updates in arrival order, then open the next."""
        w = self.world
        st = w.state
        if self.deadline_wake is not None:
            w.cancel(self.deadline_wake)
            self.deadline_wake = None
        members = [st.clients[i] for i in st.round_members]
        delivered = sorted((c for c in members if c.outcome), key=lambda c: (c.arrival_time, c.seq))
        st.server_phase = "server"
        st.round_members = []
        for c in members:
            if c.phase == "round" and c.handle is not None:  # a straggler: its update will be late
                w.executor.discard(c.handle)
                c.handle = c.message = None
        arrivals = []
        for c in delivered:
            c.outcome = None
            arrival = w.arrival(c, 1)
            c.tau = arrival.update
            st.events.append(Event(c.arrival_time, arrival.update, c.index, 1, c.latency, c.dispatch_time, None))
            arrivals.append(arrival)
        if arrivals:
            self.algorithm.aggregate(arrivals)
            w.aggregated()
            if w.verifier is not None:
                w.verifier.global_weights(self.algorithm.global_weights(), st.updates, None)
        st.rounds += 1
        if w.finish_if_done():
            return
        if arrivals:
            w.count_update()
        if self.server_time > 0:
            w.wake("server", w.clock.now + self.server_time)
        else:
            self._select()
