"""A Flower strategy as a simfl synchronous algorithm: Flower picks the nodes and aggregates, simfl keeps the clock.

``algorithms: [{name: flower, strategy: FedYogi, options: {eta: 0.01}, train_config: {lr: 0.05}}]``
drives a strategy of Flower's Message API (``flwr.serverapp.strategy.Strategy``) round by round,
as its own ``Strategy.start`` loop does, through a simfl-side grid:

1. Round ``r`` (1-based, Flower's ``server_round``) opens when clients are free: the grid's
   ``get_node_ids()`` answers the idle, present clients (node id = client + 1), and
   ``configure_train(r, arrays, ConfigRecord(train_config), grid)`` picks the nodes and their
   config (:meth:`FlowerStrategy.choose`). Flower's node sampling draws from Python's global
   ``random`` (and its DP strategies from NumPy's global generator): both are seeded from the
   stream ``(seed, "flower", r)`` for the call and put back after, so the same seed samples
   the same nodes and the user's own global generators are untouched.
2. simfl dispatches those clients with their latencies, deadlines and failures; each trains
   from the strategy's arrays with its config (simfl's trainer turns FedProx's ``proximal-mu``
   into its proximal term; a Flower ClientApp gets the config as it is, see
   :mod:`simfl.train.flower`).
3. When the round closes, the replies of the clients that delivered go to ``aggregate_train``:
   one ArrayRecord of the trained weights and one MetricRecord, the ClientApp's own or
   ``{"num-examples": the client's sample count, "train_loss": its mean loss}``; the returned
   arrays become the global model (None keeps it).

Legacy strategies (``flwr.server.strategy.Strategy``: ``configure_fit``/``aggregate_fit``, still
shipped by Flower 1.41-1.42) run the same way through a client manager of the free clients
(``strategy: "flwr.server.strategy:FedAvg"``); their replies are ``FitRes`` with the same weights,
``num_examples`` and metrics, and their evaluation replies ``EvaluateRes`` (``loss``: the
reply's ``eval_loss``; ``federated.csv`` gains the aggregated ``loss``).

4. Federated evaluation, as Flower's loop runs it after ``aggregate_train``:
   ``configure_evaluate(r, new arrays, ConfigRecord(evaluate_config), grid)`` picks nodes among
   the clients that were free when the round opened (the grid ``configure_train`` saw: simfl
   knows presence when it opens a round; seeded from ``(seed, "flower-evaluate", r)``), each
   picked client evaluates the new global model on its own data
   (:mod:`simfl.train.client_eval`: a ClientApp's ``evaluate`` handler, else simfl's scores on
   its partition), and ``aggregate_evaluate`` turns the replies into the round's row of
   ``federated.csv`` (round, update, nodes, the aggregated metrics). The evaluation costs no
   virtual time: the latency model times training rounds. A strategy that would wait for more
   nodes than were free (``min_evaluate_nodes``, ``min_available_nodes``) skips that round's
   evaluation; ``fraction_evaluate: 0`` turns it off, as in Flower. simfl's own evaluation of
   the global model on the test set (``metrics.csv``, Flower's server-side ``evaluate_fn``)
   runs on its grid as for every algorithm. Pure-latency runs evaluate nothing.

Checkpoints hold the strategy's attributes as plain data (numbers, strings, NumPy arrays,
records), rebuilt on resume over a strategy made from the same options; a strategy whose state
holds anything else cannot be checkpointed, said in one line.
"""

from __future__ import annotations

import contextlib
import inspect
import random
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field

from simfl import rng
from simfl.algorithms.base import AlgorithmConfig, Arrival, ClientEvaluation, Setup, SyncAlgorithm
from simfl.errors import InputError
from simfl.names import import_object, is_import_path, short_name
from simfl.train import flower
from simfl.train.message import Message

FLOWER_MODULES = ("flwr.serverapp.strategy", "flwr.server.strategy")
"""Flower's own strategy modules: named without --allow-imports (Flower is installed, and imported anyway)."""


class FlowerConfig(AlgorithmConfig):
    """A Flower strategy (flwr.serverapp.strategy or the legacy flwr.server.strategy) in virtual time."""

    name: Literal["flower"] = Field("flower", description="Algorithm name.")
    strategy: str = Field(
        description="A strategy of Flower's Message API by class name (FedAvg, FedProx, FedYogi, FedTrimmedAvg, "
        "Krum, ...), a legacy one as flwr.server.strategy:FedAvg, or the import path package.module:Class of "
        "the user's own (needs --allow-imports; a class object through the Python API). The entry's runs "
        "are named after the class unless it has a label."
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of the strategy's constructor, e.g. "
        "{fraction_train: 0.5, min_train_nodes: 5} or {eta: 0.01} for FedYogi."
    )
    train_config: dict[str, Any] = Field(
        default_factory=dict, description="The ConfigRecord of every round (Strategy.start's train_config), "
        "e.g. {lr: 0.05} for a ClientApp that reads it; strategies add their own keys (server-round, ...)."
    )
    evaluate_config: dict[str, Any] = Field(
        default_factory=dict, description="The ConfigRecord of every round's federated evaluation "
        "(Strategy.start's evaluate_config); strategies add server-round. Turn the evaluation off with "
        "options: {fraction_evaluate: 0} (legacy strategies: fraction_evaluate: 0)."
    )

    @property
    def default_run_name(self) -> str:
        """The strategy's class name (``FedYogi``)."""
        return short_name(self.strategy if is_import_path(self.strategy) else f"x:{self.strategy}")


def strategy_class(name: str) -> tuple[type, bool]:
    """The strategy class ``name`` names and whether it is a legacy one; one line when it is not a strategy."""
    where = "algorithms.strategy"
    flower.require(where)
    flower.prepare()
    from flwr.server.strategy import Strategy as Legacy
    from flwr.serverapp import strategy as current
    from flwr.serverapp.strategy import Strategy

    if not is_import_path(name):
        found = getattr(current, name, None)
        if not (isinstance(found, type) and issubclass(found, Strategy)):
            known = sorted(n for n, v in vars(current).items()
                           if isinstance(v, type) and issubclass(v, Strategy) and not inspect.isabstract(v))
            raise InputError(where, f"'{name}' is not a strategy of flwr.serverapp.strategy; known: {known}, "
                             "or an import path package.module:Class")
        return found, False
    module, _, attr = name.partition(":")
    if module in FLOWER_MODULES:
        import importlib

        found = getattr(importlib.import_module(module), attr, None)
    else:
        found = import_object(name, where)
    if not isinstance(found, type) or not issubclass(found, Strategy | Legacy) or inspect.isabstract(found):
        raise InputError(where, f"'{name}' is not a Flower strategy class (a subclass of "
                         "flwr.serverapp.strategy.Strategy or flwr.server.strategy.Strategy)")
    return found, issubclass(found, Legacy)


@contextlib.contextmanager
def seeded(seed: int, round_: int, what: str = "flower") -> Iterator[None]:
    """Python's and NumPy's global generators seeded from ``(seed, what, round_)`` within, restored after."""
    py_state, np_state = random.getstate(), np.random.get_state()
    draw = rng.stream(seed, what, round_)
    random.seed(int(draw.integers(2**63)))
    np.random.seed(int(draw.integers(2**32)))
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def _grid(nodes: list[int]) -> Any:
    """A Flower Grid whose ``get_node_ids()`` is ``nodes``; strategies call nothing else of it here."""
    from flwr.serverapp import Grid
    from flwr.supercore.run import Run

    class NodeGrid(Grid):
        def __init__(self) -> None:
            self._run = Run.create_empty(1)

        def set_run(self, run: Any) -> None:
            self._run = run

        @property
        def run(self) -> Any:
            return self._run

        def create_message(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("simfl's grid only lists nodes")

        def get_node_ids(self) -> list[int]:
            return list(nodes)

        def push_messages(self, messages: Any) -> Any:
            raise NotImplementedError("simfl dispatches the messages in virtual time")

        def pull_messages(self, message_ids: Any) -> Any:
            raise NotImplementedError("simfl dispatches the messages in virtual time")

        def send_and_receive(self, messages: Any, *, timeout: float | None = None) -> Any:
            raise NotImplementedError("simfl dispatches the messages in virtual time")

    return NodeGrid()


def sample_size(strategy: Any, available: int) -> int:
    """How many nodes a strategy samples from ``available`` (Flower's rule: ``max(int(available * fraction),
    least)``; the legacy API's ``fraction_fit``/``min_fit_clients`` alike; 0 when the fraction is 0)."""
    fraction = float(getattr(strategy, "fraction_train", getattr(strategy, "fraction_fit", 1.0)))
    least = int(getattr(strategy, "min_train_nodes", getattr(strategy, "min_fit_clients", 1)))
    return 0 if fraction == 0.0 else max(int(available * fraction), least)


def evaluation_nodes(strategy: Any, available: int) -> int:
    """How many nodes a strategy's federated evaluation needs connected when ``available`` are (0: it does not
    evaluate). Flower's rule: ``max(min_available_nodes, max(int(available * fraction_evaluate),
    min_evaluate_nodes))``, the legacy API's ``min_available_clients``/``min_evaluate_clients`` alike; a
    strategy without these attributes asks for none."""
    fraction = float(getattr(strategy, "fraction_evaluate", 0.0))
    if fraction == 0.0:
        return 0
    least = int(getattr(strategy, "min_evaluate_nodes", getattr(strategy, "min_evaluate_clients", 1)))
    connected = int(getattr(strategy, "min_available_nodes", getattr(strategy, "min_available_clients", 1)))
    return max(connected, max(int(available * fraction), least))


def needed_nodes(strategy: Any, available: int) -> int | None:
    """How many nodes a Message-API FedAvg-family strategy waits for when ``available`` are there (None: not
    such a one).

    Flower's ``sample_nodes`` sleeps until ``max(min_available_nodes, sample_size)`` nodes are
    connected, forever here: the bridge checks first and waits in virtual time instead."""
    if not all(hasattr(strategy, a) for a in ("fraction_train", "min_train_nodes", "min_available_nodes")):
        return None
    size = sample_size(strategy, available)
    return 0 if size == 0 else max(int(strategy.min_available_nodes), size)


# -- the strategy's state as plain data ---------------------------------------------------------------------------

def _plain(value: Any, where: str) -> Any:
    from flwr.app import ArrayRecord, ConfigRecord, MetricRecord

    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes):
        return {"__bytes__": torch.frombuffer(bytearray(value), dtype=torch.uint8).clone()}
    if isinstance(value, np.generic):
        return {"__numpy_scalar__": torch.from_numpy(np.asarray(value).reshape(1).copy())}
    if isinstance(value, np.ndarray):
        return {"__ndarray__": torch.from_numpy(np.ascontiguousarray(value).copy())}
    if isinstance(value, ArrayRecord):
        return {"__arrayrecord__": {k: _plain(a.numpy(), where) for k, a in value.items()}}
    if isinstance(value, MetricRecord | ConfigRecord):
        kind = "__metricrecord__" if isinstance(value, MetricRecord) else "__configrecord__"
        return {kind: {k: _plain(v, where) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return {"__list__" if isinstance(value, list) else "__tuple__": [_plain(v, where) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"__dict__": {k: _plain(v, where) for k, v in value.items()}}
    raise InputError(where, f"holds a {type(value).__name__}, which a simfl checkpoint cannot carry (numbers, "
                     "strings, NumPy arrays, lists, dicts and Flower records can)")


def _restore(value: Any) -> Any:
    from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord

    if not isinstance(value, dict):
        return value
    (kind, inner), = value.items()
    if kind == "__bytes__":
        return inner.numpy().tobytes()
    if kind == "__numpy_scalar__":
        return inner.numpy()[0]
    if kind == "__ndarray__":
        return inner.numpy().copy()
    if kind == "__arrayrecord__":
        return ArrayRecord({k: Array(_restore(v)) for k, v in inner.items()})
    if kind == "__metricrecord__":
        return MetricRecord({k: _restore(v) for k, v in inner.items()})
    if kind == "__configrecord__":
        return ConfigRecord({k: _restore(v) for k, v in inner.items()})
    if kind == "__list__":
        return [_restore(v) for v in inner]
    if kind == "__tuple__":
        return tuple(_restore(v) for v in inner)
    return {k: _restore(v) for k, v in inner.items()}


class FlowerStrategy(SyncAlgorithm[FlowerConfig]):
    """Synchronous rounds whose nodes, configs and aggregation are a Flower strategy's."""

    Config = FlowerConfig
    chooses_clients = True

    def __init__(self, config: FlowerConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.cls, self.legacy = strategy_class(config.strategy)
        self.strategy = self._build()
        self.w = setup.init.clone()
        self.server_round = 0
        self.configs: dict[int, dict[str, Any]] = {}
        """The config each client of the open round was sent (the strategy's ConfigRecord)."""
        self.free: list[int] = []
        """The clients free when the open round opened: the nodes its federated evaluation may pick."""
        self.federated: list[dict[str, Any]] = []
        """federated.csv: one row per evaluated round."""
        need = needed_nodes(self.strategy, setup.num_clients)
        if need is not None and need > setup.num_clients:
            raise InputError("algorithms.options", f"{config.strategy} waits for at least {need} nodes "
                             f"(min_available_nodes, min_train_nodes), the federation has {setup.num_clients} clients")

    def _build(self) -> Any:
        try:
            return self.cls(**self.config.options)
        except (TypeError, ValueError) as exc:
            raise InputError("algorithms.options", f"{self.cls.__name__}({self.config.options}): {exc}") from None

    @property
    def clients_per_round(self) -> int:
        """Flower's sample size with every client free (the estimate's K; Flower decides each round)."""
        return max(1, min(sample_size(self.strategy, self.setup.num_clients), self.setup.num_clients))

    # -- a round ----------------------------------------------------------------------------------------------

    def choose(self, round_index: int, free: list[int]) -> list[int]:
        self.server_round = round_index + 1
        self.free = list(free)
        if self.legacy:
            return self._choose_legacy(free)
        from flwr.app import ConfigRecord

        need = needed_nodes(self.strategy, len(free))
        if need is not None and len(free) < need:
            return []  # Flower would wait for nodes to connect: the engine waits for clients to be free
        arrays = flower.to_record(self.setup.layout, self.w)
        with seeded(self.setup.seed, self.server_round):
            messages = list(self.strategy.configure_train(self.server_round, arrays,
                                                          ConfigRecord(dict(self.config.train_config)),
                                                          _grid([c + 1 for c in free])))
        self.configs = {}
        for message in messages:
            client = int(message.metadata.dst_node_id) - 1
            if client not in free or client in self.configs:
                raise InputError("algorithms.strategy", f"{self.config.strategy} sent a message to node "
                                 f"{client + 1}, which is not one of the free nodes it was given (or twice)")
            self._check_arrays(message.content.array_records, arrays)
            self.configs[client] = {k: v for record in message.content.config_records.values()
                                    for k, v in record.items()}
        return sorted(self.configs)

    def _check_arrays(self, records: Mapping[str, Any], sent: Any) -> None:
        """The bridge sends every client the global weights: a strategy's own per-node arrays are refused."""
        for record in records.values():
            if record is not sent and not torch.equal(
                    flower.from_record(self.setup.layout, record, "algorithms.strategy"), self.w):
                raise InputError("algorithms.strategy", f"{self.config.strategy} sends a node arrays other than "
                                 "the global model, which the bridge does not carry")

    def round_weights(self) -> torch.Tensor:
        return self.w

    def message(self, client: int, round: int) -> Message:
        config = dict(self.configs.get(client, {}))
        mu = config.get(flower.PROX_KEY)
        hooks = {"prox_mu": float(mu)} if isinstance(mu, int | float) and mu > 0 else {}
        return Message(hooks=hooks, config=config)

    def _metrics(self, arrival: Arrival) -> dict[str, int | float]:
        """A reply's MetricRecord: a ClientApp's own metrics (they hold num-examples), else simfl's."""
        if "num-examples" in arrival.metrics:
            return flower.whole_examples(arrival.metrics)
        out: dict[str, int | float] = {"num-examples": int(arrival.num_samples)}
        loss = arrival.metrics.get("loss")
        if loss is not None and loss == loss:
            out["train_loss"] = float(loss)
        return out

    def aggregate(self, arrivals: list[Arrival]) -> None:
        if not arrivals:
            raise ValueError("a round needs at least one arrival")
        if self.legacy:
            self._aggregate_legacy(arrivals)
            return
        from flwr.app import Message as FlowerMessage
        from flwr.app import MessageType, MetricRecord, RecordDict

        replies = []
        for a in arrivals:
            sent = FlowerMessage(RecordDict(), dst_node_id=a.client + 1, message_type=MessageType.TRAIN)  # reply_to
            sent.metadata.__dict__["_message_id"] = f"{self.server_round}.{a.client}"
            content = RecordDict({"arrays": flower.to_record(self.setup.layout, a.weights),
                                  "metrics": MetricRecord(dict(self._metrics(a)))})  # type: ignore[arg-type]
            replies.append(FlowerMessage(content, reply_to=sent))
        with seeded(self.setup.seed, self.server_round):
            arrays, _ = self.strategy.aggregate_train(self.server_round, replies)
        if arrays is not None:
            self.w = flower.from_record(self.setup.layout, arrays, "algorithms.strategy")
        self._evaluate(arrivals[-1].update)

    # -- federated evaluation ---------------------------------------------------------------------------------

    def _evaluate(self, update: int) -> None:
        """The round's federated evaluation (module docstring, step 4): one row of federated.csv, or none."""
        evaluate = self.setup.evaluate_client
        need = evaluation_nodes(self.strategy, len(self.free))
        if evaluate is None or need == 0 or need > len(self.free):
            return
        if self.legacy:
            row = self._evaluate_legacy(evaluate)
        else:
            row = self._evaluate_messages(evaluate)
        if row is not None:
            self.federated.append({"round": self.server_round, "update": update, **row})

    def _evaluate_messages(self, evaluate: ClientEvaluation) -> dict[str, Any] | None:
        from flwr.app import ConfigRecord, MessageType, MetricRecord, RecordDict
        from flwr.app import Message as FlowerMessage

        arrays = flower.to_record(self.setup.layout, self.w)
        with seeded(self.setup.seed, self.server_round, "flower-evaluate"):
            messages = list(self.strategy.configure_evaluate(self.server_round, arrays,
                                                             ConfigRecord(dict(self.config.evaluate_config)),
                                                             _grid([c + 1 for c in self.free])))
        replies = []
        for message in messages:
            client = int(message.metadata.dst_node_id) - 1
            if client not in self.free:
                raise InputError("algorithms.strategy", f"{self.config.strategy} asked node {client + 1} to "
                                 "evaluate, which is not one of the nodes it was given")
            self._check_arrays(message.content.array_records, arrays)
            config = {k: v for record in message.content.config_records.values() for k, v in record.items()}
            sent = FlowerMessage(RecordDict(), dst_node_id=client + 1, message_type=MessageType.EVALUATE)
            sent.metadata.__dict__["_message_id"] = f"{self.server_round}.{client}.evaluate"
            content = RecordDict({"metrics": MetricRecord(evaluate(client, self.w, config))})  # type: ignore[arg-type]
            replies.append(FlowerMessage(content, reply_to=sent))
        if not replies:
            return None
        with seeded(self.setup.seed, self.server_round, "flower-evaluate"):
            metrics = self.strategy.aggregate_evaluate(self.server_round, replies)
        return {"nodes": len(replies), **({} if metrics is None else flower.scalar_metrics(metrics))}

    # -- legacy strategies ------------------------------------------------------------------------------------

    def _parameters(self, flat: torch.Tensor) -> Any:
        """Legacy ``Parameters`` of flat weights: one array per tensor, in the layout's order."""
        from flwr.common import ndarrays_to_parameters

        return ndarrays_to_parameters([v.numpy() for v in self.setup.layout.split(flat).values()])

    def _choose_legacy(self, free: list[int]) -> list[int]:
        manager = _manager(free)
        params = self._parameters(self.w)
        with seeded(self.setup.seed, self.server_round):
            pairs = self.strategy.configure_fit(server_round=self.server_round, parameters=params,
                                                client_manager=manager)
        self.configs = {int(proxy.cid): dict(ins.config) for proxy, ins in pairs}
        return sorted(self.configs)

    def _aggregate_legacy(self, arrivals: list[Arrival]) -> None:
        from flwr.common import Code, FitRes, Status, parameters_to_ndarrays

        manager = _manager([a.client for a in arrivals])
        results = []
        for a in arrivals:
            metrics = self._metrics(a)
            examples = int(metrics.pop("num-examples"))
            fit = FitRes(Status(Code.OK, ""), self._parameters(a.weights), examples, dict(metrics))  # type: ignore[arg-type]
            results.append((manager.all()[str(a.client)], fit))
        with seeded(self.setup.seed, self.server_round):
            params, _ = self.strategy.aggregate_fit(self.server_round, results, [])
        if params is not None:
            arrays = parameters_to_ndarrays(params)
            if len(arrays) != len(self.setup.layout.segments):
                raise InputError("algorithms.strategy", f"{self.config.strategy} returned {len(arrays)} arrays, "
                                 f"the model has {len(self.setup.layout.segments)}")
            self.w = self.setup.layout.join({s.name: torch.from_numpy(np.asarray(x, dtype=np.float32))
                                             for s, x in zip(self.setup.layout.segments, arrays, strict=True)})
        self._evaluate(arrivals[-1].update)

    def _evaluate_legacy(self, evaluate: ClientEvaluation) -> dict[str, Any] | None:
        from flwr.common import Code, EvaluateRes, Status

        manager = _manager(self.free)
        with seeded(self.setup.seed, self.server_round, "flower-evaluate"):
            pairs = self.strategy.configure_evaluate(server_round=self.server_round,
                                                     parameters=self._parameters(self.w), client_manager=manager)
        results = []
        for proxy, ins in pairs:
            metrics = dict(evaluate(int(proxy.cid), self.w, dict(ins.config)))
            examples = int(metrics.pop("num-examples"))
            loss = float(metrics.get("eval_loss", float("nan")))
            results.append((proxy, EvaluateRes(Status(Code.OK, ""), loss, examples, metrics)))  # type: ignore[arg-type]
        if not results:
            return None
        with seeded(self.setup.seed, self.server_round, "flower-evaluate"):
            loss, aggregated = self.strategy.aggregate_evaluate(self.server_round, results, [])
        row: dict[str, Any] = {"nodes": len(results)}
        if loss is not None:
            row["loss"] = float(loss)
        row.update(flower.scalar_metrics(aggregated or {}))
        return row

    # -- state ------------------------------------------------------------------------------------------------

    def global_weights(self) -> torch.Tensor:
        return self.w

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        return {"federated": list(self.federated)}

    def state(self) -> dict[str, Any]:
        attributes = {}
        for key, value in vars(self.strategy).items():
            if callable(value):  # e.g. a metrics aggregation function: an option, rebuilt by _build
                continue
            attributes[key] = _plain(value, f"algorithms.strategy ({self.config.strategy}.{key})")
        return {"w": self.w, "server_round": self.server_round, "configs": {str(k): {key: _plain(v, "config")
                for key, v in c.items()} for k, c in self.configs.items()}, "strategy": attributes,
                "free": list(self.free), "federated": [dict(row) for row in self.federated]}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.server_round = int(state["server_round"])
        self.configs = {int(k): {key: _restore(v) for key, v in c.items()} for k, c in state["configs"].items()}
        self.free = [int(c) for c in state.get("free", [])]
        self.federated = [dict(row) for row in state.get("federated", [])]
        self.strategy = self._build()
        for key, value in state["strategy"].items():
            setattr(self.strategy, key, _restore(value))


def _manager(clients: list[int]) -> Any:
    """A legacy client manager of ``clients`` that samples at once (Flower's waits up to a day for nodes)."""
    from flwr.server.client_manager import SimpleClientManager
    from flwr.server.client_proxy import ClientProxy

    class Proxy(ClientProxy):
        def _never(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("simfl trains the client in virtual time")

        get_properties = get_parameters = fit = evaluate = reconnect = _never

    class Manager(SimpleClientManager):
        def wait_for(self, num_clients: int, timeout: int = 86400) -> bool:
            return len(self.clients) >= num_clients

    manager = Manager()
    for c in clients:
        manager.register(Proxy(str(c)))
    return manager
