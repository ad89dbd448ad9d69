"""A share of slow clients over any delay model: ``stragglers: {share: 0.2, slowdown: 10}``.

A study of stragglers asks "when a share p of the clients are k times slower, ...": this section says it once for
every latency model, built in or a plugin, instead of a model of its own per study. The chosen clients' every round
latency is the model's own draw times ``slowdown`` (compute and communication alike: a slower device in all it
does); the others' are the model's draws untouched. The model draws exactly what it draws without the section (the
same streams, the same values), so turning stragglers on changes only the chosen clients' times.

Which clients: ``clients`` lists them, or ``share`` takes ``floor(share * N + 1/2)`` of the N clients, drawn without
replacement from the seed's own stream ``(seed, "stragglers")`` (a permutation's first ones), so each seed has its
own stragglers, the same for every entry of a run (the entries share the seed's latencies), and a larger share
keeps the smaller share's stragglers (the first of one permutation).

For the estimate, :func:`round_times` states the model's rows with the chosen clients' rows slowed: exactly, where the
model states one row per client; where it states groups of clients alike, each group splits into a slowed part of
the chosen share and the rest.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import Field, model_validator

from simfl import rng
from simfl.errors import InputError
from simfl.fields import NonNegInt, PositiveFloat, Probability, Section
from simfl.latency.base import Latencies, RoundTimes


class StragglersConfig(Section):
    """A share of the clients whose every round takes ``slowdown`` times the latency model's draw."""

    share: Probability | None = Field(
        None, description="Share of the clients that are slow, drawn per seed from its stream (seed, 'stragglers'): "
        "floor(share x clients + 1/2) of them. Give share or clients.")
    clients: list[NonNegInt] | None = Field(
        None, description="The slow clients by index, instead of a share (each at most once).")
    slowdown: PositiveFloat = Field(
        description="How many times slower a slow client's every round is than the latency model draws it "
        "(10: ten times the time; below 1: faster).")

    @model_validator(mode="after")
    def _one_way(self) -> StragglersConfig:
        if (self.share is None) == (self.clients is None):
            raise ValueError("give share (a share of the clients, drawn per seed) or clients (a list of indices), "
                             "not both or neither")
        if self.clients is not None and len(set(self.clients)) != len(self.clients):
            twice = sorted({c for c in self.clients if self.clients.count(c) > 1})
            raise ValueError(f"clients lists {twice[0]} more than once; list each slow client once")
        return self

    def check(self, num_clients: int) -> None:
        """Refuse listed clients beyond the population (the same line for ``simfl validate`` and every run)."""
        if self.clients is not None and self.clients and max(self.clients) >= num_clients:
            raise InputError("stragglers.clients", f"must be client indices below the {num_clients} clients, got "
                             f"{max(self.clients)}")


def count(config: StragglersConfig, num_clients: int) -> int:
    """How many clients are slow."""
    if config.clients is not None:
        return len(config.clients)
    assert config.share is not None
    return min(num_clients, math.floor(config.share * num_clients + 0.5))


def chosen(config: StragglersConfig, num_clients: int, seed: int) -> np.ndarray:
    """The slow clients' indices, sorted."""
    config.check(num_clients)
    if config.clients is not None:
        return np.array(sorted(config.clients), dtype=np.int64)
    order = rng.stream(seed, "stragglers").permutation(num_clients)
    return np.sort(order[:count(config, num_clients)])


class Slowed:
    """A latency model whose chosen clients' draws are multiplied by the slowdown (see the module's documentation).

    It passes the simulation what it asks of a latency model (:meth:`sample`, :meth:`absences`, :meth:`state`,
    :meth:`load_state`) and holds no state of its own: the slow clients follow from the config and the seed."""

    def __init__(self, base: Latencies, config: StragglersConfig, seed: int) -> None:
        self.base = base
        self.config = config
        self.num_clients: int = base.num_clients
        self.slow = frozenset(chosen(config, self.num_clients, seed).tolist())
        self.slowdown = float(config.slowdown)

    def sample(self, client: int) -> float:
        """The model's next latency of ``client``, times the slowdown for a slow client."""
        value = self.base.sample(client)
        return value * self.slowdown if client in self.slow else value

    def absences(self) -> list[list[tuple[float, float | None]]] | None:
        return self.base.absences()

    def state(self) -> dict[str, Any]:
        return self.base.state()

    def load_state(self, state: dict[str, Any]) -> None:
        self.base.load_state(state)


def over(latency: Latencies, config: StragglersConfig | None, seed: int) -> Latencies:
    """``latency`` itself without the section, else its :class:`Slowed` form."""
    return latency if config is None else Slowed(latency, config, seed)


def round_times(stated: RoundTimes, config: StragglersConfig | None, num_clients: int, seed: int) -> RoundTimes:
    """The model's statement with the slow clients' rows slowed (see the module's documentation)."""
    if config is None:
        return stated
    k = config.slowdown
    rows = len(stated.mean)
    per_client = rows == num_clients and bool((stated.weight == 1.0).all())
    if per_client:
        factor = np.ones(rows)
        factor[chosen(config, num_clients, seed)] = k
        return RoundTimes.of(stated.mean * factor, stated.std * factor, stated.low * factor, stated.weight,
                             stated.absences, stated.setup, stated.draw)
    share = count(config, num_clients) / max(num_clients, 1)
    if share in (0.0, 1.0):
        f = k if share == 1.0 else 1.0
        return RoundTimes.of(stated.mean * f, stated.std * f, stated.low * f, stated.weight, stated.absences,
                             stated.setup, stated.draw)
    absences = None if stated.absences is None else stated.absences + stated.absences
    return RoundTimes.of(np.concatenate([stated.mean, stated.mean * k]), np.concatenate([stated.std, stated.std * k]),
                         np.concatenate([stated.low, stated.low * k]),
                         np.concatenate([stated.weight * (1 - share), stated.weight * share]), absences,
                         stated.setup, stated.draw)
