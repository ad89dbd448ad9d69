"""The Python API's arguments, each read once and checked before anything runs.

``simfl.run`` and ``simfl.sweep`` take iterables: ``seeds``, ``overrides``, a sweep's lists of
values (``over``) and lists inside a scenario mapping. :func:`read` reads every one of them
exactly once, here, into a list of at most :data:`MAX_ITEMS` items, and only then checks it.
So a generator is not used up by the check (which would run without its overrides, or find no
seed), and an endless iterator (``itertools.count()``) is refused at once instead of being read
until memory runs out. A value of the wrong type is a ``TypeError``, one past the limit a
``ValueError``: one line naming the argument.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simfl import yamlsafe
from simfl.schema.scenario import Scenario

MAX_ITEMS = yamlsafe.MAX_NODES
"""Most items one iterable argument may hold (seeds, overrides, the keys of ``over`` and each of its lists, an
iterator inside a scenario mapping): as many values as a whole scenario file may hold. Only one item past
the limit is ever read."""

_TEXT = (str, bytes, bytearray, memoryview)


def kind(value: Any) -> str:
    """A value's type and a short repr, for messages."""
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def listed(value: Any, name: str, expected: str) -> list[Any]:
    """``value`` read once into a list: any iterable but text and mappings, with at most :data:`MAX_ITEMS` items.

    ``expected`` says what ``name`` must be, for the TypeError (e.g. "a list of integers, e.g. [0, 1, 2]").
    """
    if isinstance(value, (*_TEXT, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be {expected}, got {kind(value)}")
    items = list(itertools.islice(value, MAX_ITEMS + 1))
    if len(items) > MAX_ITEMS:
        raise ValueError(f"{name} holds more than {MAX_ITEMS} items (an endless iterator?), the most an argument "
                         "may hold")
    return items


def plain(value: Any, name: str) -> Any:
    """``value`` (a scenario mapping) with every iterator inside it read once into a list (:func:`listed`), and
    tuples as lists (what YAML holds, so that messages name ``algorithms[0].alpha``).

    Lists and mappings with nothing to change below them are returned as they are; one shared in several
    places is rebuilt once, and one that contains itself is left for :func:`simfl.yamlsafe.check_value`
    to refuse, which then holds the result to a scenario file's limits.
    """
    done: dict[int, Any] = {}
    busy: set[int] = set()

    def walk(item: Any, where: str, depth: int) -> Any:
        fresh = isinstance(item, Iterator) and not isinstance(item, _TEXT)
        if not fresh and not isinstance(item, (Mapping, list, tuple)):
            return item
        key = id(item)
        if key in done:
            return done[key]
        if key in busy or depth > yamlsafe.MAX_DEPTH:
            return item  # check_value names the loop or the depth
        busy.add(key)
        source = listed(item, where, "a list") if fresh else item
        if isinstance(source, Mapping):
            pairs = [(k, walk(v, f"{where}[{k!r}]", depth + 1)) for k, v in source.items()]
            changed = any(new is not old for (_, new), old in zip(pairs, source.values(), strict=True))
            result: Any = dict(pairs) if changed else source
        else:
            values = [walk(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(source)]
            changed = not isinstance(source, list) or any(new is not old for new, old in zip(values, source, strict=True))
            result = values if changed else source
        busy.discard(key)
        done[key] = result
        return result

    return walk(value, name, 0)


@dataclass(frozen=True)
class Arguments:
    """The arguments of one API call, read and checked: lists where the caller may have given any iterable."""

    scenario: Mapping[str, Any] | Scenario | str | Path
    seeds: list[int] | None
    overrides: list[str]
    over: dict[str, list[Any]] | None


CLOCKS = ("auto", "simpy", "heap")
"""The values of ``clock`` (``--clock``)."""


def read(scenario: Any, out: Any, seeds: Any, overrides: Any, workers: Any, ray: Any, flags: Mapping[str, Any],
         over: Any = None, clock: Any = "auto") -> Arguments:
    """Every argument of ``simfl.run`` or ``simfl.sweep`` read once, then checked (see the module docstring)."""
    if not isinstance(scenario, (str, Path, Mapping, Scenario)):
        raise TypeError(f"scenario must be a path to a YAML file, a mapping or a Scenario, got {kind(scenario)}")
    if isinstance(scenario, Mapping):
        scenario = plain(scenario, "scenario")
        yamlsafe.check_value(scenario, "scenario")  # the limits a YAML file has
    if out is not None and not isinstance(out, (str, Path)):
        raise TypeError(f"out must be a folder path (str or Path) or None, got {kind(out)}")
    if seeds is not None:
        seeds = listed(seeds, "seeds", "a list of integers, e.g. [0, 1, 2]")
        for i, seed in enumerate(seeds):
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise TypeError(f"seeds[{i}] must be an integer, got {kind(seed)}")
    overrides = listed(overrides, "overrides", "a list of 'key=value' strings, e.g. ['train.lr=0.1']")
    for i, text in enumerate(overrides):
        if not isinstance(text, str):
            raise TypeError(f"overrides[{i}] must be a 'key=value' string, got {kind(text)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)):
        raise TypeError(f"workers must be a whole number of processes or None, got {kind(workers)}")
    if ray is not None and not isinstance(ray, str):
        raise TypeError(f"ray must be 'local', a cluster address (str) or None, got {kind(ray)}")
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {kind(value)}")
    if not isinstance(clock, str):
        raise TypeError(f"clock must be one of {', '.join(map(repr, CLOCKS))}, got {kind(clock)}")
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {', '.join(map(repr, CLOCKS))}, got {clock!r}")
    return Arguments(scenario, seeds, overrides, None if over is None else _over(over))


def interval(value: Any, name: str) -> float | None:
    """A number of seconds > 0, or None (never): e.g. ``checkpoint_wall``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds or None, got {kind(value)}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a number of seconds > 0 or None, got {value!r}")
    return float(value)


def _over(over: Any) -> dict[str, list[Any]]:
    """``over`` of ``simfl.sweep``: a mapping of dotted keys to lists of values, each list read once."""
    if not isinstance(over, Mapping):
        raise TypeError(f"over must be a mapping of dotted keys to lists of values, e.g. {{'train.lr': [0.1, 0.05]}}, "
                        f"got {kind(over)}")
    read_over: dict[str, list[Any]] = {}
    for key, values in listed(over.items(), "over", "a mapping"):
        if not isinstance(key, str):
            raise TypeError(f"over's keys must be dotted keys (str), got {kind(key)}")
        if isinstance(values, (*_TEXT, Mapping)) or not isinstance(values, Iterable):
            raise TypeError(f"over[{key!r}] must be a list of values, e.g. [{values!r}], got {kind(values)}")
        read_over[key] = listed(values, f"over[{key!r}]", "a list of values")
    yamlsafe.check_value(read_over, "over")
    return read_over
