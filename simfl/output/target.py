"""The target accuracy of a comparison: the rule a scenario states (``eval.target``) and its value.

Light to import (no pandas): the scenario schema validates ``eval.target`` with :func:`target_config`;
:mod:`simfl.output.comparison` resolves it against the entries' final accuracies with :func:`resolve_target`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from simfl.fields import Section, UnitHalfOpen, number

DEFAULT_RELATIVE = 0.95
"""The paper's target: 95% of the lowest mean final accuracy among the compared entries."""


class TargetConfig(Section):
    """The target accuracy of time to target: ``{accuracy: 0.8}``, or ``{relative: 0.95, of: lowest|baseline}``."""

    accuracy: UnitHalfOpen | None = Field(None, description="The target accuracy itself (a fraction).")
    relative: UnitHalfOpen | None = Field(
        None, description="A fraction of the mean final accuracy (over seeds, at the common horizon) of the entry "
        "`of` names.")
    of: Literal["lowest", "baseline"] = Field(
        "lowest", description="With relative: 'lowest', the lowest mean final accuracy among the entries (the "
        "paper's rule), or 'baseline', the baseline's.")

    @model_validator(mode="after")
    def _one_rule(self) -> TargetConfig:
        if (self.accuracy is None) == (self.relative is None):
            raise ValueError("set one of accuracy (the target itself) or relative (a fraction of a final accuracy)")
        if self.accuracy is not None and "of" in self.model_fields_set:
            raise ValueError("of applies only with relative")
        return self


def target_config(value: Any) -> float | TargetConfig | None:
    """``eval.target`` as read from a scenario: a number in (0, 1] (in any notation a float field reads,
    :func:`simfl.fields.number`: ``8e-1`` too), a :class:`TargetConfig` mapping, or null (each mistake one message
    naming the key within it)."""
    if value is None or isinstance(value, TargetConfig):
        return value
    accuracy = None if isinstance(value, Mapping) else number(value)
    if accuracy is not None:
        if not (math.isfinite(accuracy) and 0.0 < accuracy <= 1.0):
            raise ValueError(f"an accuracy must be in (0, 1], got {accuracy:g}")
        return accuracy
    if isinstance(value, Mapping):
        try:
            return TargetConfig.model_validate(dict(value))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            message = "unknown key" if first["type"] == "extra_forbidden" else str(first["msg"]).removeprefix(
                "Value error, ")
            message = message[:1].lower() + message[1:]
            raise ValueError(f"{where + ': ' if where else ''}{message}") from None
    raise ValueError(f"must be an accuracy (0.8), {{accuracy: 0.8}} or {{relative: 0.95, of: lowest|baseline}}, "
                     f"got {value!r}")


TargetSpec = float | TargetConfig | None
"""``eval.target``: an accuracy, a :class:`TargetConfig`, or None (the paper's rule)."""


def percent(value: float, digits: int = 1) -> str:
    """A fraction as a percentage (``57.1%``); ``n/a`` for NaN."""
    return "n/a" if math.isnan(value) else f"{100 * value:.{digits}f}%"


def resolve_target(spec: TargetSpec, finals: Mapping[str, float], baseline: str) -> tuple[float, str]:
    """The target accuracy and its rule in words, from the entries' mean final accuracies."""
    if isinstance(spec, float | int):
        return float(spec), "set in the scenario (eval.target)"
    if spec is not None and spec.accuracy is not None:
        return float(spec.accuracy), "set in the scenario (eval.target.accuracy)"
    fraction = DEFAULT_RELATIVE if spec is None else float(spec.relative or DEFAULT_RELATIVE)
    share = f"{100 * fraction:g}%"
    if spec is not None and spec.of == "baseline":
        value = finals.get(baseline, math.nan)
        return fraction * value, f"{share} of the baseline's mean final accuracy ({baseline}: {percent(value)})"
    known = {e: v for e, v in finals.items() if not math.isnan(v)}
    if not known:
        return math.nan, "no entry has an accuracy"
    lowest = min(known, key=lambda e: known[e])
    rule = f"{share} of the lowest mean final accuracy ({lowest}: {percent(known[lowest])})"
    return fraction * known[lowest], rule + (", the paper's rule" if spec is None else "")
