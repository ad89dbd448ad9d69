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
one step after it lands (a busy server takes the next queued arrival one step after
its previous take), a synchronous round closes one step after its deadline or after
the delivery that completes it (two when a deadline is set), and a starved round
selects two steps after a client became free. Everything these steps carry is
transient within one instant; what lasts (queue, phase, round members) is in
:class:`~simfl.sim.state.SimState`.
"""

from __future__ import annotations

import math
from typing import Any

from simfl.algorithms.base import Algorithm, AsyncAlgorithm, SyncAlgorithm
from simfl.algorithms.messaging import Messaging
from simfl.sim.clock import Wake
from simfl.sim.messages import MessageServer
from simfl.sim.population import Population
from simfl.sim.server import Scheduler
from simfl.sim.state import ClientState, Event
from simfl.sim.world import World

_new_event = tuple.__new__
"""An :class:`~simfl.sim.state.Event` from all its values, in one C call (an arrival's path)."""


def scheduler_for(world: World, algorithm: Algorithm[Any], population: Population, server_time: float,
                  deadline: float | None, over_select: float) -> Scheduler:
    """The scheduler of ``algorithm``'s kind, serving ``population`` (:mod:`simfl.sim.population`); a server that
    messages nodes one message at a time (a Flower ServerApp) is served by :class:`~simfl.sim.messages.MessageServer`."""
    if isinstance(algorithm, Messaging):
        return MessageServer(world, algorithm, population, server_time, deadline)
    if isinstance(algorithm, AsyncAlgorithm):
        return AsyncServer(world, algorithm, population, server_time)
    if isinstance(algorithm, SyncAlgorithm):
        return SyncRounds(world, algorithm, population, server_time, deadline, over_select)
    raise TypeError(f"unknown algorithm kind {type(algorithm).__name__}")  # pragma: no cover


class AsyncServer:
    """Takes each arrival in turn, aggregates it, and hands its client back to the population.

    Who goes out next is the population's business (:mod:`simfl.sim.population`): every
    client goes back out at once (or after ``server_time``), or, serving a population by
    FedBuff's protocol, a client is sampled into the freed slot. A failed client waits
    ``rejoin_delay``; a returning one is handed to the population too.
    """

    def __init__(self, world: World, algorithm: AsyncAlgorithm[Any], population: Population,
                 server_time: float) -> None:
        self.world = world
        self.algorithm = algorithm
        self.population = population
        self.server_time = server_time
        self._send_next = population.next
        """The population's per-arrival call, bound once."""
        self.recalls = algorithm.recalls_clients
        """The algorithm may recall rounds in flight after an arrival (:meth:`AsyncAlgorithm.recall`)."""
        self.waiting = False
        """The server is idle, waiting for the next delivery."""
        self.taking = -1
        """The client whose arrival the pending take aggregates (:meth:`_take`)."""

    def start(self) -> None:
        self.population.open(False, self.algorithm)
        self.population.begin()
        self._next()

    def resume(self) -> None:
        self.population.open(True, self.algorithm)
        if self.world.state.server_phase == "wait":
            self._next()

    # -- arrivals ---------------------------------------------------------------------

    def delivered(self, client: ClientState) -> None:
        """A waiting server (its queue empty) takes the delivery a step later, after the wake-ups due now; a busy
        one queues it."""
        if self.waiting:
            self.waiting = False
            self.taking = client.index
            self.world.soon(self._take)
        else:
            self.world.state.queue.append(client.index)

    def _next(self) -> None:
        """Take the next queued arrival (a step later), or wait for one."""
        w = self.world
        st = w.state
        st.server_phase = "wait"
        if st.queue:
            self.taking = st.queue.pop(0)
            w.soon(self._take)
        else:
            self.waiting = True

    def _take(self) -> None:
        """Aggregate the arrival of client :attr:`taking` and hand the client back (now, or after ``server_time``).

        One take is pending at a time (the server takes the next arrival only after this one), so the client
        taken is an attribute, not a bound argument: an arrival's path."""
        w = self.world
        st = w.state
        now = w.clock.now
        index = self.taking
        client = st.clients[index]
        arrival = w.arrival(client, st.updates + 1 - client.tau)
        weights, weight = self.algorithm.on_arrival(arrival)
        client.tau = arrival.update
        st.events.append(_new_event(Event, (now, arrival.update, index, arrival.staleness, client.latency,
                                            client.dispatch_time, weight, "arrival")))
        if w.network is not None:
            w.network.stamp(client, True)
        if self.recalls:
            clients = st.clients
            for recalled in self.algorithm.recall():
                w.recall(clients[recalled])
        if w.updated(index):
            self.population.release(client, weights)
            return
        if self.server_time <= 0:
            self._send_next(client, weights)
            self._next()
            return
        self.population.hold(client, weights)
        st.server_phase = "busy"
        w.wake("server", now + self.server_time)

    def wake(self, wake: Wake) -> None:
        """The server's busy time ended: the population sends the next client out, then the next arrival is taken."""
        self.world.state.server_phase = "wait"
        self.population.resume_server()
        self._next()

    # -- failures and absences ------------------------------------------------------------

    def failed(self, client: ClientState) -> None:
        """A failed round: the client waits for the rejoin delay (its slot, when serving, is refilled at once)."""
        self.world.rejoin_later(client)
        self.population.failed(client)

    def rejoined(self, client: ClientState) -> None:
        """The rejoin delay after a failure ended: restart from the same weights (or become selectable)."""
        self.population.rejoined(client)

    def lost(self, client: ClientState) -> None:
        """The client's return restarts it (when serving, its slot goes to a sampled client)."""
        self.population.lost(client)

    def returned(self, client: ClientState) -> None:
        """A returning client restarts from its lost round's weights, joins, or becomes selectable."""
        self.population.returned(client)


class SyncRounds:
    """Rounds: select clients, send all the same weights, close the round, aggregate it, repeat.

    ``over_select``: select ``ceil(K * (1 + over_select))`` free clients; the round
    closes as soon as K of them have delivered. ``deadline``: the round closes at
    the latest ``deadline`` seconds after it opened. It also closes once every
    selected client has delivered, failed or left. Updates that come in after the
    round closed are discarded and logged as ``late``; such a client is busy until
    then and is not selected meanwhile.
    """

    def __init__(self, world: World, algorithm: SyncAlgorithm[Any], population: Population, server_time: float,
                 deadline: float | None, over_select: float) -> None:
        self.world = world
        self.population = population
        self.algorithm = algorithm
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
        self.population.open(False)
        self._select()

    def resume(self) -> None:
        st = self.world.state
        self.population.open(True)
        if st.server_phase == "starved":
            self._wait_for_a_client()
        elif st.server_phase == "open":
            self.deadline_wake = next((w for w in st.pending.values() if w.kind == "deadline"), None)

    # -- opening -------------------------------------------------------------------

    def _select(self) -> None:
        """Open a round on ``ceil(K * (1 + over_select))`` of the free, present clients (the population's
        members: a strategy's pick, a sample, or draws from the pool), or wait for one."""
        w = self.world
        st = w.state
        algorithm = self.algorithm
        size = math.ceil(algorithm.clients_per_round * (1.0 + self.over_select))
        clients = self.population.members(st.rounds, size, algorithm.choose)
        if algorithm.finished:
            w.end()
            return
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
        if w.stuck(("gone", "idle")):
            return
        self.starved = True

    def free(self) -> None:
        """A client became selectable: a starved server selects two steps later (with every client freed now)."""
        if self.freed_sent:
            return
        self.freed_sent = True
        generation = self.freed
        self.world.soon(lambda: self._freed(generation))

    def _freed(self, generation: int) -> None:
        if generation != self.freed or not self.starved:
            return
        self.starved = False
        self.freed, self.freed_sent = self.freed + 1, False
        self.world.soon(self._select)

    # -- the open round ------------------------------------------------------------

    def delivered(self, client: ClientState) -> None:
        client.outcome = True
        self.population.freed(client)
        self._progress(client)

    def failed(self, client: ClientState) -> None:
        client.phase = "idle"
        self.population.freed(client)
        self._progress(client)

    def lost(self, client: ClientState) -> None:
        self._progress(client)

    def returned(self, client: ClientState) -> None:
        self.population.freed(client)
        self.free()

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
            self.world.soon(lambda: self._completed(rounds))

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
            self.world.soon(self._close)

    def wake(self, wake: Wake) -> None:
        """The deadline of the open round passed, or the server's time after an aggregation ended."""
        if wake.kind == "deadline":
            self.deadline_wake = None  # fired: nothing to cancel
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
        network = w.network
        ended = (lambda c: c.arrival_time) if network is None else network.ended  # with phases: the upload's end
        delivered = sorted((c for c in members if c.outcome), key=lambda c: (ended(c), c.seq))
        st.server_phase = "server"
        st.round_members = []
        for c in members:
            if c.phase == "round":  # a straggler: its update will be late
                w.discard(c)
        arrivals = []
        for c in delivered:
            c.outcome = None
            arrival = w.arrival(c, 1)
            c.tau = arrival.update
            st.events.append(Event(ended(c), arrival.update, c.index, 1, c.latency, c.dispatch_time, None))
            if network is not None:
                network.stamp(c, True)
            arrivals.append(arrival)
        if arrivals:
            self.algorithm.aggregate(arrivals)
        if w.closed(bool(arrivals)):
            return
        if self.server_time > 0:
            w.wake("server", w.clock.now + self.server_time)
        else:
            self._select()
