"""The rules of the simulated world, as handlers: what happens when a wake-up fires.

The :class:`World` owns the rules of one (algorithm, seed) run that do not depend
on the server's kind: a client's round starts (dispatch) and ends (deliver, fail,
or lost to a departure), a client rejoins after a failure or returns from an
absence, the evaluation grid, the time and update budgets, a run that can make
no progress (:meth:`World.note`), and recording a metric. What the server does
with a delivered round is the scheduler's business
(:mod:`simfl.sim.schedulers`: an asynchronous server or synchronous rounds,
chosen once from the algorithm's kind), which may use only the narrow set of
methods :class:`World` lists. Checkpoints and verification are
observers (:class:`Observer`) the world calls at defined points. The
:class:`~simfl.sim.clock.Clock` (SimPy's or the heap's: the same order) decides when handlers run; it holds
the pending wake-ups (:class:`~simfl.sim.clock.Wake`), which :class:`~simfl.sim.state.SimState` carries as data
when the simulation is saved or ends.

Semantics (docs/architecture.md): the server keeps an update counter ``t``;
client m remembers ``tau_m``, the value of t when it last talked to the
server; an arrival's staleness is ``s = t - tau_m >= 1`` (1: nothing else
was processed in between; the authors' released code logs ``s - 1``).
A client's training job is submitted to the executor when the client is
dispatched and collected when its arrival is processed, so jobs may run in
parallel in real time while the virtual clock stays exact.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from simfl.algorithms.base import Algorithm, Arrival
from simfl.latency.availability import Availability
from simfl.latency.base import Latencies
from simfl.sim.clock import Clock, ClockKind, Wake, WakeKind, make_clock
from simfl.sim.evaluation import Recorder, next_grid_time
from simfl.sim.recall import boundary
from simfl.sim.server import Scheduler
from simfl.sim.state import ClientState, Event, EventKind, Phase, SimState
from simfl.train.evaluate import Scores
from simfl.train.executor import Executor
from simfl.train.local import Job
from simfl.train.message import MEMORY, Message

DRY_ROUNDS = 1000
"""A run without a time budget stops once its clients' rounds ended this many times per client in a row without an
update (failed, lost to a departure, or late for their synchronous round): it cannot reach its update budget as
its scenario stands (:meth:`World.note`). A deadline or presence windows shorter than the clients' rounds give
nothing but such rounds. Rounds that fail at ``availability.p`` may also come in long streaks by chance: then the
streak that stops a run is longer (:func:`dry_limit`)."""
DRY_MOST = 100_000
"""At most this many fruitless rounds in a row in all, whatever the population, unless the failure probability
asks for more (:func:`dry_limit`): each is an events.csv row, and a large population's rounds come from its many
clients."""
DRY_CHANCE = 1e-9
"""The chance, at most, that a run which can reach its update budget is stopped for a streak of failed rounds that
came by chance alone (:func:`dry_limit`)."""
DRY_CHANCE_MOST = 10_000_000
"""The longest streak of fruitless rounds a run waits for, whatever its failure probability: each is an events.csv
row (about 2.5 GB of memory at this count), so a run that cannot make progress still ends."""


def dry_limit(clients: int, p: float, updates: int | None) -> int:
    """Fruitless client rounds in a row that stop a run with only an update budget: :data:`DRY_ROUNDS` per client
    (at most :data:`DRY_MOST`), or more where the failure probability ``p`` could give that many by chance.

    Why a streak of ``n`` failures is beyond chance: a maximal streak of fruitless rounds starts at the run's start
    or after an update, and the run ends at its ``updates``-th, so at most ``updates + 1`` streaks start. Each
    round's failure is its own uniform draw, made at its dispatch, and its end time does not depend on it, so given
    everything before it a round ends failed with probability ``p``: a given streak reaches ``n`` failures with
    probability at most ``p ** n``, and some streak does with probability at most ``(updates + 1) * p ** n``. The
    limit is the least ``n`` that puts this below :data:`DRY_CHANCE`, when that exceeds the per-client rule (it never
    does for ``p`` up to 0.96, whatever the population and for an update budget up to a million), and at most
    :data:`DRY_CHANCE_MOST`: beyond that a stop says how likely chance alone was."""
    rule = min(DRY_ROUNDS * clients, DRY_MOST)
    if p <= 0.0:
        return rule
    starts = (updates or 0) + 1
    chance = DRY_CHANCE_MOST if p >= 1.0 else math.ceil(math.log(DRY_CHANCE / starts) / math.log(p))
    return min(max(rule, chance), max(rule, DRY_CHANCE_MOST))


def streak_chance(p: float, n: int, updates: int | None) -> float:
    """An upper bound on the chance that a run reaching its update budget has ``n`` failed rounds in a row
    somewhere (:func:`dry_limit`'s argument), at most 1."""
    return 1.0 if p >= 1.0 else min(1.0, ((updates or 0) + 1) * p ** n)


@dataclass(frozen=True)
class Budget:
    """When a run stops: a virtual-time budget and/or a number of processed updates."""

    time: float | None = None
    updates: int | None = None


@dataclass(frozen=True)
class Checkpointing:
    """When to hand the simulation's data to ``save``: every N updates, every T virtual seconds and/or every W wall
    seconds (at the end of the instant where the wall clock is found due: :class:`~simfl.sim.checkpoints.Checkpoints`)."""

    save: Callable[[dict[str, Any]], None]
    every_updates: int | None = None
    every_time: float | None = None
    every_wall: float | None = None
    at_end: Callable[[dict[str, Any]], None] | None = None
    """Also hand the data of a run its time budget stopped, as it stands then (the stop wake-up that fired still
    pending at its time, which a resumed run moves to its own budget: :class:`~simfl.sim.engine.Simulation`), so
    that a run with a later ``budget.time`` continues it (halving's promoted trials)."""


Progress = Callable[[SimState], None]


@dataclass(frozen=True)
class Watching:
    """Who watches the run from outside: ``progress`` after each metric row, ``on_update`` after each aggregation."""

    progress: Progress | None = None
    on_update: Progress | None = None
    eval_each_update: bool = False
    """Record a metric after every aggregation as well as on the time grid."""


class Phasing(Protocol):
    """What the world and its schedulers ask of rounds in phases (:class:`simfl.sim.phases.Network`)."""

    def begin(self, client: ClientState, leave: float | None) -> None:
        """``client``'s round starts now (its departure during the round at ``leave``, if any)."""

    def drop(self, client: ClientState) -> None:
        """``client`` departs during its round."""

    def stamp(self, client: ClientState, timed: bool) -> None:
        """The phase times of the event row just written for ``client`` (``timed``: the row ends its round)."""

    def ended(self, client: ClientState) -> float:
        """When ``client``'s upload ended."""

    def cut(self, client: ClientState, epochs: int) -> int | None:
        """Cut ``client``'s compute at its next epoch boundary (of ``epochs``): the epochs it then trains, or None
        when nothing is cut (its compute ended, or it is in its last epoch)."""


class Observer:
    """Hears the world's events at defined points, without being asked for by the rules: verification and
    checkpoints (:class:`~simfl.sim.verify.Verifier`, :class:`~simfl.sim.checkpoints.Checkpoints`) hook in here.

    The world calls, at each point, the observers that name it in :attr:`hears`; the methods here do nothing.
    """

    hears: frozenset[str] = frozenset()
    """The points this observer hears (names of the methods below)."""

    def attach(self, world: World) -> None:
        """Once, when the world is complete (an observer with wake-ups of its own registers their handler)."""

    def started(self) -> None:
        """A fresh world's first wake-ups are set (after the scheduler started)."""

    def resumed(self) -> None:
        """A rebuilt world's pending wake-ups are re-scheduled."""

    def dispatching(self, client: ClientState, now: float, in_flight: int) -> None:
        """``client``'s round is about to start (``in_flight``: rounds under way)."""

    def delivering(self, client: ClientState, now: float) -> None:
        """``client``'s round ends at its arrival time."""

    def recalled(self, client: ClientState, now: float, epochs: int, draw: float, compute: float) -> None:
        """``client``'s round was cut at ``now`` to its first ``epochs`` epochs (:meth:`World.recall`): its compute
        of ``draw`` seconds became ``compute``."""

    def collected(self, client: ClientState, staleness: int, update: int, weights: torch.Tensor) -> None:
        """``client``'s reply was collected as update ``update``."""

    def merged(self, weights: torch.Tensor, update: int, client: int | None, now: float) -> None:
        """The algorithm aggregated (``client``'s update, or a round: None); ``weights``: the global model."""

    def counted(self) -> None:
        """An aggregation counted updates (after the update budget did not stop the run)."""

    def recorded(self, now: float) -> None:
        """A metric row is recorded."""


def _ignore(wake: Wake) -> None:
    """The handler of an observer's wake-up kind when no observer handles it (a resumed run without them)."""


class World:
    """The rules of one run as handlers; the clock calls :meth:`fire` when a wake-up's time comes.

    What a scheduler may do is this narrow set: read :attr:`state` and ``clock.now``; :meth:`wake`,
    :meth:`cancel` and :attr:`soon` (a zero-time step); start rounds (:meth:`dispatch`, :meth:`send`,
    :meth:`away`); collect an arrival (:meth:`arrival`) and say it was aggregated (:meth:`updated`,
    :meth:`closed`); :meth:`discard` a straggler, :meth:`note` an event, :meth:`rejoin_later` after a
    failure, :meth:`recall` a round in flight to its next epoch boundary, and stop a run that is :meth:`stuck`.
    """

    scheduler: Scheduler
    """The server side, attached once after construction (:meth:`attach`)."""
    network: Phasing | None = None
    """Rounds in phases (download, compute, upload over shared links: :mod:`simfl.sim.phases`), set once after
    construction; None: a round is one draw."""

    def __init__(
        self,
        state: SimState,
        algorithm: Algorithm[Any],
        latency: Latencies,
        executor: Executor,
        evaluate: Callable[[torch.Tensor], Scores],
        budget: Budget,
        eval_every: float,
        availability: Availability | None,
        watching: Watching,
        save: Callable[[], dict[str, Any]],
        resumed: bool = False,
        clock: ClockKind = "simpy",
        epochs: int | None = None,
    ) -> None:
        self.state = state
        self.algorithm = algorithm
        self.latency = latency
        self.executor = executor
        self.budget = budget
        self.eval_every = eval_every
        self.availability = availability
        self.watching = watching
        self.save = save
        """The whole simulation as data (for checkpoints)."""
        self.epochs = epochs
        """``train.epochs``: the epochs of a round, whose boundaries a recall cuts at (None: not known, no cut)."""
        self._handlers: dict[WakeKind, Callable[[Wake], None]] = {
            "deliver": self._deliver, "leave": self._leave, "rejoin": self._rejoin, "return": self._return,
            "eval": self._evaluation, "stop": self._time_up, "checkpoint": _ignore, "save": _ignore,
        }
        """What runs when a wake-up of each kind fires (the clock calls it; the scheduler's and observers' kinds
        are added by :meth:`attach` and :meth:`handle`)."""
        self.clock: Clock = make_clock(clock, state.now if resumed else None, state.wakes, self._handlers)
        self.wake = self.clock.wake
        """Create a pending wake-up of a kind at a time, for a target (client or round), and schedule it: its
        handler runs when the time comes (:meth:`Clock.wake`, bound once)."""
        self.soon = self.clock.soon
        """Run a step at this instant, after the events already due now (:meth:`Clock.soon`, bound once)."""
        self.send: Callable[[ClientState, torch.Tensor], None] = (
            self.dispatch if availability is None else self._send_if_present)
        """Start a client's round from the given weights now, unless it is away (:meth:`away`): then its return
        restarts it from them. With no availability nobody is ever away: it is :meth:`dispatch` itself."""
        self.failure_p = 0.0 if availability is None else float(availability.config.p)
        """The probability that a client's round fails (``availability.p``), the same for every round."""
        self.dry_limit = (dry_limit(len(state.clients), self.failure_p, budget.updates) if budget.time is None
                          else math.inf)
        """Fruitless client rounds in a row (:attr:`SimState.dry`) that stop a run without a time budget."""
        self.stalled: str | None = None
        """Why the run stopped before its budget was spent, if it did (:meth:`_stall`)."""
        self.recorder = Recorder(evaluate, watching.progress)
        self._watched = watching.eval_each_update or watching.on_update is not None
        self._started: tuple[Callable[[], None], ...] = ()
        self._resumed: tuple[Callable[[], None], ...] = ()
        self._dispatching: tuple[Callable[[ClientState, float, int], None], ...] = ()
        self._delivering: tuple[Callable[[ClientState, float], None], ...] = ()
        self._recalled: tuple[Callable[[ClientState, float, int, float, float], None], ...] = ()
        self._collected: tuple[Callable[[ClientState, int, int, torch.Tensor], None], ...] = ()
        self._merged: tuple[Callable[[torch.Tensor, int, int | None, float], None], ...] = ()
        self._counted: tuple[Callable[[], None], ...] = ()

    def attach(self, scheduler: Scheduler, observers: Sequence[Observer] = ()) -> None:
        """Complete the world: its server side (which handles the ``server`` and ``deadline`` wake-ups) and the
        observers, each called at the points it hears, in the given order."""
        self.scheduler = scheduler
        self._handlers["server"] = self._handlers["deadline"] = scheduler.wake
        for o in observers:
            o.attach(self)

        def hear(point: str) -> tuple[Any, ...]:
            return tuple(getattr(o, point) for o in observers if point in o.hears)

        self._started, self._resumed = hear("started"), hear("resumed")
        self._dispatching, self._delivering, self._collected = hear("dispatching"), hear("delivering"), hear("collected")
        self._merged, self._counted, self._recalled = hear("merged"), hear("counted"), hear("recalled")
        self.recorder.heard = hear("recorded")

    def handle(self, kind: WakeKind, handler: Callable[[Wake], None]) -> None:
        """Let an observer handle its own kind of wake-up (``checkpoint``, ``save``)."""
        self._handlers[kind] = handler

    # -- wake-ups ----------------------------------------------------------------

    def cancel(self, wake: Wake) -> None:
        """Drop a pending wake-up: when its time comes nothing happens."""
        self.clock.cancel(wake)

    # -- starting ----------------------------------------------------------------

    def start(self) -> None:
        """A fresh world at time 0: absent clients wait, the scheduler starts, the timers are set."""
        for c in self.state.clients:
            if self.availability is not None and not self.availability.present(c.index, 0.0):
                self.leave_until_back(c)
        self.scheduler.start()
        self._next_evaluation()
        if self.budget.time is not None:
            self.wake("stop", self.budget.time)
        for hear in self._started:
            hear()

    def resume(self) -> None:
        """A world rebuilt from data: resubmit in-flight jobs, then re-schedule the pending wake-ups in order."""
        st = self.state
        for c in sorted(st.clients, key=lambda c: c.seq):
            if c.handle is not None:
                assert c.start is not None
                message = c.message if c.message is not None else self.algorithm.message(c.index, c.rounds - 1)
                c.handle = self.executor.submit(Job(c.index, c.rounds - 1, c.start, message, c.epochs))
        self.scheduler.resume()
        for wake in sorted(st.pending.values(), key=lambda w: w.order):
            self.clock.at(wake)
        st.pending = {}  # the clock holds them now (:meth:`pending`)
        for hear in self._resumed:
            hear()

    # -- clients -----------------------------------------------------------------

    def dispatch(self, client: ClientState, weights: torch.Tensor) -> None:
        """Start a round of ``client`` from ``weights`` now; it ends at its arrival time or at a departure."""
        st = self.state
        now = self.clock.now
        index, rounds, availability = client.index, client.rounds, self.availability
        if self._dispatching:
            in_flight = st.in_flight()
            for hear in self._dispatching:
                hear(client, now, in_flight)
        latency = self.latency.sample(index)
        arrival = now + latency
        fails = availability is not None and availability.fails(index)
        client.start, client.dispatch_time, client.latency, client.fails = weights, now, latency, fails
        client.epochs = None
        if fails:
            client.handle = client.message = None
        else:
            message = self.algorithm.message(index, rounds)
            if client.memory is not None:  # what the client kept on its device travels with its job
                message = Message(message.hooks, {**message.arrays, MEMORY: client.memory}, message.config)
            client.message = message
            client.handle = self.executor.submit(Job(index, rounds, weights, message), due=arrival)
        client.rounds = rounds + 1
        client.seq = st.seq
        client.phase = "round"
        client.outcome = None
        st.seq += 1
        leave = None if availability is None else availability.next_leave(index, now)
        if self.network is not None:  # the round's end comes from its phases
            self.network.begin(client, leave)
            return
        if leave is not None and leave <= arrival:
            self.wake("leave", leave, index)
        else:
            self.wake("deliver", arrival, index)

    def recall(self, client: ClientState) -> bool:
        """Cut ``client``'s round in flight short: it reports at its next epoch boundary with the epochs done by then
        (an asynchronous rule's recall, :attr:`simfl.algorithms.base.AsyncAlgorithm.recalls_clients`); whether it was
        cut. Where the boundary lies is :func:`simfl.sim.recall.boundary`'s rule: epoch ``k`` of ``E`` ends ``draw * k
        / E`` after the compute began (at dispatch; with phases, at the download's end, and a round still downloading
        trains one epoch). Its job becomes the first ``k`` epochs of the same round (the same stream: the same
        weights as the full job's after its ``k``-th epoch), submitted again; without phases its end wake-up moves
        there (a departure before the boundary still takes the round), with phases its compute's end does and its
        upload follows as any upload. A round not in flight, already cut, in its last epoch or past its compute is
        left as it is. A failing round fails at the boundary."""
        epochs = self.epochs
        if client.phase != "round" or client.epochs is not None or epochs is None:
            return False
        index, draw = client.index, client.latency
        if self.network is not None:
            k = self.network.cut(client, epochs)
            if k is None:
                return False
            end = client.dispatch_time + client.latency  # a due hint only: the upload follows
        else:
            cut = boundary(client.dispatch_time, self.clock.now, client.latency, epochs)
            if cut is None:
                return False
            k, latency = cut
            end = client.dispatch_time + latency
            wake = next(w for w in self.clock.pending().values()
                        if w.target == index and (w.kind == "deliver" or w.kind == "leave"))
            if wake.kind == "leave" and wake.time <= end:
                return False  # the departure comes first and takes the round, cut or not
            self.cancel(wake)
            client.latency = latency
            self.wake("deliver", end, index)
        client.epochs = k
        if client.handle is not None:
            assert client.start is not None and client.message is not None
            self.executor.discard(client.handle)
            client.handle = self.executor.submit(Job(index, client.rounds - 1, client.start, client.message, k),
                                                 due=end)
        for hear in self._recalled:
            hear(client, self.clock.now, k, draw, client.latency)
        return True

    def _deliver(self, wake: Wake) -> None:
        """A round ends at its arrival time (:meth:`end_round`)."""
        assert wake.target is not None
        self.end_round(self.state.clients[wake.target])

    def end_round(self, client: ClientState) -> None:
        """``client``'s round ends now: the update is delivered to the scheduler, or the round failed."""
        if self._delivering:
            for hear in self._delivering:
                hear(client, self.clock.now)
        if client.fails:
            self.note(client, "failure")
            client.fails = False
            client.outcome = False
            self.scheduler.failed(client)
            return
        client.phase = "idle"
        self.scheduler.delivered(client)

    def _leave(self, wake: Wake) -> None:
        """The client departs during its round: the round is lost."""
        assert wake.target is not None
        client = self.state.clients[wake.target]
        if self.network is not None:
            self.network.drop(client)
        self.note(client, "leave")
        self.discard(client)
        client.fails = False
        client.outcome = False
        self.leave_until_back(client)
        self.scheduler.lost(client)

    def discard(self, client: ClientState) -> None:
        """Drop ``client``'s training job, if any: its round will not be aggregated."""
        if client.handle is not None:
            self.executor.discard(client.handle)
            client.handle = client.message = None

    def rejoin_later(self, client: ClientState) -> None:
        """After a failed round: ``client`` waits for the rejoin delay, then the scheduler restarts it."""
        assert self.availability is not None
        client.phase = "rejoin"
        self.wake("rejoin", self.clock.now + self.availability.rejoin_delay, client.index)

    def _rejoin(self, wake: Wake) -> None:
        """After a failed async round and the rejoin delay: the scheduler restarts the client (if present)."""
        assert wake.target is not None and self.availability is not None
        if not self.clock.stopping:
            self.scheduler.rejoined(self.state.clients[wake.target])

    def away(self, client: ClientState) -> bool:
        """Whether ``client`` is away now (a departure at or before now, leave inclusive), for a scheduler to ask
        before it starts the client's round; if so it is marked away until its return or for good. A departure
        while a client is idle, queued or held by the server takes effect here (or in :meth:`send`); one during
        its round, at its ``leave`` wake-up."""
        availability = self.availability
        if availability is None or availability.present(client.index, self.clock.now):
            return False
        self.leave_until_back(client)
        return True

    def _send_if_present(self, client: ClientState, weights: torch.Tensor) -> None:
        """:attr:`send` with an availability. The presence test is written out, not a call: an arrival's path."""
        availability = self.availability
        assert availability is not None
        if availability.present(client.index, self.clock.now):
            self.dispatch(client, weights)
            return
        client.start = weights
        self.leave_until_back(client)

    def leave_until_back(self, client: ClientState) -> None:
        """Mark ``client`` away until its return (if it ever comes back)."""
        assert self.availability is not None
        client.active = False
        back = self.availability.back_at(client.index, self.clock.now)
        if back is None:
            client.phase = "gone"
            self.stuck(("gone",))
            return
        client.phase = "absent"
        self.wake("return", back, client.index)

    def _return(self, wake: Wake) -> None:
        """A departed client's absence ends: it is selectable again (async: it restarts at once)."""
        assert wake.target is not None
        if self.clock.stopping:
            return
        client = self.state.clients[wake.target]
        client.active = True
        client.phase = "idle"
        self.note(client, "join")
        self.scheduler.returned(client)

    def note(self, client: ClientState, kind: EventKind) -> None:
        """Log a failure, departure, late update or return of ``client`` now (no update, no staleness).

        The first three end a client's round without an update; once :attr:`dry_limit` such rounds came in a row
        (the update count unchanged), the run stops: it cannot make progress (:meth:`_stall`)."""
        st = self.state
        timed = kind in ("failure", "leave", "late")
        st.events.append(
            Event(self.clock.now, None, client.index, None, client.latency if timed else None,
                  client.dispatch_time if timed else None, None, kind)
        )
        if self.network is not None:
            self.network.stamp(client, timed)
        if timed:
            st.dry += 1
            if st.dry >= self.dry_limit and self.stalled is None:
                self._stall()

    def _stall(self) -> None:
        """Stop a run whose last :attr:`dry_limit` client rounds all ended without an update, saying why: where some
        of them failed, with the chance that failures alone give such a streak (:func:`dry_limit`)."""
        st = self.state
        kinds: Counter[str] = Counter()
        for e in reversed(st.events):
            if e.event == "arrival":
                break
            kinds[e.event] += 1
        why = {"late": "late for their round's close", "failure": "failed", "leave": "cut short by a departure"}
        causes = ", ".join(f"{kinds[k]} {text}" for k, text in why.items() if kinds[k])
        where = (f"(stopped at {self.clock.now:g} s after {st.updates} updates; with budget.time such a run goes on to "
                 "its time)")
        head = f"no update in the last {st.dry} client rounds in a row ({causes})"
        if not kinds["failure"]:
            self.stalled = f"{head}: the update budget of {self.budget.updates} cannot be reached {where}"
        else:
            bound = streak_chance(self.failure_p, st.dry, self.budget.updates)
            chance = (f"at this scenario's failure probability of {self.failure_p:g} per round, {st.dry} failures in a "
                      + (f"row come by chance with probability below {DRY_CHANCE:g}" if bound < DRY_CHANCE else
                         f"row may well come by chance (probability up to {bound:.2g}), but no run waits for more than "
                         f"{DRY_CHANCE_MOST:,} fruitless rounds in a row"))
            self.stalled = (f"{head}: {chance}, so the update budget of {self.budget.updates} is taken to be out of "
                            f"reach {where}" if kinds["failure"] == st.dry else
                            f"{head}: the update budget of {self.budget.updates} looks out of reach ({chance}; the "
                            f"other rounds ended late or cut short) {where}")
        self.clock.stop()

    def arrival(self, client: ClientState, staleness: int) -> Arrival:
        """Count the arrival of ``client`` (t += 1) and collect its reply: trained weights, arrays, metrics (with the
        time it is taken and the round's latency)."""
        st = self.state
        st.updates += 1
        st.dry = 0
        assert client.handle is not None and client.start is not None
        reply = self.executor.collect(client.handle)
        client.handle = client.message = None
        if self._collected:
            for hear in self._collected:
                hear(client, staleness, st.updates, reply.weights)
        arrays = reply.arrays
        if MEMORY in arrays:
            client.memory = arrays[MEMORY]
            arrays = {k: v for k, v in arrays.items() if k != MEMORY}
        return Arrival(client.index, reply.weights, client.start, staleness, st.updates, client.num_samples,
                       arrays, reply.metrics, self.clock.now, client.latency)

    # -- stopping ----------------------------------------------------------------

    def stuck(self, phases: tuple[Phase, ...]) -> bool:
        """Stop an update-budget run when every client is in one of ``phases``, so that none can deliver again
        (every one has left for good; or, for rounds, the rest are free but no round can open); whether it stopped.

        With a time budget the run goes on to its end, evaluating the unchanged model on the grid.
        """
        if self.budget.time is None and all(c.phase in phases for c in self.state.clients):
            self.clock.stop()
            return True
        return False

    def end(self) -> None:
        """The server has nothing more to do (a ServerApp's ``main`` returned): the run stops after the events due
        now, whatever is left of its budget."""
        self.clock.stop()

    def _finish_if_done(self) -> bool:
        """Stop once the update budget is spent; whether the run is stopping."""
        clock = self.clock
        limit = self.budget.updates
        if limit is not None and self.state.updates >= limit:
            clock.stop()
        return clock.stopping

    def _time_up(self, wake: Wake) -> None:
        self.clock.stop()

    # -- evaluation --------------------------------------------------------------

    def _next_evaluation(self) -> None:
        self.wake("eval", next_grid_time(self.clock.now, self.state.eval_index, self.eval_every))

    def _evaluation(self, wake: Wake) -> None:
        """Evaluate the global model at grid point i (time i * every), after the arrivals at that instant."""
        st = self.state
        self.record_metric(st.eval_index * self.eval_every)
        st.eval_index += 1
        self._next_evaluation()

    def _watch(self) -> None:
        """After every aggregation: the per-update evaluation (if asked for) and the ``on_update`` watcher."""
        if self.watching.eval_each_update:
            self.record_metric(self.clock.now)
        if self.watching.on_update is not None:
            self.watching.on_update(self.state)

    def _merge(self, client: int | None) -> None:
        """The observers of an aggregation hear of it, with the global model."""
        weights, update, now = self.algorithm.global_weights(), self.state.updates, self.clock.now
        for hear in self._merged:
            hear(weights, update, client, now)

    def updated(self, client: int) -> bool:
        """After the aggregation of ``client``'s update (counted by :meth:`arrival`): the observers hear of it,
        then the update budget (whether the run stops), else the count is heard (update-count checkpoints)."""
        if self._merged:
            self._merge(client)
        if self._watched:
            self._watch()
        if self._finish_if_done():
            return True
        if self._counted:
            self._count()
        return False

    def closed(self, merged: bool) -> bool:
        """A synchronous round closed, having aggregated updates (``merged``) or not: the observers hear of the
        aggregation, the round is counted, then the update budget (whether the run stops), else the count is heard."""
        if merged:
            self._watch()
            if self._merged:
                self._merge(None)
        self.state.rounds += 1
        if self._finish_if_done():
            return True
        if merged:
            self._count()
        return False

    def _count(self) -> None:
        for hear in self._counted:
            hear()

    def record_metric(self, time: float) -> None:
        """Record the global model's scores for grid time ``time`` now."""
        self.recorder.record(self.state, self.algorithm.global_weights(), time, self.clock.now)
