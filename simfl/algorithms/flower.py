"""A Flower strategy as a simfl synchronous algorithm: Flower picks the nodes and aggregates, simfl keeps the clock.

``algorithms: [{name: flower, strategy: FedYogi, options: {eta: 0.01}, train_config: {lr: 0.05}}]``
drives a strategy of Flower's Message API (``flwr.serverapp.strategy.Strategy``) round by round,
as its own ``Strategy.start`` loop does, through a simfl-side grid:

1. Round ``r`` (1-based, Flower's ``server_round``) opens when clients are free: the grid's
   ``get_node_ids()`` answers the idle, present clients (node id = client + 1), and
   ``configure_train(r, arrays, ConfigRecord(train_config), grid)`` picks the nodes and their
   config (:meth:`FlowerStrategy.choose`). Flower's node sampling draws from Python's global
   ``random`` (and its DP strategies from NumPy's global generator): every call of the strategy
   runs with Python's, NumPy's and torch's global generators seeded from the stream
   ``(seed, "flower", r)`` and put back after (:func:`simfl.rng.global_generators`), so the same
   seed samples the same nodes and the user's own global generators are untouched.
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

Validating a scenario makes the strategy as the run will
(:func:`~simfl.algorithms.flower_strategies.build`): the class named, the options against its
constructor's signature and annotations, the constructor called; with the number of clients
(:meth:`~simfl.algorithms.configs.FlowerConfig.check_federation`), a strategy under which no round
could ever open (:func:`~simfl.algorithms.flower_strategies.never_opens`) is refused too, so
``simfl validate`` refuses what the run would,
before any training. A round where the strategy picks no node while every client is free ends the
run in one line (nothing could change the answer). Every call of the strategy goes through
:func:`simfl.errors.user_call`: whatever it raises, or a value of the wrong kind it returns, is
one line naming the strategy, the method, the round and the exception.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import torch

from simfl import rng
from simfl.algorithms.base import Arrival, ClientEvaluation, Setup, SyncAlgorithm
from simfl.algorithms.configs import FlowerConfig
from simfl.algorithms.flower_strategies import (
    build,
    config_record,
    evaluation_nodes,
    is_iterable,
    is_pair,
    is_real,
    needed_nodes,
    never_opens,
    node_grid,
    round_size,
    strategy_class,
)
from simfl.errors import InputError, user_call
from simfl.train import flower
from simfl.train.message import Message

T = TypeVar("T")


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


def train_metrics(arrival: Arrival) -> dict[str, int | float]:
    """A train reply's MetricRecord: a ClientApp's own metrics (they hold num-examples), else simfl's
    ``{"num-examples": the client's sample count, "train_loss": its mean loss}``."""
    if "num-examples" in arrival.metrics:
        return flower.whole_examples(arrival.metrics)
    out: dict[str, int | float] = {"num-examples": int(arrival.num_samples)}
    loss = arrival.metrics.get("loss")
    if loss is not None and loss == loss:
        out["train_loss"] = float(loss)
    return out


class FlowerStrategy(SyncAlgorithm[FlowerConfig]):
    """Synchronous rounds whose nodes, configs and aggregation are a Flower strategy's."""

    Config = FlowerConfig

    def __init__(self, config: FlowerConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.cls, self.legacy = strategy_class(config.strategy)
        self.strategy = build(self.cls, config.options, config.strategy)
        self.w = setup.init.clone()
        self.server_round = 0
        self.configs: dict[int, dict[str, Any]] = {}
        """The config each client of the open round was sent (the strategy's ConfigRecord)."""
        self.free: list[int] = []
        """The clients free when the open round opened: the nodes its federated evaluation may pick."""
        self.federated: list[dict[str, Any]] = []
        """federated.csv: one row per evaluated round."""
        self.trained: list[dict[str, Any]] = []
        """train.csv: one row per round whose aggregation returned metrics (Flower's ``Result.train_metrics_clientapp``)."""
        never_opens(self.strategy, config.strategy, setup.num_clients)

    def _call(self, method: str, call: Callable[[], T], returns: Callable[[Any], bool] | None = None,
              expected: str = "") -> T:
        """``call()``, the strategy's ``method`` for the open round, as user code (:func:`simfl.errors.user_call`),
        seeded as the module docstring says (evaluation calls from their own stream)."""
        what = "flower-evaluate" if "evaluate" in method else "flower"
        with rng.global_generators(self.setup.seed, what, self.server_round):
            return user_call("algorithms.strategy", f"{self.config.strategy}.{method} in round {self.server_round}",
                             call, returns, expected)

    def _messages(self, method: str, call: Callable[[], Any]) -> list[Any]:
        """The messages a Message-API ``configure_*`` call returns, read once as user code."""
        from flwr.app import Message as FlowerMessage

        found = self._call(method, call, is_iterable, "an iterable of flwr.app.Message")
        return self._call(method, lambda: list(found), lambda ms: all(isinstance(m, FlowerMessage) for m in ms),
                          "an iterable of flwr.app.Message")

    @property
    def clients_per_round(self) -> int:
        """Flower's sample size with every client free (the estimate's K; Flower decides each round)."""
        return round_size(self.strategy, self.setup.num_clients, self.config.strategy)

    # -- a round ----------------------------------------------------------------------------------------------

    def choose(self, round_index: int, free: list[int]) -> list[int]:
        self.server_round = round_index + 1
        self.free = list(free)
        chosen = self._choose_legacy(free) if self.legacy else self._choose_messages(free)
        if not chosen and len(free) == self.setup.num_clients:
            # every client is free, so no client can become free and no later call can see more nodes
            raise InputError("algorithms.strategy", f"{self.config.strategy} picked no node in round "
                             f"{self.server_round} with all {len(free)} clients free, so no round can ever open "
                             "(simfl opens one when the strategy picks a node)")
        return chosen

    def _choose_messages(self, free: list[int]) -> list[int]:
        """The nodes and configs of a Message-API strategy's ``configure_train`` (none: wait for more free)."""
        need = needed_nodes(self.strategy, len(free), self.config.strategy)
        if need is not None and len(free) < need:
            return []  # Flower would wait for nodes to connect: the engine waits for clients to be free
        arrays = flower.to_record(self.setup.layout, self.w)
        config = config_record(self.config.train_config)
        grid = node_grid([c + 1 for c in free])
        messages = self._messages("configure_train",
                                  lambda: self.strategy.configure_train(self.server_round, arrays, config, grid))
        self.configs = {}
        for message in messages:
            client = int(message.metadata.dst_node_id) - 1
            if client not in free or client in self.configs:
                raise InputError("algorithms.strategy", f"{self.config.strategy} sent a message to node "
                                 f"{client + 1}, which is not one of the free nodes it was given (or twice)")
            self._check_arrays(message.content.array_records, arrays)
            self.configs[client] = flower.message_config(message)
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
                                  "metrics": MetricRecord(dict(train_metrics(a)))})  # type: ignore[arg-type]
            replies.append(FlowerMessage(content, reply_to=sent))
        from flwr.app import ArrayRecord

        arrays, metrics = self._call(
            "aggregate_train", lambda: self.strategy.aggregate_train(self.server_round, replies),
            lambda v: is_pair(v) and (v[0] is None or isinstance(v[0], ArrayRecord)) and (v[1] is None or isinstance(
                v[1], Mapping)), "a pair (ArrayRecord or None, MetricRecord or None)")
        if arrays is not None:
            self.w = flower.from_record(self.setup.layout, arrays, "algorithms.strategy")
        self._record_training(arrivals, metrics)
        self._evaluate(arrivals[-1].update)

    def _record_training(self, arrivals: list[Arrival], metrics: Mapping[str, Any] | None) -> None:
        """The row of train.csv of the round just aggregated: its round, update and nodes, and the numbers among
        the metrics ``aggregate_train`` (``aggregate_fit``) returned; none when it returned none."""
        if metrics:
            self.trained.append({"round": self.server_round, "update": arrivals[-1].update, "nodes": len(arrivals),
                                 **flower.scalar_metrics(metrics)})

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
        from flwr.app import Message as FlowerMessage
        from flwr.app import MessageType, MetricRecord, RecordDict

        arrays = flower.to_record(self.setup.layout, self.w)
        config = config_record(self.config.evaluate_config)
        grid = node_grid([c + 1 for c in self.free])
        messages = self._messages("configure_evaluate",
                                  lambda: self.strategy.configure_evaluate(self.server_round, arrays, config, grid))
        replies = []
        for message in messages:
            client = int(message.metadata.dst_node_id) - 1
            if client not in self.free:
                raise InputError("algorithms.strategy", f"{self.config.strategy} asked node {client + 1} to "
                                 "evaluate, which is not one of the nodes it was given")
            self._check_arrays(message.content.array_records, arrays)
            config = flower.message_config(message)
            sent = FlowerMessage(RecordDict(), dst_node_id=client + 1, message_type=MessageType.EVALUATE)
            sent.metadata.__dict__["_message_id"] = f"{self.server_round}.{client}.evaluate"
            content = RecordDict({"metrics": MetricRecord(evaluate(client, self.w, config))})  # type: ignore[arg-type]
            replies.append(FlowerMessage(content, reply_to=sent))
        if not replies:
            return None
        metrics = self._call("aggregate_evaluate", lambda: self.strategy.aggregate_evaluate(self.server_round, replies),
                             lambda v: v is None or isinstance(v, Mapping), "a MetricRecord or None")
        return {"nodes": len(replies), **({} if metrics is None else flower.scalar_metrics(metrics))}

    # -- legacy strategies ------------------------------------------------------------------------------------

    def _parameters(self, flat: torch.Tensor) -> Any:
        """Legacy ``Parameters`` of flat weights: one array per tensor, in the layout's order."""
        from flwr.common import ndarrays_to_parameters

        return ndarrays_to_parameters([v.numpy() for v in self.setup.layout.split(flat).values()])

    def _choose_legacy(self, free: list[int]) -> list[int]:
        manager = _manager(free)
        params = self._parameters(self.w)
        pairs = self._instructions("configure_fit", lambda: self.strategy.configure_fit(
            server_round=self.server_round, parameters=params, client_manager=manager), free)
        self.configs = {int(proxy.cid): dict(ins.config) for proxy, ins in pairs}
        return sorted(self.configs)

    def _instructions(self, method: str, call: Callable[[], Any], free: list[int]) -> list[tuple[Any, Any]]:
        """The (ClientProxy, instructions) pairs a legacy ``configure_*`` call returns, among the ``free`` clients."""
        expected = "a list of (ClientProxy, FitIns or EvaluateIns) pairs of the clients it was given"
        found = self._call(method, call, is_iterable, expected)
        names = {str(c) for c in free}
        return self._call(method, lambda: list(found), lambda pairs: all(
            is_pair(p) and getattr(p[0], "cid", None) in names and isinstance(getattr(p[1], "config", None), Mapping)
            for p in pairs), expected)

    def _aggregate_legacy(self, arrivals: list[Arrival]) -> None:
        from flwr.common import Code, FitRes, Status, parameters_to_ndarrays

        manager = _manager([a.client for a in arrivals])
        results = []
        for a in arrivals:
            metrics = train_metrics(a)
            examples = int(metrics.pop("num-examples"))
            fit = FitRes(Status(Code.OK, ""), self._parameters(a.weights), examples, dict(metrics))  # type: ignore[arg-type]
            results.append((manager.all()[str(a.client)], fit))
        from flwr.common import Parameters

        params, metrics = self._call(
            "aggregate_fit", lambda: self.strategy.aggregate_fit(self.server_round, results, []),
            lambda v: is_pair(v) and (v[0] is None or isinstance(v[0], Parameters)) and (v[1] is None or isinstance(
                v[1], Mapping)), "a pair (Parameters or None, dict of metrics)")
        if params is not None:
            arrays = parameters_to_ndarrays(params)
            if len(arrays) != len(self.setup.layout.segments):
                raise InputError("algorithms.strategy", f"{self.config.strategy} returned {len(arrays)} arrays, "
                                 f"the model has {len(self.setup.layout.segments)}")
            self.w = self.setup.layout.join({s.name: torch.from_numpy(np.asarray(x, dtype=np.float32))
                                             for s, x in zip(self.setup.layout.segments, arrays, strict=True)})
        self._record_training(arrivals, metrics)
        self._evaluate(arrivals[-1].update)

    def _evaluate_legacy(self, evaluate: ClientEvaluation) -> dict[str, Any] | None:
        from flwr.common import Code, EvaluateRes, Status

        manager = _manager(self.free)
        params = self._parameters(self.w)
        pairs = self._instructions("configure_evaluate", lambda: self.strategy.configure_evaluate(
            server_round=self.server_round, parameters=params, client_manager=manager), self.free)
        results = []
        for proxy, ins in pairs:
            metrics = dict(evaluate(int(proxy.cid), self.w, dict(ins.config)))
            examples = int(metrics.pop("num-examples"))
            loss = float(metrics.get("eval_loss", float("nan")))
            results.append((proxy, EvaluateRes(Status(Code.OK, ""), loss, examples, metrics)))  # type: ignore[arg-type]
        if not results:
            return None
        loss, aggregated = self._call(
            "aggregate_evaluate", lambda: self.strategy.aggregate_evaluate(self.server_round, results, []),
            lambda v: is_pair(v) and (v[0] is None or is_real(v[0])) and (v[1] is None or isinstance(v[1], Mapping)),
            "a pair (loss or None, dict of metrics)")
        row: dict[str, Any] = {"nodes": len(results)}
        if loss is not None:
            row["loss"] = float(loss)
        row.update(flower.scalar_metrics(aggregated or {}))
        return row

    # -- state ------------------------------------------------------------------------------------------------

    def global_weights(self) -> torch.Tensor:
        return self.w

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        return {"federated": list(self.federated), "train": list(self.trained)}

    def state(self) -> dict[str, Any]:
        attributes = _strategy_state(self.strategy, self.config.strategy)
        return {"w": self.w, "server_round": self.server_round, "configs": {str(k): {key: _plain(v, "config")
                for key, v in c.items()} for k, c in self.configs.items()}, "strategy": attributes,
                "free": list(self.free), "federated": [dict(row) for row in self.federated],
                "trained": [dict(row) for row in self.trained]}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.server_round = int(state["server_round"])
        self.configs = {int(k): {key: _restore(v) for key, v in c.items()} for k, c in state["configs"].items()}
        self.free = [int(c) for c in state.get("free", [])]
        self.federated = [dict(row) for row in state.get("federated", [])]
        self.trained = [dict(row) for row in state.get("trained", [])]
        self.strategy = build(self.cls, self.config.options, self.config.strategy)
        _load_strategy_state(self.strategy, state["strategy"])


def _strategy_state(strategy: Any, where: str) -> dict[str, Any]:
    """A strategy's attributes as plain data; a wrapped strategy's own, under ``{"__strategy__": ...}``."""
    from flwr.server.strategy import Strategy as Legacy
    from flwr.serverapp.strategy import Strategy

    attributes: dict[str, Any] = {}
    for key, value in vars(strategy).items():
        if isinstance(value, Strategy | Legacy):
            attributes[key] = {"__strategy__": _strategy_state(value, f"{where}.{key}")}
        elif not callable(value):  # a callable (a metrics aggregation function) is an option, rebuilt by build
            attributes[key] = _plain(value, f"algorithms.strategy ({where}.{key})")
    return attributes


def _load_strategy_state(strategy: Any, attributes: Mapping[str, Any]) -> None:
    """Set what :func:`_strategy_state` saved on a strategy built from the same options."""
    for key, value in attributes.items():
        if isinstance(value, Mapping) and set(value) == {"__strategy__"}:
            _load_strategy_state(getattr(strategy, key), value["__strategy__"])
        else:
            setattr(strategy, key, _restore(value))


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
