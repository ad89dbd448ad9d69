"""Users' own components: algorithms, delay models, datasets and models from outside simfl.

A scenario names a component by its discriminator (``algorithms[i].name``,
``latency.model``, ``data.dataset``, ``model.name``). Besides the built-in
names, that value may be

- the name of an entry point in the group ``simfl.algorithms``, ``simfl.latency``,
  ``simfl.datasets`` or ``simfl.models`` of an installed package
  (``name: fadas``); a built-in name wins over an entry point of the same name;
- an import path ``package.module:Class`` (``name: mylab.rules:FedFoo``) of a module on
  ``sys.path`` or under the working folder, also ``__main__:FedFoo`` for a class defined
  in a notebook or script;
- through the Python API, the class object itself (``{"name": FedFoo}``), which
  :func:`normalize` replaces by its import path ``module:qualname``.

A plugin follows the contract of the built-in components of its kind (see
``docs/plugins.md``): a class attribute ``Config``, a pydantic model whose
fields are the entry's parameters, and the methods of its kind, with state as
data (``state()``/``load_state()``) so that checkpoints, resume and ``--verify``
work as for built-ins.

How the schema learns about plugins: the scenario's discriminated unions are
built from the built-in registries at import time. :func:`scenario_plugins`
resolves the plugin entries of a raw scenario *before* validation, and
:mod:`simfl.schema.scenario` validates it with a subclass of ``Scenario`` whose unions
also hold those plugins' configs. Each plugin config used there is a subclass
of the plugin's own ``Config`` whose discriminator is the literal value written
in the scenario (so a dumped scenario reads back the same) and which rejects
unknown keys. Errors stay one line naming the YAML path.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from simfl import registry
from simfl.errors import InputError
from simfl.names import GIVEN, import_object, import_path, is_import_path


@dataclass(frozen=True)
class Kind:
    """One kind of component: where it sits in a scenario and what a valid one is."""

    kind: str
    """``algorithm``, ``latency``, ``dataset`` or ``model``."""
    field: str
    """The scenario key holding it (``algorithms`` is a list)."""
    discriminator: str
    """The key naming the component inside its section."""
    group: str
    """The entry-point group of installed plugins."""
    expected: str
    """What a valid component is, for messages."""
    configs: Callable[[], Mapping[str, type[BaseModel]]]
    """The built-in components' configs by name (light: no implementation imported)."""
    registry: Callable[[], Mapping[str, Any]]
    """The built-in components by name (imports their implementations)."""
    valid: Callable[[Any], bool]


def _algorithms() -> Mapping[str, Any]:
    from simfl.algorithms import ALGORITHMS

    return ALGORITHMS


def _algorithm_configs() -> Mapping[str, type[BaseModel]]:
    from simfl.algorithms.configs import BUILTINS

    return registry.configs(BUILTINS)


def _latency_configs() -> Mapping[str, type[BaseModel]]:
    from simfl.latency import LATENCY_MODELS

    return {name: model.Config for name, model in LATENCY_MODELS.items()}


def _dataset_configs() -> Mapping[str, type[BaseModel]]:
    from simfl.data.configs import BUILTINS

    return registry.configs(BUILTINS)


def _model_configs() -> Mapping[str, type[BaseModel]]:
    from simfl.models.configs import BUILTINS

    return registry.configs(BUILTINS)


def _latency_models() -> Mapping[str, Any]:
    from simfl.latency import LATENCY_MODELS

    return LATENCY_MODELS


def _datasets() -> Mapping[str, Any]:
    from simfl.data import DATASETS

    return DATASETS


def _models() -> Mapping[str, Any]:
    from simfl.models import MODELS

    return MODELS


def _config_of(obj: Any, base: type[BaseModel]) -> bool:
    config = getattr(obj, "Config", None)
    return isinstance(config, type) and issubclass(config, base)


def _valid_algorithm(obj: Any) -> bool:
    from simfl.algorithms.base import AlgorithmConfig, AsyncAlgorithm, SyncAlgorithm

    return (isinstance(obj, type) and issubclass(obj, AsyncAlgorithm | SyncAlgorithm) and not inspect.isabstract(obj)
            and _config_of(obj, AlgorithmConfig))


def _valid_latency(obj: Any) -> bool:
    from simfl.latency.base import LatencyModel

    return (isinstance(obj, type) and issubclass(obj, LatencyModel) and not inspect.isabstract(obj)
            and _config_of(obj, BaseModel))


def _valid_dataset(obj: Any) -> bool:
    from simfl.data.configs import DataConfigBase

    return _config_of(obj, DataConfigBase) and callable(getattr(obj, "load", None))


def _valid_model(obj: Any) -> bool:
    return _config_of(obj, BaseModel) and callable(getattr(obj, "build", None))


KINDS: dict[str, Kind] = {
    "algorithm": Kind(
        "algorithm", "algorithms", "name", "simfl.algorithms",
        "a subclass of simfl.algorithms.AsyncAlgorithm or SyncAlgorithm (not abstract) whose Config derives from "
        "simfl.algorithms.base.AlgorithmConfig", _algorithm_configs, _algorithms, _valid_algorithm,
    ),
    "latency": Kind(
        "latency", "latency", "model", "simfl.latency",
        "a subclass of simfl.latency.LatencyModel (not abstract) with a pydantic Config", _latency_configs,
        _latency_models, _valid_latency,
    ),
    "dataset": Kind(
        "dataset", "data", "dataset", "simfl.datasets",
        "a loader with a Config deriving from simfl.data.DataConfigBase and a load(config) -> Dataset", _dataset_configs,
        _datasets, _valid_dataset,
    ),
    "model": Kind(
        "model", "model", "name", "simfl.models",
        "a builder with a pydantic Config and a build(config, input_shape, num_classes) -> nn.Module", _model_configs,
        _models, _valid_model,
    ),
}
"""Every kind of component a plugin may provide."""

@functools.cache
def entry_points(group: str) -> dict[str, importlib.metadata.EntryPoint]:
    """The installed entry points of ``group`` by name (read once per process)."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=group):
        found.setdefault(ep.name, ep)
    return found


def installed() -> dict[str, dict[str, str]]:
    """Every installed plugin: by kind, entry-point name -> ``module:attribute`` (built-in names left out)."""
    out: dict[str, dict[str, str]] = {}
    for kind in KINDS.values():
        builtin = kind.configs()
        names = {n: ep.value for n, ep in sorted(entry_points(kind.group).items()) if n not in builtin}
        if names:
            out[kind.kind] = names
    return out


def installed_names(field: str) -> list[str]:
    """Entry-point names of the installed plugins for scenario field ``field`` (``algorithms``, ``data``, ...)."""
    for kind in KINDS.values():
        if kind.field == field:
            return list(installed().get(kind.kind, {}))
    return []


def is_plugin(kind: str, name: Any) -> bool:
    """Whether ``name`` names a plugin of ``kind`` rather than a built-in (or nothing valid)."""
    spec = KINDS[kind]
    if not isinstance(name, str) or name in spec.configs():
        return False
    return is_import_path(name) or name in entry_points(spec.group)


def _load_entry_point(ep: importlib.metadata.EntryPoint, where: str) -> Any:
    try:
        return ep.load()
    except Exception as exc:  # a broken installed package: say which entry point, in one line
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(where, f"cannot load plugin '{ep.name}' ({ep.value}, group {ep.group}): {detail}") from None


def resolve(kind: str, name: str, where: str | None = None) -> Any:
    """The component of ``kind`` called ``name``: built-in, entry point or import path.

    ``where`` names the scenario key in messages (default ``<field>.<discriminator>``).
    """
    spec = KINDS[kind]
    where = where if where is not None else f"{spec.field}.{spec.discriminator}"
    builtin = spec.configs()
    if name in builtin:
        return spec.registry()[name]
    eps = entry_points(spec.group)
    if name in eps:
        obj = _load_entry_point(eps[name], where)
    elif is_import_path(name):
        obj = import_object(name, where)
    else:
        raise InputError(where, f"unknown {kind} '{name}'; allowed: {', '.join([*builtin, *eps])} "
                         "or an import path package.module:Class")
    if not spec.valid(obj):
        shown = obj.__name__ if isinstance(obj, type) else type(obj).__name__ + " object"
        raise InputError(where, f"'{name}' ({shown}) is not a valid {kind} plugin: expected {spec.expected}")
    return obj


@functools.cache
def _plugin_config(config: type[BaseModel], discriminator: str, name: str, synchronous: bool | None = None
                   ) -> type[BaseModel]:
    """``config`` with its discriminator fixed to ``name`` and unknown keys rejected (an algorithm's: with
    ``synchronous`` as its class is)."""
    namespace: dict[str, Any] = {
        "__module__": config.__module__,
        "__qualname__": config.__qualname__,
        "__doc__": config.__doc__,
        "__annotations__": {discriminator: Literal[name]},  # type: ignore[valid-type]
        discriminator: Field(name, description="Plugin name (entry point or import path)."),
        "model_config": ConfigDict(extra="forbid"),
    }
    if synchronous is not None:
        namespace["synchronous"] = synchronous
    return type(config.__name__, (config,), namespace)


def plugin_config(kind: str, name: str, where: str | None = None) -> type[BaseModel]:
    """The config class a scenario entry naming plugin ``name`` is validated with."""
    component = resolve(kind, name, where)
    synchronous = None
    if kind == "algorithm":
        from simfl.algorithms.base import SyncAlgorithm

        synchronous = issubclass(component, SyncAlgorithm)
    return _plugin_config(component.Config, KINDS[kind].discriminator, name, synchronous)


def scenario_plugins(raw: Mapping[str, Any], where: str) -> dict[str, tuple[type[BaseModel], ...]]:
    """The plugin configs a raw scenario uses, by scenario field (empty: built-ins only).

    Resolving imports the plugins; a plugin that cannot be imported or is not a valid
    component raises a one-line InputError naming the YAML path of its name.
    """
    found: dict[str, list[type[BaseModel]]] = {}
    for kind, spec in KINDS.items():
        section = raw.get(spec.field)
        entries = list(enumerate(section)) if spec.field == "algorithms" and isinstance(section, list) else [
            (None, section)]
        for index, entry in entries:
            if not isinstance(entry, Mapping):
                continue
            name = entry.get(spec.discriminator)
            if not isinstance(name, str) or not is_plugin(kind, name):
                continue
            at = spec.field if index is None else f"{spec.field}[{index}]"
            config = plugin_config(kind, name, f"{where}: {at}.{spec.discriminator}")
            if config not in found.setdefault(spec.field, []):
                found[spec.field].append(config)
    return {field: tuple(configs) for field, configs in found.items()}


def normalize(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` with component classes given as objects (Python API) replaced by their import paths.

    The class is remembered under that path, so a class defined in a notebook or inside a
    function is found without importing it again (in this process). ``raw`` itself is not changed.
    """
    out = dict(raw)

    def named(entry: Any, key: str) -> Any:
        if not (isinstance(entry, Mapping) and isinstance(entry.get(key), type)):
            return entry
        path = import_path(entry[key])
        GIVEN[path] = entry[key]
        return {**entry, key: path}

    for spec in KINDS.values():
        section = out.get(spec.field)
        if spec.field == "algorithms" and isinstance(section, list):
            # a Flower entry's strategy may be a class object too
            out[spec.field] = [named(named(entry, spec.discriminator), "strategy") for entry in section]
        elif section is not None:
            out[spec.field] = named(section, spec.discriminator)
    return out


def only_here(scenario: Mapping[str, Any]) -> list[str]:
    """The component names of a (dumped) scenario that only this process can import: classes of the caller's
    ``__main__`` (a script, code on standard input, a notebook), which worker processes never import, and classes
    defined inside a function."""
    found: list[str] = []
    for spec in KINDS.values():
        section = scenario.get(spec.field)
        for entry in section if isinstance(section, list) else [section]:
            if not isinstance(entry, Mapping):
                continue
            for key in (spec.discriminator, "strategy"):
                name = entry.get(key)
                if isinstance(name, str) and is_import_path(name):
                    module, _, qualname = name.partition(":")
                    if module == "__main__" or "<locals>" in qualname:
                        found.append(name)
    return found


def lookup(kind: str, name: str) -> Any:
    """The component a validated scenario names (built-in or plugin)."""
    return resolve(kind, name)


def describe(obj: Any) -> str:
    """The first line of a component's config's docstring (as for built-ins), else of its own."""
    for doc in (getattr(getattr(obj, "Config", None), "__doc__", None), getattr(obj, "__doc__", None)):
        if doc and doc.strip():
            return doc.strip().splitlines()[0]
    return ""
