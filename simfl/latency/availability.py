"""Client availability: random round failures and scheduled departures/arrivals (scenario ``availability:``).

Failures (paper, appendix "Adaptability to Dynamic Environments"): each round
of client m fails with probability ``p``, decided by one uniform draw per round
from the stream ``(seed, "failure", m)`` whatever the outcome, so a client's
k-th round sees the same draw in every run and for every algorithm. The engine charges a failed
round its full latency, delivers nothing, and re-dispatches the client
``rejoin_delay`` seconds later.

Departures: ``{client, leave, rejoin}`` takes a client away at virtual time
``leave`` and brings it back at ``rejoin`` (never if null). A late arrival is
``leave: 0, rejoin: T``. A latency model's trace may add absences of its own (a
fleet trace's availability windows, :meth:`simfl.latency.base.LatencyModel.absences_of`).
Absence intervals of one client must not overlap, whatever their source:
:meth:`Availability.check`, which ``simfl validate`` and every run call alike
(``Scenario.check_clients``), names both sources of a clash.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from pydantic import Field, model_validator

from simfl import rng
from simfl.errors import InputError
from simfl.fields import NonNegFloat, NonNegInt, Probability, Section


class Departure(Section):
    """One absence of one client: away from ``leave`` until ``rejoin`` (or for good)."""

    client: NonNegInt = Field(description="Client index.")
    leave: NonNegFloat = Field(description="Virtual time (s) the client leaves.")
    rejoin: NonNegFloat | None = Field(None, description="Virtual time (s) it comes back; null: never.")

    @model_validator(mode="after")
    def _after_leave(self) -> Departure:
        if self.rejoin is not None and self.rejoin <= self.leave:
            raise ValueError(f"rejoin must be after leave, got leave={self.leave:g}, rejoin={self.rejoin:g}")
        return self


class AvailabilityConfig(Section):
    """Random failures per round and scheduled departures/arrivals of clients."""

    p: Probability = Field(0.0, description="Probability that a client's round fails (costs its latency, delivers nothing).")
    rejoin_delay: NonNegFloat = Field(0.0, description="Seconds a client waits after a failed round before starting again.")
    departures: list[Departure] = Field(default_factory=list, description="Scheduled absences {client, leave, rejoin}.")


Interval = tuple[float, float | None]
"""An absence: ``(leave, rejoin)``, ``rejoin`` None for good."""
Absences = Sequence[Sequence[Interval]]
"""Per client, its absences sorted by leave time."""


class Availability:
    """Answers whether a round fails and when a client is present.

    ``trace``: per client, the absences a latency model's trace adds to the scenario's departures; ``source``
    names it in messages (:meth:`simfl.latency.base.LatencyModel.absence_source`).
    """

    def __init__(self, config: AvailabilityConfig | None, num_clients: int, seed: int, trace: Absences | None = None,
                 source: str = "the latency trace") -> None:
        config = config if config is not None else AvailabilityConfig.model_validate({})
        self.check(config, num_clients, trace, source)
        self.config = config
        self.num_clients = num_clients
        self.rngs = rng.Streams(seed, "failure", count=num_clients)
        per: dict[int, list[Interval]] = {}
        for d in config.departures:
            per.setdefault(d.client, []).append((d.leave, d.rejoin))
        for m, a in per.items():
            if trace is not None:
                a.extend(trace[m])
            a.sort(key=lambda iv: iv[0])
        none: tuple[Interval, ...] = ()
        self.absences: list[Sequence[Interval]] = [
            per[m] if m in per else trace[m] if trace is not None and trace[m] else none for m in range(num_clients)]
        """Each client's absences, sorted by leave time; the clients without any share one empty tuple (a
        population's worth of empty lists costs memory and cache on every lookup), and those with the trace's
        only share its lists."""

    @classmethod
    def check(cls, config: AvailabilityConfig | None, num_clients: int, trace: Absences | None = None,
              source: str = "the latency trace") -> None:
        """Client indices must exist; one client's absences must not overlap, whether both are departures or one
        comes from ``trace`` (named ``source``): the line names both."""
        per: dict[int, list[tuple[float, float | None, str]]] = {}
        for i, d in enumerate(config.departures if config is not None else ()):
            if d.client >= num_clients:
                raise InputError(
                    f"availability.departures[{i}].client", f"must be in [0, {num_clients - 1}], got {d.client}"
                )
            per.setdefault(d.client, []).append((d.leave, d.rejoin, f"availability.departures[{i}]"))
        for client, ivs in per.items():
            if trace is not None:
                ivs.extend((leave, rejoin, source) for leave, rejoin in trace[client])
            ivs.sort(key=lambda iv: (iv[0], iv[2] != source))  # by leave time, the scenario's own first at a tie
            for first, second in itertools.pairwise(ivs):
                if first[1] is None or first[1] > second[0]:
                    mine = first if first[2] != source else second
                    other = second if mine is first else first
                    raise InputError(mine[2], f"client {client} is away from {_span(mine)} here and from {_span(other)} "
                                     f"by {other[2]}: one client's absences must not overlap")

    def fails(self, client: int) -> bool:
        """Whether this round of ``client`` fails (one draw per call, whatever ``p``)."""
        return bool(self.rngs[client].random() < self.config.p)

    @property
    def rejoin_delay(self) -> float:
        """Seconds between a failed round's end and the client's next start."""
        return self.config.rejoin_delay

    def schedule(self, client: int) -> list[tuple[float, float | None]]:
        """The absences ``(leave, rejoin)`` of ``client``, sorted by ``leave``."""
        return list(self.absences[client])

    def present(self, client: int, time: float) -> bool:
        """Whether ``client`` is available at virtual time ``time`` (leave inclusive, rejoin exclusive)."""
        return all(not (lv <= time and (rj is None or time < rj)) for lv, rj in self.absences[client])

    def back_at(self, client: int, time: float) -> float | None:
        """The earliest time >= ``time`` at which ``client`` is present; None if it never returns."""
        t = time
        for lv, rj in self.absences[client]:
            if lv <= t and (rj is None or t < rj):
                if rj is None:
                    return None
                t = rj
        return t

    def next_leave(self, client: int, time: float) -> float | None:
        """The first departure time of ``client`` strictly after ``time``, if any."""
        absences = self.absences[client]
        if not absences:  # most clients: no generator to build
            return None
        return next((lv for lv, _ in absences if lv > time), None)

    def state(self) -> dict[str, Any]:
        """Plain-data state (the per-client failure generator states)."""
        return {"rngs": self.rngs.states()}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state` output."""
        self.rngs.load(state["rngs"])


def _span(interval: tuple[float, float | None, str]) -> str:
    leave, rejoin, _ = interval
    return f"{leave:g} for good" if rejoin is None else f"{leave:g} to {rejoin:g}"
