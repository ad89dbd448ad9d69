"""The server side of a run whose server messages nodes and takes turns between replies (a Flower ServerApp).

:class:`MessageServer` serves a :class:`~simfl.algorithms.messaging.Messaging` algorithm. Its rule of timing:

- **a node works its messages first come, first served**: each message pushed to a node joins the node's queue;
  the node starts the next one the instant the previous one ended (replied, failed), and each message is one
  client round of that node (:meth:`~simfl.sim.world.World.dispatch`: its node's next latency draw, from the
  client's own stream ``(seed, "latency", m)``, its failure draw, departures, phases), so the k-th message a node
  works takes the node's k-th draw whatever the algorithm and the same seed gives the same times;
- a message to a node away at its start is lost (so is the rest of its queue, and a node's queue when it leaves);
- **the algorithm's turn** comes one zero-time step after what it waits for is there (every message of a call
  ended; a reply to one of them arrived; a change of the nodes), so every delivery due at that instant is in,
  and after ``server_time``; a call with a timeout (or the scenario's ``rounds.deadline``, the smaller) ends at it:
  its unfinished messages are dropped, each node still works them (it is busy for their latency) and their
  replies, late, are thrown away (an events.csv ``late`` row);
- a node working a dropped message is not listed to the algorithm until it is done (as a synchronous round's
  straggler is not selected); a node working messages still awaited is.

Each reply is an update (events.csv ``arrival`` row, staleness 1) as it arrives; each turn after the first counts a
round (the update budget is checked there). The algorithm's run cannot be checkpointed, so this server never
resumes.
"""

from __future__ import annotations

from collections import deque

from simfl.algorithms.messaging import Messaging, Request
from simfl.sim.clock import Wake
from simfl.sim.population import Population
from simfl.sim.state import ClientState, Event
from simfl.sim.world import World


class MessageServer:
    """Queues each node's messages, times them as its client rounds, and gives the algorithm its turns."""

    def __init__(self, world: World, algorithm: Messaging, population: Population, server_time: float,
                 deadline: float | None) -> None:
        self.world = world
        self.algorithm = algorithm
        self.population = population
        self.server_time = server_time
        self.deadline = deadline
        n = len(world.state.clients)
        self.queues: list[deque[int]] = [deque() for _ in range(n)]
        """Each node's messages waiting for it, oldest first."""
        self.running: dict[int, int] = {}
        """The message each busy node works on."""
        self.owner: dict[int, int] = {}
        """Each unfinished message's node."""
        self.dropped: set[int] = set()
        """Unfinished messages whose call timed out."""
        self.finished: set[int] = set()
        """Messages that ended (replied, failed, lost)."""
        self.answered: set[int] = set()
        """Messages whose reply arrived in time."""
        self.request: Request | None = None
        """What the algorithm waits for (None: its turn is under way or due)."""
        self.timer: Wake | None = None
        self.due = False
        """The next turn's step is set."""
        self.changed = False
        """A node's work ended or a node came back since the last turn (a ``nodes`` wait's end)."""
        self.replied = False
        """A reply arrived since the last turn."""
        self.turns = 0
        self.counts = True
        """The wait that ended was a call's (a round, counted), not one for nodes."""

    # -- turns ---------------------------------------------------------------------

    def start(self) -> None:
        self.population.open(False)
        self._turn()

    def resume(self) -> None:  # pragma: no cover - a Messaging run is never checkpointed
        raise RuntimeError("a messaging server does not resume")

    def listed(self) -> list[int]:
        """The clients the algorithm may message now: present, and not working a dropped message."""
        w = self.world
        out = []
        for c in w.state.clients:
            if not c.active or c.phase not in ("idle", "round"):
                continue
            if c.phase == "idle" and w.away(c):
                continue
            if self.running.get(c.index) in self.dropped or any(k in self.dropped for k in self.queues[c.index]):
                continue
            out.append(c.index)
        return out

    def _turn(self) -> None:
        """The algorithm's turn: count the round that ended, then send what it pushed and wait as it asks."""
        w = self.world
        st = w.state
        if self.turns and self.counts and w.closed(self.replied):
            return
        self.turns += 1
        self.replied = self.changed = False
        st.server_phase = "server"
        request = self.algorithm.turn(self.listed())
        self.counts = request.wait != "nodes"
        if request.wait == "done":
            w.end()
            return
        for client, key in request.sends:
            self.queues[client].append(key)
            self.owner[key] = client
        for client in dict.fromkeys(c for c, _ in request.sends):
            if client not in self.running:
                self._next(client)
        st.server_phase = "open"
        self.request = request
        if request.wait == "all":
            limits = [t for t in (request.timeout, self.deadline) if t is not None]
            if limits:
                self.timer = w.wake("deadline", w.clock.now + min(limits))
        if request.wait == "nodes" and not self.running and not any(self.queues):
            if len(self.listed()) == len(st.clients):  # nothing can change: the algorithm asks again
                self.changed = True
            elif w.stuck(("gone", "idle")):
                return
        self._check()

    def _satisfied(self, request: Request) -> bool:
        if request.wait == "nodes":
            return self.changed
        if request.wait == "any" and any(k in self.answered for k in request.keys):
            return True
        return all(k in self.finished for k in request.keys)

    def _check(self) -> None:
        """The next turn is due one step later once what the algorithm waits for is there."""
        request = self.request
        if request is None or self.due or not self._satisfied(request):
            return
        self.due = True
        self.world.soon(self._ready)

    def _ready(self) -> None:
        self.due = False
        self.request = None
        if self.timer is not None:
            self.world.cancel(self.timer)
            self.timer = None
        if self.server_time > 0:
            self.world.wake("server", self.world.clock.now + self.server_time)
        else:
            self._turn()

    def wake(self, wake: Wake) -> None:
        """A call's timeout passed (its unfinished messages are dropped), or the server's time ended."""
        if wake.kind == "server":
            self._turn()
            return
        self.timer = None
        request = self.request
        if request is None:  # pragma: no cover - a timer is cancelled when its wait ends
            return
        for key in request.keys:
            if key in self.finished or key in self.dropped:
                continue
            self.dropped.add(key)
            client = self.owner[key]
            if self.running.get(client) == key:
                self.world.discard(self.world.state.clients[client])
        for key in request.keys:
            if key not in self.finished:
                self.finished.add(key)
                self.algorithm.ended(key)
        self._check()

    # -- each node's queue ---------------------------------------------------------------

    def _next(self, client: int) -> None:
        """``client`` is free: it starts its oldest waiting message (one lost at once if the node is away)."""
        w = self.world
        c = w.state.clients[client]
        queue = self.queues[client]
        if not queue or client in self.running:
            return
        if not c.active or c.phase != "idle" or w.away(c):
            self._lose(client)
            return
        key = queue.popleft()
        self.running[client] = key
        self.algorithm.started(client, key)
        w.dispatch(c, self.algorithm.round_weights())
        if key in self.dropped:  # its reply will be thrown away: the node works it, nothing is trained
            w.discard(c)

    def _end(self, key: int, reply: bool) -> None:
        """Message ``key`` ended (``reply``: its reply arrived in time, already handed over)."""
        self.owner.pop(key, None)
        self.changed = True
        if key in self.dropped:
            self.dropped.discard(key)
            return
        self.finished.add(key)
        if reply:
            self.answered.add(key)
        else:
            self.algorithm.ended(key)

    def _lose(self, client: int) -> None:
        """``client`` left or is away: its waiting messages are lost."""
        queue = self.queues[client]
        while queue:
            self._end(queue.popleft(), False)

    def delivered(self, client: ClientState) -> None:
        w = self.world
        st = w.state
        key = self.running.pop(client.index)
        self.population.freed(client)
        if key in self.dropped:
            w.note(client, "late")
        else:
            network = w.network
            arrival = w.arrival(client, 1)
            client.tau = arrival.update
            ended = client.arrival_time if network is None else network.ended(client)
            st.events.append(Event(ended, arrival.update, client.index, 1, client.latency, client.dispatch_time,
                                   None))
            if network is not None:
                network.stamp(client, True)
            self.replied = True
            self.algorithm.replied(key, arrival)
        self._end(key, True)
        self._next(client.index)
        self._check()

    def failed(self, client: ClientState) -> None:
        client.phase = "idle"
        self.population.freed(client)
        key = self.running.pop(client.index)
        self._end(key, False)
        self._next(client.index)
        self._check()

    def lost(self, client: ClientState) -> None:
        key = self.running.pop(client.index, None)
        if key is not None:
            self._end(key, False)
        self._lose(client.index)
        self._check()

    def returned(self, client: ClientState) -> None:
        self.population.freed(client)
        self.changed = True
        self._check()

    def rejoined(self, client: ClientState) -> None:  # pragma: no cover - a failed message never waits to rejoin
        """A failed message's node starts its next one at once: no rejoin delay."""
