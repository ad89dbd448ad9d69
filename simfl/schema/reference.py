"""The scenario reference (markdown), generated from the schema so that it cannot drift from the code.

``simfl reference`` prints it; ``scenarios/REFERENCE.md`` is its committed copy,
and a test checks the two are equal. Installed plugins (entry points, :mod:`simfl.schema.plugins`)
get a section of their own at the end; the committed copy is made with none installed.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from simfl.errors import InputError
from simfl.schema import plugins


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _type_name(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(tp))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        try:
            value = info.default_factory()  # type: ignore[call-arg]
        except TypeError:
            return "(computed)"
        if isinstance(value, BaseModel):
            return "(section defaults)"
        return f"`{_yaml(value)}`"
    if info.default is PydanticUndefined:
        return "required"
    return f"`{_yaml(info.default)}`"


def _yaml(value: Any) -> str:
    """A default as it would be written in YAML (null, false, [0], ...)."""
    return json.dumps(value, default=str)


def _nested_models(tp: Any) -> list[type[BaseModel]]:
    """Section classes reachable from a field type (through unions, lists and Annotated)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(tp):
        out.extend(_nested_models(arg))
    return out


def _table(model: type[BaseModel], prefix: str, seen: set[type[BaseModel]], skip: set[str] | None = None) -> list[str]:
    """A field table of ``model`` followed by tables of its nested sections not shown before."""
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, info in model.model_fields.items():
        if skip and name in skip:
            continue
        desc = (info.description or "").replace("|", "\\|").replace("\n", " ")
        kind = _type_name(info.annotation).replace("|", "\\|")
        lines.append(f"| `{prefix}{name}` | {kind} | {_default(info)} | {desc} |")
        is_list = typing.get_origin(info.annotation) is list
        for sub in _nested_models(info.annotation):
            nested.append((f"{prefix}{name}{'[]' if is_list else ''}", sub))
    out = lines + [""]
    for key, sub in nested:
        if sub in seen:
            continue
        seen.add(sub)
        doc = (sub.__doc__ or "").strip().splitlines()[0] if sub.__doc__ else ""
        out += [f"`{key}` — {sub.__name__}: {doc}", ""] + _table(sub, f"{key}.", seen)
    return out


def _component_section(
    title: str, key: str, kind: str, seen: set[type[BaseModel]]
) -> list[str]:
    discriminator = plugins.KINDS[kind].discriminator
    out = [f"## `{key}`: {title}", "", f"Chosen by `{key}.{discriminator}`.", ""]
    for name, config in plugins.KINDS[kind].configs().items():
        doc = (config.__doc__ or "").strip().splitlines()[0] if config.__doc__ else ""
        out += [f"### `{discriminator}: {name}`", "", doc, ""] + _table(config, f"{key}.", seen, skip={discriminator})
    return out


_PLUGIN_SECTIONS = {"algorithm": ("algorithms[i]", "name"), "latency": ("latency", "model"),
                    "dataset": ("data", "dataset"), "model": ("model", "name")}


def _plugin_section(seen: set[type[BaseModel]]) -> list[str]:
    """The installed plugins (entry points of the ``simfl.*`` groups), documented like built-ins; none: no section."""
    found = plugins.installed()
    if not found:
        return []
    out = ["## Installed plugins", "", "Entry points of installed packages (groups "
           + ", ".join(f"`{k.group}`" for k in plugins.KINDS.values()) + ").", ""]
    for kind, names in found.items():
        key, discriminator = _PLUGIN_SECTIONS[kind]
        for name, value in names.items():
            out += [f"### `{key}.{discriminator}: {name}` ({kind}, `{value}`)", ""]
            try:
                component = plugins.resolve(kind, name)
            except InputError as exc:
                out += [f"Cannot be loaded: {exc.message}", ""]
                continue
            out += [plugins.describe(component), ""]
            out += _table(component.Config, f"{key}.", seen, skip={discriminator})
    return out


def reference() -> str:
    """The full scenario reference as markdown."""
    from simfl.schema.scenario import Scenario

    components = {"algorithms", "data", "model", "latency"}
    out = [
        "# Scenario reference",
        "",
        "Generated by `simfl reference` from the schema (do not edit by hand). Unknown keys are errors",
        "everywhere; paths are relative to the scenario file. Besides the built-in names below, a component",
        "may be a plugin: an installed package's entry point (listed under *Installed plugins* when there",
        "are any) or an import path `package.module:Class` (see docs/plugins.md).",
        "",
        "## Top level",
        "",
    ]
    seen: set[type[BaseModel]] = set()
    out += _table(Scenario, "", seen, skip=components)
    out += _component_section("dataset and partition", "data", "dataset", seen)
    out += _component_section("model", "model", "model", seen)
    out += _component_section("delay model", "latency", "latency", seen)
    out += _component_section("algorithms (each list entry)", "algorithms[i]", "algorithm", seen)
    out += _plugin_section(seen)
    return "\n".join(line.rstrip() for line in out).rstrip() + "\n"
