"""The ``tune:`` section: which keys ``simfl tune`` searches, over what values, and each entry's search space.

A tuned key is something one algorithm entry can hold on its own, so that the best value of every entry fits in
one scenario file: a local-training option (``train.lr``, ``train.batch_size``, ``train.momentum``,
``train.weight_decay``: every entry gets its own, written as the entry's ``train:``) or an option of the entry
itself, ``algorithms[<entry>].<option>`` (a dotted path below it too, ``staleness.a``), where ``<entry>`` is
an index, a run name (the label, else the algorithm name) or ``*`` for every entry that has the option. What
all entries share (the data, the delays, the budget, the epochs, which set every client's compute time) cannot
be tuned: the comparison is of rules under the same conditions.

A value space is a list (a categorical choice; a grid axis) or a range: ``{float: [low, high]}``,
``{log: [low, high]}`` (log-uniform), ``{int: [low, high]}`` (integers, both ends included), the first and
the last with an optional ``step``, of a kind the option's type takes (its config's field annotation: an integer
option an int range or a list of integers, :func:`kind_problem`). :mod:`simfl.launch.tune` runs the search (Optuna).
"""

from __future__ import annotations

import copy
import itertools
import math
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator

from simfl.algorithms.configs import run_name
from simfl.fields import NonNegInt, PositiveInt, Section, UnitOpen
from simfl.train.configs import EntryTrainConfig

RANGE_KINDS = ("float", "log", "int")
"""The keys of a range: ``{float: [low, high]}``, ``{log: [low, high]}``, ``{int: [low, high]}``."""
SCORES = ("final_accuracy", "best_accuracy", "mean_accuracy")
"""What a trial is scored by, on the validation set, averaged over the seeds."""
_KEY = re.compile(r"^(train\.[A-Za-z_]\w*|algorithms\[([^\]\s]+)\]\.[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)$")
_EXPONENT = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)[eE][-+]?\d+$")
TRAIN_OPTIONS = tuple(EntryTrainConfig.model_fields)
"""The local-training options one entry may hold (``epochs`` is shared by every entry)."""
_NOT_AN_OPTION = ("name", "label")


@dataclass(frozen=True)
class Space:
    """The values one key may take: ``choices`` (categorical) or a range from ``low`` to ``high``."""

    kind: Literal["categorical", "float", "int"]
    choices: tuple[Any, ...] = ()
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    step: float | None = None

    @property
    def grid(self) -> bool:
        """Whether the space is a list of values (a grid axis)."""
        return self.kind == "categorical"

    def edge(self, value: Any) -> str | None:
        """Where ``value`` lies at an end of what was searched: ``lowest`` or ``highest`` of a grid of numbers,
        ``low`` or ``high`` within the outer 5% of a range (of its logarithm for a log range); None inside it, or
        for a grid of other values. A best value there says the search may have stopped short of a better one."""
        if not _is_number(value):
            return None
        if self.grid:
            numbers = [v for v in self.choices if _is_number(v)]
            if len(numbers) < 2 or len(numbers) != len(self.choices):
                return None
            return "lowest" if value == min(numbers) else "highest" if value == max(numbers) else None
        scale = math.log if self.log else float
        low, high, at = scale(self.low), scale(self.high), scale(value)
        margin = 0.05 * (high - low)
        return "low" if at <= low + margin else "high" if at >= high - margin else None

    def ends(self) -> list[Any]:
        """The values that must each be valid for the entry: every choice, or both ends of the range."""
        if self.grid:
            return list(self.choices)
        return [int(self.low), int(self.high)] if self.kind == "int" else [self.low, self.high]


SPACING_SPREAD = 2.0
"""The most a grid's largest gap may exceed its smallest (in the scale it is spaced in) for a step beyond it."""


def spacing(values: Sequence[float]) -> str | None:
    """How a grid of three or more distinct numbers is spaced: ``geometric`` (all of one sign, its ratios more even
    than its differences: 0.01, 0.03, 0.1), ``arithmetic`` (its differences at least as even: 0.2, 0.4, 0.6, or any
    grid holding 0), or None when even the better of the two has a gap more than :data:`SPACING_SPREAD` times
    another (0.001, 0.5, 0.9) or there are fewer than three values (two say nothing of the spacing)."""
    ordered = sorted(float(v) for v in values)
    if len(ordered) < 3:
        return None

    def spread(points: Sequence[float]) -> float:
        gaps = [b - a for a, b in itertools.pairwise(points)]
        return max(gaps) / min(gaps)

    linear = spread(ordered)
    same_sign = all(v > 0 for v in ordered) or all(v < 0 for v in ordered)
    ratio = spread([math.log(abs(v)) for v in (ordered if ordered[0] > 0 else ordered[::-1])]) if same_sign else math.inf
    kind, best = ("geometric", ratio) if ratio < linear else ("arithmetic", linear)
    return kind if best <= SPACING_SPREAD else None


def _rounded(value: float, step: float) -> float:
    """``value`` with the fewest significant digits (up to 12) that keep it within a twentieth of ``step`` of itself in
    log terms (``step``: the log of the grid's ratio): 0.1 x 3.162 = 0.316 is 0.3, and 1.6 x 2 stays 3.2."""
    for digits in range(1, 13):
        near = float(f"{value:.{digits}g}")
        if near != 0 and abs(math.log(abs(near / value))) <= 0.05 * step:
            return near
    return float(f"{value:.12g}")


def grid_step(space: Space, edge: str, steps: int = 1) -> tuple[Any | None, str]:
    """The value ``steps`` steps beyond the ``lowest`` or ``highest`` of a grid of numbers, as the grid is spaced, and
    why there is none when there is none. A geometric grid steps by its mean ratio r = (high / low)^(1 / (n - 1)):
    the k-th value above is high r^k, rounded to the fewest significant digits within a twentieth of a step (0.01, 0.03,
    0.1: 0.3, then 1, then 3; 0.003 below); an arithmetic grid by its mean difference (0.2, 0.4, 0.6: 0.8, 1; 0).
    A grid of integers stays integers (the value rounded, at least k integers beyond the edge); a geometric step that
    would reach 0 or change sign is not taken. Whether the entry accepts the value (a share above 1, a learning rate
    of 0) is the caller's check (:func:`value_problem`)."""
    numbers = [v for v in space.choices if _is_number(v)]
    if not space.grid or len(numbers) != len(space.choices) or len(numbers) < 2:
        return None, "its values are not a grid of numbers"
    kind = spacing(numbers)
    if kind is None:
        shown = ", ".join(f"{v:g}" for v in sorted(numbers))
        return None, (f"its values ({shown}) do not say how it is spaced: list three or more, evenly or by a constant "
                      "ratio" if len(numbers) < 3 else f"its values ({shown}) are spaced neither evenly nor by a "
                      "constant ratio")
    integers = all(isinstance(v, int) for v in numbers)
    low, high, n = min(numbers), max(numbers), len(numbers)
    up = edge in ("highest", "high")
    at = high if up else low
    if kind == "geometric":
        ratio = (high / low) ** (1 / (n - 1))
        value = at * ratio**steps if up else at / ratio**steps
        value = value if integers else _rounded(value, abs(math.log(ratio)))
    else:
        step = (high - low) / (n - 1)
        value = at + steps * step if up else at - steps * step
        value = 0.0 if abs(value) < 1e-9 * step else float(f"{value:.12g}")  # 0.2 - 0.2 is 0, not 2.8e-17
    if integers:
        whole = round(value)
        whole = max(whole, int(at) + steps) if up else min(whole, int(at) - steps)
        if kind == "geometric" and (whole == 0 or (whole > 0) != (at > 0)):
            return None, f"no integer {'above' if up else 'below'} {at:g} continues its ratio without reaching 0"
        return whole, ""
    return value, ""


def _is_number(value: Any) -> bool:
    """An int or float, not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(value: Any) -> Any:
    """YAML 1.1 reads ``1e-3`` as text; read it as the number it is (other values stay as they are)."""
    if isinstance(value, str) and _EXPONENT.match(value.strip()):
        return float(value)
    return value


def parse_space(raw: Any) -> Space:
    """The space of a raw ``params`` value; a mistake raises ValueError saying what is allowed."""
    if isinstance(raw, list):
        if not raw:
            raise ValueError("is an empty list; give at least one value")
        values = [_number(v) for v in raw]
        seen = [repr(v) for v in values]
        for i, text in enumerate(seen):
            if text in seen[:i]:
                raise ValueError(f"lists {text} twice")
        return Space("categorical", tuple(values))
    if not isinstance(raw, Mapping):
        raise ValueError(f"must be a list of values or a range such as {{log: [0.001, 0.3]}}, got {raw!r}")
    kinds = [k for k in raw if k in RANGE_KINDS]
    unknown = [k for k in raw if k not in (*RANGE_KINDS, "step")]
    if unknown or len(kinds) != 1:
        raise ValueError(f"a range is one of {{float: [low, high]}}, {{log: [low, high]}}, {{int: [low, high]}} "
                         f"with an optional step, got {dict(raw)!r}")
    kind = kinds[0]
    ends = raw[kind]
    if not (isinstance(ends, list) and len(ends) == 2):
        raise ValueError(f"{kind}: needs [low, high], got {ends!r}")
    low, high = (_number(v) for v in ends)
    if not all(_is_number(v) and math.isfinite(v) for v in (low, high)):
        raise ValueError(f"{kind}: low and high must be finite numbers, got {ends!r}")
    if kind == "int" and not all(isinstance(v, int) for v in (low, high)):
        raise ValueError(f"int: low and high must be integers, got {ends!r}")
    if low >= high:
        raise ValueError(f"{kind}: [{low}, {high}] is {'empty' if low == high else 'inverted'}; low must be under high")
    if kind == "log" and low <= 0:
        raise ValueError(f"log: low must be > 0 (a log scale), got {low}")
    step = raw.get("step")
    if step is not None:
        step = _number(step)
        if kind == "log":
            raise ValueError("step: a log range takes no step; use {float: [low, high], step: ...}")
        if not (_is_number(step) and step > 0):
            raise ValueError(f"step: must be a number > 0, got {step!r}")
        if kind == "int" and not isinstance(step, int):
            raise ValueError(f"step: an int range's step must be an integer, got {step!r}")
    return Space("int" if kind == "int" else "float", low=float(low), high=float(high), log=kind == "log",
                 step=None if step is None else float(step))


class HalvingConfig(Section):
    """Successive halving on rungs of virtual time that are the same for every entry."""

    eta: int = Field(3, ge=2, le=10, description="Keep the best 1/eta of each entry's trials at each rung (rounded "
                     "up, at least one, and every trial level with the last one kept); with tpe, of each batch, "
                     "since its later trials learn from the scores. The rungs lie a factor eta apart in virtual "
                     "time.")
    rungs: int = Field(3, ge=2, le=6, description="Rungs of virtual time, the last the scenario's budget.time: "
                       "budget / eta^(rungs - 1), ..., budget / eta, budget, each rounded down to the evaluation "
                       "grid (eval.every); a rung under one evaluation period is left out.")


class ExtendConfig(Section):
    """Grid edge extension: a best value at the lowest or highest of a grid of numbers is searched one step further."""

    limit: int = Field(2, ge=1, le=10, description="The most extension rounds: each round, every entry whose best "
                       "value of a grid of numbers is its lowest or highest gets that axis one step further in that "
                       "direction (geometric or arithmetic, as the grid is spaced), every point of the wider grid it "
                       "lacks run as a trial; the rounds stop when no entry's best is at such an edge, or here.")


class TuneConfig(Section):
    """``simfl tune``: search each entry's hyperparameters with the same budget, scored on a validation split."""

    params: dict[str, list[Any] | dict[str, Any]] = Field(
        description="The keys to search and their values: train.lr, train.batch_size, train.momentum, "
        "train.weight_decay (each entry its own) or algorithms[<entry>].<option>, with <entry> an index, a run name "
        "or * (every entry that has the option); each a list of values (a grid axis) or a range {float: [low, "
        "high]}, {log: [low, high]} or {int: [low, high]} (optional step), e.g. {train.lr: {log: [0.001, 0.3]}, "
        "'algorithms[*].alpha': [0.2, 0.4, 0.6, 0.8]}.",
    )
    trials: PositiveInt = Field(
        description="Trials per entry, the same for every entry (an entry whose whole grid is smaller runs each "
        "point once). Each trial runs the entry on every seed for the scenario's budget.",
    )
    sampler: Literal["auto", "grid", "tpe", "random"] = Field(
        "auto", description="Optuna's sampler, seeded from the scenario's seeds and the entry: grid (every key a "
        "list), tpe, random, or auto: grid when every key is a list, else tpe.",
    )
    batch: PositiveInt = Field(
        4, description="Trials asked of each entry's search at a time, before any of them is scored; they run "
        "side by side. The trials depend on it, never on --workers.",
    )
    validation: UnitOpen = Field(
        0.1, description="Fraction of each client's training rows held out to score the trials on (data.validation "
        "of every trial; the test set is never read).",
    )
    score: Literal["final_accuracy", "best_accuracy", "mean_accuracy"] = Field(
        "final_accuracy", description="What a trial maximises, averaged over the seeds, on the validation set: the "
        "accuracy at the budget (the comparison's measure), the best evaluation, or the mean of every evaluation "
        "(which rewards getting there early).",
    )
    given_first: bool = Field(
        False, description="Make each entry's first trial its values as the scenario writes them (every one must "
        "be among the searched values), so that the best found is never one the search did not compare with them.",
    )
    halving: HalvingConfig | bool | None = Field(
        None, description="Fair early stopping: every entry's batch starts the same trials, each is scored on the "
        "validation split at the same rungs of virtual time, and the same share of each batch goes on to the next "
        "rung (the rest are pruned). true: eta 3 over 3 rungs; a mapping sets eta and rungs; false: every trial "
        "runs the whole budget. Unset: on where it is safe (a time budget with at least two rungs on the "
        "evaluation grid, and at least eta trials in each entry's first batch), with fewer rungs where a rung "
        "would come before the mean round time (the estimate's: before most clients' first update), else off; "
        "the tune's first line says which.",
    )
    extend: ExtendConfig | None = Field(
        None, description="Extend a grid where an entry's best value is at its edge ({limit: 2}: at most two rounds "
        "of one step each); off by default, since it adds trials whose number the scores decide. Grid sampler only, "
        "every entry's whole grid searched; see docs/fair-comparisons.md.",
    )
    seeds: list[NonNegInt] | None = Field(
        None, description="Seeds of the best configuration's scenario file (the test-set comparison); default: as "
        "many as the scenario's, fresh ones numbered after its largest.",
    )

    @field_validator("params")
    @classmethod
    def _spaces(cls, params: dict[str, Any]) -> dict[str, Any]:
        if not params:
            raise ValueError("needs at least one key to search")
        for key, raw in params.items():
            if not _KEY.match(key):
                raise ValueError(f"'{key}': not a tunable key; tune train.<{'|'.join(TRAIN_OPTIONS)}> or "
                                 "algorithms[<index, run name or *>].<option> (data, delays, budget and the other "
                                 "train: options are shared by every entry)")
            if key.startswith("train.") and key.split(".")[1] not in TRAIN_OPTIONS:
                option = key.split(".")[1]
                why = (" (the epochs set every client's compute time, which all entries share)" if option == "epochs"
                       else "")
                raise ValueError(f"'{key}': {option} cannot be tuned per entry{why}; tune "
                                 f"train.<{'|'.join(TRAIN_OPTIONS)}>")
            try:
                parse_space(raw)
            except ValueError as exc:
                raise ValueError(f"'{key}': {exc}") from None
        return params

    @field_validator("seeds")
    @classmethod
    def _seeds_unique(cls, seeds: list[int] | None) -> list[int] | None:
        if seeds is not None and (not seeds or len(set(seeds)) != len(seeds)):
            raise ValueError(f"must be distinct seeds, at least one, got {seeds}")
        return seeds


def rung_times(halving: HalvingConfig, budget: float, every: float) -> list[float]:
    """The virtual times at which halving scores a batch's trials: ``budget / eta^k`` for ``k = rungs - 1, ..., 0``,
    each rounded down to the evaluation grid (a multiple of ``every``, so that each is an evaluation's time), those
    under one period and repeats left out; the last is ``budget`` itself. Fewer than two: halving cannot run."""
    times: list[float] = []
    for k in range(halving.rungs - 1, 0, -1):
        time = math.floor(budget / halving.eta**k / every + 1e-9) * every
        if time >= every and time < budget and (not times or time > times[-1]):
            times.append(float(time))
    return [*times, float(budget)]


def survivors(scores: Mapping[int, float], eta: int) -> list[int]:
    """The trial numbers that go on from a rung, in number order: the best ``ceil(n / eta)`` of the ``n`` scored
    there (a score that is not a number last), and every other trial whose score equals the last of them. A tie
    is no evidence: trials still level at a rung (all at the untrained model's accuracy, before a synchronous
    rule's first round ends) all go on, whatever their numbers."""
    def rank(n: int) -> float:
        return -math.inf if math.isnan(scores[n]) else scores[n]

    if not scores:
        return []
    ranked = sorted(scores, key=lambda n: (-rank(n), n))
    cut = rank(ranked[math.ceil(len(scores) / eta) - 1])
    return sorted(n for n in ranked if rank(n) >= cut)


def _targets(key: str, names: Sequence[str]) -> tuple[list[int], str, bool]:
    """The entries ``key`` applies to, the key within each entry, and whether it named them all (``*``)."""
    if key.startswith("train."):
        return list(range(len(names))), key, True
    selector = key[len("algorithms["):key.index("]")]
    inner = key[key.index("]") + 2:]
    if selector == "*":
        return list(range(len(names))), inner, True
    if selector.isdigit():
        if int(selector) >= len(names):
            raise ValueError(f"'{key}': index {selector} out of range: the scenario has {len(names)} entries")
        return [int(selector)], inner, False
    if selector not in names:
        raise ValueError(f"'{key}': no entry named {selector}; the entries are {', '.join(names)}")
    return [names.index(selector)], inner, False


def _has(config: BaseModel, inner: str) -> bool:
    first = inner.split(".")[0]
    return first not in _NOT_AN_OPTION and first in type(config).model_fields


def entry_spaces(tune: TuneConfig, algorithms: Sequence[Any]) -> list[dict[str, Space]]:
    """Per entry, in the scenario's order, the keys searched (within the entry: ``train.lr``, ``alpha``) and their
    spaces; every value must be valid for the entry. Raises ValueError naming the key."""
    names = [run_name(a) for a in algorithms]
    spaces: list[dict[str, Space]] = [{} for _ in algorithms]
    origin: list[dict[str, str]] = [{} for _ in algorithms]
    for key, raw in tune.params.items():
        space = parse_space(raw)
        indices, inner, every = _targets(key, names)
        kept = [i for i in indices if _has(algorithms[i], inner)]
        if not kept:
            what = f"'{inner.split('.')[0]}'"
            raise ValueError(f"'{key}': no entry has an option {what}" if every
                             else f"'{key}': entry {names[indices[0]]} ({algorithms[indices[0]].name}) has no option "
                             f"{what}")
        for i in kept:
            if inner in spaces[i]:
                raise ValueError(f"'{key}' and '{origin[i][inner]}' both search {inner} of entry {names[i]}; "
                                 "keep one")
            wrong = kind_problem(algorithms[i], inner, space)
            if wrong is not None:
                raise ValueError(f"'{key}': {_flow(raw)} does not fit entry {names[i]}: {wrong}")
            for value in space.ends():
                problem = value_problem(algorithms[i], inner, value)
                if problem is not None:
                    raise ValueError(f"'{key}': {value!r} does not fit entry {names[i]}: {problem}")
            spaces[i][inner] = space
            origin[i][inner] = key
    return spaces


def _flow(raw: Any) -> str:
    """A raw value space as written in a scenario, on one line: ``{float: [8, 40]}``."""
    return yaml.safe_dump(raw, default_flow_style=True, width=10**6, sort_keys=False).strip().removesuffix("...").strip()


def _section_of(annotation: Any) -> type[BaseModel] | None:
    """The one section class a field's annotation admits (through ``Annotated`` and ``| None``), else None."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _section_of(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        found = {s for s in (_section_of(a) for a in get_args(annotation)) if s is not None}
        return found.pop() if len(found) == 1 else None
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def option_annotation(config: BaseModel, inner: str) -> Any:
    """The type annotation of the option at ``inner`` (a dotted path through the entry's sections, ``train.lr``,
    ``staleness.a``) as the entry's config classes declare it: each part is a field of the section the entry holds
    there (or of the one its annotation admits, where the entry holds none). ``Any`` where a part is no declared
    field (a key of a free mapping): then nothing is known of its type."""
    node: Any = config
    section: type[BaseModel] | None = type(config)
    annotation: Any = Any
    for part in inner.split("."):
        field = section.model_fields.get(part) if section is not None else None
        if field is None:
            return Any
        annotation = field.annotation
        node = getattr(node, part, None) if node is not None else None
        section = type(node) if isinstance(node, BaseModel) else _section_of(annotation)
    return annotation


def value_kinds(annotation: Any) -> set[str]:
    """What a field's annotation admits, in the terms a value space needs: ``int``, ``float``, ``bool``,
    ``literal`` (a fixed set of values), ``section`` and ``other`` (text, a container, anything); None is left out,
    since a searched value is never None."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return value_kinds(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return set().union(*(value_kinds(a) for a in get_args(annotation)))
    if annotation is type(None):
        return set()
    if annotation is bool:
        return {"bool"}
    if annotation is int:
        return {"int"}
    if annotation is float:
        return {"float"}
    if origin is Literal or isinstance(annotation, type) and issubclass(annotation, Enum):
        return {"literal"}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {"section"}
    return {"other"}


_KIND_WORDS = {"bool": "true or false", "int": "integers", "literal": "one of fixed values", "section": "a section"}


def kind_problem(config: BaseModel, inner: str, space: Space) -> str | None:
    """Why ``space`` is of the wrong kind for the option at ``inner`` of the entry ``config`` (its type from the
    config's field annotations, :func:`option_annotation`), or None when it fits: an integer option takes an int
    range or a list of integers (a float range would draw fractions: ``batch_size`` 18.21); a number that may be a
    fraction takes any range; an option of fixed values, true/false or a section takes a list. Text or an option of
    unknown type is left to the config's own check of each value, as is every value's range (:func:`_problem`)."""
    kinds = value_kinds(option_annotation(config, inner))
    name = inner.split(".")[-1]
    if not kinds or kinds & {"other", "float"}:
        return None
    if kinds == {"int"}:
        if not space.grid:
            return None if space.kind == "int" else (f"{name} takes integers; give {{int: [low, high]}} (an integer "
                                                     "step optional) or a list of integers")
        bad = [v for v in space.choices if not isinstance(v, int) or isinstance(v, bool)]
        return None if not bad else (f"{name} takes integers, not {', '.join(_flow(v) for v in bad)}; list integers, "
                                     "or give {int: [low, high]}")
    if space.grid:
        return None
    what = " or ".join(_KIND_WORDS[k] for k in sorted(kinds))
    return f"{name} takes {what}, not a range of numbers; give a list of its values"


def given_value(config: BaseModel, train: BaseModel, inner: str, space: Space) -> Any:
    """The value an entry has at ``inner`` as the scenario writes it (``train.*``: its own, else the scenario's
    ``train``), as one of ``space``'s values; ValueError when it is none of them."""
    own = config.model_dump(mode="json", exclude_none=True)
    if inner.startswith("train."):
        option = inner.split(".", 1)[1]
        value = own.get("train", {}).get(option, getattr(train, option))
        found = [c for c in space.choices if c == value] if space.grid else [value]
    else:
        node: Any = own
        for part in inner.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        value = node
        found = ([c for c in space.choices
                  if type(config).model_validate(with_values(own, {inner: c})).model_dump(mode="json") ==
                  type(config).model_validate(own).model_dump(mode="json") and value_problem(config, inner, c) is None]
                 if space.grid else [value])
    if not found or (not space.grid and not (isinstance(value, int | float) and space.low <= value <= space.high)):
        raise ValueError(f"given_first: the entry's own {inner} ({value!r}) is not among the searched values")
    return found[0]


def with_values(entry: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """A raw entry (a mapping, as in a scenario file) with each key within it set to its value."""
    out = copy.deepcopy(dict(entry))
    for inner, value in values.items():
        *parents, last = inner.split(".")
        node = out
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[last] = copy.deepcopy(value)
    return out


def value_problem(config: BaseModel, inner: str, value: Any) -> str | None:
    """Why ``value`` at ``inner`` does not fit the entry ``config``, or None when it does."""
    raw = with_values(config.model_dump(mode="json", exclude_none=True), {inner: value})
    try:
        type(config).model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if not isinstance(p, int))
        text = "unknown key" if first["type"] == "extra_forbidden" else str(first["msg"]).removeprefix("Value error, ")
        return f"{where}: {text}" if where else text
    return None
