"""When things happen: pending wake-ups as data, their tie order, and the two clocks that fire them.

Both clocks order events by (time, priority, scheduling order), SimPy's
order. simfl uses that to make ties explicit (docs/architecture.md, "Tie order"):

1. Client and server wake-ups (``NORMAL``) at the same instant are handled in
   creation order, i.e. for round ends the order in which the rounds were
   started (at time 0, client index order); everything they trigger at that
   instant (the server taking an arrival, re-dispatching the client) also
   runs before (2).
2. Evaluation (``EVAL``) at time T sees every arrival with time <= T.
3. The time budget (``STOP``) ends the run after the evaluation at T.
4. Checkpoints (``CHECKPOINT``) are taken after everything else at T, when
   every pending wake-up other than a checkpoint lies strictly in the future.

A pending wake-up is a :class:`Wake`: plain data (when, its priority and creation
order, what, for whom), and its own key in the clock's queue. The clock holds the
pending wake-ups while a run goes (:meth:`Clock.pending`); a checkpoint saves them
with the simulation's state, and a resumed run re-schedules them in creation order.
Every wake-up is queued at its exact absolute time, the float the rules computed (a
departure at 526.2 fires at 526.2, whatever the current time): no delay is added to
the clock's time, which would round.

The rules (:mod:`simfl.sim.world`, :mod:`simfl.sim.schedulers`) talk to a
:class:`Clock`; two implement it with the same order, so a run gives the same
events and state on either:

- :class:`SimPyClock`: each wake-up and zero-time step is a SimPy event;
- :class:`HeapClock`: a plain heap of the same keys, with the zero-time steps
  of one instant in a queue beside it; several times faster where events
  dominate (pure-latency runs, benchmarks/README.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from heapq import heappop, heappush
from typing import Any, Literal, NamedTuple, Protocol

import simpy
from simpy.core import NORMAL

ARRIVAL = NORMAL
EVAL = NORMAL + 1
STOP = NORMAL + 2
CHECKPOINT = NORMAL + 3

WakeKind = Literal["deliver", "leave", "rejoin", "return", "server", "deadline", "eval", "stop", "checkpoint", "save",
                   "link", "compute"]
"""``deliver``: a client's round ends at its arrival time; ``leave``: the client departs before that;
``rejoin``: an async client restarts after a failed round; ``return``: an absent client comes back;
``server``: the server's busy time (``server_time``) ends; ``deadline``: a synchronous round's deadline;
``eval``: a point of the evaluation grid; ``stop``: the time budget; ``checkpoint``: a timed checkpoint;
``save``: an update-count checkpoint due at this instant; with a round in phases (:mod:`simfl.sim.phases`),
``link``: the next end of a transfer over the server's links (its target: the generation that scheduled it) and
``compute``: a client's compute phase ends."""

PRIORITY: dict[WakeKind, int] = {
    "deliver": ARRIVAL, "leave": ARRIVAL, "rejoin": ARRIVAL, "return": ARRIVAL, "server": ARRIVAL,
    "deadline": ARRIVAL, "link": ARRIVAL, "compute": ARRIVAL, "eval": EVAL, "stop": STOP, "checkpoint": CHECKPOINT,
    "save": CHECKPOINT,
}


class Wake(NamedTuple):
    """A pending wake-up: when, its kind's priority, its creation order (the tie-break), what, and for whom.

    The first three fields are the tie order's key, so a wake-up is its own entry in a heap (two
    never share an ``order``). ``target`` is the client of a client's wake-up (deliver, leave,
    rejoin, return) and the round of a deadline; None otherwise. A tuple: built once per round
    end, cheaply (:func:`wake_of` from its parts).
    """

    time: float
    priority: int
    order: int
    kind: WakeKind
    target: int | None = None


def wake_of(kind: WakeKind, order: int, time: float, target: int | None = None) -> Wake:
    """The wake-up of ``kind`` with its kind's priority (:data:`PRIORITY`; an unknown kind raises KeyError)."""
    return Wake(time, PRIORITY[kind], order, kind, target)


Step = Callable[[], None]
Handlers = Mapping[WakeKind, Callable[[Wake], None]]
"""What runs when a wake-up of each kind fires (the world's handlers)."""


class Clock(Protocol):
    """What the rules ask of a clock: the time, wake-ups at exact times, zero-time steps, the run's end."""

    @property
    def now(self) -> float:
        """Virtual time (the int 0 before the first event of a fresh run, as SimPy keeps it)."""

    @property
    def stopping(self) -> bool:
        """The run's end is decided (it ends once the events already due at this instant are handled)."""

    def wake(self, kind: WakeKind, time: float, target: int | None = None) -> Wake:
        """Create the next wake-up (the next creation order) of ``kind`` at ``time`` and queue it (:meth:`at`)."""

    @property
    def wakes(self) -> int:
        """Wake-ups created so far (the next creation order)."""

    def at(self, wake: Wake) -> None:
        """Queue ``wake`` (made by :meth:`wake`, or saved by a run now resumed) at its exact time with its kind's
        priority (a time before now is refused); when its time comes, the handler of its kind runs, unless it
        was cancelled."""

    def cancel(self, wake: Wake) -> None:
        """Drop a pending wake-up (queued, not yet fired): when its time comes nothing happens."""

    def pending(self) -> dict[int, Wake]:
        """The wake-ups queued and neither fired nor cancelled, by creation order."""

    def soon(self, step: Step) -> None:
        """Run ``step`` at this instant, after the events already due now."""

    def stop(self) -> None:
        """End the run once the events already due at this instant are handled."""

    def run(self) -> None:
        """Process events until the run stops."""


ClockKind = Literal["simpy", "heap"]


def make_clock(kind: ClockKind, start: float | None, wakes: int, handlers: Handlers) -> Clock:
    """The clock of ``kind``; ``start``: the virtual time of a resumed run (None: a fresh one at 0); ``wakes``: the
    wake-ups created before (the next creation order); ``handlers``: what runs when a wake-up of each kind fires
    (read at each firing, so handlers added later count)."""
    clock: Clock = SimPyClock(start, wakes, handlers) if kind == "simpy" else HeapClock(start, wakes, handlers)
    return clock


_new_wake = tuple.__new__
"""A :class:`Wake` from its fields, as one C call (the named tuple's own constructor is a Python function)."""


class _Creating:
    """Creating wake-ups in order, the same for both clocks."""

    wakes: int
    at: Callable[[Wake], None]

    def wake(self, kind: WakeKind, time: float, target: int | None = None) -> Wake:
        """Built as :func:`wake_of` builds it, without the call: an arrival's path."""
        order = self.wakes
        wake: Wake = _new_wake(Wake, (time, PRIORITY[kind], order, kind, target))
        self.wakes = order + 1
        self.at(wake)
        return wake


def _check_time(wake: Wake, now: float) -> None:
    if not wake.time >= now:  # also refuses NaN
        raise ValueError(f"wake-up {wake.kind} at {wake.time!r} is before now {now!r}")


class _Environment(simpy.Environment):
    """A SimPy environment that also queues events at an absolute time (``now + delay`` may round)."""

    def schedule_at(self, event: simpy.Event, priority: int, time: float) -> None:
        entry: tuple[float, int, int, simpy.Event] = (time, priority, next(self._eid), event)
        heappush(self._queue, entry)  # type: ignore[arg-type,misc]  # the key SimPy's schedule() uses


class SimPyClock(_Creating):
    """SimPy decides when: each :class:`Wake` and zero-time step is a SimPy event with its callback."""

    def __init__(self, start: float | None, wakes: int, handlers: Handlers) -> None:
        self.env = _Environment() if start is None else _Environment(initial_time=start)
        self.wakes = wakes
        self.handlers = handlers
        self.stop_event = self.env.event()
        self.stopping = False
        self._pending: dict[int, Wake] = {}

    @property
    def now(self) -> float:
        return self.env.now  # type: ignore[no-any-return]

    def at(self, wake: Wake) -> None:
        _check_time(wake, self.env.now)
        self._pending[wake.order] = wake
        event = simpy.Event(self.env)
        event._ok, event._value = True, None  # triggered: it succeeds when its time comes, like a Timeout
        event.callbacks.append(lambda _: self._fire(wake))  # type: ignore[union-attr]
        self.env.schedule_at(event, wake.priority, wake.time)

    def _fire(self, wake: Wake) -> None:
        if self._pending.pop(wake.order, None) is not None:
            self.handlers[wake.kind](wake)

    def cancel(self, wake: Wake) -> None:
        self._pending.pop(wake.order, None)

    def pending(self) -> dict[int, Wake]:
        return {order: self._pending[order] for order in sorted(self._pending)}

    def soon(self, step: Step) -> None:
        event = self.env.event()
        event.callbacks.append(lambda _: step())  # type: ignore[union-attr]
        event.succeed()

    def stop(self) -> None:
        if not self.stopping:
            self.stopping = True
            self.stop_event.succeed()

    def run(self) -> None:
        self.env.run(until=self.stop_event)


class HeapClock(_Creating):
    """The same order without SimPy: a heap of wake-ups (each its own key) and a queue of this instant's steps.

    A zero-time step is due at (now, ``NORMAL``) after everything queued before it, so the
    steps of one instant form a queue in creation order; the next event is the queue's first
    step unless a wake-up due now at ``NORMAL`` was queued before it: a step keeps the
    creation order of the last wake-up queued before it, and wake-ups are queued in creation
    order. The end of the run is a step too, as SimPy's stop event is. A cancelled wake-up
    stays in the heap and is skipped when it comes up.
    """

    def __init__(self, start: float | None, wakes: int, handlers: Handlers) -> None:
        self.now: float = 0 if start is None else start
        self.wakes = wakes
        self.stopping = False
        self.handlers = handlers
        self._heap: list[Wake] = []
        self._cancelled: set[int] = set()
        """The orders of wake-ups cancelled and still in the heap."""
        self._steps: deque[tuple[int, Step | None]] = deque()
        """This instant's zero-time steps (the order of the last wake-up queued before each, step); None is the
        run's end."""
        self._last = -1
        """The order of the last wake-up queued: a step comes after it and before any queued later (wake-ups are
        created in order, and a resumed run queues its pending ones in order before it creates any)."""

    def at(self, wake: Wake) -> None:
        if not wake.time >= self.now:
            _check_time(wake, self.now)
        heappush(self._heap, wake)
        self._last = wake.order

    def cancel(self, wake: Wake) -> None:
        self._cancelled.add(wake.order)

    def pending(self) -> dict[int, Wake]:
        cancelled = self._cancelled
        return {w.order: w for w in sorted(self._heap, key=lambda w: w.order) if w.order not in cancelled}

    def soon(self, step: Step) -> None:
        self._steps.append((self._last, step))

    def stop(self) -> None:
        if not self.stopping:
            self.stopping = True
            self._steps.append((self._last, None))

    def run(self) -> None:
        heap, steps, cancelled, handlers, now = self._heap, self._steps, self._cancelled, self.handlers, self.now
        while True:
            if steps:
                last, step = steps[0]
                head: Any = heap[0] if heap else None
                if head is None or head[0] != now or head[1] != ARRIVAL or head[2] > last:
                    steps.popleft()
                    if step is None:
                        return
                    step()
                    continue
            if not heap:
                raise RuntimeError("no scheduled events left and the run did not stop")
            wake = heappop(heap)
            self.now = now = wake[0]
            if cancelled and wake[2] in cancelled:
                cancelled.discard(wake[2])
                continue
            handlers[wake[3]](wake)
