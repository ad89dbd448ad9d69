"""Who trains: the population a scheduler serves, as one object the rules call.

A run serves one of two populations (docs/architecture.md, "Schedulers"), chosen once by
:func:`population_for`:

- :class:`Everyone`: every present client is in flight (no ``server.concurrency``). An
  asynchronous client goes back out as soon as the server is done with it; a synchronous
  round samples from every free, present client (or lets the strategy choose).
- :class:`Sampled`: cross-device serving, at most C clients in flight, each new one drawn
  from the idle, present clients (:mod:`simfl.sim.selection`: the pool and the selection
  stream). What a sampled client trains from is the algorithm's choice: its kept model
  (:attr:`~simfl.algorithms.base.AsyncAlgorithm.keeps_client_models`) or the current
  weights (:meth:`~simfl.algorithms.base.AsyncAlgorithm.on_join`, ``tau`` = now).

The schedulers and the verifier call a population's methods and never ask which one runs;
"at most C in flight" is :meth:`Population.room`, stated once. The asynchronous server's
calls (:meth:`Population.begin` to :meth:`Population.returned`) and the rounds' calls
(:meth:`Population.members`, :meth:`Population.freed`) are disjoint: each scheduler uses its
own part. A population's own data is a function of the clients' phases (and
:attr:`~simfl.sim.state.SimState.selections`), so :meth:`Population.open` rebuilds it on resume.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import torch

from simfl import rng
from simfl.algorithms.base import AsyncAlgorithm
from simfl.sim.selection import Concurrency, Draws, Pool, swap_member, take_member
from simfl.sim.state import ClientState
from simfl.sim.world import World

Choose = Callable[[int, list[int]], "list[int] | None"]
"""A strategy's own pick among the free clients' indices for round ``k`` (None: simfl samples)."""


class Population(Protocol):
    """What the rules ask of the population they serve."""

    bound: str
    """The limit on clients in flight, in words (for the verifier's message)."""

    def room(self, busy: int) -> int:
        """How many more clients may start while ``busy`` slots are taken (at most C, or every client, in flight)."""

    def open(self, resumed: bool, algorithm: AsyncAlgorithm[Any] | None = None) -> None:
        """Start serving from the clients' current phases (a fresh run after absences are marked, or a resumed
        one); ``algorithm``: the asynchronous server's, which decides what a client trains from."""

    # -- the asynchronous server ----------------------------------------------------

    def begin(self) -> None:
        """Time 0: send out the first clients."""

    def next(self, client: ClientState, weights: torch.Tensor) -> None:
        """``client``'s update was aggregated, leaving ``weights`` as its model, and the server is free at once:
        send the next client out."""

    def hold(self, client: ClientState, weights: torch.Tensor) -> None:
        """``client``'s update was aggregated, leaving ``weights``, and the server is busy for ``server_time``."""

    def release(self, client: ClientState, weights: torch.Tensor | None) -> None:
        """``client``'s round is over, leaving ``weights`` as its model, and nobody is sent out (the run stops)."""

    def resume_server(self) -> None:
        """The server's busy time ended: send the next client out."""

    def failed(self, client: ClientState) -> None:
        """``client``'s round failed (it waits for the rejoin delay)."""

    def rejoined(self, client: ClientState) -> None:
        """The rejoin delay after ``client``'s failure ended."""

    def lost(self, client: ClientState) -> None:
        """``client`` departed during its round."""

    def returned(self, client: ClientState) -> None:
        """``client`` is back from an absence (or joins for the first time)."""

    # -- synchronous rounds ----------------------------------------------------------

    def members(self, rounds: int, size: int, choose: Choose) -> list[ClientState]:
        """The clients of round ``rounds``: up to ``size`` of the free, present ones (empty: none free)."""

    def freed(self, client: ClientState) -> None:
        """``client`` became free (a synchronous round's end or a return)."""


def population_for(world: World, seed: int, concurrency: Concurrency | None) -> Population:
    """The population of a run: with ``server.concurrency``, :class:`Guided` when the run's asynchronous algorithm
    selects its clients itself, else :class:`Sampled`; without, :class:`Everyone`."""
    if concurrency is None:
        return Everyone(world, seed)
    algorithm = world.algorithm
    if isinstance(algorithm, AsyncAlgorithm) and algorithm.selects_clients:
        return Guided(world, seed, concurrency)
    return Sampled(world, seed, concurrency)


def sample_round(seed: int, round_index: int, free: list[ClientState], size: int) -> list[ClientState]:
    """``min(size, len(free))`` clients of ``free`` drawn from the stream (seed, "sampling", round), in index order."""
    draw = rng.stream(seed, "sampling", round_index)
    chosen = draw.choice(len(free), size=min(size, len(free)), replace=False)
    return [free[int(i)] for i in sorted(chosen)]


class Everyone:
    """Every present client in flight: a client goes back out as soon as the server is done with it."""

    algorithm: AsyncAlgorithm[Any]
    """The asynchronous server's algorithm (set by :meth:`open`; unused by synchronous rounds)."""

    next: Callable[[ClientState, torch.Tensor], None]
    """The client goes straight back out (:meth:`World.send`, bound once: an arrival's one call)."""

    def __init__(self, world: World, seed: int) -> None:
        self.world = world
        self.seed = seed
        self.limit = len(world.state.clients)
        self.bound = f"the {self.limit} clients"
        self.next = world.send

    def room(self, busy: int) -> int:
        return self.limit - busy

    def open(self, resumed: bool, algorithm: AsyncAlgorithm[Any] | None = None) -> None:
        if algorithm is not None:
            self.algorithm = algorithm

    def begin(self) -> None:
        w = self.world
        for c in w.state.clients:
            if c.active:
                w.dispatch(c, self.algorithm.initial_weights(c.index))

    def hold(self, client: ClientState, weights: torch.Tensor) -> None:
        """The server holds the client until its busy time ends."""
        st = self.world.state
        st.server_client = client.index
        st.server_weights = weights

    def release(self, client: ClientState, weights: torch.Tensor | None) -> None:
        """Nothing to do: the client keeps the weights of its round."""

    def resume_server(self) -> None:
        """The client the server held goes back out."""
        st = self.world.state
        assert st.server_client is not None and st.server_weights is not None
        client, weights = st.clients[st.server_client], st.server_weights
        st.server_client, st.server_weights = None, None
        self.world.send(client, weights)

    def failed(self, client: ClientState) -> None:
        """Nothing to do: the client restarts after the rejoin delay."""

    def rejoined(self, client: ClientState) -> None:
        """Restart from the same weights, if present."""
        if client.start is None:
            return
        client.phase = "idle"
        self.world.send(client, client.start)

    def lost(self, client: ClientState) -> None:
        """Nothing to do: the client's return restarts it."""

    def returned(self, client: ClientState) -> None:
        """Restart from the weights of the lost round; a client absent from time 0 joins now
        (:meth:`~simfl.algorithms.base.AsyncAlgorithm.on_join`, ``tau`` = updates so far)."""
        w = self.world
        if client.start is None:
            client.tau = w.state.updates
            w.dispatch(client, self.algorithm.on_join(client.index))
        else:
            w.dispatch(client, client.start)

    def members(self, rounds: int, size: int, choose: Choose) -> list[ClientState]:
        """The strategy's pick among the free, present clients, else ``size`` of them from (seed, "sampling", round)."""
        w = self.world
        st = w.state
        free = [c for c in st.clients if c.active and c.phase == "idle" and not w.away(c)]
        if not free:
            return []
        chosen = choose(rounds, [c.index for c in free])
        if chosen is not None:
            return [st.clients[i] for i in chosen]
        return sample_round(self.seed, rounds, free, size)

    def freed(self, client: ClientState) -> None:
        """Nothing to do: every free client is found at the next round."""


class Sampled:
    """At most C clients in flight, each new one drawn from the pool of idle, present clients.

    The pool holds every active client that is idle and not waiting for the server; a drawn
    client found absent (its presence window ended while it was idle) leaves until its return
    and the draw is repeated: absence is checked when it matters, at no cost per idle client.
    The asynchronous server fills its C slots at time 0 and again after each aggregation (and
    ``server_time``), failure or departure; a synchronous round draws from the pool.
    """

    algorithm: AsyncAlgorithm[Any]
    """The asynchronous server's algorithm (set by :meth:`open`; unused by synchronous rounds)."""

    def __init__(self, world: World, seed: int, concurrency: Concurrency) -> None:
        self.world = world
        self.limit = concurrency.limit
        self.bound = f"the concurrency {self.limit}"
        self.pool = Pool.of(concurrency.selection, [c.num_samples for c in world.state.clients])
        self.draws = Draws(seed)
        self.running = 0
        """Asynchronous server: slots in use (rounds under way, deliveries waiting for the server)."""
        self.freed_clients: list[int] = []
        """Synchronous rounds: clients that became free since the last round was drawn (all, after a resume)."""
        self.keeps = False
        """The asynchronous algorithm keeps client models (read once, at :meth:`open`: an arrival's path asks it)."""
        self.upcoming: Iterator[float] = iter(())
        """Selection draws ``selections``, ``selections + 1``, ... in turn (from :meth:`open`; every draw is kept,
        so a ``next`` replaces a call with the count: an arrival's path)."""

    def room(self, busy: int) -> int:
        return self.limit - busy

    def open(self, resumed: bool, algorithm: AsyncAlgorithm[Any] | None = None) -> None:
        st = self.world.state
        waiting = set(st.queue) | set(st.round_members)
        self.pool.add_all([c.index for c in st.clients if c.active and c.phase == "idle" and c.index not in waiting])
        self.upcoming = self.draws.following(st.selections)
        if algorithm is not None:
            self.algorithm = algorithm
            self.keeps = algorithm.keeps_client_models
        if resumed:  # slots in use, and clients freed since the last draw (not saved: all are looked at)
            self.running = st.in_flight() + len(st.queue)
            self.freed_clients = [c.index for c in st.clients]

    def draw(self, back: int | None = None) -> ClientState | None:
        """A present client drawn from the pool and taken out of it; None when the pool is empty.

        ``back``: a client made selectable just before the first draw (an arrival's client; in one call). The
        pool's compiled walks are called directly, and presence asked only with an availability: an arrival's path.
        """
        w = self.world
        st = w.state
        pool, upcoming, availability = self.pool, self.upcoming, w.availability
        data, span = pool.data, pool.span
        while back is not None or data[0]:
            u = next(upcoming)
            index = take_member(data, span, u) if back is None else swap_member(data, span, back, u)
            back = None
            st.selections += 1
            client = st.clients[index]
            if availability is None or not w.away(client):
                return client
        return None

    # -- the asynchronous server ------------------------------------------------------

    def _fill(self, back: int | None = None) -> None:
        """Dispatch sampled clients while there is room (the busy server holds one slot); ``back``, the client of
        the arrival just taken, becomes selectable first."""
        room = self.room(self.running + (self.world.state.server_phase == "busy"))
        while room > 0:  # each dispatch takes one slot
            client = self.draw(back)
            back = None
            if client is None:
                return
            self._send(client)
            room -= 1
        if back is not None:
            self.pool.add(back)

    def _send(self, client: ClientState) -> None:
        """Start a sampled client's round from its kept model (the algorithm keeps client models and has one
        for it), else from the server's current weights (``on_join``, its ``tau`` then the updates so far)."""
        self.running += 1
        algorithm = self.algorithm
        kept = algorithm.kept(client.index) if self.keeps else None
        if kept is None:
            client.tau = self.world.state.updates
            kept = algorithm.on_join(client.index)
        self.world.dispatch(client, kept)

    def begin(self) -> None:
        self._fill()

    def release(self, client: ClientState, weights: torch.Tensor | None) -> None:
        """A slot is free: the algorithm keeps ``weights`` as the client's model if it keeps client models
        (:meth:`~simfl.algorithms.base.AsyncAlgorithm.keep`); nothing of the round stays in the client's state."""
        self.running -= 1
        if weights is not None and self.keeps:
            self.algorithm.keep(client.index, weights)
        client.start = None

    def next(self, client: ClientState, weights: torch.Tensor) -> None:
        """The slot is free and the client selectable again, and at once drawn from."""
        self.release(client, weights)
        self._fill(back=client.index)

    def hold(self, client: ClientState, weights: torch.Tensor) -> None:
        """The slot is free and the client selectable; the busy server holds a slot until its time ends."""
        self.release(client, weights)
        self.pool.add(client.index)

    def resume_server(self) -> None:
        self._fill()

    def failed(self, client: ClientState) -> None:
        """The slot goes to a newly sampled client at once; the failed one is selectable after the rejoin delay."""
        self.release(client, client.start)
        self._fill()

    def rejoined(self, client: ClientState) -> None:
        client.phase = "idle"
        if self.world.away(client):
            return
        self.pool.add(client.index)
        self._fill()

    def lost(self, client: ClientState) -> None:
        """The slot goes to a newly sampled client."""
        self.release(client, client.start)
        self._fill()

    def returned(self, client: ClientState) -> None:
        """The client is selectable, and sampled at once if a slot is free."""
        self.pool.add(client.index)
        self._fill()

    # -- synchronous rounds -------------------------------------------------------------

    def members(self, rounds: int, size: int, choose: Choose) -> list[ClientState]:
        """``size`` clients drawn one by one from the pool, at most the room left beside the stragglers still
        training, in drawing order (the strategy does not choose)."""
        st = self.world.state
        for i in self.freed_clients:
            c = st.clients[i]
            if c.active and c.phase == "idle":
                self.pool.add(i)
        self.freed_clients = []
        size = min(size, self.room(st.in_flight()))
        clients: list[ClientState] = []
        while len(clients) < size:
            client = self.draw()
            if client is None:
                break
            clients.append(client)
        return clients

    def freed(self, client: ClientState) -> None:
        self.freed_clients.append(client.index)


class Guided(Sampled):
    """At most C clients in flight, the asynchronous algorithm choosing each new one among the idle, present clients
    (:meth:`~simfl.algorithms.base.AsyncAlgorithm.select`) in place of the selection stream's draw.

    The pool is :class:`Sampled`'s (its weights unused, the stream never read: ``selections`` stays 0); whenever
    slots free up, every member is asked for its presence (an absent one leaves until its return, as a drawn one
    does), and the algorithm is handed the present ones, ascending, with the free slots to fill and the time. It
    costs O(idle clients) per selection, which only a rule that selects pays.
    """

    def _fill(self, back: int | None = None) -> None:
        """Make ``back`` (the arrival just taken) selectable, then dispatch the clients the algorithm selects for
        the free slots (the busy server holds one)."""
        w = self.world
        st = w.state
        pool = self.pool
        if back is not None:
            pool.add(back)
        room = self.room(self.running + (st.server_phase == "busy"))
        if room <= 0 or not pool.count:
            return
        candidates = pool.selectable()
        if w.availability is not None:
            present = []
            for i in candidates:
                if w.away(st.clients[i]):
                    pool.remove(i)
                else:
                    present.append(i)
            candidates = present
        if not candidates:
            return
        count = min(room, len(candidates))
        chosen = self.algorithm.select(candidates, count, w.clock.now)
        members = set(candidates)
        if len(chosen) != count or len(set(chosen)) != count or not members.issuperset(chosen):
            raise ValueError(f"{type(self.algorithm).__name__}.select must return {count} distinct clients of the "
                             f"{len(candidates)} idle, present ones it was given, returned {list(chosen)[:10]}")
        for index in chosen:
            pool.remove(index)
            self._send(st.clients[index])
