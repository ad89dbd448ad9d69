"""Components named by import path: ``package.module:Attribute``, and the default run name of any component name.

The foundation under every layer that names components: the algorithm registry (run names),
local-training hooks (a plugin's own hook) and the plugin resolver of the schema
(:mod:`simfl.schema.plugins`, which also reads installed entry points) all import from here.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from simfl.errors import InputError

GIVEN: dict[str, Any] = {}
"""Classes passed as objects through the Python API, by their import path (found without importing)."""

ALLOW_IMPORTS = "SIMFL_ALLOW_IMPORTS"
"""Environment variable that lets files name import paths (``1``); worker processes inherit it."""
HOW_TO_ALLOW = f"--allow-imports, {ALLOW_IMPORTS}=1, or allow_imports=True in the Python API"
TRUSTED_IMPORTS = "SIMFL_TRUSTED_IMPORTS"
"""Environment variable listing, one per line, the import paths that may be imported without permission: a Flower
App's own ServerApp and ClientApp under ``simfl flwr run`` (:func:`trusting`); worker processes inherit it."""


def imports_allowed() -> bool:
    """Whether import paths named by files (scenarios, checkpoints) may be imported in this process."""
    return os.environ.get(ALLOW_IMPORTS, "").strip().lower() in ("1", "true", "yes")


@contextlib.contextmanager
def allowing_imports(allow: bool) -> Iterator[None]:
    """Within the block, import paths may be imported when ``allow`` (or the environment already allows them).

    Importing a module runs its top-level code, so a scenario or checkpoint that names
    ``evil:X`` would run ``evil.py`` from the working folder: it is done only on the user's word.
    Set through the environment so that worker processes started meanwhile inherit it.
    """
    with _environment(ALLOW_IMPORTS, "1" if allow else None):
        yield


def trusted() -> tuple[str, ...]:
    """The import paths this process may import without permission (:func:`trusting`)."""
    return tuple(p for p in os.environ.get(TRUSTED_IMPORTS, "").split("\n") if p)


@contextlib.contextmanager
def trusting(paths: Iterable[str]) -> Iterator[None]:
    """Within the block, exactly ``paths`` may be imported without the user's permission (and, as before, any import
    path once they allowed them).

    ``simfl flwr run APP`` runs the app's code, as ``flwr run`` does: its ``pyproject.toml``'s ServerApp and
    ClientApp (and what they import) are what the command is for. An import path written anywhere else (the
    ``--scenario`` file, a ``--set``, a saved scenario) is the file's, not the app's, and still needs
    :func:`allowing_imports`. Set through the environment so that worker processes started meanwhile inherit it.
    """
    with _environment(TRUSTED_IMPORTS, "\n".join(dict.fromkeys([*trusted(), *paths]))):
        yield


@contextlib.contextmanager
def _environment(name: str, value: str | None) -> Iterator[None]:
    """Within the block, the environment variable ``name`` is ``value`` (None: left as it is); restored after."""
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


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
    """The object at import path ``module:attr.attr``; a one-line InputError when it is not there.

    Refused, before anything is imported, unless the user allowed import paths
    (:func:`imports_allowed`) or the command trusts this one (:func:`trusting`: a Flower App's own components);
    classes passed through the API (:data:`GIVEN`) need no permission.
    """
    if name in GIVEN:
        return GIVEN[name]
    module_name, _, attr = name.partition(":")
    if not module_name or not attr:
        raise InputError(where, f"'{name}' is not an import path of the form package.module:Class")
    if not imports_allowed() and name not in trusted():
        raise InputError(where, f"'{name}' is an import path: importing it runs module '{module_name}''s code, "
                         f"which simfl does only when told to ({HOW_TO_ALLOW}); installed plugins need no permission")
    _search_working_folder()
    try:
        module = importlib.import_module(module_name)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # any failure while importing the user's module (sys.exit too) is theirs to see
        try:
            text = (str(exc).strip().splitlines() or [""])[0]
        except Exception:  # the exception's own __str__ failing
            text = ""
        detail = text if isinstance(exc, Exception) and text else f"{type(exc).__name__}{': ' + text if text else ''}"
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
