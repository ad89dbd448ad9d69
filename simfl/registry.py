"""Built-in components by name, their configs light to import and their implementations loaded on first use.

A component package (algorithms, datasets, models) lists its built-ins once, in its ``configs`` module:
each name with its ``Config`` (a pydantic section, importable without torch) and the import path of
the class that implements it. Validating a scenario, printing the reference or estimating a run then
needs only the configs, so ``simfl validate`` never loads torch for a built-in component; the package's
registry of implementations (``simfl.algorithms.ALGORITHMS`` and its kin) imports them when it is first
read (the package's module ``__getattr__``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class Builtin:
    """A built-in component: its config and where its implementation lives."""

    config: type[BaseModel]
    target: str
    """``package.module:Attribute`` of the implementation (a class, or an object with ``build``/``load``)."""

    def load(self) -> Any:
        """The implementation (imports its module)."""
        return load(self.target)


def load(target: str) -> Any:
    """The attribute ``module:Attribute`` names (imports the module): a built-in's implementation, imported on first
    use (the executors by ``executor.kind``, :data:`simfl.train.configs.EXECUTORS`, are listed by such targets)."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def configs(builtins: Mapping[str, Builtin]) -> dict[str, type[BaseModel]]:
    """Each built-in's config by name."""
    return {name: b.config for name, b in builtins.items()}


def implementations(builtins: Mapping[str, Builtin]) -> dict[str, Any]:
    """Each built-in's implementation by name, in the listing's order (imports every module)."""
    found = {name: b.load() for name, b in builtins.items()}
    for name, impl in found.items():
        assert getattr(impl, "Config", None) is builtins[name].config, f"{name}: its Config is not the listed one"
    return found


def lazy(namespace: dict[str, Any], registry: str, builtins: Mapping[str, Builtin],
         others: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` (PEP 562): ``registry`` (its built-ins' implementations by name) and
    ``others`` (name -> ``module:Attribute``), each imported when first read and then kept in ``namespace``."""

    def __getattr__(name: str) -> Any:
        if name == registry:
            value = implementations(builtins)
        elif others is not None and name in others:
            value = load(others[name])
        else:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    return __getattr__
