"""The delay-model interface: how long each round of each client takes.

A model draws the k-th round latency of client m as the k-th draw of the
stream ``(seed, "latency", m)``, so the sequence of latencies a client sees
does not depend on the algorithm, on other clients, or on wall-clock order.

Latencies are drawn ahead in blocks of :attr:`LatencyModel.AHEAD` per client (fewer in a large
population, :attr:`LatencyModel.DRAWN_AHEAD`)
(one NumPy call instead of one per round where a model vectorises its draw,
see :meth:`LatencyModel.draws`); the values are the same, in the same order,
as one draw at a time, and the drawn-ahead values are part of the state.
A client's generator is built at its first draw (:class:`simfl.rng.Streams`), so a
large population costs little before its clients train.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from simfl import rng
from simfl.errors import InputError
from simfl.fields import Section

ConfigT = TypeVar("ConfigT", bound=Section)


@dataclass(frozen=True)
class Workload:
    """What a delay model may scale compute and communication by."""

    model_bytes: int
    """Bytes of the exchanged (trainable) state, float32."""
    flops: int | Callable[[], int]
    """Approximate forward+backward FLOPs of one training sample, or what counts them at the first use of
    :attr:`flops_per_sample` (a count imports seconds of PyTorch, which a run whose delays do not scale with
    compute need not pay)."""
    samples: tuple[int, ...]
    """Training samples held by each client."""
    epochs: int

    @cached_property
    def flops_per_sample(self) -> int:
        """:attr:`flops`, counted now if it was not given (0: unknown, a Flower app's model, which simfl cannot run)."""
        return counted(self.flops)

    def training_flops(self, where: str, needs: str, instead: str) -> int:
        """:attr:`flops_per_sample` for a delay that scales with them; unknown ones are one line naming ``where``,
        what ``needs`` them and what to give ``instead``."""
        flops = self.flops_per_sample
        if flops == 0:
            raise InputError(where, f"{needs} needs the model's training FLOPs, which a Flower app's model "
                             f"(model: flower_app) does not give; give {instead}")
        return flops


def counted(flops: int | Callable[[], int]) -> int:
    """FLOPs given, or counted now by the function given."""
    return flops if isinstance(flops, int) else int(flops())


class LatencyModel(ABC, Generic[ConfigT]):
    """Draws client round latencies in virtual seconds (> 0)."""

    Config: ClassVar[type[Section]]
    AHEAD: ClassVar[int] = 64
    """Latencies drawn at once per client when its drawn-ahead values run out (populations: see :attr:`ahead_n`)."""
    DRAWN_AHEAD: ClassVar[int] = 64_000
    """About how many latencies a model keeps drawn ahead over all its clients: a large population,
    whose clients each train a few times, draws fewer per client (never under 4)."""

    def __init__(self, config: ConfigT, num_clients: int, seed: int, workload: Workload) -> None:
        self.config = config
        self.num_clients = num_clients
        self.seed = seed
        self.workload = workload
        self.rngs = rng.Streams(seed, "latency", count=num_clients)
        self.ahead: list[list[float] | None] = [None] * num_clients
        """Per client, drawn but not yet used latencies, the next one last (None: none drawn yet; a million empty
        lists would cost a noticeable part of a second before the first event)."""
        self.ahead_n = max(4, min(self.AHEAD, self.DRAWN_AHEAD // max(num_clients, 1)))
        """Block size per client: AHEAD up to 1,000 clients; the values drawn do not depend on it."""
        self.firsts: list[float] = []
        """Every client's first block when the model derived them all at construction (:meth:`use_firsts`)."""
        self.width = 0
        """Values per client in :attr:`firsts` (0: none)."""
        self.taken = [0] * num_clients
        """Per client, values taken from its first block in :attr:`firsts`."""

    def use_firsts(self, firsts: np.ndarray, lanes: np.ndarray | None = None) -> None:
        """Serve each client's first block from ``firsts`` (shape (clients, ahead_n)): exactly what :meth:`block`
        would draw first, derived for all clients at once by a model that can. The block counts as drawn at
        the client's first sample, as any other (its stream claimed, :meth:`state` unchanged), and is taken one
        value at a time without a list per client. Clients outside ``lanes`` (a boolean mask; None: all), whose
        first block the model could not derive, and those with a value failing the check of :meth:`sample`,
        draw theirs from their generator as usual (a bad value is refused there)."""
        good = (firsts > 0).all(axis=1) & (firsts < math.inf).all(axis=1)  # NaN fails both
        if lanes is not None:
            good &= lanes
        if not firsts.size or not good.any():
            return
        self.width = self.ahead_n
        self.firsts = firsts.ravel().tolist()
        for m in np.flatnonzero(~good).tolist():
            self.taken[m] = self.width  # as if its first block were used up: the next sample draws from its stream

    @classmethod
    def check(cls, config: ConfigT, num_clients: int) -> None:
        """Raise :class:`simfl.errors.InputError` if ``config`` does not fit ``num_clients`` clients."""

    def sample(self, client: int) -> float:
        """The next round latency of ``client``."""
        taken = self.taken[client]
        if taken < self.width:  # its first block, derived at construction
            if not taken:
                self.rngs.claim(client, self.width)
            self.taken[client] = taken + 1
            return self.firsts[client * self.width + taken]
        ahead = self.ahead[client]
        if ahead:
            return ahead.pop()
        block = self.block(client, self.ahead_n)
        # Every value finite and > 0. A finite sum rules out NaN and infinities (a test per value costs
        # more in Python); only a sum that overflows, or a bad value, takes the test per value.
        if not (0.0 < min(block) and sum(block) < math.inf):
            bad = next((v for v in block if not 0.0 < v < math.inf), None)
            if bad is not None:
                raise InputError(f"latency.model {getattr(self.config, 'model', type(self).__name__)}",
                                 f"drew the latency {bad!r} for client {client}; every latency must be a finite "
                                 "number > 0: check the model's parameters")
        block.reverse()  # a new list (see block), the next value last
        self.ahead[client] = block
        return block.pop()

    def block(self, client: int, n: int) -> list[float]:
        """:meth:`draws` from ``client``'s generator, as a new list (the caller keeps it); a model drawing plain
        uniforms may take them without the generator."""
        return self.draws(client, self.rngs[client], n)

    def draws(self, client: int, gen: np.random.Generator, n: int) -> list[float]:
        """The next latencies of ``client`` (at least one, up to about ``n``, a new list), as :meth:`draw` gives them.

        Overridden where one vectorised NumPy call gives exactly the values of ``n`` calls of :meth:`draw`.
        """
        return [float(self.draw(client, gen)) for _ in range(n)]

    @abstractmethod
    def draw(self, client: int, gen: np.random.Generator) -> float:
        """Draw one round latency of ``client`` from its own generator."""

    def absences(self) -> list[list[tuple[float, float | None]]] | None:
        """Per client, intervals ``(leave, rejoin)`` the model's trace says it is away (None: no such trace)."""
        return None

    def state(self) -> dict[str, Any]:
        """Plain-data state (the per-client generator states and drawn-ahead values)."""
        return {"rngs": self.rngs.states(), "ahead": [self._ahead(m) for m in range(self.num_clients)]}

    def _ahead(self, client: int) -> list[float]:
        """``client``'s drawn but not yet used latencies, the next one last (those of its first block included)."""
        taken, w = self.taken[client], self.width
        if 0 < taken < w:
            return self.firsts[client * w + taken:(client + 1) * w][::-1]
        return list(self.ahead[client] or ())

    def load_state(self, state: dict[str, Any]) -> None:
        self.rngs.load(state["rngs"])
        self.ahead = [list(a) if a else None for a in state["ahead"]] if "ahead" in state else [None] * len(self.rngs)
        self.firsts, self.width = [], 0
