"""What the built-in models cost on the shipped scenarios' data, measured once, so that validation needs no torch.

The estimate (:func:`simfl.schema.estimate.dry_model`) needs a model's parameter count, bytes, training
FLOPs per sample and exchanged tensors. Measuring them builds the model under torch (about 3 s of CPU
to import torch and its FLOP counter), which would make ``simfl validate`` slow for every scenario.
``model_costs.json`` beside this module holds those figures for each (built-in model config, sample
shape, classes) of the scenarios shipped with the project, as :func:`simfl.schema.estimate.measure_model`
gives them; any other model or shape is measured as before. ``tests/cli/test_model_costs.py`` measures
every entry again and checks that every shipped scenario is listed, so the table cannot drift from the
models. ``python -m simfl.schema.measure_models FILE...`` adds the given scenarios' models and rewrites it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

TABLE = Path(__file__).with_name("model_costs.json")
"""The table: a JSON object, key (:func:`key`) -> [parameters, bytes, FLOPs per sample, {tensor: values}]."""


def key(model: BaseModel, shape: Sequence[int], classes: int) -> str:
    """The table's key of ``model`` (a built-in model's validated config) on samples of ``shape`` in ``classes``."""
    return json.dumps([model.model_dump(mode="json"), list(shape), int(classes)], sort_keys=True)


@functools.cache
def _table() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(TABLE.read_text()) if TABLE.exists() else {}
    return loaded


def known(model: BaseModel, shape: Sequence[int], classes: int) -> tuple[int, int, int, dict[str, int]] | None:
    """The measured cost of ``model`` on ``shape`` and ``classes``, or None when the table does not list it."""
    if not shape:
        return None
    row = _table().get(key(model, shape, classes))
    if row is None:
        return None
    params, size, flops, tensors = row
    return int(params), int(size), int(flops), {str(n): int(v) for n, v in tensors.items()}
