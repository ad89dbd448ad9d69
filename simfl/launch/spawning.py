"""Spawned worker processes that never import the caller's ``__main__``.

CPython's ``spawn`` start method (3.11: ``multiprocessing.spawn`` and ``popen_spawn_posix``)
starts a fresh interpreter and sends it, before the process object, the *preparation data*
that :func:`multiprocessing.spawn.get_preparation_data` gathers in the parent. Besides the
process name, ``sys.path``, ``sys.argv`` and the working folder, it holds
``init_main_from_name`` (``__main__`` has a module spec: ``python -m``, a notebook's
``ipykernel_launcher``) or ``init_main_from_path`` (``__main__.__file__``), and the child's
``prepare`` runs that module or file again, as ``__mp_main__``, so that objects pickled from
the parent's ``__main__`` can be found. For simfl this is only harm: a script without
``if __name__ == "__main__":`` runs again in every worker (which then dies before it takes a
unit), code piped on standard input names the file ``<stdin>``, which does not exist, and a
notebook's kernel module is imported in every worker. A worker needs nothing from the
caller's main module: its target (``simfl.launch.parallel``) lives in simfl and a unit is
plain data (the scenario as YAML text).

:func:`context` is a spawn context whose processes leave both main-module entries out of
the preparation data, and nothing else changes: the same interpreter, environment, paths and
pickles, so the numbers are the same. Python offers no switch for it, and the data is built
and sent inside ``Popen._launch``; rather than restate that method, the context's ``Popen``
runs it as it is while a thread-local flag is set, and a wrapper of
``spawn.get_preparation_data`` (installed once, on the first launch) drops the two keys only
while that flag is set. Any other caller, another thread included, gets the data unchanged.
POSIX only (simfl's workers run on Linux).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from multiprocessing import context as mp_context
from multiprocessing import popen_spawn_posix, spawn
from typing import Any

MAIN_KEYS = ("init_main_from_name", "init_main_from_path")
"""The preparation data's entries that make a spawned child run the parent's main module again."""

_launching = threading.local()
_install_lock = threading.Lock()


def _install() -> None:
    """Wrap ``spawn.get_preparation_data`` (once) so that it leaves out :data:`MAIN_KEYS` during our launches."""
    with _install_lock:
        if getattr(spawn.get_preparation_data, "simfl_without_main", False):
            return
        original: Callable[[str], dict[str, Any]] = spawn.get_preparation_data

        def preparation_data(name: str) -> dict[str, Any]:
            data = original(name)
            if getattr(_launching, "active", False):
                for key in MAIN_KEYS:
                    data.pop(key, None)
            return data

        preparation_data.simfl_without_main = True  # type: ignore[attr-defined]
        spawn.get_preparation_data = preparation_data


class _Popen(popen_spawn_posix.Popen):
    """CPython's spawn launch, run with the flag that keeps the main module out of the preparation data."""

    def _launch(self, process_obj: Any) -> None:
        _install()
        _launching.active = True
        try:
            super()._launch(process_obj)  # type: ignore[misc]  # CPython's own, absent from the stubs
        finally:
            _launching.active = False


class _Process(mp_context.SpawnProcess):
    """A spawned process that does not import the caller's ``__main__``."""

    @staticmethod
    def _Popen(process_obj: Any) -> _Popen:  # noqa: N802 - multiprocessing's name
        return _Popen(process_obj)


class _Context(mp_context.SpawnContext):
    """The spawn context whose processes are :class:`_Process` (queues and locks as spawn's own)."""

    Process = _Process


_CONTEXT = _Context()


def context() -> mp_context.SpawnContext:
    """The spawn context for worker processes that never import the caller's ``__main__``."""
    return _CONTEXT
