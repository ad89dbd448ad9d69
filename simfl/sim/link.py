"""The server's shared links: the one rule that decides when each transfer ends (docs/contention.md).

A transfer is a model's bytes on their way down to a client (over the server's egress) or up from it (over its
ingress). :class:`Links` holds the transfers in progress with their remaining bytes, and gives them rates by a
max-min fair share of each direction's capacity: every transfer gets an equal share, except that a client whose own
link is slower than its share gets its link's speed and the others share what it leaves (processor sharing when no
client's link is the slower: n transfers each get 1/n). At most ``connections`` transfers (both directions) are in
progress at once; the others wait in one FIFO queue and start when one ends.

The rule is event-driven and the same on both clocks: remaining bytes are brought up to date and rates recomputed at
every start and end (:meth:`Links.ask`, :meth:`Links.drop`, :meth:`Links.due`), and the next end of all is one
wake-up (:meth:`Links.next_end`, scheduled by :mod:`simfl.sim.phases`). A transfer ends exactly at the time that
wake-up was computed for: the end time is one expression of the state (:meth:`Links.end_of`), and whatever touches
the links at or after that time finds the transfer done (its remaining bytes 0), not a rounding's worth short.

Everything here is plain data (:class:`NetState`), saved with the simulation's state and loaded from it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from simfl import rng
from simfl.sim.configs import Bandwidth, Direction, NetworkConfig, Spread

if TYPE_CHECKING:
    from simfl.latency.base import RoundTimes

PHASE_COLUMNS = ("download_start", "download_end", "compute_start", "compute_end", "upload_start", "upload_end")
"""events.csv's columns added when a round runs in phases (virtual seconds; empty where a phase did not happen)."""


@dataclass(slots=True)
class Transfer:
    """One model's bytes between the server and a client."""

    client: int
    up: bool
    """An upload over the server's ingress (False: a download over its egress)."""
    remaining: float
    """Bytes still to send (brought up to date at :attr:`NetState.last`)."""
    cap: float
    """The client's own link in this direction, bytes/s (inf: it does not limit)."""
    order: int
    """When it asked for a connection, counted (the FIFO order and the tie order)."""
    start: float | None = None
    """When it got a connection and began (None: still waiting for one)."""
    rate: float = 0.0
    """Bytes/s it gets now (0 while waiting)."""

    def data(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))


@dataclass(slots=True)
class RoundPhases:
    """One client's round in phases: its compute time, when each phase began and ended (None: not yet), and the
    wake-ups it holds (its departure, its compute's end), so that they can be cancelled."""

    compute: float
    """Seconds of computing (the latency model's draw)."""
    download_start: float | None = None
    download_end: float | None = None
    compute_start: float | None = None
    compute_end: float | None = None
    upload_start: float | None = None
    upload_end: float | None = None
    leave: tuple[float, int] | None = None
    """The client's departure during this round, as its wake-up's (time, creation order); None: none pending."""
    computing: tuple[float, int] | None = None
    """The wake-up ending its compute, (time, creation order), while it computes."""

    def times(self) -> tuple[float | None, ...]:
        """Its row of :data:`PHASE_COLUMNS`."""
        return (self.download_start, self.download_end, self.compute_start, self.compute_end, self.upload_start,
                self.upload_end)

    def data(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))


@dataclass
class NetState:
    """The network's part of the simulation's state, as plain data."""

    active: list[Transfer] = field(default_factory=list)
    """Transfers in progress, in the order they began."""
    waiting: list[Transfer] = field(default_factory=list)
    """Transfers waiting for a connection, first come first."""
    last: float = 0.0
    """When :attr:`Transfer.remaining` was last brought up to date."""
    asked: int = 0
    """Transfers asked for so far (the next :attr:`Transfer.order`)."""
    rounds: dict[int, RoundPhases] = field(default_factory=dict)
    """Per client with a round whose event row is not written yet: its phases."""
    wake: tuple[float, int, int] | None = None
    """The pending wake-up of the next end: (time, creation order, generation); None: no transfer in progress."""
    generation: int = 0
    """Counts the ends scheduled; a wake-up of an older generation is stale and ignored."""

    def to_data(self) -> dict[str, Any]:
        return {"active": [t.data() for t in self.active], "waiting": [t.data() for t in self.waiting],
                "last": self.last, "asked": self.asked,
                "rounds": [(c, r.data()) for c, r in sorted(self.rounds.items())],
                "wake": self.wake, "generation": self.generation}

    @staticmethod
    def from_data(data: dict[str, Any]) -> NetState:
        def pair(value: Any) -> tuple[float, int] | None:
            return None if value is None else (value[0], value[1])

        rounds = {}
        for client, values in data["rounds"]:
            r = RoundPhases(*values)
            r.leave, r.computing = pair(r.leave), pair(r.computing)
            rounds[int(client)] = r
        wake = data["wake"]
        return NetState([Transfer(*t) for t in data["active"]], [Transfer(*t) for t in data["waiting"]],
                        data["last"], data["asked"], rounds, None if wake is None else (wake[0], wake[1], wake[2]),
                        data["generation"])


class Links:
    """The rule over a :class:`NetState`: the server's ``egress`` and ``ingress`` (bytes/s, inf: unlimited) and
    at most ``connections`` transfers at once (None: no limit)."""

    def __init__(self, egress: float, ingress: float, connections: int | None, state: NetState) -> None:
        self.egress = egress
        self.ingress = ingress
        self.connections = connections
        self.state = state

    @staticmethod
    def end_of(transfer: Transfer, last: float) -> float:
        """When ``transfer`` ends at its rate since ``last`` (the one expression of an end time)."""
        return last + transfer.remaining / transfer.rate

    def next_end(self) -> float | None:
        """The earliest end of the transfers in progress (None: none)."""
        st = self.state
        return min((self.end_of(t, st.last) for t in st.active), default=None)

    def ask(self, now: float, client: int, up: bool, size: float, cap: float) -> Transfer:
        """``client`` asks to send ``size`` bytes now: it begins at once if a connection is free, else it waits."""
        st = self.state
        self._advance(now)
        transfer = Transfer(client, up, float(size), cap, st.asked)
        st.asked += 1
        st.waiting.append(transfer)
        self._fill(now)
        self._share()
        return transfer

    def drop(self, now: float, client: int) -> Transfer | None:
        """``client``'s transfer ends unfinished now (a departure); it, or None when the client has none."""
        st = self.state
        self._advance(now)
        found = next((t for t in st.active + st.waiting if t.client == client), None)
        if found is not None:
            if found.start is None:
                st.waiting.remove(found)
            else:
                st.active.remove(found)
                found.rate = 0.0
            self._fill(now)
            self._share()
        return found

    def due(self, now: float) -> list[Transfer]:
        """The transfers ended by ``now`` (at the wake-up of :meth:`next_end`), in the order they began, taken out;
        waiting ones take their connections."""
        st = self.state
        self._advance(now)
        done = [t for t in st.active if t.remaining == 0.0]
        if done:
            st.active = [t for t in st.active if t.remaining != 0.0]
            for t in done:
                t.rate = 0.0
            self._fill(now)
        self._share()
        return done

    def _advance(self, now: float) -> None:
        """Bring every remaining byte count up to ``now``; a transfer whose end is at or before now has 0 left."""
        st = self.state
        last, dt = st.last, now - st.last
        for t in st.active:
            if self.end_of(t, last) <= now:
                t.remaining = 0.0
            elif dt > 0.0:
                t.remaining = max(0.0, t.remaining - t.rate * dt)
        st.last = now

    def _fill(self, now: float) -> None:
        """Waiting transfers take the free connections, first come first."""
        st = self.state
        limit = math.inf if self.connections is None else self.connections
        while st.waiting and len(st.active) < limit:
            transfer = st.waiting.pop(0)
            transfer.start = now
            st.active.append(transfer)

    def _share(self) -> None:
        """Each direction's max-min fair share: transfers by their own link's speed, slowest first, each taking the
        smaller of its link and an equal part of what is left."""
        for up, capacity in ((False, self.egress), (True, self.ingress)):
            moving = sorted((t for t in self.state.active if t.up == up), key=lambda t: (t.cap, t.order))
            left, n = capacity, len(moving)
            for t in moving:
                t.rate = min(t.cap, left / n)
                left -= t.rate
                n -= 1


def bandwidths(direction: Direction | None, clients: int, seed: int, name: str,
               fleet: Sequence[float] | None) -> list[float]:
    """Each client's link speed in one direction (bytes/s; inf where the section gives none)."""
    if direction is None:
        return [math.inf] * clients
    value: Bandwidth = direction.bandwidth
    if value == "fleet":
        if not fleet:
            raise ValueError("bandwidth 'fleet' needs the fleet trace's bandwidths")
        return [float(fleet[m % len(fleet)]) for m in range(clients)]
    if isinstance(value, Spread):
        if value.std == 0.0:
            return [float(value.mean)] * clients
        sigma2 = math.log1p((value.std / value.mean) ** 2)
        mu = math.log(value.mean) - sigma2 / 2.0
        drawn = rng.stream(seed, "network", name).lognormal(mu, math.sqrt(sigma2), size=clients)
        return [float(v) for v in np.maximum(drawn, np.finfo(np.float64).tiny)]
    return [float(value)] * clients


def shared_times(at_once: int, think: float, demands: Sequence[tuple[float, float]]) -> list[float]:
    """Mean value analysis of ``at_once`` rounds going round a closed loop: each spends ``think`` seconds computing
    and one transfer at each of the server's links (``demands``: per link, the seconds a transfer takes alone on
    it, and on the client's own link), a link shared equally by the transfers on it (processor sharing). Returns
    each link's mean transfer time. Exact for processor sharing with unlimited client links (its mean times do not
    depend on the distribution of the compute's); a client's own link bounds a transfer's time from below."""
    queue = [0.0] * len(demands)
    times = [own for _, own in demands]
    for n in range(1, at_once + 1):
        times = [max(own, alone * (1.0 + q)) for (alone, own), q in zip(demands, queue, strict=True)]
        cycle = think + sum(times)
        rate = n / cycle if cycle > 0 else math.inf
        queue = [rate * t for t in times]
    return times


def round_times(stated: RoundTimes, config: NetworkConfig | None, size: float, clients: int, seed: int,
                at_once: int, together: bool) -> RoundTimes:
    """The latency model's statement (its compute times) with each round's two transfers added, for the estimate.

    A transfer of ``size`` bytes alone takes size / min(b, B), b the client's link and B the server's in that
    direction; ``at_once`` rounds in flight (an asynchronous run's concurrency, or a synchronous round's clients)
    share the server's links as :func:`shared_times` counts them, or where they start ``together`` (a synchronous
    round's downloads) n transfers each take n times as long as alone. Left out: the queue of ``connections`` and a
    ``bandwidth: fleet`` client link (taken as unlimited: only the server's side counts); clients' links drawn from
    a spread count at their own speeds where the statement has a row per client, else at their mean time.
    """
    if config is None:
        return stated
    from simfl.latency.base import RoundTimes

    def own(direction: Direction | None, name: str) -> np.ndarray:
        fleet = direction is not None and direction.bandwidth == "fleet"
        per = size / np.asarray(bandwidths(None if fleet else direction, clients, seed, name, None), dtype=np.float64)
        if len(stated.mean) == clients and bool((stated.weight == 1.0).all()):
            return per
        return np.full(len(stated.mean), float(per.mean()) if len(per) else 0.0)

    own_down, own_up = own(config.download, "download"), own(config.upload, "upload")
    server = config.server
    alone_down = 0.0 if server.egress is None else size / float(server.egress)
    alone_up = 0.0 if server.ingress is None else size / float(server.ingress)
    weight = stated.weight / stated.weight.sum()
    compute = stated.mean
    think = float((weight * np.where(np.isfinite(compute), compute, 0.0)).sum())
    mean_down, mean_up = float((weight * own_down).sum()), float((weight * own_up).sum())
    if together:
        down = max(mean_down, at_once * alone_down)
        (up,) = shared_times(at_once, think + down, [(alone_up, mean_up)])
    else:
        down, up = shared_times(at_once, think, [(alone_down, mean_down), (alone_up, mean_up)])
    mean = compute + np.maximum(own_down, down) + np.maximum(own_up, up)
    alone = np.maximum(own_down, alone_down) + np.maximum(own_up, alone_up)
    return RoundTimes.of(mean, stated.std, np.minimum(stated.low + alone, mean), stated.weight, stated.absences,
                         stated.setup, stated.draw)  # the minimum: the two sums round apart where low = mean
