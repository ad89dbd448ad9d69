"""What a model costs before a run: stated by its config, read from the table of measured built-ins, or measured.

The estimate needs a model's parameter count, bytes, training FLOPs per sample, exchanged tensors and the bytes
its activations hold per sample (:class:`ModelCost`). A model's config states them (``cost(shape, classes)``, see
:class:`simfl.models.configs.ModelConfigBase`); the built-ins read ``model_costs.json`` beside this module,
which lists each (built-in model config, sample shape, classes) of the scenarios shipped with the project as
:func:`measure` gives them, so that ``simfl validate`` of those loads no torch (about 3 s of CPU with its
FLOP counter). A config that states nothing for a shape (a plugin, a shape not listed) is measured: built
on the CPU (or PyTorch's meta device when large) and run forward on a batch of that shape, which also proves
that model and data fit. ``tests/cli/test_model_costs.py`` measures every entry of the table again and checks
that every shipped scenario is listed; ``python -m simfl.schema.measure_models FILE...`` adds the given
scenarios' models and rewrites it. Light to import: torch only inside :func:`measure`.
"""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

TABLE = Path(__file__).with_name("model_costs.json")
"""The table: a JSON object, key (:func:`key`) -> [parameters, bytes, FLOPs per sample, {tensor: values},
[training activation bytes per sample, evaluation activation bytes per sample]]."""

Activations = tuple[int, int]
"""Bytes per sample a model's activations hold at their peak: (training step, evaluation)
(:func:`simfl.models.cost.activation_bytes_per_sample`)."""
CPU_CHECK_PARAMETERS = 20_000_000
"""A model of at most this many parameters is checked against the data by a forward pass on the CPU (80 MB of
weights); a larger one on the meta device, whose kernels import about 1.5 s of PyTorch's compiler on first use."""


@dataclass(frozen=True)
class ModelCost:
    """What one model costs: parameters, bytes (4 per parameter and floating-point buffer), training FLOPs per
    sample (or a function counting them, called only where an estimate needs them; 0: none a run can know, a
    Flower app's arrays; None: known once the run starts), the values of each exchanged tensor by name (in
    the layout's order) and its :data:`Activations` (or a function counting them; None: not stated, and not
    counted in the memory estimate). ``unknown``: why the model cannot be sized ahead (its figures are then None
    and 0)."""

    params: int | None
    bytes: int
    flops: int | Callable[[], int] | None
    tensors: dict[str, int] | None
    unknown: str | None = None
    activations: Activations | Callable[[], Activations | None] | None = None

    @classmethod
    def not_ahead(cls, why: str, flops: int | None = None) -> ModelCost:
        """A model sized only when the run starts, for the reason ``why`` (``flops`` 0: not even then)."""
        return cls(None, 0, flops, None, why)


def key(model: BaseModel, shape: Sequence[int], classes: int) -> str:
    """The table's key of ``model`` (a built-in model's validated config) on samples of ``shape`` in ``classes``."""
    return json.dumps([model.model_dump(mode="json"), list(shape), int(classes)], sort_keys=True)


@functools.cache
def _table() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(TABLE.read_text()) if TABLE.exists() else {}
    return loaded


def known(model: BaseModel, shape: Sequence[int], classes: int) -> ModelCost | None:
    """The measured cost of ``model`` on ``shape`` and ``classes``, or None when the table does not list it."""
    if not shape:
        return None
    row = _table().get(key(model, shape, classes))
    if row is None:
        return None
    params, size, flops, tensors, (training, evaluation) = row
    return ModelCost(int(params), int(size), int(flops), {str(n): int(v) for n, v in tensors.items()},
                     activations=(int(training), int(evaluation)))


def takes(config: Any) -> str:
    """The kind of samples a model's config says it reads (``values`` unless it says ``tokens``)."""
    return str(getattr(config, "takes", "values"))


def needs(config: Any) -> str:
    """What a model's config says it needs, for the message when model and data do not fit."""
    return str(getattr(config, "needs", "other samples"))


def stated(config: Any, shape: tuple[int, ...], classes: int) -> ModelCost | None:
    """The cost a model's config states on samples of ``shape`` in ``classes`` (None: it states none)."""
    cost = getattr(config, "cost", None)
    return cost(shape, classes) if callable(cost) else None


class Misfit(Exception):
    """A model that does not run on the samples it was measured on (``detail``: what it gave instead)."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail


_MEASURED: dict[tuple[Any, ...], ModelCost] = {}
"""Each model measured in this process, by its builder, config, sample shape and classes: a tune or a sweep
estimates the same model once per trial or cell, and its activations take a second or more to count."""


def measure(build: Callable[[Any, tuple[int, ...], int], Any], config: Any, shape: tuple[int, ...],
            classes: int) -> ModelCost:
    """The :class:`ModelCost` of the model ``build(config, shape, classes)`` makes, sized on the meta device
    (once per process for the same model and data, :data:`_MEASURED`).

    Runs one forward pass of a batch of samples of ``shape`` (on the CPU up to :data:`CPU_CHECK_PARAMETERS`
    parameters, else on the meta device), so that a model that does not fit the data raises :class:`Misfit` here
    instead of deep in training. The FLOPs and activations are functions, counted on call on the meta device.
    """
    dumped = config.model_dump_json() if hasattr(config, "model_dump_json") else repr(config)
    key = (build, type(config), dumped, tuple(shape), classes)
    if key not in _MEASURED:
        _MEASURED[key] = _measure(build, config, shape, classes)
    return _MEASURED[key]


def _measure(build: Callable[[Any, tuple[int, ...], int], Any], config: Any, shape: tuple[int, ...],
             classes: int) -> ModelCost:
    """:func:`measure`, done."""
    import torch

    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = build(config, shape, classes)
        params = sum(p.numel() for p in model.parameters())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if params <= CPU_CHECK_PARAMETERS:  # PyTorch's meta kernels import seconds of its compiler on first use
                with torch.random.fork_rng(devices=[]):
                    built = build(config, shape, classes)
                out = built.eval()(torch.zeros((2, *shape)))
            else:
                with torch.device("meta"):
                    out = model.eval()(torch.zeros((2, *shape)))
    except (RuntimeError, ValueError, TypeError, IndexError, ZeroDivisionError, AssertionError) as exc:
        raise Misfit() from exc
    if tuple(out.shape) != (2, classes):
        raise Misfit(f" (the model's output is {'x'.join(map(str, out.shape[1:]))}, not {classes} classes)")
    buffers = sum(b.numel() for b in model.buffers() if b.is_floating_point())
    tensors = {n: p.numel() for n, p in model.named_parameters() if p.requires_grad}  # as models.flat.Layout
    tensors.update((n, b.numel()) for n, b in model.named_buffers() if b.is_floating_point())

    @functools.cache  # counted once, however many parts of an estimate read it
    def flops() -> int:
        from simfl.models.cost import training_flops_per_sample

        try:
            with torch.device("meta"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return int(training_flops_per_sample(model, torch.zeros(shape)))
        except (RuntimeError, ValueError, TypeError):
            return 6 * params

    @functools.cache
    def activations() -> Activations | None:
        from simfl.models.cost import activation_bytes_per_sample

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return activation_bytes_per_sample(model, shape)
        except (RuntimeError, ValueError, TypeError, NotImplementedError):
            return None  # an operator the meta device does not run: stated as not counted

    return ModelCost(params, 4 * (params + buffers), flops, tensors, activations=activations)


def activations_of(cost: ModelCost) -> Activations | None:
    """The model's :data:`Activations`, counted now where ``cost`` holds a function (None: not stated)."""
    return cost.activations() if callable(cost.activations) else cost.activations
