"""What bounds a run: its virtual horizon and the client updates, rounds and events it makes, from what the latency
model states (:class:`~simfl.latency.base.RoundTimes`), what the entry states (its round size and bound on rounds)
and the scenario's budget, population, availability and rounds.

An expectation, not a simulation: each client's rounds are a renewal process of its stated mean round time, and the
budget is reached where the expected count of updates meets it.

- Every present client in flight (no ``server:``, asynchronous): client m delivers about
  ``(1 - p) * (present time / cycle + (c**2 - 1) / 2)`` updates over each stretch of presence, where ``cycle =
  mean + p * rejoin_delay + (1 - p) * server_time`` and ``c`` is its coefficient of variation (the renewal
  theorem's second term, 0 for exponential rounds; a client of fixed rounds delivers ``floor(time / cycle)``).
- ``server: {concurrency: C}`` (asynchronous): each freed slot draws an idle, present client; client m is then
  dispatched at a rate ``k * a_m / (1 + k * b_m)`` (``a_m`` its share of time present, ``b_m`` the time it is
  busy per dispatch), with ``k`` such that the C slots are full. A slow client is in flight longer, so the idle
  pool holds more fast ones: between the arithmetic mean round time (C much smaller than N) and every client's
  own rate (C = N).
- Synchronous rounds: a round selects ``ceil(K (1 + over_select))`` free clients and closes once K delivered,
  every selected client ended, or the ``deadline`` passed; stragglers stay busy until their round ends and their
  update is late when it ends. Rounds are drawn (:func:`sync_rounds`: :data:`PATHS` runs of :data:`ROUNDS`
  rounds, lognormal round times of each client's stated mean and spread, never below its shortest round, from a
  fixed seed: the same answer each time), and the budget counts the rounds that closed within it, past the drawn
  ones at their long-run mean. A deadline below every present client's shortest round (``low``) lets no update
  arrive: with only an update budget such a run has no end (:attr:`Extent.endless`, which the limits refuse).
- ``availability``: a round fails with probability p (it costs its time, delivers nothing); a departure takes a
  client's presence away (its average client's rate); a trace's own absences (fleet windows) are the stated rows'.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from simfl.latency.base import STATED_ROWS, RoundTimes

RATE_STEPS = 80
"""Bisection steps of the horizon at which the expected updates meet an update budget."""
ROUNDS = 64
"""Synchronous rounds drawn along each run (:func:`sync_rounds`)."""
PATHS = 16
"""Independent runs of :data:`ROUNDS` synchronous rounds drawn to average over."""


@dataclass(frozen=True)
class StatedWorld:
    """What the scenario says of the world the entries run in, beside the latency model's statement."""

    times: RoundTimes
    clients: int
    concurrency: int | None = None
    """``server.concurrency`` (None: every present client in flight)."""
    p: float = 0.0
    rejoin_delay: float = 0.0
    departures: tuple[tuple[float, float | None], ...] = ()
    """The scenario's own departures ``(leave, rejoin)`` (their clients are not told apart)."""
    server_time: float = 0.0
    deadline: float | None = None
    over_select: float = 0.0
    model: str = "?"
    """The latency model's name, for messages."""

    @functools.cached_property
    def stretches(self) -> Stretches:
        """The rows' stretches of presence."""
        return Stretches.of(self.times)

    @functools.cached_property
    def drawn(self) -> dict[int, Rounds]:
        """Synchronous rounds drawn in this world, by round size (entries of one size share them)."""
        return {}


@dataclass(frozen=True)
class EntryBudget:
    """When a run stops: virtual seconds, updates, and the entry's own bound on rounds (None: no such bound)."""

    time: float | None
    updates: int | None
    rounds: int | None = None


@dataclass(frozen=True)
class Extent:
    """What one run of one entry is expected to make."""

    horizon: float
    """Virtual seconds the run lasts (inf: its budget is never reached, see :attr:`endless`)."""
    arrivals: float
    """Client updates processed (aggregated)."""
    aggregations: float
    """Aggregations: one per arrival (asynchronous) or per round that aggregated something (synchronous)."""
    rounds: float = 0.0
    """Synchronous rounds opened."""
    failed: float = 0.0
    """Rounds that failed (``availability.p``)."""
    late: float = 0.0
    """Updates discarded because their round had closed (synchronous)."""
    empty: float = 0.0
    """Synchronous rounds that closed with no update."""
    absences: float = 0.0
    """Rows absences write within the horizon: a ``leave`` for a departure after the start, a ``join`` for a return
    (a departure, a fleet window's end and start)."""
    in_flight: float = 0.0
    """Clients training at once, on average."""
    endless: str | None = None
    """Why the budget is never reached (None: it is)."""


@dataclass(frozen=True)
class Stretches:
    """Every stretch of presence of every row on ``[0, inf)``, flat: ``start``, ``end`` (inf: for good) and its
    ``row``, so that a horizon's present times are one vectorised pass."""

    start: np.ndarray
    end: np.ndarray
    row: np.ndarray
    rows: int

    @classmethod
    def of(cls, times: RoundTimes) -> Stretches:
        rows = len(times.mean)
        if times.absences is None:
            return cls(np.zeros(rows), np.full(rows, math.inf), np.arange(rows), rows)
        start, end, row = [], [], []
        for i, away in enumerate(times.absences):
            t = 0.0
            for leave, back in away:
                if leave > t:
                    start.append(t)
                    end.append(leave)
                    row.append(i)
                t = math.inf if back is None else max(t, back)
                if not math.isfinite(t):
                    break
            if math.isfinite(t):
                start.append(t)
                end.append(math.inf)
                row.append(i)
        return cls(np.array(start, dtype=np.float64), np.array(end, dtype=np.float64), np.array(row, dtype=np.int64),
                   rows)

    def lengths(self, horizon: float) -> np.ndarray:
        """Each stretch's present time within ``[0, horizon]``."""
        return np.clip(np.minimum(self.end, horizon) - self.start, 0.0, None)

    def present(self, horizon: float) -> np.ndarray:
        """Each row's present time within ``[0, horizon]``."""
        return np.bincount(self.row, weights=self.lengths(horizon), minlength=self.rows)


def last_presence(world: StatedWorld) -> float:
    """When the last client leaves for good (inf: some client stays)."""
    return float(world.stretches.end.max()) if len(world.stretches.end) else 0.0


def _cycle(world: StatedWorld) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the time between two starts of a client's round (busy: in flight, waiting to rejoin after a failure,
    held by the server after an update) and the time a serving slot is held per dispatch."""
    t, p, s = world.times, world.p, world.server_time
    return t.mean + p * world.rejoin_delay + (1 - p) * s, t.mean + (1 - p) * s


def _everyone(world: StatedWorld, horizon: float) -> tuple[float, float]:
    """(expected updates by ``horizon``, clients in flight on average): every present client in flight. Over each
    stretch of presence a client restarting every ``busy`` seconds on average (squared coefficient of variation
    ``c2``) completes ``floor(length / busy)`` rounds when they are fixed, else the renewal theorem's two terms
    (never below zero)."""
    t, st = world.times, world.stretches
    busy, _ = _cycle(world)
    ok = np.isfinite(busy)
    cycle = np.where(ok, busy, 1.0)[st.row]
    c2 = np.where(ok, (t.std / np.where(ok, t.mean, 1.0)) ** 2, 0.0)[st.row]
    fixed = ((t.std == 0) & (world.p == 0))[st.row]
    lengths = st.lengths(horizon)
    done = np.where(fixed, np.floor(lengths / cycle), np.maximum(lengths / cycle + (c2 - 1) / 2, 0.0))
    done = np.where(ok[st.row] & (lengths > 0), done, 0.0)
    starts = float((t.weight[st.row] * done).sum())
    share = st.present(horizon) / horizon
    in_flight = float((t.weight * share * np.where(ok, t.mean / np.where(ok, busy, 1.0), 0.0)).sum())
    return (1 - world.p) * starts, in_flight


def _sampled(world: StatedWorld, horizon: float) -> tuple[float, float]:
    """(expected updates by ``horizon``, clients in flight): at most ``concurrency`` in flight, each freed slot drawing
    an idle, present client. Client m's dispatch rate is ``k a_m / (1 + k b_m)``; ``k`` fills the slots."""
    t = world.times
    busy, slot = _cycle(world)
    share = world.stretches.present(horizon) / horizon
    ok = np.isfinite(busy)
    w = np.where(ok, t.weight * share, 0.0)
    busy_ok = np.where(ok, busy, 1.0)
    most = float((w * slot / busy_ok).sum())  # every present client in flight
    slots = min(float(world.concurrency or 0), most)
    if slots <= 0:
        return 0.0, 0.0

    def held(k: float) -> float:
        return float((w * k / (1 + k * busy_ok) * slot).sum())

    low, high = 0.0, 1.0
    while held(high) < slots * (1 - 1e-9) and high < 1e300:
        low, high = high, high * 16
    for _ in range(RATE_STEPS):
        mid = (low + high) / 2 if high < 1e300 else high
        if held(mid) < slots:
            low = mid
        else:
            high = mid
    rate = w * high / (1 + high * busy_ok)
    dispatches = float(rate.sum()) * horizon
    mix = rate / rate.sum()
    mean = float((mix * t.mean).sum())
    c2 = float((mix * ((np.where(ok, t.std, 0.0) / mean) ** 2 + (t.mean / mean) ** 2)).sum()) - 1 if mean > 0 else 0.0
    c2 = c2 if math.isfinite(c2) else 0.0
    return (1 - world.p) * max(dispatches + slots * (c2 - 1) / 2, 0.0), slots


def async_updates(world: StatedWorld, horizon: float) -> tuple[float, float]:
    """(expected updates by ``horizon``, clients in flight) of an asynchronous entry, at most one per ``server_time``."""
    if horizon <= 0:
        return 0.0, 0.0
    if world.concurrency is None or world.concurrency >= world.clients:
        got, in_flight = _everyone(world, horizon)
    else:
        got, in_flight = _sampled(world, horizon)
    got -= _departed(world, horizon, got)
    if world.server_time > 0:
        got = min(got, horizon / world.server_time)
    return max(got, 0.0), in_flight


def _departed(world: StatedWorld, horizon: float, updates: float) -> float:
    """Updates the scenario's departures take away: their absent time within ``horizon`` at an average client's
    rate (a client away is not sampled; under serving, its slot goes to another)."""
    if not world.departures or world.concurrency is not None and world.concurrency < world.clients:
        return 0.0
    away = sum(min(horizon, math.inf if back is None else back) - leave
               for leave, back in world.departures if leave < horizon)
    return updates / max(world.clients, 1) * away / horizon


@dataclass(frozen=True)
class Rounds:
    """Synchronous rounds drawn along :data:`PATHS` independent runs of :data:`ROUNDS` rounds each: per run and round,
    when it closed (virtual seconds from the start), its updates, late updates, failures and selected clients."""

    close: np.ndarray
    delivered: np.ndarray
    late: np.ndarray
    failed: np.ndarray
    selected: np.ndarray

    @property
    def period(self) -> float:
        """Virtual seconds per round in the long run (the later half of each run, past the start's transient)."""
        half = self.close.shape[1] // 2
        span = self.close[:, -1] - self.close[:, half - 1]
        return float(span.mean()) / (self.close.shape[1] - half)

    def per_round(self, values: np.ndarray) -> float:
        """The long-run mean of ``values`` per round (the later half of each run)."""
        return float(values[:, values.shape[1] // 2:].mean())

    def until(self, horizon: float) -> Closed:
        """The rounds closed by ``horizon``; past the drawn ones, at the long-run :attr:`period`."""
        done = (self.close <= horizon).sum(axis=1)
        beyond = np.where(done == self.close.shape[1],
                          np.maximum(horizon - self.close[:, -1], 0.0) / max(self.period, 1e-300), 0.0)
        return Closed(float((done + beyond).mean()), done)

    def total(self, values: np.ndarray, closed: Closed) -> float:
        """The mean over the runs of ``values`` summed over the rounds ``closed``, past the drawn ones at their
        long-run mean."""
        drawn = np.array([values[i, :d].sum() for i, d in enumerate(closed.drawn.tolist())])
        extra = max(closed.rounds - float(closed.drawn.mean()), 0.0)
        return float(drawn.mean()) + extra * self.per_round(values)


class Closed(NamedTuple):
    """Synchronous rounds closed by some time: their mean number over the runs, and each run's drawn rounds among
    them."""

    rounds: float
    drawn: np.ndarray


def sync_rounds(world: StatedWorld, k: int) -> Rounds:
    """:data:`PATHS` runs of :data:`ROUNDS` rounds of ``k`` clients (see the module docstring), side by side, from a
    fixed seed. A population of at most :data:`~simfl.latency.base.STATED_ROWS` clients stated as whole rows is
    drawn client by client, each busy until its round ends (a straggler is not selected again before); a larger
    one is drawn by rows, every client free (stragglers are few among many)."""
    t = world.times
    gen = np.random.default_rng(0)
    ok = np.isfinite(t.mean)
    sigma = np.sqrt(np.log1p(np.where(ok, (t.std / np.where(ok, t.mean, 1.0)) ** 2, 0.0)))
    mu = np.log(np.where(ok, t.mean, 1.0)) - sigma ** 2 / 2
    whole = bool(np.all(t.weight == np.round(t.weight))) and t.weight.sum() <= STATED_ROWS
    rows = np.repeat(np.arange(len(t.mean)), np.round(t.weight).astype(np.int64)) if whole else None
    size = math.ceil(k * (1 + world.over_select))
    if world.concurrency is not None:
        size = min(size, world.concurrency)
    size = min(size, world.clients)
    deadline = math.inf if world.deadline is None else world.deadline
    busy = np.zeros((PATHS, len(rows))) if rows is not None else None  # when each client is free again
    straggling = np.zeros((PATHS, len(rows)), dtype=bool) if rows is not None else None  # its update will be late
    now = np.zeros(PATHS)
    shape = (PATHS, ROUNDS)
    close, delivered, late, failed, selected = (np.zeros(shape) for _ in range(5))
    lanes = np.arange(PATHS)[:, None]
    for r in range(ROUNDS):
        if busy is not None and rows is not None and straggling is not None:
            now = np.maximum(now, busy.min(axis=1))  # none free: the first straggler's end
            free = busy <= now[:, None]
            if r:  # a late update is written when it ends: within the round before this opening
                late[:, r - 1] = (straggling & free).sum(axis=1)
            straggling &= ~free
            take = np.minimum(free.sum(axis=1), size)
            keys = np.where(free, gen.random(busy.shape), np.inf)
            order = np.argsort(keys, axis=1)[:, :size]
            chosen = order
            picks = rows[order]
            taken = np.arange(size)[None, :] < take[:, None]
        else:
            picks = gen.choice(len(t.mean), size=(PATHS, size), p=t.weight / t.weight.sum())
            take = np.full(PATHS, size)
            taken = np.ones((PATHS, size), dtype=bool)
        draws = np.where(ok[picks], np.exp(mu[picks] + sigma[picks] * gen.standard_normal((PATHS, size))), np.inf)
        draws = np.where(taken, np.maximum(draws, t.low[picks]), np.nan)
        fails = (gen.random((PATHS, size)) < world.p) & taken
        good = np.sort(np.where(taken & ~fails, draws, np.inf), axis=1)
        needed = np.minimum(k, take)
        kth = good[np.arange(PATHS), np.maximum(needed - 1, 0)]
        ends = np.where(take > 0, np.where(taken, draws, -np.inf).max(axis=1), 0.0)
        at = np.minimum(np.where(np.isfinite(kth), kth, ends), deadline)
        close[:, r] = now + at
        delivered[:, r] = (good <= at[:, None]).sum(axis=1)
        failed[:, r] = fails.sum(axis=1)
        selected[:, r] = take
        if busy is not None and straggling is not None:
            busy[lanes, chosen] = np.where(taken, now[:, None] + draws, busy[lanes, chosen])
            straggling[lanes, chosen] |= taken & ~fails & (draws > at[:, None])
        else:
            late[:, r] = (np.isfinite(good) & (good > at[:, None])).sum(axis=1)
        now = now + at + world.server_time
    return Rounds(close, delivered, late, failed, selected)


def extent(world: StatedWorld, k: int | None, budget: EntryBudget) -> Extent:
    """The :class:`Extent` of one run of an entry of round size ``k`` (None: asynchronous) under ``budget``.
    Round times may be huge or endless (inf): their sums and ratios are meant to overflow to inf."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if k is None:
            return _async_extent(world, budget)
        return _sync_extent(world, k, budget)


def _absences_within(world: StatedWorld, horizon: float) -> float:
    """Rows of events.csv that absences write within ``horizon``: a ``leave`` for each departure after the start
    (the client was in a round), a ``join`` for each return."""
    moves = [(leave, back) for leave, back in world.departures]
    count = float(sum((0 < leave < horizon) + (back is not None and back <= horizon) for leave, back in moves))
    if world.times.absences is not None:
        for weight, away in zip(world.times.weight, world.times.absences, strict=True):
            count += weight * sum((0 < leave < horizon) + (back is not None and back <= horizon) for leave, back in away)
    return count


def _async_extent(world: StatedWorld, budget: EntryBudget) -> Extent:
    horizon = budget.time if budget.time is not None else math.inf
    endless = None
    if budget.updates is not None:
        last = last_presence(world)
        reach = min(horizon, last)
        if math.isfinite(reach) and async_updates(world, reach)[0] < budget.updates:
            horizon = reach  # every client gone for good (the run stops) or the time budget first
        else:
            horizon = _meet(lambda h: async_updates(world, h)[0], budget.updates, reach)
            if not math.isfinite(horizon):
                endless = (f"budget.updates {budget.updates:,} is never reached: latency.model {world.model} states "
                           f"mean round times of {float(world.times.mean.min()):.3g} s and more; set budget.time")
    if not math.isfinite(horizon):
        return Extent(horizon, float(budget.updates or 0), float(budget.updates or 0), endless=endless)
    arrivals, in_flight = async_updates(world, horizon)
    if budget.updates is not None:
        arrivals = min(arrivals, float(budget.updates))
    failed = arrivals * world.p / (1 - world.p) if world.p < 1 else 0.0
    return Extent(horizon, arrivals, arrivals, failed=failed, absences=_absences_within(world, horizon),
                  in_flight=in_flight)


def _meet(count: Callable[[float], float], target: float, most: float) -> float:
    """The smallest horizon (at most ``most``) at which ``count(horizon)`` reaches ``target`` (inf: none)."""
    high = 1.0
    while count(high) < target:
        if high >= most:
            return most
        if high > 1e300:  # beyond any sane run: the expected count grows linearly from here
            reached = count(high)
            return high * target / reached if reached > 0 else math.inf
        high = min(high * 4, most)
    low = 0.0
    for _ in range(RATE_STEPS):
        mid = (low + high) / 2
        if count(mid) < target:
            low = mid
        else:
            high = mid
        if high - low <= 1e-9 * high:
            break
    return high


def _sync_extent(world: StatedWorld, k: int, budget: EntryBudget) -> Extent:
    if budget.time is None and (why := _never_in_time(world, budget)) is not None:
        return Extent(math.inf, float(budget.updates or 0), 0.0, endless=why)
    drawn = world.drawn.get(k) or world.drawn.setdefault(k, sync_rounds(world, k))
    per_round = drawn.per_round(drawn.delivered)
    if budget.time is not None:
        horizon = budget.time
    elif per_round > 0 or drawn.delivered.sum() >= PATHS * (budget.updates or 0):
        horizon = _meet(lambda h: drawn.total(drawn.delivered, drawn.until(h)), float(budget.updates or 0), math.inf)
    else:
        within = "" if world.deadline is None else f" within rounds.deadline {world.deadline:g} s"
        why = (f"budget.updates {budget.updates:,} is never reached: no client update is expected{within} (the round "
               f"times latency.model {world.model} states almost never end in time); "
               + ("raise rounds.deadline or set budget.time" if within else "set budget.time"))
        return Extent(math.inf, float(budget.updates or 0), 0.0, endless=why)
    if budget.rounds is not None:  # the entry ends its run after its rounds
        horizon = min(horizon, _meet(lambda h: drawn.until(h).rounds, float(budget.rounds), horizon))
    closed = drawn.until(horizon)
    rounds = closed.rounds
    arrivals = drawn.total(drawn.delivered, closed)
    if budget.updates is not None:
        arrivals = min(arrivals, float(budget.updates))
    empty = drawn.total((drawn.delivered == 0).astype(np.float64), closed)
    return Extent(horizon, arrivals, rounds - empty, rounds=rounds, failed=drawn.total(drawn.failed, closed),
                  late=drawn.total(drawn.late, closed), empty=empty, absences=_absences_within(world, horizon),
                  in_flight=drawn.per_round(drawn.selected))


def _never_in_time(world: StatedWorld, budget: EntryBudget) -> str | None:
    """Why a synchronous run never makes progress where the stated bounds prove it: every present client's shortest
    round is longer than ``rounds.deadline``, so every round closes empty (None: they do not prove it)."""
    deadline, t = world.deadline, world.times
    if deadline is None:
        return None
    present = np.array([not away or away[0][0] > 0 or away[0][1] is not None for away in t.absences]) \
        if t.absences is not None else np.ones(len(t.low), dtype=bool)
    if not present.any():
        return None
    shortest = float(t.low[present].min())
    if shortest <= deadline:
        return None
    return (f"rounds.deadline {deadline:g} s is below every client's shortest round ({shortest:g} s, as "
            f"latency.model {world.model} states it), so every round closes empty and budget.updates "
            f"{budget.updates:,} is never reached: raise rounds.deadline or set budget.time")
