"""When things happen: pending wake-ups as data, their tie order, and the SimPy clock that fires them.

SimPy orders events by (time, priority, scheduling order). simfl uses that
to make ties explicit (docs/architecture.md, "Tie order"):

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
scheduled at an exact absolute time (:func:`delay_until`), so a rebuilt world
fires its timers at bit-identical times.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

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


@dataclass(frozen=True, slots=True)
class Wake:
    """A pending wake-up: what happens, its creation order (the tie-break), when, and for whom.

    ``index`` is the client of a client's wake-up (deliver, leave, rejoin, return) and the
    round of a deadline; None otherwise.
    """

    kind: WakeKind
    order: int
    time: float
    index: int | None = None


def delay_until(now: float, wake: float) -> float:
    """A delay d >= 0 with ``now + d == wake`` exactly in floating point (SimPy adds delays to now)."""
    if wake < now:
        raise ValueError(f"wake-up {wake!r} is before now {now!r}")
    d = wake - now
    for _ in range(8):
        if now + d == wake:
            return d
        d = math.nextafter(d, math.inf if now + d < wake else 0.0)
    raise ValueError(f"no delay from {now!r} reaches {wake!r} exactly")


class At(simpy.events.Event):
    """A timeout of ``delay`` virtual seconds processed with ``priority`` among events at the same time."""

    def __init__(self, env: simpy.Environment, delay: float, priority: int) -> None:
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, priority, delay)  # type: ignore[arg-type]  # EventPriority is an int


class Clock:
    """SimPy decides when: it fires each :class:`Wake` at its time, runs zero-time steps and stops the run.

    ``fire`` is called with each wake-up when its time comes; ``start`` is the virtual time of a
    resumed run (None: a fresh one). :meth:`soon` runs a step
    later at the same instant, after the events already due then (a SimPy event
    succeeding now); the schedulers use it where a hand-off takes zero-time steps.
    """

    def __init__(self, start: float | None, fire: Callable[[Wake], None]) -> None:
        self.env = simpy.Environment() if start is None else simpy.Environment(initial_time=start)
        self.fire = fire
        self.stop_event = self.env.event()

    @property
    def now(self) -> float:
        """Virtual time (the int 0 before the first event of a fresh run, as SimPy keeps it)."""
        return self.env.now  # type: ignore[no-any-return]

    @property
    def stopping(self) -> bool:
        """The run's end is decided (it ends once the events already due at this instant are handled)."""
        return bool(self.stop_event.triggered)

    def at(self, wake: Wake) -> None:
        """Schedule ``wake`` at its exact time with its kind's priority."""
        event = At(self.env, delay_until(self.env.now, wake.time), PRIORITY[wake.kind])
        event.callbacks.append(lambda _: self.fire(wake))  # type: ignore[union-attr]

    def soon(self, step: Callable[[], None]) -> None:
        """Run ``step`` at this instant, after the events already due now."""
        event = self.env.event()
        event.callbacks.append(lambda _: step())  # type: ignore[union-attr]
        event.succeed()

    def stop(self) -> None:
        """End the run once the events already due at this instant are handled."""
        if not self.stop_event.triggered:
            self.stop_event.succeed()

    def run(self) -> None:
        """Process events until the run stops."""
        self.env.run(until=self.stop_event)
