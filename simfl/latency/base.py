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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Generic, Protocol, TypeVar

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

    def training_flops(self, use: FlopsUse) -> int:
        """:attr:`flops_per_sample` for a delay that scales with them (``use``: :data:`FlopsUse`); unknown ones are
        one line (:func:`unknown_flops`)."""
        flops = self.flops_per_sample
        if flops == 0:
            raise unknown_flops(use)
        return flops


FlopsUse = tuple[str, str, str]
"""Where a delay model reads the model's training FLOPs, what in it needs them and what to give instead."""


def unknown_flops(use: FlopsUse) -> InputError:
    """The refusal of a delay that needs the model's training FLOPs where the model gives none (a Flower app's), which
    every run raises as its delay model is built and ``simfl validate`` from the configs
    (:meth:`LatencyModel.flops_use`)."""
    where, needs, instead = use
    return InputError(where, f"{needs} needs the model's training FLOPs, which a Flower app's model "
                      f"(model: flower_app) does not give; give {instead}")


def counted(flops: int | Callable[[], int]) -> int:
    """FLOPs given, or counted now by the function given."""
    return flops if isinstance(flops, int) else int(flops())


Absence = tuple[float, float | None]
"""An interval ``(leave, rejoin)`` a client is away (``rejoin`` None: for good)."""

STATED_ROWS = 4096
"""Clients a delay model states one by one at most; a larger population is stated by groups of clients alike, or by
the first :data:`STATED_ROWS` clients standing for the rest (:class:`RoundTimes`)."""


@dataclass(frozen=True)
class RoundTimes:
    """What a delay model states of its clients' round times, for the estimate (:meth:`LatencyModel.round_times`).

    Row ``i`` stands for ``weight[i]`` clients alike (the weights add up to the population): their rounds last
    ``mean[i]`` seconds on average with standard deviation ``std[i]`` (0: every round the same), and never less
    than ``low[i]`` (0 where nothing bounds them from below: a deadline below every row's ``low`` lets no update
    arrive in time). ``absences``, where the model's own trace takes clients away (a fleet's presence windows):
    per row, the intervals its clients are away, sorted. ``setup``: wall seconds a run spends on the model's own
    setup beyond every model's (its trace's windows followed per client), on the reference machine
    (:data:`simfl.schema.costs.PROBE_ARRIVAL_SECONDS`), which the estimate scales to this one's. ``draw``: wall
    seconds one round time's draw costs on that machine, where the model states it (None: as much as the engine's
    probe's lognormal draw, :data:`simfl.schema.costs.DRAW_SECONDS`).
    """

    mean: np.ndarray
    std: np.ndarray
    low: np.ndarray
    weight: np.ndarray
    absences: tuple[tuple[Absence, ...], ...] | None = None
    setup: float = 0.0
    draw: float | None = None

    @classmethod
    def of(cls, mean: Any, std: Any, low: Any, weight: Any = 1.0,
           absences: Sequence[Sequence[Absence]] | None = None, setup: float = 0.0,
           draw: float | None = None) -> RoundTimes:
        """Rows from numbers or sequences (a number is the same for every row), checked: means > 0 (inf: a round
        that never ends), spreads and bounds >= 0, weights > 0, one absence list per row, a finite setup >= 0 and
        draw >= 0."""
        mean = np.atleast_1d(np.asarray(mean, dtype=np.float64))
        rows = len(mean)
        std, low, weight = (np.broadcast_to(np.asarray(v, dtype=np.float64), (rows,)).copy() for v in (std, low, weight))
        if not (rows and (mean > 0).all() and (std >= 0).all() and (low >= 0).all() and (low <= mean).all()
                and (weight > 0).all() and np.isfinite(weight).all() and math.isfinite(setup) and setup >= 0
                and (draw is None or math.isfinite(draw) and draw >= 0)):
            raise ValueError("round times need means > 0, spreads >= 0, 0 <= low <= mean and weights > 0 per row, "
                             "and a setup and a draw >= 0")
        if absences is not None and len(absences) != rows:
            raise ValueError(f"{len(absences)} absence lists for {rows} rows")
        held = None if absences is None else tuple(tuple(a) for a in absences)
        return cls(mean, std, low, weight, held, float(setup), None if draw is None else float(draw))

    @property
    def clients(self) -> float:
        """The clients the rows stand for."""
        return float(self.weight.sum())


def grouped(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, counts)``: the distinct rows of ``values`` (one row per client, shape (clients, k)) and how many
    clients share each (a statement of a population of few kinds of clients needs one row per kind)."""
    rows, counts = np.unique(np.asarray(values, dtype=np.float64).reshape(len(values), -1), axis=0, return_counts=True)
    return rows, counts.astype(np.float64)


class Latencies(Protocol):
    """What the simulation asks of its delays: a :class:`LatencyModel`, or one seen through a section that changes
    its draws (:class:`simfl.latency.stragglers.Slowed`)."""

    num_clients: int

    def sample(self, client: int) -> float:
        """The next round latency of ``client``."""

    def absences(self) -> list[list[tuple[float, float | None]]] | None:
        """Per client, intervals ``(leave, rejoin)`` the model's trace says it is away (None: no such trace)."""

    def state(self) -> dict[str, Any]:
        """Plain-data state."""

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state`."""


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

    @classmethod
    def round_times(cls, config: ConfigT, num_clients: int, seed: int, workload: Workload) -> RoundTimes | None:
        """What the model's round times are for ``num_clients`` clients under ``seed`` (:class:`RoundTimes`), for
        the estimate; None: the estimate counts the model's own draws (:meth:`drawn_round_times`). Light: no latency
        is drawn beyond what assigns clients their kinds (devices, speeds)."""
        return None

    DRAWN_CLIENTS: ClassVar[int] = 1_000
    """Clients whose own draws :meth:`drawn_round_times` takes: every client up to this many, else this many
    spread evenly over the population."""
    DRAWN_ROUNDS: ClassVar[int] = 20
    """Round times it draws of each of them."""

    @classmethod
    def drawn_round_times(cls, config: ConfigT, num_clients: int, seed: int, workload: Workload) -> RoundTimes:
        """The round times the model's own draws give, where it states none (:meth:`round_times` is None): a model
        built as a run builds it draws :data:`DRAWN_ROUNDS` rounds of every client, or of :data:`DRAWN_CLIENTS`
        spread evenly over a larger population; each row is one of them (its mean, spread and shortest), standing
        for the clients nearer to it than to the next drawn one. The estimate then counts what the model does,
        whatever it does, at the cost of those draws (20,000 at most); not seen: absences its trace would give
        (:meth:`absences`), and rounds beyond the first :data:`DRAWN_ROUNDS` that differ from them."""
        model = cls(config, num_clients, seed, workload)
        picked = np.unique(np.linspace(0, num_clients - 1, min(num_clients, cls.DRAWN_CLIENTS)).round().astype(int))
        drawn = np.array([[model.sample(int(m)) for _ in range(cls.DRAWN_ROUNDS)] for m in picked.tolist()])
        edges = np.concatenate(([0.0], (picked[1:] + picked[:-1]) / 2.0 + 0.5, [float(num_clients)]))
        weight = np.diff(np.floor(edges))  # the clients nearest each drawn one (ties to the lower)
        low, high = drawn.min(axis=1), drawn.max(axis=1)
        fixed = low == high  # every round the same: stated exactly (no spread from the sums' rounding)
        mean = np.where(fixed, low, drawn.mean(axis=1))
        std = np.where(fixed, 0.0, drawn.std(axis=1))
        return RoundTimes.of(mean, std, np.minimum(low, mean), weight)

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

    @classmethod
    def flops_use(cls, config: ConfigT) -> FlopsUse | None:
        """Whether the latencies of ``config`` scale with the model's training FLOPs (where, what and what instead:
        :data:`FlopsUse`), from the config alone. Default: they do not."""
        return None

    @classmethod
    def absences_of(cls, config: ConfigT, num_clients: int) -> list[list[tuple[float, float | None]]] | None:
        """:meth:`absences` from the config alone (no model built), for the checks ``simfl validate`` and every
        run share (:meth:`simfl.latency.availability.Availability.check`)."""
        return None

    @classmethod
    def absence_source(cls, config: ConfigT) -> str:
        """What :meth:`absences` come from, in messages (e.g. a fleet trace's file)."""
        return f"latency.model {getattr(config, 'model', cls.__name__)}"

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
