"""Users' own Flower strategies that fail, one class per (API, method, behaviour), importable by path.

``tests.flower.strategies:Message_configure_train_none`` is Flower's FedAvg (Message API) whose
``configure_train`` returns None; ``Legacy___init___exit`` the legacy FedAvg whose constructor calls
``sys.exit(3)``. :data:`NAMES` lists every class; :data:`METHODS` and :data:`BEHAVIOURS` what they vary.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from flwr.server import strategy as legacy
from flwr.serverapp import strategy as current

METHODS: dict[str, tuple[str, ...]] = {
    "Message": ("__init__", "configure_train", "aggregate_train", "configure_evaluate", "aggregate_evaluate"),
    "Legacy": ("__init__", "configure_fit", "aggregate_fit", "configure_evaluate", "aggregate_evaluate"),
}
"""The methods simfl calls, per API."""


class Oddity(BaseException):
    """An exception outside the Exception hierarchy."""


def _raise(kind: type[BaseException]) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise kind(f"the user's strategy failed in {type(self).__name__}")

    return method


def _exit(self: Any, *args: Any, **kwargs: Any) -> Any:
    sys.exit(3)


def _none(self: Any, *args: Any, **kwargs: Any) -> Any:
    return None


def _text(self: Any, *args: Any, **kwargs: Any) -> Any:
    return "not what Flower's API returns"


def _numbers(self: Any, *args: Any, **kwargs: Any) -> Any:
    return [1, 2, 3]


BEHAVIOURS: dict[str, Callable[..., Any]] = {
    "value_error": _raise(ValueError), "runtime_error": _raise(RuntimeError), "key_error": _raise(KeyError),
    "zero_division": _raise(ZeroDivisionError), "oddity": _raise(Oddity), "exit": _exit, "none": _none,
    "text": _text, "numbers": _numbers,
}
"""What a method does instead of its job (a constructor's return value is ignored, so it only raises or exits)."""
RETURNS = ("none", "text", "numbers")
"""The behaviours that return a wrong value rather than raise."""


def _init(behaviour: Callable[..., Any], base: type) -> Callable[..., Any]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        base.__init__(self, *args, **kwargs)
        behaviour(self)

    return __init__


NAMES: list[str] = []
"""Every class of this module, by name ``<API>_<method>_<behaviour>``."""
for _api, _base in (("Message", current.FedAvg), ("Legacy", legacy.FedAvg)):
    for _method in METHODS[_api]:
        for _name, _behaviour in BEHAVIOURS.items():
            if _method == "__init__" and _name in RETURNS:
                continue
            _cls_name = f"{_api}_{_method}_{_name}"
            _body = _init(_behaviour, _base) if _method == "__init__" else _behaviour
            globals()[_cls_name] = type(_cls_name, (_base,), {_method: _body, "__module__": __name__})
            NAMES.append(_cls_name)


class PicksNone(current.FedAvg):
    """Samples as FedAvg says but sends no node a message: no round can ever open."""

    def configure_train(self, *args: Any, **kwargs: Any) -> Any:
        return []


class LegacyPicksNone(legacy.FedAvg):
    """The legacy API's PicksNone."""

    def configure_fit(self, *args: Any, **kwargs: Any) -> Any:
        return []
