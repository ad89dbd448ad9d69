"""The two shapes of aggregation algorithm the engine drives.

An :class:`AsyncAlgorithm` is called once per processed arrival and answers
with the weights the arriving client trains on next (FedAsync, OrthoFL,
FedBuff, CA2FL). A :class:`SyncAlgorithm` is called once per round with all
of the round's arrivals (FedAvg, FedProx, FedAdam). Both keep their whole
state in flat float32 vectors laid out by :class:`simfl.models.flat.Layout`
and expose it as plain data for checkpoints. Neither knows about SimPy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeVar

import torch

from simfl.algorithms.configs import AlgorithmConfig, StoreSpec
from simfl.algorithms.store import ClientVectors, vectors
from simfl.models.flat import Layout
from simfl.train.evaluate import Scores
from simfl.train.message import NO_MESSAGE, Message

ConfigT = TypeVar("ConfigT", bound=AlgorithmConfig)


@dataclass(slots=True)
class Arrival:
    """A client's trained weights as the server processes them (read-only by convention, see ``Event``)."""

    client: int
    weights: torch.Tensor
    """W_m^(t): the client's flat weights after local training."""
    start: torch.Tensor
    """The flat weights the client started this round from (what it was dispatched)."""
    staleness: int
    """s = t - tau_m >= 1 (1: no other update was processed in between)."""
    update: int
    """t: the server's update counter, counting this arrival."""
    num_samples: int
    """Number of training samples the client holds (for sample-weighted means)."""
    arrays: Mapping[str, torch.Tensor] = field(default_factory=dict)
    """What the client's hooks sent back besides its weights (e.g. SCAFFOLD's updated control variate)."""
    metrics: Mapping[str, float] = field(default_factory=dict)
    """The round's ``steps`` (optimizer steps), ``loss`` (mean training loss) and ``loss_sq`` (the mean over the
    round's training samples of each sample's loss squared); empty when nothing trained."""
    time: float = 0.0
    """The virtual time the server takes the arrival (what a rule paced by time reads: Pisces)."""
    latency: float = 0.0
    """The round's duration, dispatch to delivery (the client's latency as events.csv records it)."""


ClientEvaluation = Callable[[int, torch.Tensor, Mapping[str, Any]], dict[str, int | float]]
"""Evaluation on a client (federated evaluation): ``(client, flat weights, config)`` to the client's reply
metrics, ``num-examples`` among them (:class:`simfl.train.client_eval.ClientEvaluator`)."""


@dataclass(frozen=True)
class Setup:
    """What every algorithm is built with."""

    layout: Layout
    init: torch.Tensor
    """W^(0): the initial global flat weights (shared by every algorithm of a seed)."""
    num_clients: int
    client_sizes: tuple[int, ...]
    seed: int
    store: StoreSpec = StoreSpec()
    """Where per-client vectors live (:mod:`simfl.algorithms.store`)."""
    evaluate_client: ClientEvaluation | None = None
    """Evaluates weights on a client's own data, costing no virtual time (None: the run cannot, e.g. in
    pure-latency mode). Only an algorithm that asks clients to evaluate (a Flower strategy) calls it."""
    say: Callable[[str], None] | None = None
    """Tells the user how the run goes, one line at a time, with the virtual time (a ServerApp's rounds, in
    Flower's words); None: nowhere."""
    data_held: bool = True
    """simfl holds the clients' data; False when they are a Flower app's own (``data: {dataset: flower_app}``),
    whose ``client_sizes`` are placeholder counts."""

    def vectors(self) -> ClientVectors:
        """An empty store of one model-sized row per client."""
        return vectors(self.store, self.num_clients, self.init.numel())


class Algorithm(ABC, Generic[ConfigT]):
    """Common part of async and sync algorithms."""

    mode: ClassVar[Literal["async", "sync"]]
    Config: ClassVar[type[AlgorithmConfig]]

    _sent: Message | None = None
    """The default :meth:`message`, built at its first use (the local options are fixed for the run)."""

    def __init__(self, config: ConfigT, setup: Setup) -> None:
        self.config = config
        self.setup = setup

    def local_options(self) -> dict[str, Any]:
        """Changes to local training, the same for every client and round, keyed by :data:`simfl.train.hooks.HOOKS`
        entries (plain data; {}: none). The default :meth:`message` sends them."""
        return {}

    def message(self, client: int, round: int) -> Message:
        """What client ``client`` receives with its weights when its round ``round`` (0 for its first) is dispatched.

        Built at dispatch, so it may read the algorithm's state then (e.g. SCAFFOLD's control
        variates); the arrays are not copied, so an algorithm that changes a sent tensor in place
        later must send a copy. Default: :meth:`local_options` as hooks, no arrays, no config (one message,
        built once: the options are the same for every client and round).
        """
        if self._sent is None:
            options = self.local_options()
            self._sent = Message(hooks=options) if options else NO_MESSAGE
        return self._sent

    @abstractmethod
    def global_weights(self) -> torch.Tensor:
        """The flat weights of the model that is evaluated (not to be modified)."""

    def scoring(self) -> Callable[[torch.Tensor], Scores] | None:
        """How the global model is scored when the algorithm holds a model that is not simfl's to score (a Flower
        ServerApp's own model, scored by the app's ``evaluate_fn``); None (default): the run's own scoring."""
        return None

    def close(self) -> None:
        """Release what the algorithm holds outside its state when its run ends, however it ends (a ServerApp's
        thread). Default: nothing."""

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        """Per-run tables the algorithm keeps beside metrics and events, by name: rows of scalars, written as
        ``<name>.csv`` in the run's folder when the run ends (e.g. a Flower strategy's ``federated``
        evaluation). Their rows belong to :meth:`state`, so a resumed run has them all. Default: none."""
        return {}

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """The algorithm's whole state as plain data (tensors, numbers, lists, dicts)."""

    @abstractmethod
    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state` output exactly."""


class SingleModel:
    """Mixin for algorithms whose whole state is one global flat model ``w`` (listed first among the bases)."""

    w: torch.Tensor

    def global_weights(self) -> torch.Tensor:
        return self.w

    def state(self) -> dict[str, Any]:
        return {"w": self.w}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]


class Versions:
    """The global models a buffered rule has published and the one each client was dispatched with: its staleness
    in versions (FedBuff, FADAS, FedStaleWeight). Every client starts on version 0 (the time-0 dispatch)."""

    def __init__(self, num_clients: int) -> None:
        self.version = 0
        """Global models published (flushes) so far."""
        self.dispatched = [0] * num_clients
        """The version each client was last dispatched with."""

    def staleness(self, client: int) -> int:
        """Versions published since ``client`` was dispatched."""
        return self.version - self.dispatched[client]

    def dispatch(self, client: int) -> None:
        """``client`` leaves with the current version (a re-dispatch, or a late joiner's first)."""
        self.dispatched[client] = self.version

    def publish(self) -> None:
        self.version += 1

    def state(self) -> dict[str, Any]:
        return {"version": self.version, "dispatched": list(self.dispatched)}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.version = int(state["version"])
        self.dispatched = [int(v) for v in state["dispatched"]]



class VersionedModel:
    """Mixin for the buffered rules whose clients train from one global flat model ``w`` and whose staleness
    counts its published versions (``versions``; FedBuff, FADAS, FedStaleWeight, Pisces; listed first among the
    bases)."""

    w: torch.Tensor
    versions: Versions

    def initial_weights(self, client: int) -> torch.Tensor:
        # no side effect: at time 0 every client is dispatched version 0, as Versions starts
        return self.w

    def on_join(self, client: int) -> torch.Tensor:
        # a late joiner is dispatched the current version: its staleness counts from here
        self.versions.dispatch(client)
        return self.w

    def global_weights(self) -> torch.Tensor:
        return self.w

class AsyncAlgorithm(Algorithm[ConfigT]):
    """Aggregates each arrival at once and re-dispatches its client."""

    mode = "async"

    @property
    def keeps_client_models(self) -> bool:
        """Cross-device serving (scenario ``server:``), where a client waits idle between its rounds:
        True when the weights :meth:`on_arrival` returns are the client's own model, which it keeps
        and trains from when it is sampled again, its staleness counted from that arrival (OrthoFL's
        calibrated model); False when a sampled client downloads the server's current weights
        (:meth:`on_join`) and its staleness counts from that dispatch (FedAsync, FedBuff, CA2FL).
        A client never seen before gets :meth:`on_join` either way. Stated by the config
        (:attr:`simfl.algorithms.configs.AlgorithmConfig.keeps_client_models`), so that the estimate
        knows it before a run. The kept models are a :class:`ClientVectors` store (:meth:`keep`,
        :meth:`kept`), made on first use."""
        return self.config.keeps_client_models

    @property
    def selects_clients(self) -> bool:
        """Cross-device serving (scenario ``server:``): True when the algorithm picks the clients sent into free
        slots itself (:meth:`select`) in place of the scenario's ``server.selection`` draw (Pisces's utility);
        False (default): the selection stream draws them. Stated by the config
        (:attr:`simfl.algorithms.configs.AlgorithmConfig.selects_clients`). Without ``server.concurrency`` every
        present client is always in flight and nothing is selected."""
        return self.config.selects_clients

    def select(self, candidates: list[int], count: int, now: float) -> list[int]:
        """Cross-device serving, when :attr:`selects_clients`: the ``count`` clients to send out now, in the order
        they are dispatched, chosen among ``candidates`` (every idle, present client, ascending; ``1 <= count <=
        len(candidates)``) at virtual time ``now``. Called whenever slots free up (time 0, after an aggregation and
        the server's time, a failure, a departure, a return), between the arrivals the algorithm saw, so a rule
        ranks from its own state, which it checkpoints; it must be deterministic (no global random state).
        Default: the lowest indices."""
        return candidates[:count]

    @property
    def recalls_clients(self) -> bool:
        """True when the algorithm may recall clients whose rounds are in flight after an arrival (:meth:`recall`,
        PORT's urgent report to a stale client); False (default): every round runs its drawn time. Stated by the
        config (:attr:`simfl.algorithms.configs.AlgorithmConfig.recalls_clients`)."""
        return self.config.recalls_clients

    def recall(self) -> list[int]:
        """When :attr:`recalls_clients`: right after each :meth:`on_arrival`, the clients whose rounds in flight
        should report early, each at its next epoch boundary with the epochs done by then (its job becomes the first
        epochs of the same round: the same stream, so the weights a full job has after them). The simulation cuts
        them in the order given (:meth:`simfl.sim.world.World.recall`, where the boundary lies) and passes over a
        client not in flight, already cut, in its last epoch or past its compute, so a rule may name clients from
        its own bookkeeping without knowing which are in flight. Deterministic, from the algorithm's state (no
        global random state). Default: none."""
        return []

    _kept: ClientVectors | None = None

    def keep(self, client: int, weights: torch.Tensor) -> None:
        """Cross-device serving: client ``client`` goes idle keeping ``weights`` (its model, when
        :attr:`keeps_client_models`)."""
        if self._kept is None:
            self._kept = self.setup.vectors()
        self._kept.put(client, weights)

    def kept(self, client: int) -> torch.Tensor | None:
        """The model client ``client`` kept from its last arrival, or None."""
        return None if self._kept is None else self._kept.get(client)

    def kept_state(self) -> dict[str, Any] | None:
        """The kept models as plain data (None: none kept), for checkpoints."""
        return None if self._kept is None else self._kept.state()

    def load_kept_state(self, state: dict[str, Any] | None) -> None:
        """Put back :meth:`kept_state` output."""
        self._kept = None
        if state is not None:
            self._kept = self.setup.vectors()
            self._kept.load_state(state)

    @abstractmethod
    def initial_weights(self, client: int) -> torch.Tensor:
        """The weights client ``client`` starts its first round from (time 0)."""

    def on_join(self, client: int) -> torch.Tensor:
        """The weights a client absent since time 0 starts from when it first joins, now (and, under
        cross-device serving, a sampled client that has no model of its own to keep).

        The engine counts its staleness from here (``tau`` = the current update count);
        an algorithm that remembers per-client anchors or versions sets them to the
        current ones, so the join is treated as a dispatch at the current update, not
        at time 0. Default: the same weights as :meth:`initial_weights`, asked now.
        """
        return self.initial_weights(client)

    @abstractmethod
    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        """Process one arrival.

        Returns the weights the client trains on next and the mixing weight
        used (None where the algorithm has none), recorded in events.csv.
        """


class SyncAlgorithm(Algorithm[ConfigT]):
    """Aggregates a whole round of K sampled clients, all sent the same weights."""

    mode = "sync"

    finished: bool = False
    """No round will open again (a Flower ServerApp whose ``main`` returned): the run ends at the next opening,
    whatever is left of its budget."""

    @property
    @abstractmethod
    def clients_per_round(self) -> int:
        """K, the number of clients sampled each round."""

    def choose(self, round_index: int, free: list[int]) -> list[int] | None:
        """The clients of round ``round_index`` (0-based) among ``free`` (idle, present, ascending), or None to
        let the engine sample ``clients_per_round`` of them (an algorithm that picks them says so in its
        config's ``chooses_clients``); an empty list waits for more clients to be free.
        Called just before :meth:`round_weights` and :meth:`message` of that round."""
        return None

    @abstractmethod
    def round_weights(self) -> torch.Tensor:
        """The weights every client of the next round starts from."""

    @abstractmethod
    def aggregate(self, arrivals: list[Arrival]) -> None:
        """Fold the round's arrivals into the global model."""
