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

A pending wake-up is a :class:`Wake`: plain data (what, when, for whom and its
creation order), kept in the simulation's state, so a checkpoint saves the
list and a resumed run re-schedules it in creation order. Every wake-up is
queued at its exact absolute time, the float the rules computed (a departure
at 526.2 fires at 526.2, whatever the current time): no delay is added to the
clock's time, which would round.

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
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any, Literal, NamedTuple, Protocol

import simpy
from simpy.core import NORMAL

ARRIVAL = NORMAL
EVAL = NORMAL + 1
STOP = NORMAL + 2
CHECKPOINT = NORMAL + 3

WakeKind = Literal["deliver", "leave", "rejoin", "return", "server", "deadline", "eval", "stop", "checkpoint", "save"]
"""``deliver``: a client's round ends at its arrival time; ``leave``: the client departs before that;
``rejoin``: an async client restarts after a failed round; ``return``: an absent client comes back;
``server``: the server's busy time (``server_time``) ends; ``deadline``: a synchronous round's deadline;
``eval``: a point of the evaluation grid; ``stop``: the time budget; ``checkpoint``: a timed checkpoint;
``save``: an update-count checkpoint due at this instant."""

PRIORITY: dict[WakeKind, int] = {
    "deliver": ARRIVAL, "leave": ARRIVAL, "rejoin": ARRIVAL, "return": ARRIVAL, "server": ARRIVAL,
    "deadline": ARRIVAL, "eval": EVAL, "stop": STOP, "checkpoint": CHECKPOINT, "save": CHECKPOINT,
}


class Wake(NamedTuple):
    """A pending wake-up: what happens, its creation order (the tie-break), when, and for whom.

    ``target`` is the client of a client's wake-up (deliver, leave, rejoin, return) and the
    round of a deadline; None otherwise. A tuple: built once per round end, cheaply.
    """

    kind: WakeKind
    order: int
    time: float
    target: int | None = None


Step = Callable[[], None]


class Clock(Protocol):
    """What the rules ask of a clock: the time, wake-ups at exact times, zero-time steps, the run's end."""

    @property
    def now(self) -> float:
        """Virtual time (the int 0 before the first event of a fresh run, as SimPy keeps it)."""

    @property
    def stopping(self) -> bool:
        """The run's end is decided (it ends once the events already due at this instant are handled)."""

    def at(self, wake: Wake) -> None:
        """Queue ``wake`` at its exact time with its kind's priority (a time before now is refused)."""

    def soon(self, step: Step) -> None:
        """Run ``step`` at this instant, after the events already due now."""

    def stop(self) -> None:
        """End the run once the events already due at this instant are handled."""

    def run(self) -> None:
        """Process events until the run stops."""


ClockKind = Literal["simpy", "heap"]


def make_clock(kind: ClockKind, start: float | None, fire: Callable[[Wake], None]) -> Clock:
    """The clock of ``kind``; ``start``: the virtual time of a resumed run (None: a fresh one at 0)."""
    clock: Clock = SimPyClock(start, fire) if kind == "simpy" else HeapClock(start, fire)
    return clock


def _check_time(wake: Wake, now: float) -> None:
    if not wake.time >= now:  # also refuses NaN
        raise ValueError(f"wake-up {wake.kind} at {wake.time!r} is before now {now!r}")


class _Environment(simpy.Environment):
    """A SimPy environment that also queues events at an absolute time (``now + delay`` may round)."""

    def schedule_at(self, event: simpy.Event, priority: int, time: float) -> None:
        entry: tuple[float, int, int, simpy.Event] = (time, priority, next(self._eid), event)
        heappush(self._queue, entry)  # type: ignore[arg-type,misc]  # the key SimPy's schedule() uses


class SimPyClock:
    """SimPy decides when: each :class:`Wake` and zero-time step is a SimPy event with its callback."""

    def __init__(self, start: float | None, fire: Callable[[Wake], None]) -> None:
        self.env = _Environment() if start is None else _Environment(initial_time=start)
        self.fire = fire
        self.stop_event = self.env.event()
        self.stopping = False

    @property
    def now(self) -> float:
        return self.env.now  # type: ignore[no-any-return]

    def at(self, wake: Wake) -> None:
        _check_time(wake, self.env.now)
        event = simpy.Event(self.env)
        event._ok, event._value = True, None  # triggered: it succeeds when its time comes, like a Timeout
        event.callbacks.append(lambda _: self.fire(wake))  # type: ignore[union-attr]
        self.env.schedule_at(event, PRIORITY[wake.kind], wake.time)

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


class HeapClock:
    """The same order without SimPy: a heap of (time, priority, order, wake) and a queue of this instant's steps.

    A zero-time step is due at (now, ``NORMAL``) after everything queued before it, so the
    steps of one instant form a queue in creation order; the next event is the queue's first
    step unless a wake-up due now at ``NORMAL`` was created before it (one order counter for
    both). The end of the run is a step too, as SimPy's stop event is.
    """

    def __init__(self, start: float | None, fire: Callable[[Wake], None]) -> None:
        self.now: float = 0 if start is None else start
        self.stopping = False
        self.fire = fire
        self._heap: list[tuple[float, int, int, Wake]] = []
        self._steps: deque[tuple[int, Step | None]] = deque()
        """This instant's zero-time steps (order, step); None is the run's end."""
        self._order = 0

    def at(self, wake: Wake) -> None:
        if not wake.time >= self.now:
            _check_time(wake, self.now)
        heappush(self._heap, (wake.time, PRIORITY[wake.kind], self._order, wake))
        self._order += 1

    def soon(self, step: Step) -> None:
        self._steps.append((self._order, step))
        self._order += 1

    def stop(self) -> None:
        if not self.stopping:
            self.stopping = True
            self._steps.append((self._order, None))
            self._order += 1

    def run(self) -> None:
        heap, steps, fire, now = self._heap, self._steps, self.fire, self.now
        while True:
            if steps:
                order, step = steps[0]
                head: Any = heap[0] if heap else None
                if head is None or head[0] != now or head[1] != ARRIVAL or head[2] > order:
                    steps.popleft()
                    if step is None:
                        return
                    step()
                    continue
            if not heap:
                raise RuntimeError("no scheduled events left and the run did not stop")
            now, _, _, wake = heappop(heap)
            self.now = now
            fire(wake)
