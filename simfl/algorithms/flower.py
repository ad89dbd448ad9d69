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

Validating a scenario makes the strategy as the run will (:func:`build`): the class named, the
options against its constructor's signature and annotations, the constructor called; with the
number of clients (:meth:`FlowerStrategy.check_federation`), a strategy under which no round could
ever open (:func:`never_opens`) is refused too, so ``simfl validate`` refuses what the run would,
before any training. A round where the strategy picks no node while every client is free ends the
run in one line (nothing could change the answer). Every call of the strategy goes through
:func:`simfl.errors.user_call`: whatever it raises, or a value of the wrong kind it returns, is
one line naming the strategy, the method, the round and the exception.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import random
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, TypeVar

import numpy as np
import torch
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo, field_validator

from simfl import rng
from simfl.algorithms.base import AlgorithmConfig, Arrival, ClientEvaluation, Setup, SyncAlgorithm
from simfl.errors import InputError, user_call
from simfl.names import import_object, is_import_path, short_name
from simfl.train import flower
from simfl.train.message import Message

FLOWER_MODULES = ("flwr.serverapp.strategy", "flwr.server.strategy")
"""Flower's own strategy modules: named without --allow-imports (Flower is installed, and imported anyway)."""
SIMFL_TRAIN_METRICS = ("num-examples", "train_loss")
"""The metrics of a training reply of simfl's own trainer (``train_loss`` when the loss is a number)."""
SIMFL_EVALUATE_METRICS = ("num-examples", "eval_loss", "eval_acc")
"""The metrics of an evaluation reply of simfl's own scores (:mod:`simfl.train.client_eval`)."""

T = TypeVar("T")


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
        default_factory=dict, validate_default=True, description="Keyword arguments of the strategy's constructor, "
        "e.g. {fraction_train: 0.5, min_train_nodes: 5} or {eta: 0.01} for FedYogi."
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

    # Validation makes the strategy as the run will, so that `simfl validate` refuses what the run would.

    @field_validator("strategy")
    @classmethod
    def _a_strategy(cls, name: str) -> str:
        try:
            strategy_class(name)
        except InputError as exc:
            raise ValueError(exc.message) from None
        return name

    @field_validator("options")
    @classmethod
    def _options_build_it(cls, options: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        name = info.data.get("strategy")
        if name is None:  # the strategy's own error is reported
            return options
        found, _ = strategy_class(name)
        try:
            with _quiet():
                never_opens(build(found, options, name), name, None)
        except InputError as exc:
            raise ValueError(exc.message) from None
        return options

    @field_validator("train_config", "evaluate_config")
    @classmethod
    def _a_config_record(cls, config: dict[str, Any]) -> dict[str, Any]:
        try:
            config_record(config)
        except InputError as exc:
            raise ValueError(exc.message) from None
        return config


def config_record(config: Mapping[str, Any]) -> Any:
    """``config`` as a Flower ConfigRecord; one line naming the key whose value ConfigRecord refuses (or a NaN)."""
    flower.require("algorithms.train_config")
    from flwr.app import ConfigRecord

    for key, value in config.items():
        _finite(value, key)
        try:
            ConfigRecord({key: value})
        except Exception as exc:  # Flower's own check of the value's type
            raise InputError("algorithms.train_config", f"{key}: {exc} (got {_shown(value)})") from None
    return ConfigRecord(dict(config))


def _finite(value: Any, where: str) -> None:
    """Refuse NaN and infinities anywhere in ``value`` (a resolved scenario.yaml would write them as null)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError("algorithms.options", f"{where}: must be a finite number, got {value}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            _finite(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _finite(item, f"{where}[{i}]")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Flower's log silenced within: a strategy built to be checked logs nothing (the run's own one does)."""
    logger = logging.getLogger("flwr")
    before = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(before)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_STRICT = ConfigDict(strict=True, arbitrary_types_allowed=True, allow_inf_nan=False)


def check_options(cls: type, options: Mapping[str, Any], name: str) -> None:
    """Refuse options ``cls``'s constructor cannot take, before it is called: a keyword it does not have, one it
    needs that is missing, a value its annotation refuses (strictly: no text for a number, no bool for an
    int; annotations pydantic cannot check are left to the constructor), a NaN or infinity anywhere."""
    where = "algorithms.options"
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):  # no signature to read: the constructor decides
        return
    named = {k: p for k, p in parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    anything = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    for key, value in options.items():
        if key not in named and not anything:
            raise InputError(where, f"unexpected keyword '{key}' for {name}; its options: {', '.join(named) or 'none'}")
        _finite(value, key)
    missing = [k for k, p in named.items() if p.default is p.empty and k not in options]
    if missing:
        raise InputError(where, f"{name} needs {missing[0]} (an option without a default)")
    hints = _constructor_hints(cls)
    for key, value in options.items():
        if key not in hints:
            continue
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(hints[key], config=_STRICT)
        except Exception:  # a type pydantic cannot check (e.g. a dataclass): the constructor decides
            continue
        try:
            adapter.validate_python(value)
        except ValidationError as exc:
            message = str(exc.errors()[0]["msg"]).rstrip(".")
            raise InputError(where, f"{key}: {message[:1].lower()}{message[1:]} ({name} takes "
                             f"{_annotation(hints[key])}), got {_shown(value)}") from None


def _constructor_hints(cls: type) -> dict[str, Any]:
    """The annotations of ``cls``'s constructor; none when they do not resolve (the constructor then decides)."""
    constructor: Any = cls
    try:
        return typing.get_type_hints(constructor.__init__)
    except Exception:
        return {}


def _annotation(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def _flowers(cls: type) -> bool:
    """Whether ``cls`` is one of Flower's own strategies (not the user's code)."""
    return cls.__module__.split(".")[0] == "flwr"


def build(cls: type, options: Mapping[str, Any], name: str) -> Any:
    """The strategy ``cls(**options)``, made as every run makes it, after :func:`check_options`.

    A wrapper's inner strategy (an option its constructor annotates as a Strategy, e.g. the ``strategy`` of
    ``DifferentialPrivacyServerSideFixedClipping``) is given by name, ``strategy: FedAvg``, or with its own
    options, ``strategy: {strategy: FedAvg, options: {fraction_train: 0.5}}``, and built the same way first.
    Flower's own strategies refusing the options is a mistake in them (an InputError); the user's own
    strategy raising is user code failing (:func:`simfl.errors.user_call`)."""
    options = _inner_strategies(cls, options, name)
    check_options(cls, options, name)
    call = f"{name}({', '.join(f'{k}={_shown(v)}' for k, v in options.items())})"
    if _flowers(cls):
        try:
            return cls(**options)
        except Exception as exc:
            raise InputError("algorithms.options", f"{call}: {type(exc).__name__}: {exc}") from None
    return user_call("algorithms.strategy", f"the strategy {call}", lambda: cls(**options))


def _inner_strategies(cls: type, options: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``options`` with each strategy a wrapper takes, given by name or as ``{strategy, options}``, built."""
    from flwr.server.strategy import Strategy as Legacy
    from flwr.serverapp.strategy import Strategy

    hints = _constructor_hints(cls)
    out = dict(options)
    for key, value in options.items():
        hint = hints.get(key)
        inner_options: Any
        if not (isinstance(hint, type) and issubclass(hint, Strategy | Legacy)):
            continue
        if isinstance(value, str):
            inner, inner_options = value, {}
        elif isinstance(value, Mapping) and set(value) <= {"strategy", "options"} and isinstance(value.get("strategy"),
                                                                                                    str):
            inner, inner_options = value["strategy"], value.get("options") or {}
            if not isinstance(inner_options, Mapping):
                raise InputError("algorithms.options", f"{key}.options: must be a mapping of the inner strategy's "
                                 f"options, got {_shown(inner_options)}")
        else:
            continue  # the constructor's annotation check names it
        found, _ = strategy_class(inner)
        if not issubclass(found, hint):
            raise InputError("algorithms.options", f"{key}: {name} wraps a {hint.__name__}, and {inner} is not one "
                             "(a Message-API wrapper takes a flwr.serverapp strategy, a legacy one a legacy strategy)")
        out[key] = build(found, inner_options, inner)
    return out


def _number(strategy: Any, attribute: str, default: float, name: str) -> float:
    """A strategy's sampling attribute as a finite number (its default when it has none)."""
    value = getattr(strategy, attribute, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError("algorithms.options", f"{name}'s {attribute} is {_shown(value)}, not a finite number")
    return float(value)


def never_opens(strategy: Any, name: str, clients: int | None) -> None:
    """Refuse a strategy under which no round can ever open with ``clients`` clients (None: whatever their number).

    simfl opens a round when the strategy picks a node; a strategy that samples none (Flower's
    ``fraction_train: 0``, a sample of fewer than one node) or more nodes than there are (a legacy
    ``min_fit_clients`` above the clients) would leave the run waiting forever for a round.
    """
    where = "algorithms.options"
    if hasattr(strategy, "fraction_train") and _number(strategy, "fraction_train", 1.0, name) == 0.0:
        raise InputError(where, f"{name} has fraction_train 0: it trains no node, so no round would ever open; "
                         "give a fraction > 0")
    if clients is None:
        return
    size = sample_size(strategy, clients, name)
    legacy = _legacy_sampling(strategy)
    fraction, least = ("fraction_fit", "min_fit_clients") if legacy else ("fraction_train", "min_train_nodes")
    if size < 1:
        raise InputError(where, f"{name} samples {size} of the {clients} clients each round ({fraction}, {least}), "
                         "so no round would ever open")
    if legacy and size > clients:
        raise InputError(where, f"{name} samples {size} clients each round ({fraction}, {least}), the federation has "
                         f"{clients}, so no round would ever open")
    evaluation_nodes(strategy, clients)  # its numbers are checked too
    need = needed_nodes(strategy, clients, name)
    if need is not None and need > clients:
        raise InputError(where, f"{name} waits for at least {need} nodes (min_available_nodes, min_train_nodes), "
                         f"the federation has {clients} clients")


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
        if not (isinstance(found, type) and issubclass(found, Strategy)) or inspect.isabstract(found):
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


def _legacy_sampling(strategy: Any) -> bool:
    """Whether a strategy samples by the legacy API's attributes (``fraction_fit``, ``min_fit_clients``)."""
    return hasattr(strategy, "fraction_fit") and not hasattr(strategy, "fraction_train")


def sample_size(strategy: Any, available: int, name: str = "the strategy") -> int:
    """How many nodes a strategy samples from ``available`` (Flower's rule: ``max(int(available * fraction),
    least)``; 0 when the Message API's ``fraction_train`` is 0, which skips training; the legacy API's
    ``fraction_fit``/``min_fit_clients`` always take the rule)."""
    legacy = _legacy_sampling(strategy)
    attribute, least = ("fraction_fit", "min_fit_clients") if legacy else ("fraction_train", "min_train_nodes")
    fraction = _number(strategy, attribute, 1.0, name)
    if fraction == 0.0 and not legacy:
        return 0
    if not math.isfinite(available * fraction):
        raise InputError("algorithms.options", f"{name}'s {attribute} {fraction:g} times {available} nodes is not a "
                         "number of nodes")
    return max(int(available * fraction), int(_number(strategy, least, 1, name)))


def evaluation_nodes(strategy: Any, available: int) -> int:
    """How many nodes a strategy's federated evaluation needs connected when ``available`` are (0: it does not
    evaluate). Flower's rule: ``max(min_available_nodes, max(int(available * fraction_evaluate),
    min_evaluate_nodes))``, the legacy API's ``min_available_clients``/``min_evaluate_clients`` alike; a
    strategy without these attributes asks for none."""
    fraction = _number(strategy, "fraction_evaluate", 0.0, "the strategy")
    if fraction == 0.0:
        return 0
    legacy = not hasattr(strategy, "min_evaluate_nodes")
    least = int(_number(strategy, "min_evaluate_clients" if legacy else "min_evaluate_nodes", 1, "the strategy"))
    connected = int(_number(strategy, "min_available_clients" if legacy else "min_available_nodes", 1, "the strategy"))
    if not math.isfinite(available * fraction):
        raise InputError("algorithms.options", f"fraction_evaluate {fraction:g} times {available} nodes is not a number "
                         "of nodes")
    return max(connected, max(int(available * fraction), least))


def needed_nodes(strategy: Any, available: int, name: str = "the strategy") -> int | None:
    """How many nodes a Message-API FedAvg-family strategy waits for when ``available`` are there (None: not
    such a one).

    Flower's ``sample_nodes`` sleeps until ``max(min_available_nodes, sample_size)`` nodes are
    connected, forever here: the bridge checks first and waits in virtual time instead."""
    if not all(hasattr(strategy, a) for a in ("fraction_train", "min_train_nodes", "min_available_nodes")):
        return None
    size = sample_size(strategy, available, name)
    return 0 if size == 0 else max(int(_number(strategy, "min_available_nodes", 1, name)), size)


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
        self.strategy = build(self.cls, config.options, config.strategy)
        self.w = setup.init.clone()
        self.server_round = 0
        self.configs: dict[int, dict[str, Any]] = {}
        """The config each client of the open round was sent (the strategy's ConfigRecord)."""
        self.free: list[int] = []
        """The clients free when the open round opened: the nodes its federated evaluation may pick."""
        self.federated: list[dict[str, Any]] = []
        """federated.csv: one row per evaluated round."""
        never_opens(self.strategy, config.strategy, setup.num_clients)

    @classmethod
    def check_federation(cls, config: Any, num_clients: int, client_app: bool, where: str) -> None:
        """The strategy made as the run makes it, on ``num_clients`` clients: refused when no round could ever
        open, or when simfl's own clients (no ``client_app``) would not reply its ``weighted_by_key``."""
        found, _ = strategy_class(config.strategy)
        try:
            with _quiet():
                strategy = build(found, config.options, config.strategy)
            never_opens(strategy, config.strategy, num_clients)
            if not client_app:
                _simfl_replies_carry(strategy, config.strategy)
        except InputError as exc:
            raise InputError(f"{where}.options", exc.message) from None

    def _call(self, method: str, call: Callable[[], T], returns: Callable[[Any], bool] | None = None,
              expected: str = "") -> T:
        """``call()``, the strategy's ``method`` for the open round, as user code (:func:`simfl.errors.user_call`),
        seeded as the module docstring says (evaluation calls from their own stream)."""
        what = "flower-evaluate" if "evaluate" in method else "flower"
        with seeded(self.setup.seed, self.server_round, what):
            return user_call("algorithms.strategy", f"{self.config.strategy}.{method} in round {self.server_round}",
                             call, returns, expected)

    def _messages(self, method: str, call: Callable[[], Any]) -> list[Any]:
        """The messages a Message-API ``configure_*`` call returns, read once as user code."""
        from flwr.app import Message as FlowerMessage

        found = self._call(method, call, _iterable, "an iterable of flwr.app.Message")
        return self._call(method, lambda: list(found), lambda ms: all(isinstance(m, FlowerMessage) for m in ms),
                          "an iterable of flwr.app.Message")

    @property
    def clients_per_round(self) -> int:
        """Flower's sample size with every client free (the estimate's K; Flower decides each round)."""
        return max(1, min(sample_size(self.strategy, self.setup.num_clients, self.config.strategy),
                          self.setup.num_clients))

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
        grid = _grid([c + 1 for c in free])
        messages = self._messages("configure_train",
                                  lambda: self.strategy.configure_train(self.server_round, arrays, config, grid))
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
        from flwr.app import ArrayRecord

        arrays, _ = self._call("aggregate_train", lambda: self.strategy.aggregate_train(self.server_round, replies),
                               lambda v: _pair(v) and (v[0] is None or isinstance(v[0], ArrayRecord)),
                               "a pair (ArrayRecord or None, MetricRecord or None)")
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
        from flwr.app import Message as FlowerMessage
        from flwr.app import MessageType, MetricRecord, RecordDict

        arrays = flower.to_record(self.setup.layout, self.w)
        config = config_record(self.config.evaluate_config)
        grid = _grid([c + 1 for c in self.free])
        messages = self._messages("configure_evaluate",
                                  lambda: self.strategy.configure_evaluate(self.server_round, arrays, config, grid))
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
        found = self._call(method, call, _iterable, expected)
        names = {str(c) for c in free}
        return self._call(method, lambda: list(found), lambda pairs: all(
            _pair(p) and getattr(p[0], "cid", None) in names and isinstance(getattr(p[1], "config", None), Mapping)
            for p in pairs), expected)

    def _aggregate_legacy(self, arrivals: list[Arrival]) -> None:
        from flwr.common import Code, FitRes, Status, parameters_to_ndarrays

        manager = _manager([a.client for a in arrivals])
        results = []
        for a in arrivals:
            metrics = self._metrics(a)
            examples = int(metrics.pop("num-examples"))
            fit = FitRes(Status(Code.OK, ""), self._parameters(a.weights), examples, dict(metrics))  # type: ignore[arg-type]
            results.append((manager.all()[str(a.client)], fit))
        from flwr.common import Parameters

        params, _ = self._call("aggregate_fit", lambda: self.strategy.aggregate_fit(self.server_round, results, []),
                               lambda v: _pair(v) and (v[0] is None or isinstance(v[0], Parameters)),
                               "a pair (Parameters or None, dict of metrics)")
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
            lambda v: _pair(v) and (v[0] is None or _real(v[0])) and (v[1] is None or isinstance(v[1], Mapping)),
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
        return {"federated": list(self.federated)}

    def state(self) -> dict[str, Any]:
        attributes = _strategy_state(self.strategy, self.config.strategy)
        return {"w": self.w, "server_round": self.server_round, "configs": {str(k): {key: _plain(v, "config")
                for key, v in c.items()} for k, c in self.configs.items()}, "strategy": attributes,
                "free": list(self.free), "federated": [dict(row) for row in self.federated]}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.server_round = int(state["server_round"])
        self.configs = {int(k): {key: _restore(v) for key, v in c.items()} for k, c in state["configs"].items()}
        self.free = [int(c) for c in state.get("free", [])]
        self.federated = [dict(row) for row in state.get("federated", [])]
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


def _iterable(value: Any) -> bool:
    return isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping)


def _pair(value: Any) -> bool:
    return isinstance(value, tuple | list) and len(value) == 2


def _real(value: Any) -> bool:
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)


def _simfl_replies_carry(strategy: Any, name: str) -> None:
    """Refuse a ``weighted_by_key`` that simfl's own clients do not reply (training, and evaluation when it runs)."""
    key = getattr(strategy, "weighted_by_key", None)
    if key is None:
        return
    evaluates = _number(strategy, "fraction_evaluate", 0.0, name) != 0.0
    if key not in SIMFL_TRAIN_METRICS or (evaluates and key not in SIMFL_EVALUATE_METRICS):
        raise InputError("algorithms.options", f"weighted_by_key {key!r} of {name} is not a metric simfl's clients "
                         f"reply (training: {', '.join(SIMFL_TRAIN_METRICS)}; evaluation: "
                         f"{', '.join(SIMFL_EVALUATE_METRICS)}); a Flower ClientApp (client.flower_app) may reply "
                         "others")


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
