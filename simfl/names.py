"""Components named by import path: ``package.module:Attribute``, and the default run name of any component name.

The foundation under every layer that names components: the algorithm registry (run names),
local-training hooks (a plugin's own hook) and the plugin resolver of the schema
(:mod:`simfl.schema.plugins`, which also reads installed entry points) all import from here.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from simfl.errors import InputError

GIVEN: dict[str, Any] = {}
"""Classes passed as objects through the Python API, by their import path (found without importing)."""


def import_path(obj: Any) -> str:
    """``module:qualname`` of a class or function (how a scenario names it)."""
    return f"{obj.__module__}:{obj.__qualname__}"


def is_import_path(name: str) -> bool:
    """Whether a component name is an import path ``package.module:Attribute``."""
    return ":" in name


def short_name(name: str) -> str:
    """The default run name of a component named ``name``: an import path's last attribute, else the name."""
    if not is_import_path(name):
        return name
    return name.rsplit(":", 1)[1].rsplit(".", 1)[-1]


def import_object(name: str, where: str) -> Any:
    """The object at import path ``module:attr.attr``; a one-line InputError when it is not there."""
    if name in GIVEN:
        return GIVEN[name]
    module_name, _, attr = name.partition(":")
    if not module_name or not attr:
        raise InputError(where, f"'{name}' is not an import path of the form package.module:Class")
    _search_working_folder()
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any failure while importing the user's module is their mistake to see
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(where, f"cannot import module '{module_name}' of '{name}': {detail}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError(where, f"module '{module_name}' has no attribute '{attr}' (from '{name}')")
        obj = getattr(obj, part)
    return obj


def _search_working_folder() -> None:
    """Let import paths reach modules under the working folder, as ``python -m`` would.

    The ``simfl`` command's own folder, not the working folder, heads ``sys.path``; the working
    folder is appended (last, so it never shadows an installed package).
    """
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.append(here)
