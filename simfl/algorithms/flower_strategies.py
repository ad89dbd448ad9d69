"""A Flower strategy found by name, its options checked against its constructor and built, and what its rounds need.

What both a Flower entry's validation (:class:`simfl.algorithms.configs.FlowerConfig`) and its run
(:mod:`simfl.algorithms.flower`) do with a strategy before it drives any round: find its class
(Flower's Message API by name, a legacy one, or the user's own by import path), check the options,
make it as the run will, and answer how many nodes its rounds sample or need, so that a strategy
under which no round could ever open is refused before training. Light: no torch; Flower itself is
imported when a strategy is looked up.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
from pydantic import ConfigDict, TypeAdapter, ValidationError

from simfl.errors import InputError, user_call
from simfl.names import import_object, is_import_path
from simfl.rng import importing

FLOWER_MODULES = ("flwr.serverapp.strategy", "flwr.server.strategy")
"""Flower's own strategy modules: named without --allow-imports (Flower is installed, and imported anyway)."""


SIMFL_TRAIN_METRICS = ("num-examples", "train_loss")
"""The metrics of a training reply of simfl's own trainer (``train_loss`` when the loss is a number)."""


SIMFL_EVALUATE_METRICS = ("num-examples", "eval_loss", "eval_acc")
"""The metrics of an evaluation reply of simfl's own scores (:mod:`simfl.train.client_eval`)."""


def config_record(config: Mapping[str, Any]) -> Any:
    """``config`` as a Flower ConfigRecord; one line naming the key whose value ConfigRecord refuses (or a NaN)."""
    from simfl.train.flower import require

    require("algorithms.train_config")
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
def quiet() -> Iterator[None]:
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
    from simfl.train.flower import prepare, require

    where = "algorithms.strategy"
    require(where)
    prepare()
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


def node_grid(nodes: list[int]) -> Any:
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


def round_size(strategy: Any, available: int, name: str = "the strategy") -> int:
    """The clients a round of the strategy waits for with ``available`` free: its sample size, at least one and
    at most every client."""
    return max(1, min(sample_size(strategy, available, name), available))


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


def is_iterable(value: Any) -> bool:
    return isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping)


def is_pair(value: Any) -> bool:
    return isinstance(value, tuple | list) and len(value) == 2


def is_real(value: Any) -> bool:
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)


def simfl_replies_carry(strategy: Any, name: str) -> None:
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


def load_server_app(path: str, where: str = "algorithms.app") -> Any:
    """The ServerApp at ``path`` (import paths need the user's permission, see :mod:`simfl.names`), as a
    ``serverapp`` entry's validation and its run load it."""
    try:
        from flwr.serverapp import ServerApp
    except ImportError:
        raise InputError(where, "needs Flower (flwr), which is not installed: pip install 'simfl[flower]'") from None
    with importing():
        app = import_object(path, where)
    if not isinstance(app, ServerApp):
        raise InputError(where, f"'{path}' is a {type(app).__name__}, not a Flower ServerApp (flwr.serverapp.ServerApp)")
    return app
