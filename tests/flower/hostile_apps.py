"""Flower ClientApps that misbehave, one per (API, behaviour), importable by path.

``tests.flower.hostile_apps:message_exit_3`` is a Message API app whose handlers call ``sys.exit(3)``;
``legacy_metrics_list`` a legacy NumPyClient app whose ``fit`` and ``evaluate`` return a list metric;
``message_switch`` and ``legacy_switch`` do what the config key ``behaviour`` of each message says, so one
app (and one process worker) serves every behaviour. Every app otherwise answers as
:data:`tests.flower.apps.frozen_app` does (the weights it was sent), so it fits any model.
:data:`MESSAGE` and :data:`LEGACY` list the behaviours of each API.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from flwr.app import Context, Message, MetricRecord, RecordDict
from flwr.client import NumPyClient
from flwr.clientapp import ClientApp

from simfl.train.flower import client_data


class Oddity(BaseException):
    """An exception outside the Exception hierarchy."""


class Quit(SystemExit):
    """A SystemExit of the user's own."""


def _loop() -> None:
    """Spin forever (a busy loop that never reaches a blocking call)."""
    n = 0
    while True:
        n += 1


def _sleep() -> None:
    time.sleep(3600)


def _wait() -> None:
    threading.Event().wait()


def _raises(kind: type[BaseException], text: str = "the user's app failed") -> Callable[[], None]:
    def act() -> None:
        raise kind(text)

    return act


def _exits(code: Any) -> Callable[[], None]:
    def act() -> None:
        sys.exit(code)

    return act


ACTS: dict[str, Callable[[], None]] = {
    "exit_0": _exits(0), "exit_1": _exits(1), "exit_3": _exits(3), "exit_none": _exits(None),
    "exit_text": _exits("the app gave up"), "quit": _raises(Quit, "4"), "oddity": _raises(Oddity),
    "generator_exit": _raises(GeneratorExit), "base_exception": _raises(BaseException),
    "loop": _loop, "sleep": _sleep, "wait": _wait,
}
"""Behaviours that never reply: what the app does instead."""

STATES: dict[str, Callable[[], Any]] = {
    "state_dict": lambda: {"seen": 1}, "state_none": lambda: None, "state_text": lambda: "state",
    "state_record": lambda: MetricRecord({"seen": 1}), "state_list": lambda: [RecordDict()],
}
"""What an app assigns to ``context.state`` in place of a RecordDict."""

NUMBERS: dict[str, Any] = {"zero": 0, "negative": -3, "fraction": 2.5, "nan": float("nan"), "inf": float("inf"),
                           "huge": 2**63, "text": "ten", "flag": True}
"""``num-examples`` values a reply gives in place of a positive count (Message API: in its MetricRecord)."""

METRICS: dict[str, Any] = {"list": [0.5, 0.25], "text": "fine", "bytes": b"\x00", "ints": [1, 2],
                           "empty": [], "flag": True}
"""Metric values a legacy client's ``fit`` returns in place of a number."""


def misbehave(behaviour: str, context: Context) -> None:
    """Do what ``behaviour`` says in place of training: never return (:data:`ACTS`) or replace the state."""
    if behaviour in ACTS:
        ACTS[behaviour]()
    if behaviour in STATES:
        context.state = STATES[behaviour]()


def _examples(behaviour: str, count: int) -> Any:
    return NUMBERS[behaviour.removeprefix("examples_")] if behaviour.startswith("examples_") else count


def _reply(msg: Message, context: Context, behaviour: str, arrays: bool) -> Message:
    """The reply of an app that trains nothing: the weights it was sent (``arrays``) and its example count."""
    misbehave(behaviour, context)
    _x, y = client_data(context)
    record = MetricRecord({"num-examples": len(y)})
    record.__dict__["_data"]["num-examples"] = _examples(behaviour, len(y))  # past MetricRecord's own type check
    content = RecordDict({"arrays": msg.content["arrays"], "metrics": record} if arrays else {"metrics": record})
    return Message(content, reply_to=msg)


def _message_app(fixed: str | None) -> ClientApp:
    """A Message API app misbehaving as ``fixed`` says, or (None) as the message's config key ``behaviour`` says."""
    app = ClientApp()

    def behaviour(msg: Message) -> str:
        return fixed if fixed is not None else str(msg.content["config"].get("behaviour", "none"))

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return _reply(msg, context, behaviour(msg), arrays=True)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        return _reply(msg, context, behaviour(msg), arrays=False)

    return app


class Frozen(NumPyClient):
    """A legacy client that trains nothing; it misbehaves in ``fit`` and ``evaluate`` as its behaviour says."""

    def __init__(self, context: Context, fixed: str | None) -> None:
        self.context_ = context
        self.fixed = fixed

    def _behaviour(self, config: dict[str, Any]) -> str:
        return self.fixed if self.fixed is not None else str(config.get("behaviour", "none"))

    def _metrics(self, behaviour: str) -> dict[str, Any]:
        if behaviour.startswith("metrics_"):
            return {"train_loss": 0.5, "bad": METRICS[behaviour.removeprefix("metrics_")]}
        return {"train_loss": 0.5}

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[list[np.ndarray], int, dict[str, Any]]:
        behaviour = self._behaviour(config)
        misbehave(behaviour, self.context_)
        _x, y = client_data(self.context_)
        return parameters, _examples(behaviour, len(y)), self._metrics(behaviour)

    def evaluate(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[float, int, dict[str, Any]]:
        behaviour = self._behaviour(config)
        misbehave(behaviour, self.context_)
        _x, y = client_data(self.context_)
        return 0.5, _examples(behaviour, len(y)), self._metrics(behaviour)


def _legacy_app(fixed: str | None) -> ClientApp:
    def client_fn(context: Context) -> Any:
        if fixed is not None and fixed.startswith("fn_"):
            ACTS[fixed.removeprefix("fn_")]()
        return Frozen(context, fixed).to_client()

    return ClientApp(client_fn=client_fn)


MESSAGE: list[str] = [*ACTS, *STATES, *(f"examples_{k}" for k in NUMBERS)]
"""Behaviours of the Message API apps ``message_<behaviour>``."""
LEGACY: list[str] = [*ACTS, *STATES, *(f"examples_{k}" for k in NUMBERS), *(f"metrics_{k}" for k in METRICS)]
"""Behaviours of the legacy apps ``legacy_<behaviour>``."""
IN_CLIENT_FN = ("fn_exit_3", "fn_oddity", "fn_sleep")
"""Legacy behaviours in ``client_fn`` rather than in the client's methods."""

message_switch = _message_app(None)
"""Misbehaves as the message's config key ``behaviour`` says (``none``: answers as a frozen app)."""
legacy_switch = _legacy_app(None)
"""The legacy client that misbehaves as its config key ``behaviour`` says."""
for _name in MESSAGE:
    globals()[f"message_{_name}"] = _message_app(_name)
for _name in [*LEGACY, *IN_CLIENT_FN]:
    globals()[f"legacy_{_name}"] = _legacy_app(_name)
