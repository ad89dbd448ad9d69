"""Constrained field types shared by every scenario section.

Each type checks its value after pydantic's own type check and fails with a
message that states what is allowed and what was given, e.g.
``must be in (0, 1), got 1.5``; ``simfl.schema.scenario`` prefixes the YAML path.
Component configs (an algorithm's, a delay model's, ...) subclass
:class:`Section` so that unknown keys are rejected everywhere. :data:`PATH_KEYS` names the
settings that are file or folder paths.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, TypeAdapter, ValidationError, model_validator


class Section(BaseModel):
    """Base of every scenario section: unknown keys are errors, values are checked on assignment, and ``true`` or
    ``false`` where only a number belongs is refused (pydantic would read it as 1 or 0, so ``concurrency: true``
    would run one client in flight). Numeric text stays a number: YAML 1.1 reads ``lr: 1e-3`` as the text
    ``"1e-3"``, the common way to write it."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False, ser_json_inf_nan="constants")
    """``ser_json_inf_nan``: NaN and infinities a section holds in an untyped value (a Flower App's run config from
    ``--run-config lr=nan``) stay NaN and infinities in the scenario's text (pydantic writes null otherwise)."""

    @model_validator(mode="before")
    @classmethod
    def _numbers_are_not_booleans(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name, value in data.items():
            field = cls.model_fields.get(name)
            if field is None:
                continue
            if isinstance(value, bool):
                kinds = _kinds(field.annotation)
            elif isinstance(value, list) and any(isinstance(v, bool) for v in value):
                kinds = _kinds(_items(field.annotation))
                value = next(v for v in value if isinstance(v, bool))
            else:
                continue
            if kinds & {int, float} and not kinds & {bool, object}:
                raise ValueError(f"{name}: must be a number, got {'true' if value else 'false'}")
        return data


def _items(annotation: Any) -> Any:
    """The item type of a list a field's annotation admits (``object`` when it admits none)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _items(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        found = [_items(a) for a in get_args(annotation)]
        return next((f for f in found if f is not object), object)
    if origin is list and get_args(annotation):
        return get_args(annotation)[0]
    return object


def _kinds(annotation: Any) -> set[type]:
    """The plain types a field's annotation admits at its top level (``object`` for anything else: no check)."""
    origin = get_origin(annotation)
    if annotation in (int, float, bool, str, type(None)):
        return {annotation}
    if origin is Annotated:
        return _kinds(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return set().union(*(_kinds(a) for a in get_args(annotation)))
    if origin is Literal:
        return {type(a) for a in get_args(annotation)}
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return {str}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) or origin in (list, tuple, dict):
        return {type(None)}  # a section or a container: not a number
    return {object}


def _fmt(x: float) -> str:
    return f"{x:g}"


def _range(low: float | None, high: float | None, low_open: bool, high_open: bool) -> Callable[[float], float]:
    lo = "-inf" if low is None else _fmt(low)
    hi = "inf" if high is None else _fmt(high)
    text = f"{'(' if low_open or low is None else '['}{lo}, {hi}{')' if high_open or high is None else ']'}"

    def check(v: float) -> float:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"must be a finite number in {text}, got {v}")
        bad = (
            (low is not None and (v <= low if low_open else v < low))
            or (high is not None and (v >= high if high_open else v > high))
        )
        if bad:
            raise ValueError(f"must be in {text}, got {_fmt(v)}")
        return v

    return check


_FLOAT: TypeAdapter[float] = TypeAdapter(float)
"""A float field's own reading of a value (pydantic's, lax)."""


def number(value: Any) -> float | None:
    """``value`` read as a number exactly as a float field of a :class:`Section` reads it (None: it is none), for a
    setting that takes a number or something else (``eval.target``: an accuracy or a mapping). Every notation is a
    number: ``0.8``, ``.8``, and ``8e-1`` or ``8E-1``, which YAML 1.1 reads as text (an exponent without a dot);
    ``true`` and ``false`` are not numbers (:meth:`Section._numbers_are_not_booleans`)."""
    if isinstance(value, bool):
        return None
    try:
        return _FLOAT.validate_python(value)
    except ValidationError:
        return None


UnitOpen = Annotated[float, AfterValidator(_range(0.0, 1.0, True, True))]
"""A float in (0, 1)."""
UnitHalfOpen = Annotated[float, AfterValidator(_range(0.0, 1.0, True, False))]
"""A float in (0, 1]."""
Probability = Annotated[float, AfterValidator(_range(0.0, 1.0, False, False))]
"""A float in [0, 1]."""
PositiveFloat = Annotated[float, AfterValidator(_range(0.0, None, True, True))]
"""A finite float > 0."""
NonNegFloat = Annotated[float, AfterValidator(_range(0.0, None, False, True))]
"""A finite float >= 0."""
PositiveInt = Annotated[int, AfterValidator(_range(0, None, True, True))]
"""An int >= 1."""
NonNegInt = Annotated[int, AfterValidator(_range(0, None, False, True))]
"""An int >= 0."""


PATH_KEYS = ("data.root", "data.cache_dir", "data.partition.path", "client_state.dir", "latency.path", "latency.traces",
             "latency.behavior", "tracking.tensorboard.dir", "tracking.wandb.dir")
"""The scenario settings (dotted keys) that name a file or folder. A scenario file gives them relative to its
own folder: :func:`simfl.schema.scenario.resolve_paths` makes them absolute for a run, the scenario.yaml a run
writes gives them relative to itself where it can (:func:`simfl.schema.scenario.dump`), and ``simfl report``
compares them resolved."""
