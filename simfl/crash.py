"""The last resort of the ``simfl`` command: an unexpected exception is a bug, reported in one line.

The traceback, the command line and the versions go into a ``crash.txt`` file
(in the run's own staging or output folder when simfl wrote one, else in the
temporary folder); the terminal gets one line saying where it is.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path

from simfl import __version__, outdir
from simfl.errors import UserCodeFailed


def _versions() -> str:
    lines = [f"simfl {__version__}", f"python {sys.version.split()[0]}", f"platform {platform.platform()}"]
    for name in ("torch", "numpy", "pandas", "pydantic", "yaml", "simpy"):
        module = sys.modules.get(name)
        if module is not None:
            lines.append(f"{name} {getattr(module, '__version__', '?')}")
    return "\n".join(lines)


def _place(out: Path | None) -> Path:
    """A new crash file: in ``out``'s staging or output folder when simfl wrote it, else in the temp folder."""
    if out is not None:
        for folder in (out.with_name(out.name + ".partial") if out.name else out, out):
            try:
                if outdir.is_ours(folder) and not (folder / "crash.txt").exists():
                    return folder / "crash.txt"
            except OSError:
                continue
    fd, name = tempfile.mkstemp(prefix="simfl-crash-", suffix=".txt")
    os.close(fd)
    return Path(name)


def report(exc: BaseException, argv: Sequence[str], out: Path | None) -> str:
    """Write the crash file for ``exc`` and return the one line for the terminal."""
    text = (f"command: simfl {' '.join(argv)}\ncwd: {os.getcwd()}\n\n{_versions()}\n\n"
            + "".join(traceback.format_exception(exc)))
    where = _write(text, out)
    first = (str(exc).splitlines() or [""])[0][:200]
    return (f"simfl: internal error {type(exc).__name__}: {first}; this is a bug in simfl: please report it with "
            f"the file {where}")


def user_code(exc: UserCodeFailed, argv: Sequence[str], out: Path | None) -> str:
    """Write the traceback (or what it returned) of the user's own failing code to a crash file; the one line naming
    it and the file."""
    text = f"command: simfl {' '.join(argv)}\ncwd: {os.getcwd()}\n\n{_versions()}\n\n{exc}\n\n{exc.details}"
    what = "its traceback" if exc.details.startswith("Traceback") else "the details"
    return (f"simfl: {exc} (an error in that code, not in simfl); {what} {'is' if what == 'its traceback' else 'are'} "
            f"in {_write(text, out)}")


def _write(text: str, out: Path | None) -> str:
    """Write a crash file (see :func:`_place`); its path, or why there is none."""
    try:
        path = _place(out)
        path.write_text(text, encoding="utf-8", errors="replace")
        return str(path)
    except OSError:
        return "(could not be written)"
